package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.robolectric.Shadows.shadowOf;

import android.app.Activity;
import android.app.PendingIntent;
import android.content.ComponentName;
import android.content.Context;
import android.content.Intent;
import android.content.pm.ApplicationInfo;
import android.content.pm.PackageInfo;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.net.Uri;
import android.os.Bundle;
import android.os.Process;
import android.view.View;
import android.view.ViewGroup;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.Ops;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.Robolectric;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.android.controller.ActivityController;
import org.robolectric.annotation.Config;
import org.robolectric.shadows.ShadowBinder;
import org.robolectric.shadows.ShadowProcess;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * The hosted Provider's two processes and its confirmation screen, under
 * Robolectric: a Consumer's {@code ContentResolver.call()} to
 * {@link HostileProvider}, which hands it to {@link HostedBridge}, whose
 * {@link HostedProvider} tells a hosting connection (a sink here) and plays
 * its reply; the scripted PendingIntent of {@link ConfirmActivity}, launched
 * and decided on; and a scripted death.
 *
 * <p>What Robolectric does not do: it runs every component in the test's
 * one process, without Binder, whatever {@code android:process} says, and
 * {@code Process.killProcess} only records the pid ({@code ShadowProcess}).
 * So these tests show the separate-process declaration (in the manifest and
 * as the package manager records it), that the kill is decided in the
 * hosted process's code only and aimed at its own pid, and that the probe's
 * side serves the next call; that a Consumer then sees a
 * {@code DeadObjectException} and Android restarts {@code :hosted} needs a
 * phone (android-probe-app/README.md, checklist).
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = ShadowPackageManagerFlags.class)
public class HostedProcessTest {
    private static final String CONSUMER = "com.example.consumer";
    private static final int CONSUMER_UID = 10234;

    private Context ctx;
    private HostedProvider hosted;
    private HostedProvider.Connection conn;
    private final BlockingQueue<Frame> frames = new LinkedBlockingQueue<>();

    @Before
    public void setUp() throws Exception {
        ctx = RuntimeEnvironment.getApplication();
        ManifestInstaller.install(ctx);
        PackageInfo consumer = new PackageInfo();
        consumer.packageName = CONSUMER;
        consumer.applicationInfo = new ApplicationInfo();
        consumer.applicationInfo.packageName = CONSUMER;
        consumer.applicationInfo.uid = CONSUMER_UID;
        shadowOf(ctx.getPackageManager()).installPackage(consumer);
        ShadowProcess.clearKilledProcesses();
        hosted = Hosting.get(ctx);
        conn = hosted.attach(frames::add);
        conn.host(new Ops.HostProviderParams(hosted.hostable().authority, hosted.hostable().variants.get(0).meta));
    }

    @After
    public void tearDown() {
        conn.close();
    }

