package com.clawseed.probe;

import android.content.ComponentName;
import android.content.ContentProvider;
import android.content.Context;
import android.content.pm.ApplicationInfo;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HostedProvider;
import java.io.File;
import java.util.function.LongSupplier;
import org.robolectric.shadows.ShadowContentResolver;
import org.robolectric.shadows.ShadowPackageManager;

/**
 * Identity b's probe app on the JVM device, beside a's, for a Consumer under
 * test: the peer a phone's second probe is (probe-wire "peer probe"). Its
 * hostile Provider is a second Provider of another package (CSES-014's
 * decoy), and the ContentProvider that a's foreign discovery service names
 * (CSES-002: a service whose authority belongs to another package).
 *
 * <p>It is the probe app's own code, installed as the flavor {@code b}
 * APK installs it: the manifest's providers and services under package
 * {@link JvmDevice#PACKAGE_B} (b's placeholders, so its foreign service
 * names a's authority), its {@link HostileProvider} and
 * {@link HostedBridge} attached to a Context of b's package, so that calls,
 * result files and confirmations reach b's own {@link Hosting} instance,
 * which identity b's connection hosts. What differs from a phone: both
 * apps run in one process (a {@code provider_died} of b's Provider is
 * played as of a's, by its own ContentProvider object), and b's result
 * files are in a directory of their own under the JVM's cache.
 */
final class PeerProbe {
    private PeerProbe() {}

    /** The product flavor of identity b's probe app (app/build.gradle.kts). */
    static final String FLAVOR = "b";

    /**
     * Installs b's probe app (its package must be installed already, with
     * its UID and certificate) and returns its hosted Provider, reset,
     * timed by {@code clock}.
     */
    static HostedProvider install(Context app, ShadowPackageManager spm, LongSupplier clock) throws Exception {
        ApplicationInfo info = spm.getInternalMutablePackageInfo(JvmDevice.PACKAGE_B).applicationInfo;
        Context b = new PeerContext(app, info);
        ManifestInstaller.install(b, FLAVOR);
        // Registered as b's before any call: Robolectric would otherwise
        // make them on first use with the test application's Context (a's
        // package), and b's calls would reach a's bridge.
        attach(b, HostileProvider.class);
        attach(b, HostedBridge.class);
        HostedProvider hosted = Hosting.get(b, clock);
        hosted.reset();
        return hosted;
    }

    @SuppressWarnings("deprecation")
    private static void attach(Context b, Class<? extends ContentProvider> cls) throws Exception {
        ProviderInfo p;
        try {
            p = b.getPackageManager().getProviderInfo(new ComponentName(b, cls), 0);
        } catch (PackageManager.NameNotFoundException e) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "the probe's manifest lacks " + cls.getSimpleName()
                    + " for identity b: " + e);
        }
        ContentProvider provider = cls.getDeclaredConstructor().newInstance();
        provider.attachInfo(b, p);
        ShadowContentResolver.registerProviderInternal(p.authority, provider);
    }

    /** b's Context: its package and UID, and a cache directory of its own (its result files). */
    static final class PeerContext extends JvmDevice.VendorContext {
        PeerContext(Context base, ApplicationInfo info) {
            super(base, info);
        }

        @Override
        public File getCacheDir() {
            File dir = new File(super.getCacheDir(), "probe-" + FLAVOR);
            if (!dir.isDirectory() && !dir.mkdirs()) {
                throw new IllegalStateException("cannot make " + dir);
            }
            return dir;
        }
    }
}
