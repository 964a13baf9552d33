package com.clawseed.probe;

import static org.robolectric.Shadows.shadowOf;

import android.app.Instrumentation;
import android.content.ComponentName;
import android.content.ContentProvider;
import android.content.Context;
import android.content.ContextWrapper;
import android.content.IntentFilter;
import android.content.pm.ApplicationInfo;
import android.content.pm.PackageInfo;
import android.content.pm.ProviderInfo;
import android.content.pm.ServiceInfo;
import android.content.pm.Signature;
import android.content.pm.SigningInfo;
import com.clawseed.probe.core.Abilities;
import com.clawseed.probe.core.DeviceBackend;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.FdSource;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.core.ProbeSession;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireError;
import java.io.File;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;
import org.robolectric.shadows.ShadowContentResolver;
import org.robolectric.shadows.ShadowPackageManager;
import org.robolectric.shadows.ShadowSigningInfo;
import org.robolectric.shadow.api.Shadow;

/**
 * The end-to-end JVM device (scripts/jvm-device.sh): the probe app's own
 * {@link ProbeSession}, {@code Dispatcher} and {@link AndroidBackend} under
 * Robolectric, serving probe wire over TCP for identity a and identity b,
 * in front of a vendor's Provider ({@link VendorApp}: the sample of
 * examples/java-provider by default, or the vendor's own compiled classes),
 * registered from its manifest or the script's flags as Robolectric
 * registers providers. Runs until killed.
 *
 * <p>What differs from a phone, and how this device says so:
 * <ul>
 *   <li>one process: the Provider runs in the probe's process, called
 *       directly, with no Binder between them; each call's thread carries
 *       the caller's UID ({@link JvmShadows.CallingUid}). Binder's rules
 *       that change a verdict are applied ({@link BinderRules}): who may
 *       acquire the provider (exported, read/write permission), the
 *       transaction limit, the caller's own copy of each descriptor. Not
 *       applied: parcelling itself (values pass as objects), Binder's
 *       thread pool, a buffer shared with other transactions in flight,
 *       path permissions and URI grants;
 *   <li>{@code resolve} starts the Provider's activity under Robolectric
 *       on its main thread and plays the decision in its view tree
 *       ({@link JvmResolver}), not through a phone's UI automation;
 *   <li>a clock the host moves: the Provider's classes read {@link DeviceClock}
 *       (scripts/jvm-device.sh rewrote their clock reads with
 *       {@link ClockRewriter}), so {@code advance_clock} is listed and a
 *       lifetime runs out in seconds; a Provider that reads a clock the
 *       rewrite cannot redirect gets no {@code advance_clock}, with why in
 *       {@code ops_unavailable}, and its lifetimes are waited out in real
 *       time. The framework's own clocks (Robolectric's SystemClock, the
 *       main looper's) do not move;
 *   <li>{@code restart_provider} replaces the Provider object with a new
 *       one (its {@code shutdown()} called, a new instance attached): memory
 *       is lost, SharedPreferences stay, as after {@code am force-stop};
 *       static fields survive, which a phone's restart would clear.
 * </ul>
 *
 * <p>It is a JUnit test so that Robolectric's runner builds the sandbox; it
 * is compiled and run only by scripts/jvm-device.sh.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = {ShadowPackageManagerFlags.class, JvmShadows.CallingUid.class, JvmShadows.Creator.class,
    JvmShadows.CrossBinder.class, JvmShadows.RealPipe.class, JvmShadows.ProviderAccess.class})
public class JvmDevice {
    static final String ANDROID = ManifestInstaller.ANDROID;
    /**
     * Identity a's UID, the device process's: fixed, because Robolectric
     * draws a random application UID for the process, which now and then
     * was one of the fixed UIDs below (a device start failed with
     * "duplicate key: 10200" in BinderRules.install).
     */
    static final int UID_A = 10_100;
    /** Identity b: a second app with its own UID, package and certificate. */
    static final int UID_B = 10_200;
    static final String PACKAGE_B = "com.clawseed.probe.b";
    static final int VENDOR_UID = 10_300;
    /**
     * The two identities' certificates: those of the committed test keystores that sign the probe
     * APKs (scripts/build-apks.sh, app/build.gradle.kts), so that a digest a Provider lists (the
     * sample's manager_certs) means the same identity here as on a phone.
     */
    static final byte[] CERT_A = testCert("probe-a", "cetp-probe-a");
    static final byte[] CERT_B = testCert("probe-b", "cetp-probe-b");

    private Context app;
    private Vendor vendor;
    /** The vendor's Consumer under test ({@code --consumer-jar}); null when none was given. */
    private JvmConsumer consumer;

    /** The vendor's Provider as installed, and the live Provider object. */
    static final class Vendor {
        String pkg;
        ProviderInfo provider;
        Context context;
        /** Null while the Provider is not started (its onCreate threw). */
        volatile ContentProvider live;
        /** Why it did not start, for the error the host sees; null when it runs. */
        volatile String startFailure;
    }

    @Test
    public void serve() throws Exception {
        String listenA = System.getProperty("cetp.jvm.listen");
        String listenB = System.getProperty("cetp.jvm.listen_b");
        if (listenA == null || listenB == null) {
            throw new IllegalStateException("set -Dcetp.jvm.listen and -Dcetp.jvm.listen_b (scripts/jvm-device.sh does)");
        }
        app = RuntimeEnvironment.getApplication();
        org.robolectric.shadows.ShadowProcess.setUid(UID_A);
        app.getApplicationInfo().uid = UID_A;
        ManifestInstaller.install(app);
        ShadowPackageManager spm = shadowOf(app.getPackageManager());
        spm.setPackagesForUid(UID_A, app.getPackageName());
        setCert(spm, app.getPackageName(), CERT_A, app.getApplicationInfo().uid);
        installB(spm);
        VendorApp spec;
        try {
            spec = VendorApp.fromProperties();
            spec.checkLoadable(JvmDevice.class.getClassLoader());
        } catch (VendorApp.UsageError e) {
            // The command's mistake, before anything is served: scripts/jvm-device.sh's usage exit.
            System.err.println("jvm-device: " + e.getMessage());
            System.err.flush();
            Runtime.getRuntime().halt(2);
            return;
        }
        vendor = installVendor(spm, spec);
        BinderRules.install(app, spm, spec, vendor.provider, android.os.Process.myUid(), UID_B);
        HostedProvider hosting = null;
        HostedProvider hostingB = null;
        try {
            consumer = JvmConsumer.fromProperties(app, spm, JvmDevice.class.getClassLoader());
        } catch (JvmConsumer.UsageError e) {
            System.err.println("jvm-device: " + e.getMessage());
            System.err.flush();
            Runtime.getRuntime().halt(2);
            return;
        }
        if (consumer != null) {
            // The hostile Provider the harness scripts, hosted as the probe
            // app hosts it on a phone (HostileProvider, HostedBridge,
            // ConfirmActivity, from this app's manifest), on identity a.
            hosting = Hosting.get(app, DeviceClock::currentTimeMillis);
            hosting.reset();
            // And identity b's probe app, the peer: a second Provider of
            // another package, and the ContentProvider a's foreign service
            // names (CSES-014, CSES-002), hosted by b's connection.
            hostingB = PeerProbe.install(app, spm, DeviceClock::currentTimeMillis);
        }

        ServerSocket a = listen(listenA);
        ServerSocket b = listen(listenB);
        serve(a, "a", android.os.Process.myUid(), List.of(app.getPackageName()), CERT_A, hosting, consumer);
        serve(b, "b", UID_B, List.of(PACKAGE_B), CERT_B, hostingB, null);
        System.out.println("jvm-device: ready: identity a on " + a.getLocalSocketAddress() + ", identity b on "
                + b.getLocalSocketAddress() + ", Provider " + vendor.pkg
                + defectNote() + (consumer == null ? "" : ", Consumer " + System.getProperty("cetp.jvm.consumer.class")));
        System.out.flush();
        // The test thread is Robolectric's main thread: run what is posted to it.
        while (true) {
            JvmResolver.idleMain();
            Thread.sleep(20);
        }
    }

    private static String defectNote() {
        String d = System.getProperty("com.example.cetp.tasks.defect");
        return d == null ? "" : " with seeded defect " + d;
    }

    private static ServerSocket listen(String hostPort) throws Exception {
        int colon = hostPort.lastIndexOf(':');
        ServerSocket s = new ServerSocket();
        s.setReuseAddress(true);
        s.bind(new InetSocketAddress(InetAddress.getByName(hostPort.substring(0, colon)),
                Integer.parseInt(hostPort.substring(colon + 1))), 8);
        return s;
    }

    /**
     * Serves one identity's connections: {@code hosting} is the hosted
     * Provider they host (null: none), {@code actor} the Consumer under test
     * they make act (null: none).
     */
    private void serve(ServerSocket server, String name, int uid, List<String> packages, byte[] cert,
            HostedProvider hosting, JvmConsumer actor) {
        Thread t = new Thread(() -> {
            while (true) {
                Socket conn;
                try {
                    conn = server.accept();
                } catch (Exception e) {
                    return;
                }
                Thread session = new Thread(() -> {
                    try (Socket c = conn) {
                        DeviceBackend backend = new Identity(
                                new AndroidBackend(app, UiAccess.connect(new Instrumentation())),
                                name, uid, packages, sha256(cert), hosting != null, actor);
                        new ProbeSession(c.getInputStream(), c.getOutputStream(), backend, hosting,
                                message -> System.err.println("jvm-device " + name + ": " + message)).run();
                    } catch (Exception e) {
                        System.err.println("jvm-device " + name + ": connection ended: " + e);
                    }
                }, "jvm-device-" + name);
                session.setDaemon(true);
                session.start();
            }
        }, "jvm-device-accept-" + name);
        t.setDaemon(true);
        t.start();
    }

    /**
     * One identity in front of the probe's AndroidBackend: its own hello
     * identity, and its UID on the thread of each call.
     */
    final class Identity implements DeviceBackend {
        private final AndroidBackend inner;
        private final String name;
        private final int uid;
        private final List<String> packages;
        private final String cert;
        /** Whether this identity's connections host its probe app's hostile Provider. */
        private final boolean hosts;
        /** The Consumer this connection makes act (identity a's, which hosts the hostile Provider); or null. */
        private final JvmConsumer actor;

        Identity(AndroidBackend inner, String name, int uid, List<String> packages, String cert, boolean hosts,
                JvmConsumer actor) {
            this.hosts = hosts;
            this.actor = actor;
            this.inner = inner;
            this.name = name;
            this.uid = uid;
            this.packages = packages;
            this.cert = cert;
        }

        @Override
        public Hello hello() throws DeviceError {
            Hello h = inner.hello();
            // The device clock the Provider reads (DeviceClock), moved or not.
            // advance_clock moves what the Provider's code reads, not the
            // sleeps of its threads: the host waits for an operation in real time.
            com.clawseed.probe.wire.JsonObject extra = new com.clawseed.probe.wire.JsonObject()
                    .with("advance_clock_moves", "reads");
            if (hosts) {
                extra.put("reply_extensions", hostedExtensions());
            }
            return new Hello("cetp-jvm-device/" + BuildConfig.VERSION_NAME,
                    new Ops.Identity(name, uid, packages, List.of(cert)), h.device, DeviceClock.currentTimeMillis(),
                    extra);
        }

        @Override
        public Abilities abilities() {
            String unmovable = DeviceClock.whyUnmovable();
            if (unmovable != null) {
                return Abilities.without(Map.of(Abilities.ADVANCE_CLOCK, unmovable));
            }
            return Abilities.FULL.plus(Abilities.ADVANCE_CLOCK);
        }

        @Override
        public long advanceClock(long ms) throws DeviceError {
            if (!abilities().can(Abilities.ADVANCE_CLOCK)) {
                throw abilities().refusal(Abilities.ADVANCE_CLOCK);
            }
            if (ms < 0 || ms > DeviceClock.MAX_ADVANCE_MS) {
                throw new DeviceError(WireError.BAD_REQUEST,
                        "advance_clock needs `ms`, an integer from 0 to " + DeviceClock.MAX_ADVANCE_MS);
            }
            // Not logged: an operation's polls move it 300 ms at a time, thousands per run.
            return DeviceClock.advance(ms);
        }

        @Override
        public List<Ops.ServiceInfo> discover() throws DeviceError {
            return inner.discover();
        }

        @Override
        public List<String> consumers() {
            return actor == null ? List.of() : List.of(JvmConsumer.NAME);
        }

        @Override
        public com.clawseed.probe.wire.JsonObject consumerAct(String name, com.clawseed.probe.wire.JsonObject action,
                long timeoutMs) throws DeviceError, InterruptedException {
            if (actor == null) {
                throw DeviceError.unsupported("this connection hosts no Consumer under test");
            }
            return actor.act(action, timeoutMs);
        }

        @Override
        public CallResult call(Ops.CallParams params) throws DeviceError, InterruptedException {
            JvmShadows.CALLING_UID.set(uid);
            try {
                if (params.authority.equals(vendor.provider.authority)) {
                    startIfDead();
                }
                return inner.call(params);
            } catch (DeviceError e) {
                String why = vendor.startFailure;
                if (why != null && WireError.PROVIDER_DIED.equals(e.kind)) {
                    // What only the JVM device can add: the phone's probe sees the death, not its cause.
                    throw new DeviceError(e.kind, e.getMessage() + " (JVM device: " + why + ")");
                }
                throw e;
            } finally {
                JvmShadows.CALLING_UID.remove();
            }
        }

        /**
         * The probe's descriptor, with {@code writable} read from the real
         * descriptor: Robolectric's {@code Os.fcntlInt} is a stub answering
         * 0 (read-only) for every descriptor, so the probe's own reading
         * would pass RES-002 whatever the Provider returned.
         */
        @Override
        public FdSource takeFd(String handle) throws DeviceError {
            FdSource fd = inner.takeFd(handle);
            return new FdSource() {
                @Override
                public java.io.InputStream stream() throws java.io.IOException {
                    return fd.stream();
                }

                @Override
                public String checkError() {
                    return fd.checkError();
                }

                @Override
                public Boolean writable() {
                    try {
                        return accessModeWritable(fd.stream());
                    } catch (java.io.IOException e) {
                        return null;
                    }
                }

                @Override
                public void close() throws java.io.IOException {
                    fd.close();
                }
            };
        }

        @Override
        public void closeFd(String handle) throws DeviceError {
            inner.closeFd(handle);
        }

        @Override
        public ResolveResult resolve(Ops.ResolveParams params) throws DeviceError, InterruptedException {
            return JvmResolver.resolve(app, inner.takeIntent(params.handle), params);
        }

        @Override
        public void restartProvider(String pkg) throws DeviceError {
            if (!pkg.equals(vendor.pkg)) {
                throw DeviceError.unsupported("the JVM device restarts only " + vendor.pkg);
            }
            restartVendor();
        }

        @Override
        public void close() {
            inner.close();
        }
    }

    /**
     * The hosted Provider's reply extensions this device plays: all of the
     * probe app's. {@code fd_closed} is heard as on a phone: a result
     * file's close listener hears the copy the Consumer was handed, never
     * the probe's own ({@link JvmShadows.RealPipe#open}); a Consumer that
     * never closes its copy is heard as never closing it.
     */
    static List<Object> hostedExtensions() {
        return new java.util.ArrayList<>(HostedProvider.REPLY_EXTENSIONS);
    }

    /**
     * F_GETFL & O_ACCMODE of the descriptor behind {@code in}, as the probe
     * reads it on a phone, here from Linux's {@code /proc/self/fdinfo}; null
     * when it cannot be read (then the host does not judge RES-002).
     */
    static Boolean accessModeWritable(java.io.InputStream in) {
        if (!(in instanceof java.io.FileInputStream)) {
            return null;
        }
        try {
            java.io.FileDescriptor fd = ((java.io.FileInputStream) in).getFD();
            java.lang.reflect.Field field = java.io.FileDescriptor.class.getDeclaredField("fd");
            field.setAccessible(true);
            int n = field.getInt(fd);
            if (n < 0) {
                return null;
            }
            for (String line : Files.readAllLines(new File("/proc/self/fdinfo/" + n).toPath())) {
                if (line.startsWith("flags:")) {
                    // O_ACCMODE is 3; O_RDONLY 0.
                    return (Integer.parseInt(line.substring(6).trim(), 8) & 3) != 0;
                }
            }
            return null;
        } catch (ReflectiveOperationException | java.io.IOException | NumberFormatException e) {
            return null;
        }
    }

    /** As after {@code am force-stop}: the old Provider object is shut down, a new one attached. */
    private synchronized void restartVendor() {
        ContentProvider old = vendor.live;
        if (old != null) {
            old.shutdown();
        }
        vendor.live = attach(vendor);
    }

    /**
     * A Provider whose {@code onCreate} threw, or whose process an Error in
     * {@code call} killed ({@link JvmShadows#DEAD}): on a phone its process
     * died, and the next request starts it again. Here the next
     * call attaches it again; if that throws too, no client is found and the
     * probe reports {@code provider_died}, charged to the Provider.
     */
    private synchronized void startIfDead() {
        ContentProvider live = vendor.live;
        if (live == null) {
            vendor.live = attach(vendor);
        } else if (JvmShadows.DEAD.contains(live)) {
            // An Error killed its process during a call: this request starts it again.
            live.shutdown();
            vendor.live = attach(vendor);
        }
    }

    /**
     * A new instance of the Provider, attached as Android attaches it when
     * its process starts ({@code attachInfo} calls {@code onCreate}), and
     * registered for its authority; null when its constructor or
     * {@code onCreate} threw, which is then logged with its stack trace as
     * a phone's logcat shows the crash, and remembered for the error report.
     */
    private static ContentProvider attach(Vendor v) {
        ContentProvider p;
        try {
            p = (ContentProvider) Class.forName(v.provider.name).getDeclaredConstructor().newInstance();
        } catch (java.lang.reflect.InvocationTargetException | ExceptionInInitializerError e) {
            return crashed(v, "its constructor threw", e instanceof ExceptionInInitializerError
                    ? ((ExceptionInInitializerError) e).getCause() : e.getCause());
        } catch (ReflectiveOperationException e) {
            // VendorApp.checkLoadable proved it loads and is a ContentProvider:
            // only a missing public no-argument constructor is left, as on a phone.
            return crashed(v, "it cannot be instantiated", e);
        }
        try {
            p.attachInfo(v.context, v.provider);
        } catch (RuntimeException | Error e) {
            return crashed(v, "its onCreate threw", e);
        }
        ShadowContentResolver.registerProviderInternal(v.provider.authority, p);
        v.startFailure = null;
        return p;
    }

    private static ContentProvider crashed(Vendor v, String what, Throwable e) {
        v.startFailure = what + ": " + e;
        // The Provider's registration is dropped, so the probe finds no client for it.
        ShadowContentResolver.registerProviderInternal(v.provider.authority, null);
        System.err.println("jvm-device: the Provider " + v.provider.name + " did not start (a phone's process would"
                + " crash: \"Unable to get provider " + v.provider.name + "\"): " + what + ":");
        e.printStackTrace(System.err);
        return null;
    }

    static void installB(ShadowPackageManager spm) {
        PackageInfo b = new PackageInfo();
        b.packageName = PACKAGE_B;
        b.applicationInfo = new ApplicationInfo();
        b.applicationInfo.packageName = PACKAGE_B;
        b.applicationInfo.uid = UID_B;
        spm.installPackage(b);
        spm.setPackagesForUid(UID_B, PACKAGE_B);
        setCert(spm, PACKAGE_B, CERT_B, UID_B);
    }

    /** The DER certificate of android-probe-app/app/ALIAS-test.keystore (PKCS#12, public test password). */
    private static byte[] testCert(String alias, String password) {
        String repo = System.getProperty("cetp.repo.dir");
        if (repo == null) {
            throw new IllegalStateException("set -Dcetp.repo.dir to the repository (scripts/jvm-device.sh does)");
        }
        File file = new File(repo, "android-probe-app/app/" + alias + "-test.keystore");
        try (java.io.InputStream in = Files.newInputStream(file.toPath())) {
            java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
            ks.load(in, password.toCharArray());
            return ks.getCertificate(alias).getEncoded();
        } catch (java.io.IOException | java.security.GeneralSecurityException e) {
            throw new IllegalStateException("cannot read the test certificate of " + file + ": " + e, e);
        }
    }

    /** Both the pre-28 signatures and the signingInfo AndroidBackend and the sample read. */
    @SuppressWarnings("deprecation")
    private static void setCert(ShadowPackageManager spm, String pkg, byte[] cert, int uid) {
        PackageInfo info = spm.getInternalMutablePackageInfo(pkg);
        Signature[] sigs = {new Signature(cert)};
        info.signatures = sigs;
        info.signingInfo = new SigningInfo();
        ShadowSigningInfo shadow = Shadow.extract(info.signingInfo);
        shadow.setSignatures(sigs);
        shadow.setPastSigningCertificates(sigs);
        if (info.applicationInfo != null) {
            info.applicationInfo.uid = uid;
        }
    }

    /**
     * The vendor's package, Provider and discovery service, as Android
     * installs them from the APK; then the Provider is started, as Android
     * starts it with its process.
     */
    private Vendor installVendor(ShadowPackageManager spm, VendorApp spec) {
        Vendor v = new Vendor();
        v.pkg = spec.pkg;
        PackageInfo info = new PackageInfo();
        info.packageName = v.pkg;
        info.applicationInfo = new ApplicationInfo();
        info.applicationInfo.packageName = v.pkg;
        info.applicationInfo.uid = VENDOR_UID;
        spm.installPackage(info);
        spm.setPackagesForUid(VENDOR_UID, v.pkg);
        setCert(spm, v.pkg, ("vendor " + v.pkg).getBytes(StandardCharsets.UTF_8), VENDOR_UID);
        ApplicationInfo appInfo = spm.getInternalMutablePackageInfo(v.pkg).applicationInfo;
        v.context = new VendorContext(app, appInfo);

        ProviderInfo p = spec.provider;
        p.applicationInfo = appInfo;
        spm.addOrUpdateProvider(p);
        v.provider = p;

        ServiceInfo s = spec.service;
        s.applicationInfo = appInfo;
        spm.addOrUpdateService(s);
        IntentFilter filter = new IntentFilter();
        for (String action : spec.serviceActions) {
            filter.addAction(action);
        }
        spm.addIntentFilterForService(new ComponentName(v.pkg, s.name), filter);
        v.live = attach(v);
        return v;
    }

    /** The vendor app's Context: its own package and UID, the JVM's resources and files. */
    static class VendorContext extends ContextWrapper {
        private final ApplicationInfo info;

        VendorContext(Context base, ApplicationInfo info) {
            super(base);
            this.info = info;
        }

        @Override
        public String getPackageName() {
            return info.packageName;
        }

        @Override
        public String getOpPackageName() {
            return info.packageName;
        }

        @Override
        public ApplicationInfo getApplicationInfo() {
            return info;
        }

        @Override
        public Context getApplicationContext() {
            return this;
        }
    }

    static String sha256(byte[] data) {
        try {
            StringBuilder sb = new StringBuilder();
            for (byte x : MessageDigest.getInstance("SHA-256").digest(data)) {
                sb.append(String.format("%02x", x & 0xFF));
            }
            return sb.toString();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