    private CompletableFuture<Bundle> consumerCalls(String method) {
        CompletableFuture<Bundle> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(ctx.getContentResolver().call(
                        Uri.parse("content://" + hosted.hostable().authority), method, null, new Bundle()));
            } catch (RuntimeException e) {
                f.completeExceptionally(e);
            }
        });
        t.setDaemon(true);
        t.start();
        return f;
    }

    private Frame.Event event(String name) throws InterruptedException {
        Frame f = frames.poll(10, TimeUnit.SECONDS);
        assertNotNull("no " + name + " event", f);
        assertTrue(f.toString(), f instanceof Frame.Event);
        Frame.Event e = (Frame.Event) f;
        assertEquals(JsonWriter.toText(e.fields), name, e.event);
        return e;
    }

    private void reply(String json) throws Exception {
        Frame.Request r = (Frame.Request) FrameCodec.decode(json.getBytes(StandardCharsets.UTF_8));
        conn.reply((Ops.ReplyParams) Ops.decodeParams(r));
    }

    private static final String NEEDS_USER = "{\"status\":{\"t\":\"string\",\"v\":\"error\"},\"error\":{\"t\":\"bundle\","
            + "\"v\":{\"code\":{\"t\":\"string\",\"v\":\"USER_ACTION_REQUIRED\"},\"resolution\":{\"t\":\"pending_intent\","
            + "\"v\":{\"handle\":\"%s\",\"creator_package\":null,\"creator_uid\":null,\"immutable\":%s,\"activity\":true}}}}}";

    @SuppressWarnings("deprecation")
    private static PendingIntent resolutionOf(Bundle result) {
        Bundle error = result.getBundle("error");
        assertNotNull(result.toString(), error);
        return (PendingIntent) error.getParcelable("resolution");
    }

    /** A Consumer's call answered with a confirmation scripted under {@code handle}. */
    private PendingIntent confirmation(String handle) throws Exception {
        CompletableFuture<Bundle> call = consumerCalls("execute_tool");
        String id = (String) event("incoming_call").fields.get("call");
        reply("{\"id\":1,\"op\":\"reply\",\"call\":\"" + id + "\",\"result\":" + String.format(NEEDS_USER, handle, "true") + "}");
        Bundle result = call.get(10, TimeUnit.SECONDS);
        assertEquals("error", result.getString("status"));
        return resolutionOf(result);
    }

    private static View find(View v, String description) {
        if (description.contentEquals(v.getContentDescription() == null ? "" : v.getContentDescription())) {
            return v;
        }
        if (v instanceof ViewGroup) {
            ViewGroup g = (ViewGroup) v;
            for (int i = 0; i < g.getChildCount(); i++) {
                View found = find(g.getChildAt(i), description);
                if (found != null) {
                    return found;
                }
            }
        }
        return null;
    }

    /** Launches the intent's activity as a Consumer would for a result, from {@code CONSUMER}. */
    private ActivityController<ConfirmActivity> launch(Intent intent) {
        ActivityController<ConfirmActivity> c = Robolectric.buildActivity(ConfirmActivity.class, intent);
        shadowOf(c.get()).setCallingPackage(CONSUMER);
        return c.setup();
    }

    @Test
    public void theHostedProviderRunsInAProcessOfItsOwnAndTheProbeInItsOwn() throws Exception {
        DocumentBuilderFactory xml = DocumentBuilderFactory.newInstance();
        xml.setNamespaceAware(true);
        Element app = (Element) xml.newDocumentBuilder()
                .parse(ManifestInstaller.manifestFile()).getElementsByTagName("application").item(0);
        String ns = ManifestInstaller.ANDROID;
        NodeList providers = app.getElementsByTagName("provider");
        int seen = 0;
        for (int i = 0; i < providers.getLength(); i++) {
            Element p = (Element) providers.item(i);
            switch (p.getAttributeNS(ns, "name")) {
                case ".HostileProvider":
                    assertEquals(":hosted", p.getAttributeNS(ns, "process"));
                    assertEquals("true", p.getAttributeNS(ns, "exported"));
                    seen++;
                    break;
                case ".HostedBridge":
                    // With the connections, in the probe's process; only this app calls it.
                    assertEquals("", p.getAttributeNS(ns, "process"));
                    assertEquals("false", p.getAttributeNS(ns, "exported"));
                    seen++;
                    break;
                default:
                    fail("an unexpected provider " + p.getAttributeNS(ns, "name"));
            }
        }
        assertEquals(2, seen);
        NodeList activities = app.getElementsByTagName("activity");
        for (int i = 0; i < activities.getLength(); i++) {
            Element a = (Element) activities.item(i);
            // Both in the probe's process: the confirmation reports to its connections.
            assertEquals(a.getAttributeNS(ns, "name"), "", a.getAttributeNS(ns, "process"));
            assertEquals(a.getAttributeNS(ns, "name"), "false", a.getAttributeNS(ns, "exported"));
        }
        assertTrue(new String(Files.readAllBytes(ManifestInstaller.manifestFile().toPath()), StandardCharsets.UTF_8)
                .contains("android:name=\".ConfirmActivity\""));
        // As the package manager records it.
        ProviderInfo hostile = ctx.getPackageManager().getProviderInfo(
                new ComponentName(ctx, HostileProvider.class), PackageManager.ComponentInfoFlags.of(0));
        assertEquals(ctx.getPackageName() + ":hosted", hostile.processName);
        ProviderInfo bridge = ctx.getPackageManager().getProviderInfo(
                new ComponentName(ctx, HostedBridge.class), PackageManager.ComponentInfoFlags.of(0));
        assertEquals(ctx.getPackageName(), bridge.processName);
    }

    @Test
    public void aScriptedConfirmationIsAnImmutableIntentOfTheProbesOwnActivityAndTheDecisionReachesTheHost()
            throws Exception {
        PendingIntent pi = confirmation("pi-1");
        assertEquals(ctx.getPackageName(), pi.getCreatorPackage());
        assertTrue(pi.isImmutable());
        assertTrue(pi.isActivity());
        assertTrue((shadowOf(pi).getFlags() & PendingIntent.FLAG_IMMUTABLE) != 0);
        Intent target = shadowOf(pi).getSavedIntent();
        assertEquals(new ComponentName(ctx, ConfirmActivity.class), target.getComponent());
        assertNotNull(ConfirmActivity.tokenOf(target.getData()));

        ActivityController<ConfirmActivity> c = launch(target);
        ConfirmActivity screen = c.get();
        View approve = find(screen.getWindow().getDecorView(), ConfirmActivity.APPROVE);
        assertNotNull("an approve button UI automation can find", approve);
        assertNotNull(find(screen.getWindow().getDecorView(), ConfirmActivity.DENY));
        assertTrue(frames.isEmpty());
        approve.performClick();
        assertTrue(screen.isFinishing());
        assertEquals(Activity.RESULT_OK, shadowOf(screen).getResultCode());
        Frame.Event launched = event("intent_launched");
        assertEquals("{\"authority\":\"" + hosted.hostable().authority + "\",\"decision\":\"approve\",\"handle\":\"pi-1\","
                + "\"launcher\":{\"packages\":[\"" + CONSUMER + "\"],\"uid\":" + CONSUMER_UID + "},\"now_ms\":"
                + launched.fields.get("now_ms") + "}", JsonWriter.toText(launched.fields));
        c.pause().stop().destroy();
        assertTrue("decided once", frames.isEmpty());

        // Deny, then Back (dismiss): each a result and an event of its own.
        ActivityController<ConfirmActivity> d = launch(shadowOf(confirmation("pi-2")).getSavedIntent());
        find(d.get().getWindow().getDecorView(), ConfirmActivity.DENY).performClick();
        assertEquals(Activity.RESULT_CANCELED, shadowOf(d.get()).getResultCode());
        assertEquals("deny", event("intent_launched").fields.get("decision"));
        ActivityController<ConfirmActivity> back = launch(shadowOf(confirmation("pi-3")).getSavedIntent());
        back.get().finish();
        back.pause();
        assertEquals(Activity.RESULT_CANCELED, shadowOf(back.get()).getResultCode());
        Frame.Event dismissed = event("intent_launched");
        assertEquals("dismiss", dismissed.fields.get("decision"));
        assertEquals("pi-3", dismissed.fields.get("handle"));
    }

    @Test
    public void aConfirmationOfAnotherProbeProcessOrAMutableScriptIsRefused() throws Exception {
        // A URI whose nonce is not this process's (a PendingIntent an earlier probe handed out).
        Intent stale = new Intent(ctx, ConfirmActivity.class)
                .setData(Uri.parse(HostedBridge.CONFIRM_SCHEME + "://" + ctx.getPackageName() + "/0/k1"));
        ActivityController<ConfirmActivity> c = launch(stale);
        assertTrue(c.get().isFinishing());
        assertEquals(Activity.RESULT_CANCELED, shadowOf(c.get()).getResultCode());
        assertNull(ConfirmActivity.tokenOf(Uri.parse("cetp-confirm://x/" + ResolveActivity.NONCE + "/k1/extra")));
        assertNull(ConfirmActivity.tokenOf(null));
        assertTrue(frames.isEmpty());

        // A script asking for a mutable PendingIntent asks for what the probe never makes.
        CompletableFuture<Bundle> call = consumerCalls("execute_tool");
        String id = (String) event("incoming_call").fields.get("call");
        try {
            reply("{\"id\":1,\"op\":\"reply\",\"call\":\"" + id + "\",\"result\":" + String.format(NEEDS_USER, "pi-1", "false") + "}");
            fail("a mutable PendingIntent was played");
        } catch (DeviceError e) {
            assertEquals("unsupported", e.kind);
        }
        reply("{\"id\":2,\"op\":\"reply\",\"call\":\"" + id + "\",\"result\":null}");
        assertNull(call.get(10, TimeUnit.SECONDS));
    }

    @Test
    public void aScriptedDeathKillsTheHostedProcessOnlyAndTheProbeServesTheRetry() throws Exception {
        CompletableFuture<Bundle> call = consumerCalls("execute_tool");
        String id = (String) event("incoming_call").fields.get("call");
        reply("{\"id\":1,\"op\":\"reply\",\"call\":\"" + id + "\",\"fail\":\"provider_died\"}");
        try {
            call.get(10, TimeUnit.SECONDS);
            fail("the call returned");
        } catch (java.util.concurrent.ExecutionException e) {
            // Under Robolectric the kill is only recorded, so the provider throws after it.
            assertTrue(String.valueOf(e.getCause()), e.getCause() instanceof IllegalStateException);
        }
        assertTrue("the hosted provider killed its own process", ShadowProcess.wasKilled(Process.myPid()));
        assertEquals(0, hosted.busy());

        // The probe's side lives on: the retry is forwarded and answered.
        CompletableFuture<Bundle> retry = consumerCalls("execute_tool");
        String second = (String) event("incoming_call").fields.get("call");
        reply("{\"id\":2,\"op\":\"reply\",\"call\":\"" + second + "\",\"result\":{\"k\":{\"t\":\"int\",\"v\":7}}}");
        assertEquals(7, retry.get(10, TimeUnit.SECONDS).getInt("k"));
        assertNotNull(hosted.exposed());
    }

    @Test
    public void theBridgeOnlyOrdersTheDeathAndServesOnlyThisApp() throws Exception {
        Uri bridge = HostedBridge.uri(ctx);
        CompletableFuture<Bundle> direct = new CompletableFuture<>();
        Bundle request = new Bundle();
        request.putInt(HostedBridge.KEY_UID, CONSUMER_UID);
        Thread t = new Thread(() -> direct.complete(ctx.getContentResolver().call(bridge, "execute_tool", null, request)));
        t.setDaemon(true);
        t.start();
        Frame.Event e = event("incoming_call");
        assertEquals("{\"packages\":[\"" + CONSUMER + "\"],\"uid\":" + CONSUMER_UID + "}",
                JsonWriter.toText(e.fields.get("caller")));
        reply("{\"id\":1,\"op\":\"reply\",\"call\":\"" + e.fields.get("call") + "\",\"fail\":\"provider_died\"}");
        Bundle answer = direct.get(10, TimeUnit.SECONDS);
        assertTrue(answer.getBoolean(HostedBridge.KEY_DIE));
        assertFalse("the probe's own process is never killed", ShadowProcess.wasKilled(Process.myPid()));

        ShadowBinder.setCallingUid(CONSUMER_UID);
        try {
            ctx.getContentResolver().call(bridge, "execute_tool", null, request);
            fail("a stranger reached the bridge");
        } catch (SecurityException expected) {
            // Only the hosted process (this app's UID) may call it.
        } finally {
            ShadowBinder.setCallingUid(Process.myUid());
        }
    }
}
