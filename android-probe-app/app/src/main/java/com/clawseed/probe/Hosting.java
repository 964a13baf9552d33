package com.clawseed.probe;

import android.content.ComponentName;
import android.content.Context;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.content.pm.ServiceInfo;
import android.os.Build;
import android.os.ParcelFileDescriptor;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HostedProvider;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The process's one hosted Provider ({@link HostedProvider}), shared by the
 * probe's connections (which host it) and {@link HostileProvider} (which
 * Consumers call). Its authority and the meta-data of its discovery services
 * are read from this app's own manifest, so that they cannot drift from what
 * Android actually declares.
 */
final class Hosting {
    private Hosting() {}

    /** The discovery services, one per meta-data set; all disabled in the manifest. */
    private static final Class<?>[] SERVICES = {
        HostileToolService.class, HostileToolService.V1Only.class, HostileToolService.V2Only.class,
    };

    private static HostedProvider instance;

    /** The process's hosted Provider, built on first use from the manifest. */
    static synchronized HostedProvider get(Context context) throws DeviceError {
        if (instance == null) {
            Context app = context.getApplicationContext() != null ? context.getApplicationContext() : context;
            instance = new HostedProvider(hostable(app), exposer(app), HostedProvider.Limits.defaults(),
                    System::currentTimeMillis);
        }
        return instance;
    }

    @SuppressWarnings("deprecation")
    private static HostedProvider.Hostable hostable(Context context) throws DeviceError {
        PackageManager pm = context.getPackageManager();
        String pkg = context.getPackageName();
        try {
            ComponentName providerName = new ComponentName(context, HostileProvider.class);
            ProviderInfo provider = Build.VERSION.SDK_INT >= 33
                    ? pm.getProviderInfo(providerName, PackageManager.ComponentInfoFlags.of(0))
                    : pm.getProviderInfo(providerName, 0);
            List<HostedProvider.Variant> variants = new ArrayList<>();
            for (Class<?> c : SERVICES) {
                ComponentName name = new ComponentName(context, c);
                // Disabled until hosted: without this flag Android does not find them.
                int flags = PackageManager.GET_META_DATA | PackageManager.MATCH_DISABLED_COMPONENTS;
                ServiceInfo si = Build.VERSION.SDK_INT >= 33
                        ? pm.getServiceInfo(name, PackageManager.ComponentInfoFlags.of(flags))
                        : pm.getServiceInfo(name, flags);
                // As `discover` reports them: android:value="1" arrives as an Integer.
                Map<String, String> meta = new TreeMap<>();
                AndroidBackend.readMeta(si.metaData, meta, new TreeMap<>());
                variants.add(new HostedProvider.Variant(name.flattenToShortString(), meta));
            }
            return new HostedProvider.Hostable(provider.authority, pkg, variants);
        } catch (PackageManager.NameNotFoundException e) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "the probe's manifest lacks its hostile provider: " + e);
        }
    }

    /**
     * Enables the chosen discovery service and returns the others to their
     * manifest state (disabled). DONT_KILL_APP: changing a component's state
     * otherwise kills the app's process, which is the probe itself.
     */
    private static HostedProvider.Exposer exposer(Context context) {
        return variant -> {
            PackageManager pm = context.getPackageManager();
            try {
                for (Class<?> c : SERVICES) {
                    ComponentName name = new ComponentName(context, c);
                    boolean on = variant != null && variant.service.equals(name.flattenToShortString());
                    pm.setComponentEnabledSetting(name,
                            on ? PackageManager.COMPONENT_ENABLED_STATE_ENABLED
                                    : PackageManager.COMPONENT_ENABLED_STATE_DEFAULT,
                            PackageManager.DONT_KILL_APP);
                }
            } catch (RuntimeException e) {
                throw new DeviceError(DeviceError.DEVICE_ERROR, "cannot change the hostile provider's services: " + e);
            }
        };
    }

    /**
     * Result descriptors are reliable pipes: a descriptor the probe cuts off
     * (deadline, endless cap) is closed with an error a Consumer can see with
     * {@code checkError}, instead of looking like a complete file.
     */
    static final HostedProvider.Pipes<ParcelFileDescriptor> PIPES = () -> {
        ParcelFileDescriptor[] p = ParcelFileDescriptor.createReliablePipe();
        return new HostedProvider.Pipe<ParcelFileDescriptor>() {
            // Not AutoCloseOutputStream: the write end is closed through the
            // descriptor, with or without an error, never by the stream.
            private final OutputStream out = new FileOutputStream(p[1].getFileDescriptor());
            private boolean writerClosed;

            @Override
            public ParcelFileDescriptor reader() {
                return p[0];
            }

            @Override
            public OutputStream writer() {
                return out;
            }

            @Override
            public void closeReader() {
                try {
                    p[0].close();
                } catch (IOException ignored) {
                    // The caller holds its own copy; ours is gone either way.
                }
            }

            @Override
            public synchronized void closeWriter(String error) {
                if (writerClosed) {
                    return;
                }
                writerClosed = true;
                try {
                    // Closing from the watchdog's thread also wakes a writer
                    // blocked on a full pipe (libcore signals threads blocked
                    // on a descriptor that is closed).
                    if (error == null) {
                        p[1].close();
                    } else {
                        p[1].closeWithError(error);
                    }
                } catch (IOException ignored) {
                    // Closed either way.
                }
            }
        };
    };
}
