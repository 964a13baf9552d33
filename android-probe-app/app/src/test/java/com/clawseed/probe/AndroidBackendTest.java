package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.robolectric.Shadows.shadowOf;

import android.app.Instrumentation;
import android.content.ComponentName;
import android.content.Context;
import android.content.IntentFilter;
import android.content.pm.ApplicationInfo;
import android.content.pm.PackageInfo;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.content.pm.ServiceInfo;
import android.os.Bundle;
import com.clawseed.probe.core.DeviceBackend;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireBundle;
import com.clawseed.probe.wire.WireValue;
import java.util.List;
import java.util.Map;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.Robolectric;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;
import org.robolectric.shadows.ShadowPackageManager;

/**
 * AndroidBackend against Robolectric's ContentResolver and PackageManager:
 * a vendor Provider registered as Robolectric registers providers, its
 * discovery service with meta-data typed as aapt2 compiles it, and the
 * probe's own manifest (ManifestInstaller). Robolectric runs the Provider
 * in the test's process: no Binder between them (BinderExceptionsTest
 * covers what Binder does to exceptions).
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = ShadowPackageManagerFlags.class)
public class AndroidBackendTest {
    private Context ctx;
    private AndroidBackend backend;

    @Before
    public void setUp() throws Exception {
        ctx = RuntimeEnvironment.getApplication();
        installVendor(ctx);
        backend = new AndroidBackend(ctx, UiAccess.connect(new Instrumentation()));
    }

    /**
     * The probe's manifest, and a vendor's Provider registered as Robolectric
     * registers providers, with its discovery service (meta-data typed as
     * aapt2 compiles it).
     */
    static void installVendor(Context ctx) throws Exception {
        ManifestInstaller.install(ctx);
        ShadowPackageManager spm = shadowOf(ctx.getPackageManager());
        PackageInfo vendor = new PackageInfo();
        vendor.packageName = TestToolProvider.PACKAGE;
        vendor.applicationInfo = new ApplicationInfo();
        vendor.applicationInfo.packageName = TestToolProvider.PACKAGE;
        spm.installPackage(vendor);
        ProviderInfo p = new ProviderInfo();
        p.authority = TestToolProvider.AUTHORITY;
        p.name = TestToolProvider.class.getName();
        p.packageName = TestToolProvider.PACKAGE;
        p.exported = true;
        p.applicationInfo = vendor.applicationInfo;
        spm.addOrUpdateProvider(p);
        Robolectric.buildContentProvider(TestToolProvider.class).create(p);
        ServiceInfo s = new ServiceInfo();
        s.name = "com.example.vendor.cetp.ToolProviderService";
        s.packageName = TestToolProvider.PACKAGE;
        s.exported = true;
        s.applicationInfo = vendor.applicationInfo;
        // android:value="01" and "1,2", as aapt2 compiles them.
        s.metaData = new Bundle();
        s.metaData.putString("com.clawseed.tools.authority", TestToolProvider.AUTHORITY);
        s.metaData.putInt("com.clawseed.tools.version", (Integer) ManifestInstaller.typed("01"));
        s.metaData.putString("com.clawseed.tools.versions", (String) ManifestInstaller.typed("1,2"));
        spm.addOrUpdateService(s);
        IntentFilter f = new IntentFilter(AndroidBackend.ACTION_TOOL_PROVIDER);
        spm.addIntentFilterForService(new ComponentName(TestToolProvider.PACKAGE, s.name), f);
    }

    private Ops.ServiceInfo vendorService() {
        for (Ops.ServiceInfo s : backend.discover()) {
            if (s.pkg.equals(TestToolProvider.PACKAGE)) {
                return s;
            }
        }
        throw new AssertionError("the vendor's service was not discovered");
    }

    @Test
    public void discover_reports_meta_data_with_the_type_android_compiled_it_to() {
        Ops.ServiceInfo s = vendorService();
        assertEquals("com.example.vendor/.cetp.ToolProviderService", s.service);
        assertEquals(TestToolProvider.PACKAGE, s.authorityPackage);
        // "01" is the Integer 1 on the device: its text is a re-print, and the type says so.
        assertEquals("1", s.meta.get("com.clawseed.tools.version"));
        assertEquals("1,2", s.meta.get("com.clawseed.tools.versions"));
        assertEquals(Map.of("com.clawseed.tools.version", "int"), s.metaTypes);
        JsonObject json = (JsonObject) ((List<?>) Ops.discoverOk(List.of(s)).get("providers")).get(0);
        assertEquals(Map.of("com.clawseed.tools.version", "int"), json.get("meta_types"));
    }

    @Test
    public void aapt_types_of_manifest_values() {
        assertEquals(1, ManifestInstaller.typed("01"));
        assertEquals(2, ManifestInstaller.typed("2"));
        assertEquals("1,2", ManifestInstaller.typed("1,2"));
        assertEquals(Boolean.TRUE, ManifestInstaller.typed("true"));
        assertEquals(1.5f, ManifestInstaller.typed("1.5"));
        assertEquals("com.example.app.clawseed.tools", ManifestInstaller.typed("com.example.app.clawseed.tools"));
    }

    @Test
    public void call_returns_the_providers_bundle_with_exact_types() throws Exception {
        WireBundle extras = new WireBundle().put("consumer_versions", WireValue.ofIntArray(new int[] {2, 1}));
        DeviceBackend.CallResult r = backend.call(
                new Ops.CallParams(TestToolProvider.AUTHORITY, "echo", "x", extras, 5000));
        assertEquals(WireValue.ofInt(2), r.result.get("protocol_version"));
        assertEquals(WireValue.ofLong(2L), r.result.get("deadline_at_ms"));
        assertEquals(WireValue.ofString("x"), r.result.get("arg"));
        assertEquals(WireValue.ofBundle(extras), r.result.get("extras"));
        assertEquals(0, r.unreadKeys);
        assertNull(backend.call(new Ops.CallParams(TestToolProvider.AUTHORITY, "null", null, null, 5000)).result);
    }

    private DeviceError callFails(String authority, String method) {
        try {
            backend.call(new Ops.CallParams(authority, method, null, null, 5000));
        } catch (DeviceError e) {
            return e;
        }
        throw new AssertionError(method + " did not fail");
    }

    @Test
    public void call_failures_get_their_error_kind() {
        DeviceError e = callFails("com.nobody.clawseed.tools", "negotiate");
        assertEquals("unknown_authority", e.kind);
        e = callFails(TestToolProvider.AUTHORITY, "state");
        assertEquals("provider_exception", e.kind);
        assertEquals("java.lang.IllegalStateException", e.className);
        e = callFails(TestToolProvider.AUTHORITY, "refuse");
        // Guarded by nothing here: a SecurityException is the Provider's own.
        assertEquals("provider_exception", e.kind);
        assertEquals("java.lang.SecurityException", e.className);
    }

    @Test
    public void hello_names_the_identity_of_this_build() throws DeviceError {
        DeviceBackend.Hello h = backend.hello();
        assertEquals("a", h.identity.name);
        assertEquals(34, h.device.sdkInt);
        assertTrue(h.identity.packages.contains(ctx.getPackageName()));
    }

    @Test
    public void the_hosted_provider_comes_from_the_manifest_and_is_discovered_only_while_hosted() throws Exception {
        HostedProvider hosted = Hosting.get(ctx);
        HostedProvider.Hostable h = hosted.hostable();
        assertEquals(ctx.getPackageName() + ".hostile.clawseed.tools", h.authority);
        assertEquals(3, h.variants.size());
        // Disabled in the manifest: nobody discovers it.
        for (Ops.ServiceInfo s : backend.discover()) {
            assertFalse(s.service, s.pkg.equals(ctx.getPackageName()));
        }
        // Without a host, a Consumer's call fails as a device error would on
        // the simulated device: an IllegalStateException, which Binder carries.
        DeviceError e = callFails(h.authority, "negotiate");
        assertEquals("provider_exception", e.kind);
        assertEquals("java.lang.IllegalStateException", e.className);
        PackageManager pm = ctx.getPackageManager();
        ComponentName v1 = new ComponentName(ctx, HostileToolService.V1Only.class);
        pm.setComponentEnabledSetting(v1, PackageManager.COMPONENT_ENABLED_STATE_ENABLED, PackageManager.DONT_KILL_APP);
        int found = 0;
        for (Ops.ServiceInfo s : backend.discover()) {
            if (s.pkg.equals(ctx.getPackageName())) {
                found++;
                assertEquals(v1.flattenToShortString(), s.service);
                assertEquals(h.authority, s.meta.get("com.clawseed.tools.authority"));
                assertEquals("1", s.meta.get("com.clawseed.tools.version"));
                assertEquals(Map.of("com.clawseed.tools.version", "int"), s.metaTypes);
                assertEquals(ctx.getPackageName(), s.authorityPackage);
            }
        }
        assertEquals(1, found);
        hosted.reset();
        for (Ops.ServiceInfo s : backend.discover()) {
            if (s.pkg.equals(ctx.getPackageName())) {
                fail("still discovered after reset: " + s.service);
            }
        }
    }
}
