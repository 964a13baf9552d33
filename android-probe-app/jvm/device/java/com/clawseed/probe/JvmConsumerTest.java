package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import android.app.Activity;
import android.app.PendingIntent;
import android.content.ContentProviderClient;
import android.content.Context;
import android.net.Uri;
import android.os.Bundle;
import android.os.DeadObjectException;
import com.clawseed.probe.consumer.ConsumerAdapter;
import com.clawseed.probe.consumer.Outcome;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonParser;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireError;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;

/**
 * A vendor's Consumer on the JVM device ({@link JvmConsumer}): the adapter's
 * outcomes as the host reads them (bounded, escaped), a throw as
 * {@code crashed}, a declined act as {@code unsupported}, a stuck act as a
 * device timeout; and the Consumer's calls to the hostile Provider the probe
 * hosts, as on a phone: a scripted answer, a Provider dying mid-call (a dead
 * Binder, not an exception of the Provider's), and a confirmation launched
 * through the device's user, who decides in the probe's own screen. Run as
 * the device runs it: the act on the Consumer's thread, this (main) thread
 * running the looper and answering the hosted calls.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = {ShadowPackageManagerFlags.class, JvmShadows.CrossBinder.class, JvmShadows.Creator.class,
    JvmShadows.RealPipe.class})
public class JvmConsumerTest {
    private Context app;
    private HostedProvider hosted;
    private HostedProvider.Connection conn;
    private final BlockingQueue<Frame> frames = new LinkedBlockingQueue<>();
    /** What the host answers the next incoming calls with: the members of a reply after `call`. */
    private final Deque<String> script = new ArrayDeque<>();
    private final List<String> methods = new ArrayList<>();
    private final List<JsonObject> launched = new ArrayList<>();

    /** The test's Consumer: what each act does is set by the test. */
    public static final class Scripted implements ConsumerAdapter {
        static volatile Context started;
        static volatile int starts;
        static volatile Step step;
        static volatile PendingIntent waiting;
        static volatile boolean interrupted;

        interface Step {
            Outcome run(String authority) throws Exception;
        }

        @Override
        public void start(Context context) {
            started = context;
            starts++;
        }

        @Override
        public Outcome connect(String authority) throws Exception {
            return step.run(authority);
        }

        @Override
        public Outcome listTools(String authority) throws Exception {
            return step.run(authority);
        }

        @Override
        public Outcome callTool(String authority, String tool, String argsJson) throws Exception {
            return step.run(authority + " " + tool + " " + argsJson);
        }

        @Override
        public Outcome userDecision(String decision, User user) throws Exception {
            int code = user.launch(waiting);
            return Outcome.success("{\"decision\":\"" + decision + "\",\"code\":" + code + "}");
        }

        @Override
        public Outcome reset() {
            return Outcome.success(null);
        }
    }

    /** Not an adapter at all. */
    public static final class NotAnAdapter {}

    @Before
    public void setUp() throws Exception {
        app = RuntimeEnvironment.getApplication();
        ManifestInstaller.install(app);
        System.setProperty("cetp.jvm.resolve_look_ms", "300");
        Scripted.started = null;
        Scripted.starts = 0;
        Scripted.waiting = null;
        Scripted.interrupted = false;
        hosted = Hosting.get(app, DeviceClock::currentTimeMillis);
        conn = hosted.attach(frames::add);
        conn.host(new Ops.HostProviderParams(hosted.hostable().authority, hosted.hostable().variants.get(0).meta));
    }

    @After
    public void tearDown() {
        conn.close();
    }

    private JvmConsumer consumer() throws Exception {
        return new JvmConsumer(JvmConsumer.load(Scripted.class.getName(), getClass().getClassLoader()), app,
                new JvmDevice.VendorContext(app, consumerInfo()));
    }

    private static android.content.pm.ApplicationInfo consumerInfo() {
        android.content.pm.ApplicationInfo info = new android.content.pm.ApplicationInfo();
        info.packageName = "com.example.consumer";
        info.uid = JvmConsumer.UID;
        return info;
    }

    /**
     * One act on another thread, as a session runs it, while this thread
     * runs the main looper and answers each incoming call from the script.
     */
    private Object act(JvmConsumer c, String actionJson, long timeoutMs) throws Exception {
        JsonObject action = (JsonObject) JsonParser.parse(actionJson);
        Object[] out = new Object[1];
        Thread session = new Thread(() -> {
            try {
                out[0] = c.act(action, timeoutMs);
            } catch (DeviceError | RuntimeException | InterruptedException e) {
                out[0] = e;
            }
        });
        session.start();
        long stop = JvmResolver.now() + 30_000;
        while (session.isAlive() && JvmResolver.now() < stop) {
            JvmResolver.idleMain();
            Frame f = frames.poll();
            if (f instanceof Frame.Event) {
                Frame.Event e = (Frame.Event) f;
                if (e.event.equals("incoming_call")) {
                    methods.add((String) e.fields.get("method"));
                    String id = (String) e.fields.get("call");
                    String line = "{\"id\":1,\"op\":\"reply\",\"call\":\"" + id + "\"," + script.removeFirst() + "}";
                    Frame.Request r = (Frame.Request) FrameCodec.decode(line.getBytes(StandardCharsets.UTF_8));
                    conn.reply((Ops.ReplyParams) Ops.decodeParams(r));
                } else if (e.event.equals("intent_launched")) {
                    launched.add(e.fields);
                }
            }
            Thread.sleep(2);
        }
        assertFalse("the act did not return within 30 s", session.isAlive());
        return out[0];
    }

    private static String text(Object json) {
        return JsonWriter.toText(json);
    }

    /** The Consumer's own call to the hosted Provider, through an unstable client as a careful Consumer makes it. */
    private static Bundle callHosted(String authority, String method) throws Exception {
        ContentProviderClient client = Scripted.started.getContentResolver()
                .acquireUnstableContentProviderClient(Uri.parse("content://" + authority));
        assertNotNull("no client for the hosted Provider " + authority, client);
        try {
            return client.call(method, null, new Bundle());
        } finally {
            client.close();
        }
    }

    @Test
    public void outcomesReachTheHostBoundedAndEscaped() throws Exception {
        JvmConsumer c = consumer();
        Scripted.step = a -> Outcome.success("{\"note_id\":\"n1\",\"args\":" + a.substring(a.lastIndexOf(' ') + 1) + "}");
        Object o = act(c, "{\"do\":\"call_tool\",\"authority\":\"x\",\"tool\":\"t\",\"args\":{\"k\":[1,2]}}", 10_000);
        assertEquals("{\"outcome\":\"success\",\"value\":{\"args\":{\"k\":[1,2]},\"note_id\":\"n1\"}}", text(o));
        // Started once, with its own package.
        act(c, "{\"do\":\"reset\"}", 10_000);
        assertEquals(1, Scripted.starts);
        assertEquals("com.example.consumer", Scripted.started.getPackageName());
        Scripted.step = a -> Outcome.error("INVALID_ARGUMENT", "bad \ud800 " + "x".repeat(100_000));
        JsonObject err = (JsonObject) act(c, "{\"do\":\"connect\",\"authority\":\"x\"}", 10_000);
        assertEquals("error", err.get("outcome"));
        assertEquals("INVALID_ARGUMENT", err.get("error_code"));
        String message = (String) err.get("message");
        assertTrue(message, message.startsWith("bad \ufffd x"));
        assertEquals(JvmConsumer.MAX_TEXT + 1, message.length());
        Scripted.step = a -> Outcome.refused(null);
        assertEquals("{\"detail\":null,\"outcome\":\"refused\"}", text(act(c, "{\"do\":\"list_tools\",\"authority\":\"x\"}", 10_000)));
        // An adapter's value that is not JSON is the rig's mistake (infra), never the Consumer's finding.
        Scripted.step = a -> Outcome.success("{not json");
        assertEquals(DeviceError.DEVICE_ERROR, ((DeviceError) act(c, "{\"do\":\"connect\",\"authority\":\"x\"}", 10_000)).kind);
    }

    @Test
    public void aThrowIsACrashADeclinedActASetupGapAndAStuckOneATimeout() throws Exception {
        JvmConsumer c = consumer();
        Scripted.step = a -> {
            throw new NullPointerException("the Consumer's bug");
        };
        assertEquals("{\"class\":\"java.lang.NullPointerException\",\"message\":\"the Consumer's bug\",\"outcome\":\"crashed\"}",
                text(act(c, "{\"do\":\"connect\",\"authority\":\"x\"}", 10_000)));
        DeviceError declined = (DeviceError) act(c, "{\"do\":\"cancel_tool\",\"authority\":\"x\",\"tool\":\"t\"}", 10_000);
        assertEquals(WireError.UNSUPPORTED, declined.kind);
        assertTrue(declined.getMessage(), declined.getMessage().contains("cancel_tool"));
        Scripted.step = a -> {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                Scripted.interrupted = true;
                throw e;
            }
            return Outcome.success(null);
        };
        DeviceError stuck = (DeviceError) act(c, "{\"do\":\"connect\",\"authority\":\"x\"}", 500);
        assertEquals(WireError.TIMEOUT, stuck.kind);
        long stop = JvmResolver.now() + 5_000;
        while (!Scripted.interrupted && JvmResolver.now() < stop) {
            Thread.sleep(10);
        }
        assertTrue("the stuck act was not interrupted", Scripted.interrupted);
        for (String bad : new String[] {"{\"do\":\"fly\"}", "{\"do\":\"connect\"}", "{\"do\":\"user_decision\",\"decision\":\"maybe\"}"}) {
            assertEquals(bad, WireError.BAD_REQUEST, ((DeviceError) act(c, bad, 10_000)).kind);
        }
        try {
            JvmConsumer.load(NotAnAdapter.class.getName(), getClass().getClassLoader());
            fail("a class that is no adapter was loaded");
        } catch (JvmConsumer.UsageError expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("does not implement"));
        }
    }

    /** The next {@code fd_closed} event within {@code ms}, or null. */
    private JsonObject fdClosed(long ms) throws InterruptedException {
        long stop = JvmResolver.now() + ms;
        while (JvmResolver.now() < stop) {
            JvmResolver.idleMain();
            Frame f = frames.poll();
            if (f instanceof Frame.Event && ((Frame.Event) f).event.equals("fd_closed")) {
                return ((Frame.Event) f).fields;
            }
            Thread.sleep(5);
        }
        return null;
    }

    /**
     * The device reports the Consumer's close of a result file (fd_closed),
     * and only that: the probe's own copies are let go of (the hosted
     * Provider's after {@link HostileProvider#READER_CLOSE_DELAY_MS}) and
     * nothing is heard, so a Consumer that keeps its descriptor is seen
     * never to close it. Under Robolectric's own listener the probe's
     * release was heard as the Consumer's close, and a leaking Consumer
     * passed.
     */
    @Test
    public void theConsumersCloseOfItsResultFileIsHeardNotTheProbesRelease() throws Exception {
        assertTrue(JvmDevice.hostedExtensions().containsAll(List.of("fd_closed", "fd_endless", "pending_intent")));
        JvmConsumer c = consumer();
        String authority = hosted.hostable().authority;
        android.os.ParcelFileDescriptor[] kept = new android.os.ParcelFileDescriptor[1];
        script.add("\"result\":{\"status\":{\"t\":\"string\",\"v\":\"success\"}},\"fd_data\":\"AQID\"");
        Scripted.step = a -> {
            kept[0] = callHosted(authority, "execute_tool").getParcelable("result_fd",
                    android.os.ParcelFileDescriptor.class);
            return Outcome.success(null);
        };
        Object o = act(c, "{\"do\":\"connect\",\"authority\":\"" + authority + "\"}", 10_000);
        assertNotNull("no result_fd reached the Consumer: " + text(o), kept[0]);
        try (java.io.FileInputStream in = new java.io.FileInputStream(kept[0].getFileDescriptor())) {
            assertEquals(1, in.read());
        }
        assertEquals(null, fdClosed(HostileProvider.READER_CLOSE_DELAY_MS + 1_500));
        kept[0].close();
        JsonObject closed = fdClosed(10_000);
        assertNotNull("the Consumer's close was not reported", closed);
        assertEquals("closed", closed.get("how"));
    }

    @Test
    public void theConsumerMeetsTheHostedProviderAsOnAPhone() throws Exception {
        JvmConsumer c = consumer();
        String authority = hosted.hostable().authority;
        // A scripted answer.
        script.add("\"result\":{\"status\":{\"t\":\"string\",\"v\":\"success\"}}");
        Scripted.step = a -> Outcome.success("\"" + callHosted(authority, "negotiate").getString("status") + "\"");
        assertEquals("{\"outcome\":\"success\",\"value\":\"success\"}",
                text(act(c, "{\"do\":\"connect\",\"authority\":\"" + authority + "\"}", 10_000)));
        assertEquals(List.of("negotiate"), methods);
        // The Provider dies mid-call: the Consumer's Binder dies.
        script.add("\"fail\":\"provider_died\"");
        Scripted.step = a -> {
            try {
                callHosted(authority, "execute_tool");
                return Outcome.success(null);
            } catch (DeadObjectException e) {
                return Outcome.error("DEAD", e.getMessage());
            }
        };
        JsonObject died = (JsonObject) act(c, "{\"do\":\"connect\",\"authority\":\"" + authority + "\"}", 10_000);
        assertEquals(text(died), "DEAD", died.get("error_code"));
        // A confirmation: the Consumer waits for the user, who approves in the probe's screen.
        script.add("\"result\":{\"status\":{\"t\":\"string\",\"v\":\"error\"},\"error\":{\"t\":\"bundle\",\"v\":{"
                + "\"code\":{\"t\":\"string\",\"v\":\"USER_ACTION_REQUIRED\"},\"resolution\":{\"t\":\"pending_intent\","
                + "\"v\":{\"handle\":\"pi-script-1\",\"creator_package\":null,\"creator_uid\":null,\"immutable\":true,"
                + "\"activity\":true}}}}}");
        Scripted.step = a -> {
            Bundle error = callHosted(authority, "execute_tool").getBundle("error");
            Scripted.waiting = error.getParcelable("resolution", PendingIntent.class);
            return Outcome.needsUser("confirm");
        };
        assertEquals("needs_user", ((JsonObject) act(c, "{\"do\":\"call_tool\",\"authority\":\"" + authority
                + "\",\"tool\":\"t\",\"args\":{}}", 10_000)).get("outcome"));
        assertNotNull(Scripted.waiting);
        JsonObject decided = (JsonObject) act(c, "{\"do\":\"user_decision\",\"decision\":\"approve\"}", 20_000);
        assertEquals(text(decided), "{\"code\":" + Activity.RESULT_OK + ",\"decision\":\"approve\"}", text(decided.get("value")));
        assertEquals(1, launched.size());
        assertEquals("pi-script-1", launched.get(0).get("handle"));
        assertEquals("approve", launched.get(0).get("decision"));
    }

    /**
     * Identity b's probe app beside a's ({@link PeerProbe}), as a phone's
     * second probe: its hostile Provider is another package's, hosted by
     * b's own connection, and a's foreign service names it (CSES-002), so
     * a Consumer's call to b's authority reaches b's connection and not
     * a's, and its confirmation reaches b's hosted Provider.
     */
    @Test
    public void identityBsProbeHostsASecondProviderOfAnotherPackage() throws Exception {
        org.robolectric.shadows.ShadowPackageManager spm = org.robolectric.Shadows.shadowOf(app.getPackageManager());
        JvmDevice.installB(spm);
        HostedProvider b = PeerProbe.install(app, spm, DeviceClock::currentTimeMillis);
        BlockingQueue<Frame> bFrames = new LinkedBlockingQueue<>();
        HostedProvider.Connection bConn = b.attach(bFrames::add);
        try {
            String bAuthority = b.hostable().authority;
            assertEquals(JvmDevice.PACKAGE_B + ".hostile.clawseed.tools", bAuthority);
            // a's foreign service names b's package; b's own names a's.
            assertEquals(JvmDevice.PACKAGE_B, hosted.hostable().foreignPackage);
            // (b's names the authority of a phone's probe a: the JVM's own
            // package is Robolectric's, and no scenario hosts on a through b.)
            assertEquals("com.clawseed.probe", b.hostable().foreignPackage);
            bConn.host(new Ops.HostProviderParams(bAuthority, b.hostable().variants.get(0).meta));
            assertEquals(JvmDevice.PACKAGE_B,
                    app.getPackageManager().resolveContentProvider(bAuthority, 0).packageName);
            JvmConsumer c = consumer();
            Object[] answered = new Object[1];
            Scripted.step = a -> {
                answered[0] = callHosted(bAuthority, "negotiate");
                return Outcome.success(null);
            };
            Thread act = new Thread(() -> {
                try {
                    c.act((JsonObject) JsonParser.parse("{\"do\":\"connect\",\"authority\":\"x\"}"), 20_000);
                } catch (Exception e) {
                    answered[0] = e;
                }
            });
            act.start();
            long stop = JvmResolver.now() + 20_000;
            Frame.Event call = null;
            while (call == null && JvmResolver.now() < stop) {
                JvmResolver.idleMain();
                Frame f = bFrames.poll(5, java.util.concurrent.TimeUnit.MILLISECONDS);
                if (f instanceof Frame.Event && ((Frame.Event) f).event.equals("incoming_call")) {
                    call = (Frame.Event) f;
                }
            }
            assertNotNull("the call to b's authority did not reach b's connection", call);
            assertEquals("negotiate", call.fields.get("method"));
            assertTrue("a's connection heard b's call", frames.stream().noneMatch(f -> f instanceof Frame.Event
                    && ((Frame.Event) f).event.equals("incoming_call")));
            String line = "{\"id\":1,\"op\":\"reply\",\"call\":\"" + call.fields.get("call")
                    + "\",\"result\":{\"status\":{\"t\":\"string\",\"v\":\"success\"}}}";
            bConn.reply((Ops.ReplyParams) Ops.decodeParams(
                    (Frame.Request) FrameCodec.decode(line.getBytes(StandardCharsets.UTF_8))));
            act.join(20_000);
            assertTrue(String.valueOf(answered[0]), answered[0] instanceof Bundle);
            assertEquals("success", ((Bundle) answered[0]).getString("status"));
            // A confirmation b hands out names b's package, and reaches b's hosted Provider.
            Uri confirm = Uri.parse("cetp-confirm://" + JvmDevice.PACKAGE_B + "/x/y");
            assertTrue(Hosting.forConfirmation(app, confirm) == b);
            assertTrue(Hosting.forConfirmation(app, Uri.parse("cetp-confirm://" + app.getPackageName() + "/x/y")) == hosted);
        } finally {
            bConn.close();
        }
    }
}
