package com.clawseed.probe;

import android.content.ComponentName;
import android.content.Context;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.content.pm.ServiceInfo;
import android.os.Build;
import android.os.Handler;
import android.os.HandlerThread;
import android.os.ParcelFileDescriptor;
import android.util.Log;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.FdClose;
import com.clawseed.probe.core.HostedProvider;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The process's hosted Provider ({@link HostedProvider}), shared by the
 * probe's connections (which host it) and {@link HostileProvider} (which
 * Consumers call). Its authority and the meta-data of its discovery services
 * (the foreign one's too, which names the other probe app's authority) are
 * read from this app's own manifest, so that they cannot drift from what
 * Android actually declares.
 *
 * <p>One per package: on a phone a process is one probe app, so there is
 * one; the JVM device runs both probe apps (identity a's and b's, each with
 * its own Context) in one process, and each gets its own.
 */
final class Hosting {
    private Hosting() {}

    /** The discovery services of the own Provider, one per meta-data set; all disabled in the manifest. */
    private static final Class<?>[] SERVICES = {
        HostileToolService.class, HostileToolService.V1Only.class, HostileToolService.V2Only.class,
    };

    /** The service naming the other probe app's authority; disabled in the manifest too. */
    private static final Class<?> FOREIGN = HostileToolService.Foreign.class;

    /** The meta-data key naming a service's authority (CETP §2.1). */
    private static final String AUTHORITY_KEY = "com.clawseed.tools.authority";

    /** The directory of result files, under the app's cache: only this app reads it. */
    static final String RESULT_DIR = "cetp-hosted-fd";

    /** Each package's hosted Provider and its result files, by package. */
    private static final Map<String, HostedProvider> INSTANCES = new TreeMap<>();
    private static final Map<String, ResultFiles> RESULTS = new TreeMap<>();

    /** The process's hosted Provider, built on first use from the manifest. */
    static synchronized HostedProvider get(Context context) throws DeviceError {
        return get(context, System::currentTimeMillis);
    }

    /**
     * As {@link #get(Context)}, its events' {@code now_ms} read from
     * {@code clock} when this call builds it: the JVM device's clock that
     * {@code advance_clock} moves, which the Consumer under test reads too
     * (on a phone both are the system clock).
     */
    static synchronized HostedProvider get(Context context, java.util.function.LongSupplier clock) throws DeviceError {
        Context app = context.getApplicationContext() != null ? context.getApplicationContext() : context;
        String pkg = app.getPackageName();
        HostedProvider hosted = INSTANCES.get(pkg);
        if (hosted == null) {
            hosted = new HostedProvider(hostable(app), exposer(app), HostedProvider.Limits.defaults(), clock);
            ResultFiles results = new ResultFiles(new File(app.getCacheDir(), RESULT_DIR));
            // Files left by a probe process that died holding them: no one
            // will close or delete them now.
            results.clearStale();
            INSTANCES.put(pkg, hosted);
            RESULTS.put(pkg, results);
        }
        return hosted;
    }

    /** The result files of the package's hosted Provider ({@code fd_data}); after {@link #get}. */
    static synchronized ResultFiles results(Context context) throws DeviceError {
        get(context);
        Context app = context.getApplicationContext() != null ? context.getApplicationContext() : context;
        return RESULTS.get(app.getPackageName());
    }

