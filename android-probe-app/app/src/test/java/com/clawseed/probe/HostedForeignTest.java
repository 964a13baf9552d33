package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.robolectric.Shadows.shadowOf;

import android.app.Instrumentation;
import android.content.ComponentName;
import android.content.Context;
import android.content.pm.ApplicationInfo;
import android.content.pm.PackageInfo;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.net.Uri;
import android.os.Bundle;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.Ops;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;
import org.robolectric.shadows.ShadowPackageManager;

/**
 * The second probe as peer, under Robolectric: this app's
 * {@code HostileToolService$Foreign}, read from the manifest (its authority
 * the other flavor's, set per flavor in build.gradle.kts), announced in
 * hello, enabled only while a connection hosts it and then discovered with
 * the other probe's package as its authority's; and the own Provider
 * hosted without a discovery service ({@code discoverable: false}), whose
 * calls still reach the connection. The tests run as identity a; the other
 * probe (b) is installed into Robolectric's package manager as a package
 * with its ContentProvider, which is all {@code discover} looks at.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = ShadowPackageManagerFlags.class)
public class HostedForeignTest {
    /** The other probe: b for identity a (what scripts/probe-app-check.sh runs), a for b. */
    private static final String PEER = BuildConfig.FLAVOR.equals("a") ? "com.clawseed.probe.b" : "com.clawseed.probe";
    private static final String PEER_AUTHORITY = PEER + ".hostile.clawseed.tools";

    private Context ctx;
    private AndroidBackend backend;
    private HostedProvider hosted;
    private final List<HostedProvider.Connection> conns = new ArrayList<>();
    private final BlockingQueue<Frame> frames = new LinkedBlockingQueue<>();

    @Before
    public void setUp() throws Exception {
        ctx = RuntimeEnvironment.getApplication();
        ManifestInstaller.install(ctx);
        ShadowPackageManager spm = shadowOf(ctx.getPackageManager());
        PackageInfo peer = new PackageInfo();
        peer.packageName = PEER;
        peer.applicationInfo = new ApplicationInfo();
        peer.applicationInfo.packageName = PEER;
        spm.installPackage(peer);
        ProviderInfo p = new ProviderInfo();
        p.authority = PEER_AUTHORITY;
        p.name = "com.clawseed.probe.HostileProvider";
        p.packageName = PEER;
        p.exported = true;
        p.applicationInfo = peer.applicationInfo;
        spm.addOrUpdateProvider(p);
        backend = new AndroidBackend(ctx, UiAccess.connect(new Instrumentation()));
        hosted = Hosting.get(ctx);
        hosted.reset();
    }

    @After
    public void tearDown() {
        for (HostedProvider.Connection c : conns) {
            c.close();
        }
    }

    private HostedProvider.Connection connect() {
        HostedProvider.Connection c = hosted.attach(frames::add);
        conns.add(c);
        return c;
    }

    /** This probe's services that a Consumer discovers now, by component. */
    private Map<String, Ops.ServiceInfo> ours() {
        Map<String, Ops.ServiceInfo> out = new TreeMap<>();
        for (Ops.ServiceInfo s : backend.discover()) {
            if (s.pkg.equals(ctx.getPackageName())) {
                out.put(s.service, s);
            }
        }
        return out;
    }

    private HostedProvider.Variant foreign() {
        assertEquals(1, hosted.hostable().foreign.size());
        return hosted.hostable().foreign.get(0);
    }

    private static JsonObject extra(String... kv) {
        JsonObject o = new JsonObject();
        for (int i = 0; i < kv.length; i += 2) {
            o.with(kv[i], kv[i + 1]);
        }
        return o;
    }

    private void hostForeign(HostedProvider.Connection c) throws DeviceError {
        c.host(new Ops.HostProviderParams(PEER_AUTHORITY, foreign().meta,
                extra("package", ctx.getPackageName(), "authority_package", PEER)));
    }

    private String foreignService() {
        return new ComponentName(ctx, HostileToolService.Foreign.class).flattenToShortString();
    }

    @Test
    public void theForeignServiceIsReadFromTheManifestAndAnnouncedInHello() throws Exception {
        HostedProvider.Variant f = foreign();
        assertEquals(foreignService(), f.service);
        Map<String, String> meta = new TreeMap<>();
        meta.put("com.clawseed.tools.authority", PEER_AUTHORITY);
        meta.put("com.clawseed.tools.version", "1");
        meta.put("com.clawseed.tools.versions", "1,2");
        assertEquals(meta, f.meta);
        assertEquals(PEER, hosted.hostable().foreignPackage);
        JsonObject hp = (JsonObject) hosted.helloMembers().get("hosted_provider");
        assertEquals("[{\"com.clawseed.tools.authority\":\"" + PEER_AUTHORITY + "\",\"com.clawseed.tools.version\":\"1\","
                + "\"com.clawseed.tools.versions\":\"1,2\"}]", JsonWriter.toText(hp.get("foreign_metas")));
        assertEquals(PEER, hp.get("foreign_package"));
        assertEquals("[\"fd_closed\",\"fd_endless\",\"pending_intent\"]",
                JsonWriter.toText(hosted.helloMembers().get("reply_extensions")));
    }

    @Test
    public void theForeignServiceIsDiscoveredOnlyWhileHostedWithThePeersPackageAsItsProviders() throws Exception {
        assertEquals(Map.of(), ours());
        HostedProvider.Connection c = connect();
        hostForeign(c);
        Map<String, Ops.ServiceInfo> found = ours();
        assertEquals(List.of(foreignService()), new ArrayList<>(found.keySet()));
        Ops.ServiceInfo s = found.get(foreignService());
        assertEquals(PEER_AUTHORITY, s.meta.get("com.clawseed.tools.authority"));
        assertEquals("the service is this package's, its ContentProvider the peer's", PEER, s.authorityPackage);
        assertEquals(Map.of("com.clawseed.tools.version", "int"), s.metaTypes);
        // One connection at a time.
        try {
            hostForeign(connect());
            fail("a second connection declared the foreign service");
        } catch (DeviceError e) {
            assertEquals("bad_request", e.kind);
        }
        // Nobody hosts this probe's own Provider: its calls reach no connection.
        assertEquals(HostedProvider.Failure.NOT_HOSTED, hosted.call(1, List.of(), "m", null, null).failure);
        c.close();
        assertEquals(Map.of(), ours());
    }

    @Test
    public void aProviderHostedWithoutDiscoveryIsCalledButNotDiscovered() throws Exception {
        HostedProvider.Connection c = connect();
        c.host(new Ops.HostProviderParams(hosted.hostable().authority, Map.of(),
                new JsonObject().with("discoverable", false)));
        assertEquals(Map.of(), ours());
        CompletableFuture<Bundle> call = new CompletableFuture<>();
        Thread t = new Thread(() -> call.complete(ctx.getContentResolver().call(
                Uri.parse("content://" + hosted.hostable().authority), "negotiate", null, new Bundle())));
        t.setDaemon(true);
        t.start();
        Frame f = frames.poll(10, TimeUnit.SECONDS);
        assertNotNull("the call reaches the connection", f);
        String id = (String) ((Frame.Event) f).fields.get("call");
        Frame.Request r = (Frame.Request) FrameCodec.decode(("{\"id\":1,\"op\":\"reply\",\"call\":\"" + id
                + "\",\"result\":{\"k\":{\"t\":\"int\",\"v\":3}}}").getBytes(StandardCharsets.UTF_8));
        c.reply((Ops.ReplyParams) Ops.decodeParams(r));
        assertEquals(3, call.get(10, TimeUnit.SECONDS).getInt("k"));
    }

    @Test
    public void oneConnectionMayHoldBothAndResetHidesBoth() throws Exception {
        HostedProvider.Connection c = connect();
        c.host(new Ops.HostProviderParams(hosted.hostable().authority, hosted.hostable().variants.get(0).meta));
        hostForeign(c);
        Map<String, Ops.ServiceInfo> found = ours();
        String own = new ComponentName(ctx, HostileToolService.class).flattenToShortString();
        assertEquals(List.of(own, foreignService()), new ArrayList<>(found.keySet()));
        assertEquals(ctx.getPackageName(), found.get(own).authorityPackage);
        assertEquals(PEER, found.get(foreignService()).authorityPackage);
        hosted.reset();
        assertEquals(Map.of(), ours());
        // A probe start's reset, as here, leaves the manifest's state: disabled.
        PackageManager pm = ctx.getPackageManager();
        assertEquals(PackageManager.COMPONENT_ENABLED_STATE_DEFAULT,
                pm.getComponentEnabledSetting(new ComponentName(ctx, HostileToolService.Foreign.class)));
        c.close();
        assertNull(hosted.foreignExposed());
    }

    @Test
    public void theForeignPackageIsTheOtherAuthorityWithoutTheProbesSuffix() throws Exception {
        assertEquals("com.clawseed.probe.b", Hosting.foreignPackage("com.clawseed.probe",
                "com.clawseed.probe.hostile.clawseed.tools", "com.clawseed.probe.b.hostile.clawseed.tools"));
        assertEquals("com.clawseed.probe", Hosting.foreignPackage("com.clawseed.probe.b",
                "com.clawseed.probe.b.hostile.clawseed.tools", "com.clawseed.probe.hostile.clawseed.tools"));
        // Whatever package the app was installed as (Robolectric's test package here).
        assertEquals(PEER, hosted.hostable().foreignPackage);
        for (String bad : new String[] {null, "com.clawseed.probe.hostile.clawseed.tools", ".hostile.clawseed.tools",
            "com.example.other.clawseed.tools"}) {
            try {
                Hosting.foreignPackage("com.clawseed.probe", "com.clawseed.probe.hostile.clawseed.tools", bad);
                fail("accepted " + bad);
            } catch (DeviceError e) {
                assertTrue(e.getMessage(), e.getMessage().contains("foreign service"));
            }
        }
    }
}
