package com.clawseed.probe;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import android.app.Instrumentation;
import android.content.ContentProvider;
import android.content.ContentProviderClient;
import android.content.ContentValues;
import android.content.pm.ApplicationInfo;
import android.content.pm.ProviderInfo;
import android.database.Cursor;
import android.net.Uri;
import android.os.Bundle;
import android.os.DeadObjectException;
import android.os.Parcel;
import android.os.ParcelFileDescriptor;
import android.os.TransactionTooLargeException;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireError;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;
import org.robolectric.shadows.ShadowContentResolver;

/**
 * Binder's rules on the JVM device ({@link BinderRules}), each on a case
 * whose outcome changes without it (scripts/jvm-device.sh --self-test).
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = {JvmShadows.CallingUid.class, JvmShadows.CrossBinder.class, JvmShadows.RealPipe.class,
    JvmShadows.ProviderAccess.class})
public class BinderRulesTest {
    static final String AUTHORITY = "com.example.fixture.clawseed.tools";
    static final int OWNER = 10_300;
    static final int CALLER = 10_200;

    /** The fixture Provider: answers what the test sets, then does what the test says with its own copy. */
    public static final class Fixture extends ContentProvider {
        volatile Bundle answer;
        volatile Runnable afterReturn;
        volatile Bundle received;

        @Override
        public boolean onCreate() {
            return true;
        }

        @Override
        public Bundle call(String method, String arg, Bundle extras) {
            received = extras;
            Runnable r = afterReturn;
            if (r != null) {
                // "Right after returning": as soon as the caller has the reply.
                Thread t = new Thread(() -> {
                    try {
                        Thread.sleep(50);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    r.run();
                });
                t.start();
            }
            return answer;
        }

        @Override
        public Cursor query(Uri uri, String[] p, String s, String[] a, String o) {
            return null;
        }

        @Override
        public String getType(Uri uri) {
            return null;
        }

        @Override
        public Uri insert(Uri uri, ContentValues values) {
            return null;
        }

        @Override
        public int delete(Uri uri, String s, String[] a) {
            return 0;
        }

        @Override
        public int update(Uri uri, ContentValues values, String s, String[] a) {
            return 0;
        }
    }

    private Fixture provider;
    private ProviderInfo info;

    @Before
    public void install() {
        // Robolectric draws the process's UID at random; never CALLER's.
        org.robolectric.shadows.ShadowProcess.setUid(JvmDevice.UID_A);
        info = new ProviderInfo();
        info.authority = AUTHORITY;
        info.name = Fixture.class.getName();
        info.packageName = "com.example.fixture";
        info.exported = true;
        info.applicationInfo = new ApplicationInfo();
        info.applicationInfo.uid = OWNER;
        provider = new Fixture();
        provider.attachInfo(RuntimeEnvironment.getApplication(), info);
        ShadowContentResolver.registerProviderInternal(AUTHORITY, provider);
        BinderRules.access = new BinderRules.Access(info, Map.of(CALLER, Set.of("com.clawseed.permission.ACCESS_TOOLS")));
        JvmShadows.CALLING_UID.set(CALLER);
    }

    @After
    public void uninstall() {
        BinderRules.access = null;
        JvmShadows.CALLING_UID.remove();
    }

    private ContentProviderClient acquire() {
        return RuntimeEnvironment.getApplication().getContentResolver()
                .acquireUnstableContentProviderClient(Uri.parse("content://" + AUTHORITY));
    }

    // ---- acquiring a provider ----

    @Test
    public void a_provider_that_is_not_exported_is_refused_to_another_uid() {
        info.exported = false;
        try {
            acquire();
            fail("acquired a provider that is not exported");
        } catch (SecurityException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("not exported from UID " + OWNER));
        }
        // Its own UID is served.
        JvmShadows.CALLING_UID.set(OWNER);
        assertNotNull(acquire());
    }

    @Test
    public void a_permission_the_caller_lacks_is_refused_and_one_it_holds_served() throws Exception {
        info.readPermission = "com.example.fixture.permission.SIGNED";
        info.writePermission = "com.example.fixture.permission.SIGNED";
        try {
            acquire();
            fail("acquired a provider guarded by a permission the caller lacks");
        } catch (SecurityException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("requires com.example.fixture.permission.SIGNED or"));
        }
        // Either permission serves; an unset one counts as held (a phone's checkComponentPermission).
        info.writePermission = "com.clawseed.permission.ACCESS_TOOLS";
        assertNotNull(acquire());
        info.readPermission = null;
        info.writePermission = "com.example.fixture.permission.SIGNED";
        assertNotNull(acquire());
    }

    /**
     * What the device installs for the probes (BinderRules.install): the
     * vendor's permissions defined with their levels, what identity b
     * holds answered to the Provider's own checkCallingPermission, and the
     * package's requested and granted permissions recorded.
     */
    @Test
    public void the_identities_hold_the_normal_permissions_they_request() throws Exception {
        android.app.Application app = RuntimeEnvironment.getApplication();
        org.robolectric.shadows.ShadowPackageManager spm = org.robolectric.Shadows.shadowOf(app.getPackageManager());
        android.content.pm.PackageInfo b = new android.content.pm.PackageInfo();
        b.packageName = "com.clawseed.probe.b";
        b.applicationInfo = new ApplicationInfo();
        b.applicationInfo.packageName = b.packageName;
        b.applicationInfo.uid = CALLER;
        spm.installPackage(b);
        spm.setPackagesForUid(CALLER, b.packageName);
        VendorApp vendor = new VendorApp();
        vendor.pkg = "com.example.fixture";
        vendor.declaredPermissions.put("com.clawseed.permission.ACCESS_TOOLS", "normal");
        vendor.declaredPermissions.put("com.example.fixture.permission.SIGNED", "signature");
        info.readPermission = "com.example.fixture.permission.SIGNED";
        info.writePermission = "com.example.fixture.permission.SIGNED";
        BinderRules.install(app, spm, vendor, info, android.os.Process.myUid(), CALLER);
        assertEquals(android.content.pm.PermissionInfo.PROTECTION_SIGNATURE,
                app.getPackageManager().getPermissionInfo("com.example.fixture.permission.SIGNED", 0).getProtection());
        // The Provider asks about its caller, identity b.
        assertEquals(android.content.pm.PackageManager.PERMISSION_GRANTED,
                provider.getContext().checkCallingPermission("com.clawseed.permission.ACCESS_TOOLS"));
        assertEquals(android.content.pm.PackageManager.PERMISSION_DENIED,
                provider.getContext().checkCallingPermission("com.example.fixture.permission.SIGNED"));
        android.content.pm.PackageInfo recorded = app.getPackageManager().getPackageInfo(b.packageName,
                android.content.pm.PackageManager.GET_PERMISSIONS);
        assertTrue(java.util.Arrays.asList(recorded.requestedPermissions)
                .contains("com.clawseed.permission.ACCESS_TOOLS"));
        // Held by neither identity, the signature permission guards the provider alone: refused.
        try {
            acquire();
            fail("acquired a provider guarded by the vendor's signature permission");
        } catch (SecurityException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("requires com.example.fixture.permission.SIGNED"));
        }
    }

    @Test
    public void what_a_probe_holds_follows_the_protection_level() {
        List<String> asked = List.of("android.permission.QUERY_ALL_PACKAGES", "n", "s", "d", "undeclared");
        Map<String, String> declared = Map.of("n", "normal", "s", "signature|privileged", "d", "dangerous");
        assertEquals(Set.of("android.permission.QUERY_ALL_PACKAGES", "n"), BinderRules.held(asked, declared, false));
        assertEquals(Set.of("android.permission.QUERY_ALL_PACKAGES", "n", "s"), BinderRules.held(asked, declared, true));
        // From an APK's compiled manifest: the number (signature|privileged is 0x12).
        assertEquals("signature", BinderRules.baseLevel("0x12"));
        assertEquals("signature", BinderRules.baseLevel("18"));
        assertEquals("dangerous", BinderRules.baseLevel("1"));
        assertEquals("normal", BinderRules.baseLevel("0"));
    }

    /**
     * What the probe's own AndroidBackend reports for the refusal, as on a
     * phone: provider_exception naming java.lang.SecurityException, the
     * Provider's doing, never setup trouble (the probe holds the tool
     * permission).
     */
    @Test
    public void the_probe_reports_a_refusal_as_a_phones_probe_does() throws Exception {
        info.exported = false;
        try {
            probe().call(new Ops.CallParams(AUTHORITY, "m", null, null, 0));
            fail("the probe called a provider that is not exported");
        } catch (DeviceError e) {
            assertEquals(WireError.PROVIDER_EXCEPTION, e.kind);
            assertEquals("java.lang.SecurityException", e.className);
        }
    }

    /**
     * A phone's queryIntentServices does not hide another app's service
     * that is not exported (ComputerEngine filters by package visibility,
     * which QUERY_ALL_PACKAGES opens; the non-exported filter applies only
     * when an intent is resolved to start or bind): discover lists it with
     * exported=false and its permission, for the host to judge. The JVM
     * device's package manager does the same.
     */
    @Test
    public void discover_lists_a_service_that_is_not_exported_as_a_phone_does() {
        android.content.pm.ServiceInfo s = new android.content.pm.ServiceInfo();
        s.packageName = "com.example.fixture";
        s.name = "com.example.fixture.ToolProviderService";
        s.exported = false;
        s.permission = "com.example.fixture.permission.BIND";
        s.applicationInfo = info.applicationInfo;
        s.applicationInfo.packageName = "com.example.fixture";
        org.robolectric.shadows.ShadowPackageManager spm =
                org.robolectric.Shadows.shadowOf(RuntimeEnvironment.getApplication().getPackageManager());
        spm.addOrUpdateService(s);
        android.content.IntentFilter filter = new android.content.IntentFilter(AndroidBackend.ACTION_TOOL_PROVIDER);
        spm.addIntentFilterForService(new android.content.ComponentName(s.packageName, s.name), filter);
        Ops.ServiceInfo found = null;
        for (Ops.ServiceInfo si : probe().discover()) {
            if (si.pkg.equals("com.example.fixture")) {
                found = si;
            }
        }
        assertNotNull("the service that is not exported is listed", found);
        assertEquals(false, found.exported);
        assertEquals("com.example.fixture.permission.BIND", found.permission);
    }

    private static AndroidBackend probe() {
        return new AndroidBackend(RuntimeEnvironment.getApplication(), UiAccess.connect(new Instrumentation()));
    }

    // ---- transaction size ----

    @Test
    public void the_estimate_matches_a_parcel_for_strings_and_byte_arrays() {
        Bundle b = new Bundle();
        b.putString("envelope", "x".repeat(100_001));
        b.putByteArray("bytes", new byte[300_003]);
        b.putInt("n", 7);
        Bundle inner = new Bundle();
        inner.putString("k", "värde");
        b.putBundle("inner", inner);
        Parcel p = Parcel.obtain();
        try {
            p.writeBundle(b);
            assertEquals(p.dataSize(), BinderRules.bundle(b));
        } finally {
            p.recycle();
        }
        // And both are what a phone's Parcel writes: 2 bytes per UTF-16 unit, 1 per byte.
        assertTrue(BinderRules.bundle(b) > 2 * 100_001 + 300_003);
        assertTrue(BinderRules.bundle(b) < 2 * 100_001 + 300_003 + 200);
    }

    @Test
    public void a_reply_larger_than_the_buffer_fails_as_on_a_phone() throws Exception {
        Bundle big = new Bundle();
        big.putString("envelope", "x".repeat(530_000));
        provider.answer = big;
        try {
            acquire().call("m", null, null);
            fail("a reply of " + BinderRules.replyBytes(big) + " bytes crossed Binder");
        } catch (DeadObjectException e) {
            // A small request: libbinder blames the small parcel; the probe then asks getType.
            assertTrue(e.getMessage(), e.getMessage().contains("small parcel"));
        }
        // The probe tells the small-parcel failure from a death (getType still answers).
        try {
            probe().call(new Ops.CallParams(AUTHORITY, "m", null, null, 0));
            fail("the probe received a reply of " + BinderRules.replyBytes(big) + " bytes");
        } catch (DeviceError e) {
            assertEquals(WireError.TRANSACTION_TOO_LARGE, e.kind);
        }
        // Just under the limit crosses.
        Bundle fits = new Bundle();
        fits.putString("envelope", "x".repeat(510_000));
        provider.answer = fits;
        assertEquals(510_000, acquire().call("m", null, null).getString("envelope").length());
    }

    @Test
    public void a_request_larger_than_the_buffer_never_reaches_the_provider() throws Exception {
        Bundle big = new Bundle();
        big.putByteArray("bytes", new byte[BinderRules.LIMIT_BYTES]);
        provider.answer = new Bundle();
        try {
            acquire().call("m", null, big);
            fail("a request of " + BinderRules.bundle(big) + " bytes crossed Binder");
        } catch (TransactionTooLargeException e) {
            assertTrue(e.getMessage(), e.getMessage().startsWith("data parcel size "));
        }
        assertNull(provider.received);
    }

    // ---- descriptors ----

    @Test(timeout = 20_000)
    public void a_provider_closing_its_pipe_end_after_returning_does_not_cut_the_read_short() throws Exception {
        ParcelFileDescriptor[] pipe = ParcelFileDescriptor.createReliablePipe();
        byte[] bytes = pattern(300_007);
        Bundle answer = new Bundle();
        answer.putParcelable("result_fd", pipe[0]);
        provider.answer = answer;
        provider.afterReturn = () -> {
            try {
                pipe[0].close();
                Thread.sleep(100);
                try (OutputStream out = new ParcelFileDescriptor.AutoCloseOutputStream(pipe[1])) {
                    out.write(bytes);
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        };
        Bundle got = acquire().call("m", null, null);
        ParcelFileDescriptor mine = got.getParcelable("result_fd", ParcelFileDescriptor.class);
        assertArrayEquals(bytes, readAll(mine));
    }

    @Test
    public void the_caller_closing_its_copy_leaves_the_providers_open() throws Exception {
        File f = File.createTempFile("binder-rules", ".bin");
        f.deleteOnExit();
        byte[] bytes = pattern(10_000);
        Files.write(f.toPath(), bytes);
        ParcelFileDescriptor own = ParcelFileDescriptor.open(f, ParcelFileDescriptor.MODE_READ_ONLY);
        Bundle answer = new Bundle();
        answer.putParcelable("result_fd", own);
        provider.answer = answer;
        Bundle got = acquire().call("m", null, null);
        ParcelFileDescriptor mine = got.getParcelable("result_fd", ParcelFileDescriptor.class);
        assertEquals(bytes.length, mine.getStatSize());
        assertEquals(Boolean.FALSE, JvmDevice.accessModeWritable(new FileInputStream(mine.getFileDescriptor())));
        mine.close();
        // The Provider's Bundle is its own: still its descriptor, still open.
        assertTrue(answer.getParcelable("result_fd", ParcelFileDescriptor.class) == own);
        assertTrue(own.getFileDescriptor().valid());
        assertArrayEquals(bytes, readAll(own));
    }

    private static byte[] pattern(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + 7);
        }
        return b;
    }

    private static byte[] readAll(ParcelFileDescriptor pfd) throws Exception {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        try (InputStream in = new FileInputStream(pfd.getFileDescriptor())) {
            byte[] buf = new byte[8192];
            for (int n; (n = in.read(buf)) >= 0; ) {
                got.write(buf, 0, n);
            }
        }
        return got.toByteArray();
    }
}