    /**
     * The hosted Provider a confirmation's data URI names
     * ({@code cetp-confirm://PACKAGE/…}, {@link HostedBridge#confirmation}):
     * that package's, when this process hosts it, else {@code own}'s. On a
     * phone the URI always names the activity's own package; the JVM device
     * runs both probe apps' confirmations in one activity class, and b's
     * must reach b's hosted Provider.
     */
    static synchronized HostedProvider forConfirmation(Context own, android.net.Uri data) throws DeviceError {
        String named = data == null ? null : data.getAuthority();
        HostedProvider hosted = named == null ? null : INSTANCES.get(named);
        return hosted != null ? hosted : get(own);
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
                variants.add(variant(context, pm, c));
            }
            HostedProvider.Variant foreign = variant(context, pm, FOREIGN);
            return new HostedProvider.Hostable(provider.authority, pkg, variants, Collections.singletonList(foreign),
                    foreignPackage(pkg, provider.authority, foreign.meta.get(AUTHORITY_KEY)));
        } catch (PackageManager.NameNotFoundException e) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "the probe's manifest lacks its hostile provider: " + e);
        }
    }

    /** A discovery service of this app, with its meta-data as {@code discover} reports it. */
    @SuppressWarnings("deprecation")
    private static HostedProvider.Variant variant(Context context, PackageManager pm, Class<?> c)
            throws PackageManager.NameNotFoundException {
        ComponentName name = new ComponentName(context, c);
        // Disabled until hosted: without this flag Android does not find them.
        int flags = PackageManager.GET_META_DATA | PackageManager.MATCH_DISABLED_COMPONENTS;
        ServiceInfo si = Build.VERSION.SDK_INT >= 33
                ? pm.getServiceInfo(name, PackageManager.ComponentInfoFlags.of(flags))
                : pm.getServiceInfo(name, flags);
        // As `discover` reports them: android:value="1" arrives as an Integer.
        Map<String, String> meta = new TreeMap<>();
        AndroidBackend.readMeta(si.metaData, meta, new TreeMap<>());
        return new HostedProvider.Variant(name.flattenToShortString(), meta);
    }

    /**
     * The package whose ContentProvider serves the foreign service's
     * authority. Both probe flavors declare their authority as
     * {@code ${applicationId}.hostile.clawseed.tools} (this one's is read
     * above), so the other's package is its authority without that suffix;
     * the other probe need not be installed for hello to say so. A manifest
     * that breaks the rule stops hosting, rather than announce a package
     * that may be wrong.
     */
    static String foreignPackage(String pkg, String ownAuthority, String foreignAuthority) throws DeviceError {
        String suffix = ownAuthority.startsWith(pkg + ".") ? ownAuthority.substring(pkg.length()) : null;
        if (suffix == null || foreignAuthority == null || !foreignAuthority.endsWith(suffix)
                || foreignAuthority.length() == suffix.length() || foreignAuthority.equals(ownAuthority)) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "the probe's manifest declares its foreign service's"
                    + " authority as " + foreignAuthority + ", not another probe's package followed by " + suffix);
        }
        return foreignAuthority.substring(0, foreignAuthority.length() - suffix.length());
    }

    /**
     * Enables the chosen discovery services (an own one, the foreign one)
     * and returns the others to their manifest state (disabled).
     * DONT_KILL_APP: changing a component's state otherwise kills the app's
     * process, which is the probe itself.
     */
    private static HostedProvider.Exposer exposer(Context context) {
        List<Class<?>> all = new ArrayList<>(java.util.Arrays.asList(SERVICES));
        all.add(FOREIGN);
        return (own, foreign) -> {
            PackageManager pm = context.getPackageManager();
            try {
                for (Class<?> c : all) {
                    ComponentName name = new ComponentName(context, c);
                    String n = name.flattenToShortString();
                    boolean on = (own != null && own.service.equals(n)) || (foreign != null && foreign.service.equals(n));
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
     * The descriptors of {@code fd_endless} are reliable pipes: one the probe
     * cuts off (deadline, endless cap) is closed with an error a Consumer can
     * see with {@code checkError}, instead of looking like a complete file.
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
                // Silently: a normal close would write "closed" on the
                // pipe's status channel, and the writer, which reads that
                // channel before writing its own status, would then keep a
                // cut-off's error from the Consumer (writeCommStatusAndClose:
                // "Skip writing status when other end has already gone away").
                HostedBridge.releaseSilently(p[0]);
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

    /**
     * The result files of {@code fd_data} replies (CETP §4.5), made in the
     * probe's process, where the hosting connections are: the bytes are
     * written to a file under the app's cache, which is opened read-only
     * with a close listener
     * ({@code ParcelFileDescriptor.open(File, MODE_READ_ONLY, Handler,
     * OnCloseListener)}, API 19). The descriptor carries a status channel
     * through every copy Binder makes of it, to the hosted process and on
     * to the Consumer; the listener runs here, on this class's own thread,
     * and hears the first status any copy writes (the Consumer's close,
     * detach, a leak found by its garbage collector, an error), or that
     * every copy vanished without one. The probe's copies (this process's,
     * and the hosted process's, {@link HostileProvider}) are let go of
     * without a status ({@link HostedBridge#releaseSilently}), so what the
     * listener hears is the Consumer's.
     */
    static final class ResultFiles implements HostedProvider.ResultFiles<ParcelFileDescriptor> {
        private final File dir;
        private final Handler handler;

        ResultFiles(File dir) {
            this.dir = dir;
            // Not the main thread: the instrumentation's may be busy, and a
            // listener must not wait behind it. One thread for every file.
            HandlerThread t = new HandlerThread("cetp-fd-close");
            t.setDaemon(true);
            t.start();
            this.handler = new Handler(t.getLooper());
        }

        File dir() {
            return dir;
        }

        /** Deletes every result file there: called once per process, before any is made. */
        void clearStale() {
            File[] old = dir.listFiles();
            if (old != null) {
                for (File f : old) {
                    if (!f.delete()) {
                        Log.w(ProbeInstrumentation.TAG, "hostile provider: cannot delete " + f);
                    }
                }
            }
        }

        @Override
        public HostedProvider.ResultFile<ParcelFileDescriptor> open(byte[] data, HostedProvider.CloseListener listener)
                throws IOException {
            if (!dir.isDirectory() && !dir.mkdirs()) {
                throw new IOException("cannot make " + dir);
            }
            File file = File.createTempFile("result-", ".bin", dir);
            try {
                try (FileOutputStream out = new FileOutputStream(file)) {
                    out.write(data);
                }
                ParcelFileDescriptor pfd = ParcelFileDescriptor.open(file, ParcelFileDescriptor.MODE_READ_ONLY, handler,
                        e -> listener.closed(FdClose.of(e)));
                return new ResultFile(file, pfd);
            } catch (IOException | RuntimeException e) {
                deleteQuietly(file);
                throw e;
            }
        }
    }

    /** One result file and the probe's own copy of its descriptor. */
    static final class ResultFile implements HostedProvider.ResultFile<ParcelFileDescriptor> {
        private final File file;
        private final ParcelFileDescriptor pfd;
        private boolean released;

        ResultFile(File file, ParcelFileDescriptor pfd) {
            this.file = file;
            this.pfd = pfd;
        }

        File file() {
            return file;
        }

        @Override
        public ParcelFileDescriptor descriptor() {
            return pfd;
        }

        @Override
        public synchronized void releaseOwn() {
            if (!released) {
                released = true;
                HostedBridge.releaseSilently(pfd);
            }
        }

        /**
         * Its own copy (if still held) and the file. A Consumer that still
         * holds its descriptor keeps reading the unlinked file; the listener
         * stays registered until that copy goes, and is then ignored.
         */
        @Override
        public void dispose() {
            releaseOwn();
            deleteQuietly(file);
        }
    }

    private static void deleteQuietly(File f) {
        if (!f.delete() && f.exists()) {
            Log.w(ProbeInstrumentation.TAG, "hostile provider: cannot delete " + f);
        }
    }
}
