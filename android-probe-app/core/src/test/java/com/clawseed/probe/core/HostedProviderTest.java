package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.FrameReader;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.WireBundle;
import com.clawseed.probe.wire.WireValue;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.channels.Channels;
import java.nio.channels.Pipe;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The hosted (hostile) Provider through a real session: {@code host_provider},
 * a Consumer's call on another thread as a Binder thread would make it, the
 * {@code incoming_call} event, the host's {@code reply}, and what the caller
 * gets; with the bounds that keep a hostile or absent host from holding a
 * Binder thread or memory.
 */
class HostedProviderTest {
    static final String AUTHORITY = "com.clawseed.probe.hostile.clawseed.tools";
    static final String PKG = "com.clawseed.probe";
    static final long NOW = 1717171717999L;

    private final List<String> exposed = Collections.synchronizedList(new ArrayList<>());
    private HostedProvider hosting;
    private FakeBackend backend;
    private Socket client;
    private Thread server;
    private FrameReader reader;
    private OutputStream out;

    static Map<String, String> meta(String... kv) {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("com.clawseed.tools.authority", AUTHORITY);
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    /** The other probe app (identity b), whose authority this one's $Foreign service names. */
    static final String FOREIGN_PKG = "com.clawseed.probe.b";
    static final String FOREIGN_AUTHORITY = "com.clawseed.probe.b.hostile.clawseed.tools";

    static Map<String, String> foreignMeta() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("com.clawseed.tools.authority", FOREIGN_AUTHORITY);
        m.put("com.clawseed.tools.version", "1");
        m.put("com.clawseed.tools.versions", "1,2");
        return m;
    }

    static HostedProvider.Hostable hostable() {
        return new HostedProvider.Hostable(AUTHORITY, PKG, Arrays.asList(
                new HostedProvider.Variant(PKG + "/.HostileToolService",
                        meta("com.clawseed.tools.version", "1", "com.clawseed.tools.versions", "1,2")),
                new HostedProvider.Variant(PKG + "/.HostileToolService$V1Only", meta("com.clawseed.tools.version", "1"))),
                List.of(new HostedProvider.Variant(PKG + "/.HostileToolService$Foreign", foreignMeta())), FOREIGN_PKG);
    }

    /** What an exposer was asked to show: the own service or "none", and " + " the foreign one if any. */
    static String shown(HostedProvider.Variant own, HostedProvider.Variant foreign) {
        return (own == null ? "none" : own.service) + (foreign == null ? "" : " + " + foreign.service);
    }

    static HostedProvider.Limits fast() {
        return HostedProvider.Limits.defaults().replyWaitMs(3_000).holdMs(300).maxDelayMs(200).maxBusy(3)
                .maxFdDataBytes(1024).readerCloseDelayMs(50).fdDeadlineMs(5_000);
    }

    private HostedProvider newHosting(HostedProvider.Limits limits) {
        return new HostedProvider(hostable(), (own, foreign) -> exposed.add(shown(own, foreign)), limits, () -> NOW);
    }

    private void start(HostedProvider.Limits limits) throws Exception {
        hosting = newHosting(limits);
        backend = new FakeBackend();
        ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        HostedProvider h = hosting;
        server = new Thread(() -> {
            try (ServerSocket l = listener; Socket s = l.accept()) {
                new ProbeSession(s.getInputStream(), s.getOutputStream(), backend, h, m -> { }).run();
            } catch (IOException e) {
                // The test fails on what the client sees.
            }
        });
        server.start();
        client = new Socket(InetAddress.getLoopbackAddress(), listener.getLocalPort());
        client.setSoTimeout(10_000);
        reader = new FrameReader(client.getInputStream());
        out = client.getOutputStream();
    }

    @BeforeEach
    void connect() throws Exception {
        start(fast());
    }

    @AfterEach
    void disconnect() throws Exception {
        client.close();
        server.join(10_000);
        assertTrue(backend.closed.await(5, TimeUnit.SECONDS), "backend not closed");
    }

    private void send(String line) throws IOException {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private Frame next() throws Exception {
        byte[] line = reader.readLine();
        if (line == null) {
            throw new AssertionError("connection closed");
        }
        return FrameCodec.decode(line);
    }

    private static String text(Object json) {
        return JsonWriter.toText(json);
    }

    private static String line(Frame f) {
        return new String(FrameCodec.encode(f), StandardCharsets.UTF_8).trim();
    }

    private JsonObject ok(long id) throws Exception {
        Frame f = next();
        assertTrue(f instanceof Frame.Ok, "expected ok, got " + line(f));
        assertEquals(id, ((Frame.Ok) f).id);
        return ((Frame.Ok) f).ok;
    }

    private Frame.Err err(long id, String kind) throws Exception {
        Frame f = next();
        assertTrue(f instanceof Frame.Err, "expected error, got " + line(f));
        Frame.Err e = (Frame.Err) f;
        assertEquals(id, e.id);
        assertEquals(kind, e.error.kind, e.error.toString());
        return e;
    }

    private Frame.Event event() throws Exception {
        Frame f = next();
        assertTrue(f instanceof Frame.Event, "expected an event, got " + line(f));
        return (Frame.Event) f;
    }

    private static final String DUAL_META = "{\"com.clawseed.tools.authority\":\"" + AUTHORITY
            + "\",\"com.clawseed.tools.version\":\"1\",\"com.clawseed.tools.versions\":\"1,2\"}";

    private void host(long id) throws Exception {
        send("{\"id\":" + id + ",\"op\":\"host_provider\",\"authority\":\"" + AUTHORITY + "\",\"meta\":" + DUAL_META
                + ",\"package\":\"" + PKG + "\",\"authority_package\":\"" + PKG + "\"}");
        assertEquals("{}", text(ok(id)));
    }

    /** A Consumer's call on its own thread, as a Binder thread makes it. */
    private CompletableFuture<HostedProvider.Answer> consumerCalls(String method, String arg, WireBundle extras) {
        CompletableFuture<HostedProvider.Answer> f = new CompletableFuture<>();
        Thread t = new Thread(() -> f.complete(hosting.call(10200, List.of("com.example.consumer"), method, arg, extras)));
        t.setDaemon(true);
        t.start();
        return f;
    }

    private static HostedProvider.Answer get(CompletableFuture<HostedProvider.Answer> f) throws Exception {
        return f.get(10, TimeUnit.SECONDS);
    }

    /** Read ends backed by real OS pipes: blocking writes, a broken pipe when the reader closes. */
    static final class NioPipe implements HostedProvider.Pipe<InputStream> {
        final Pipe pipe;
        final InputStream in;
        final OutputStream outStream;
        volatile boolean writerClosed;
        volatile String error;
        volatile boolean readerReleased;
        final CountDownLatch closedLatch = new CountDownLatch(1);

        NioPipe() throws IOException {
            pipe = Pipe.open();
            in = Channels.newInputStream(pipe.source());
            outStream = Channels.newOutputStream(pipe.sink());
        }

        @Override
        public InputStream reader() {
            return in;
        }

        @Override
        public OutputStream writer() {
            return outStream;
        }

        @Override
        public void closeReader() {
            // The caller's copy is the only one here; on Android this closes the provider's dup.
            readerReleased = true;
        }

        @Override
        public synchronized void closeWriter(String err) {
            if (writerClosed) {
                return;
            }
            writerClosed = true;
            error = err;
            try {
                pipe.sink().close();
            } catch (IOException ignored) {
                // Closed either way.
            }
            closedLatch.countDown();
        }
    }

    private final List<NioPipe> pipes = Collections.synchronizedList(new ArrayList<>());

    private InputStream open(HostedProvider.FdPayload payload) throws IOException {
        return hosting.openFd(payload, () -> {
            NioPipe p = new NioPipe();
            pipes.add(p);
            return p;
        });
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        int n;
        while ((n = in.read(buf)) >= 0) {
            b.write(buf, 0, n);
        }
        return b.toByteArray();
    }

    @Test
    void helloListsTheHostingOpsButNoConsumer() throws Exception {
        send("{\"id\":1,\"op\":\"hello\"}");
        JsonObject hello = ok(1);
        assertEquals("[\"hello\",\"discover\",\"call\",\"read_fd\",\"close_fd\",\"resolve\",\"restart_provider\","
                + "\"host_provider\",\"reply\"]", text(hello.get("ops")));
        assertFalse(hello.containsKey("consumers"), text(hello));
        assertEquals("[\"fd_closed\",\"fd_endless\",\"pending_intent\"]", text(hello.get("reply_extensions")));
        assertEquals("[\"timeout\",\"provider_died\"]", text(hello.get("reply_fail")));
        // A phone's Binder holds the hosted Provider's answers to its limit.
        assertEquals(Boolean.TRUE, hello.get("binder_transaction_limit"));
        JsonObject hp = (JsonObject) hello.get("hosted_provider");
        assertEquals(AUTHORITY, hp.get("authority"));
        assertEquals(PKG, hp.get("package"));
        assertTrue(text(hp.get("metas")).contains("\"com.clawseed.tools.versions\":\"1,2\""), text(hp));
        // The other probe's authority, declared by a service of this package.
        assertEquals("[{\"com.clawseed.tools.authority\":\"" + FOREIGN_AUTHORITY + "\",\"com.clawseed.tools.version\":\"1\","
                + "\"com.clawseed.tools.versions\":\"1,2\"}]", text(hp.get("foreign_metas")));
        assertEquals(FOREIGN_PKG, hp.get("foreign_package"));
        send("{\"id\":2,\"op\":\"consumer_act\",\"consumer\":\"default\",\"action\":{\"do\":\"reset\"}}");
        err(2, "unknown_op");
    }

    @Test
    void roundTripReturnsTheScriptedBundle() throws Exception {
        host(1);
        assertEquals(List.of(PKG + "/.HostileToolService"), exposed);
        WireBundle extras = new WireBundle()
                .put("consumer_versions", WireValue.ofIntArray(new int[] {2, 1}))
                .put("consumer_capabilities", WireValue.ofString("[\"async_operations\"]"));
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("negotiate", null, extras);
        Frame.Event ev = event();
        assertEquals("{\"arg\":null,\"call\":\"c-1\",\"caller\":{\"packages\":[\"com.example.consumer\"],\"uid\":10200},"
                + "\"event\":\"incoming_call\",\"extras\":{\"consumer_capabilities\":{\"t\":\"string\",\"v\":\"[\\\"async_operations\\\"]\"},"
                + "\"consumer_versions\":{\"t\":\"int[]\",\"v\":[2,1]}},\"method\":\"negotiate\",\"now_ms\":" + NOW + "}", line(ev));
        assertFalse(call.isDone(), "the call must wait for the reply");
        assertEquals(1, hosting.waiting());
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"protocol_version\":{\"t\":\"int\",\"v\":2},"
                + "\"status\":{\"t\":\"string\",\"v\":\"success\"}},\"delay_ms\":0}");
        assertEquals("{}", text(ok(2)));
        HostedProvider.Answer a = get(call);
        assertFalse(a.throwsException());
        assertNull(a.failure);
        assertNull(a.fd);
        assertEquals(new WireBundle().put("protocol_version", WireValue.ofInt(2))
                .put("status", WireValue.ofString("success")), a.result);
        assertEquals(0, hosting.waiting());
        assertEquals(0, hosting.busy());

        // A null result, and the next call id.
        CompletableFuture<HostedProvider.Answer> second = consumerCalls("execute", "x", null);
        Frame.Event ev2 = event();
        assertEquals("c-2", ev2.fields.get("call"));
        assertEquals("x", ev2.fields.get("arg"));
        assertEquals("null", text(ev2.fields.get("extras")));
        send("{\"id\":3,\"op\":\"reply\",\"call\":\"c-2\",\"result\":null}");
        ok(3);
        HostedProvider.Answer b = get(second);
        assertNull(b.result);
        assertFalse(b.throwsException());
    }

    @Test
    void fdDataBecomesAReadableDescriptor() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute", null, null);
        event();
        // {"ok":true}
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"fd_data\":\"eyJvayI6dHJ1ZX0=\"}");
        ok(2);
        HostedProvider.Answer a = get(call);
        // A descriptor needs a Bundle to travel in, even when the script's result is null.
        assertEquals(new WireBundle(), a.result);
        assertNotNull(a.fd);
        assertFalse(a.fd.endless());
        assertEquals(11, a.fd.length());
        try (InputStream in = open(a.fd)) {
            assertArrayEquals("{\"ok\":true}".getBytes(StandardCharsets.UTF_8), readAll(in));
        }
        NioPipe p = pipes.get(0);
        assertTrue(p.closedLatch.await(5, TimeUnit.SECONDS));
        assertNull(p.error, "a complete descriptor ends cleanly");
    }

    @Test
    void anEndlessDescriptorRunsUntilTheReaderCloses() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"status\":{\"t\":\"string\",\"v\":\"success\"}},"
                + "\"fd_endless\":7}");
        ok(2);
        HostedProvider.Answer a = get(call);
        assertTrue(a.fd.endless());
        assertEquals(7, a.fd.fill);
        assertEquals("success", a.result.get("status").asString());
        InputStream in = open(a.fd);
        byte[] buf = new byte[300_000];
        int got = 0;
        while (got < buf.length) {
            int n = in.read(buf, got, buf.length - got);
            assertTrue(n > 0, "an endless descriptor reached EOF after " + got + " bytes");
            got += n;
        }
        for (byte b : buf) {
            assertEquals(7, b);
        }
        in.close();
        NioPipe p = pipes.get(0);
        assertTrue(p.closedLatch.await(5, TimeUnit.SECONDS), "the writer must stop once the reader is gone");
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!p.readerReleased && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertTrue(p.readerReleased, "the provider's copy of the read end must be released");
    }

    @Test
    void anEndlessDescriptorStopsAtItsCapWithAnError() throws Exception {
        client.close();
        server.join(10_000);
        start(fast().endlessCapBytes(100_000));
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"fd_endless\":255}");
        ok(2);
        try (InputStream in = open(get(call).fd)) {
            assertEquals(100_000, readAll(in).length);
        }
        NioPipe p = pipes.get(0);
        assertTrue(p.closedLatch.await(5, TimeUnit.SECONDS));
        assertNotNull(p.error, "a cut endless descriptor reports an error to a reader that checks");
    }

    @Test
    void aStalledReaderIsCutOffAtTheDeadline() throws Exception {
        client.close();
        server.join(10_000);
        start(fast().fdDeadlineMs(300));
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"fd_endless\":1}");
        ok(2);
        InputStream in = open(get(call).fd);
        // Nothing is read: the writer blocks on a full pipe until the watchdog closes it.
        NioPipe p = pipes.get(0);
        assertTrue(p.closedLatch.await(5, TimeUnit.SECONDS), "a blocked writer must be cut off");
        assertNotNull(p.error);
        in.close();
    }

    @Test
    void descriptorWritersAreBounded() throws Exception {
        List<InputStream> held = new ArrayList<>();
        HostedProvider.Answer a;
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"fd_endless\":1}");
        ok(2);
        a = get(call);
        for (int i = 0; i < 4; i++) {
            held.add(open(a.fd));
        }
        IOException e = assertThrows(IOException.class, () -> open(a.fd));
        assertTrue(e.getMessage().contains("at most 4"), e.getMessage());
        held.get(0).close();
        assertTrue(pipes.get(0).closedLatch.await(5, TimeUnit.SECONDS));
        // The slot comes back once a writer ends.
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        InputStream again = null;
        while (again == null && System.nanoTime() < until) {
            try {
                again = open(a.fd);
            } catch (IOException busy) {
                Thread.sleep(20);
            }
        }
        assertNotNull(again, "a writer slot must be given back");
        held.add(again);
        for (InputStream in : held) {
            in.close();
        }
    }

    @Test
    void aThrowReplyMakesTheProviderThrowAnAllowedClassOnly() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"throw\":{\"class\":\"java.lang.OutOfMemoryError\"}}");
        Frame.Err e = err(2, "unsupported");
        assertTrue(e.error.message.contains("java.lang.SecurityException"), e.error.message);
        assertFalse(call.isDone(), "a reply the device cannot play leaves the call waiting");
        send("{\"id\":3,\"op\":\"reply\",\"call\":\"c-1\",\"throw\":{\"class\":\"java.lang.SecurityException\",\"message\":\"not you\"}}");
        ok(3);
        HostedProvider.Answer a = get(call);
        assertTrue(a.throwsException());
        assertNull(a.failure);
        RuntimeException x = a.exception();
        assertEquals(SecurityException.class, x.getClass());
        assertEquals("not you", x.getMessage());
        for (String cls : HostedProvider.THROWABLE) {
            CompletableFuture<HostedProvider.Answer> c = consumerCalls("execute", null, null);
            String id = (String) event().fields.get("call");
            send("{\"id\":4,\"op\":\"reply\",\"call\":\"" + id + "\",\"throw\":{\"class\":\"" + cls + "\"}}");
            ok(4);
            assertEquals(cls, get(c).exception().getClass().getName());
        }
    }

    @Test
    void unknownDoubleAndLateRepliesAreUnknownHandles() throws Exception {
        host(1);
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-9\",\"result\":null}");
        assertTrue(err(2, "unknown_handle").error.message.contains("c-9"));
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("m", null, null);
        event();
        send("{\"id\":3,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null}");
        ok(3);
        get(call);
        send("{\"id\":4,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null}");
        err(4, "unknown_handle");
        // Another connection cannot answer this one's calls.
        CompletableFuture<HostedProvider.Answer> other = consumerCalls("m", null, null);
        event();
        HostedProvider.Connection stranger = hosting.attach(f -> { });
        DeviceError de = assertThrows(DeviceError.class, () -> stranger.reply(replyParams("{\"call\":\"c-2\",\"result\":null}")));
        assertEquals("unknown_handle", de.kind);
        stranger.close();
        send("{\"id\":5,\"op\":\"reply\",\"call\":\"c-2\",\"result\":null}");
        ok(5);
        get(other);
    }

    private static com.clawseed.probe.wire.Ops.ReplyParams replyParams(String json) throws Exception {
        Frame.Request r = (Frame.Request) FrameCodec.decode(
                ("{\"id\":1,\"op\":\"reply\"," + json.substring(1)).getBytes(StandardCharsets.UTF_8));
        return (com.clawseed.probe.wire.Ops.ReplyParams) com.clawseed.probe.wire.Ops.decodeParams(r);
    }

    @Test
    void aCallTheHostNeverAnswersTimesOutAndItsReplyComesTooLate() throws Exception {
        client.close();
        server.join(10_000);
        start(fast().replyWaitMs(300));
        host(1);
        long t0 = System.nanoTime();
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("m", null, null);
        event();
        HostedProvider.Answer a = get(call);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertEquals(HostedProvider.Failure.NO_REPLY, a.failure);
        assertEquals(IllegalStateException.class, a.exception().getClass());
        assertTrue(ms >= 250 && ms < 5_000, "waited " + ms + " ms");
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null}");
        err(2, "unknown_handle");
        assertEquals(0, hosting.busy());
    }

    @Test
    void hostileRepliesAreRefusedAndTheCallStillWaits() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("m", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"fd_data\":\"@@@@\"}");
        assertTrue(err(2, "bad_request").error.message.startsWith("bad_base64"));
        send("{\"id\":3,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"fd_data\":\"" + "QUFB".repeat(342) + "\"}");
        assertTrue(err(3, "unsupported").error.message.contains("1026 bytes"));
        send("{\"id\":4,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"r\":{\"t\":\"pending_intent\",\"v\":{\"handle\":\"pi-1\","
                + "\"creator_package\":null,\"creator_uid\":null,\"immutable\":false,\"activity\":true}}}}");
        assertTrue(err(4, "unsupported").error.message.contains("immutable activity"));
        send("{\"id\":5,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"b\":{\"t\":\"bundle\",\"v\":{\"f\":{\"t\":\"fd\",\"v\":{\"handle\":\"fd-1\"}}}}}}");
        assertTrue(err(5, "unsupported").error.message.contains("`fd`"));
        send("{\"id\":6,\"op\":\"reply\",\"call\":\"c-1\",\"fail\":\"transaction_too_large\"}");
        assertTrue(err(6, "unsupported").error.message.contains("provider_died"));
        send("{\"id\":7,\"op\":\"reply\",\"call\":\"c-1\",\"fail\":\"timeout\",\"result\":null}");
        assertTrue(err(7, "bad_request").error.message.startsWith("bad_value"));
        send("{\"id\":8,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"fd_endless\":256}");
        assertTrue(err(8, "bad_request").error.message.startsWith("bad_value"));
        send("{\"id\":9,\"op\":\"reply\",\"call\":\"c-1\"}");
        assertTrue(err(9, "bad_request").error.message.startsWith("missing_field"));
        assertFalse(call.isDone());
        send("{\"id\":10,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"k\":{\"t\":\"long\",\"v\":5}}}");
        ok(10);
        assertEquals(5L, get(call).result.get("k").asLong());
    }

    private static String pendingIntent(String handle, String immutable, String activity) {
        return "{\"t\":\"pending_intent\",\"v\":{\"handle\":\"" + handle + "\",\"creator_package\":null,"
                + "\"creator_uid\":null,\"immutable\":" + immutable + ",\"activity\":" + activity + "}}";
    }

    @Test
    void aScriptedPendingIntentIsPlayedAndItsLaunchIsReportedToItsHost() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute_tool", null, null);
        assertEquals("incoming_call", event().event);
        // Only an immutable activity intent: what the probe creates.
        for (String[] bad : new String[][] {{"false", "true"}, {"true", "false"}}) {
            send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"e\":{\"t\":\"bundle\",\"v\":"
                    + "{\"resolution\":" + pendingIntent("pi-1", bad[0], bad[1]) + "}}}}");
            assertTrue(err(2, "unsupported").error.message.contains("immutable activity intent"));
        }
        assertFalse(call.isDone(), "a refused reply leaves the call waiting");
        // Unstated facts are the probe's: immutable, an activity.
        send("{\"id\":3,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"e\":{\"t\":\"bundle\",\"v\":"
                + "{\"resolution\":" + pendingIntent("pi-7", "null", "true") + "}}}}");
        ok(3);
        HostedProvider.Answer a = get(call);
        assertFalse(a.throwsException());
        assertFalse(a.dies());
        WireValue.PendingIntentInfo pi = a.result.get("e").asBundle().get("resolution").asPendingIntent();
        assertEquals("pi-7", pi.handle);
        String token = hosting.issue(a, pi.handle);
        assertNotNull(token);
        assertFalse(hosting.launched("k999", "approve", 10200, List.of()), "an unknown token reports nothing");
        assertThrows(IllegalArgumentException.class, () -> hosting.launched(token, "maybe", 1, List.of()));
        assertTrue(hosting.launched(token, "approve", 10200, List.of("com.example.consumer")));
        Frame.Event launched = event();
        assertEquals("intent_launched", launched.event);
        assertEquals("{\"authority\":\"" + AUTHORITY + "\",\"decision\":\"approve\",\"handle\":\"pi-7\","
                + "\"launcher\":{\"packages\":[\"com.example.consumer\"],\"uid\":10200},\"now_ms\":" + NOW + "}",
                text(launched.fields));
        // A second launch of the same intent is reported again; no launcher known is left out.
        assertTrue(hosting.launched(token, "deny", -1, null));
        assertEquals("{\"authority\":\"" + AUTHORITY + "\",\"decision\":\"deny\",\"handle\":\"pi-7\",\"now_ms\":"
                + NOW + "}", text(event().fields));
        // Failures come from no connection: nothing to report a launch to.
        assertNull(hosting.issue(HostedProvider.Answer.failed(HostedProvider.Failure.BUSY, "x"), "pi-1"));
        assertEquals(1, hosting.confirmations());
        client.close();
        server.join(10_000);
        assertFalse(hosting.launched(token, "approve", 10200, List.of()), "its host is gone");
        assertEquals(0, hosting.confirmations(), "a closed connection's confirmations are forgotten");
    }

    @Test
    void confirmationsAreBounded() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("m", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":{\"r\":" + pendingIntent("pi-1", "true", "true") + "}}");
        ok(2);
        HostedProvider.Answer a = get(call);
        String first = hosting.issue(a, "pi-1");
        for (int i = 0; i < HostedProvider.MAX_CONFIRMATIONS; i++) {
            hosting.issue(a, "pi-1");
        }
        assertEquals(HostedProvider.MAX_CONFIRMATIONS, hosting.confirmations());
        assertFalse(hosting.launched(first, "approve", 1, List.of()), "the oldest was forgotten");
    }

    @Test
    void failProviderDiedMakesTheHostedProcessDieAndFreesTheCall() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute_tool", null, null);
        event();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"fail\":\"provider_died\"}");
        ok(2);
        HostedProvider.Answer a = get(call);
        assertTrue(a.dies(), "the answer asks the hosted process to die");
        assertFalse(a.throwsException());
        assertNull(a.result);
        assertEquals(HostedProvider.Failure.DIES, a.failure);
        assertEquals(0, hosting.busy());
        assertEquals(0, hosting.waiting());
        // The probe (this object, its connection) lives on: the retry is served.
        CompletableFuture<HostedProvider.Answer> retry = consumerCalls("execute_tool", null, null);
        assertEquals("c-2", event().fields.get("call"));
        send("{\"id\":3,\"op\":\"reply\",\"call\":\"c-2\",\"result\":{\"k\":{\"t\":\"int\",\"v\":1}}}");
        ok(3);
        assertFalse(get(retry).dies());
    }

    @Test
    void hostProviderNamesTheDeclaredAuthorityAndMeta() throws Exception {
        send("{\"id\":1,\"op\":\"host_provider\",\"authority\":\"\",\"meta\":{}}");
        err(1, "bad_request");
        send("{\"id\":2,\"op\":\"host_provider\",\"authority\":\"org.cetp.hostile.clawseed.tools\",\"meta\":" + DUAL_META + "}");
        assertTrue(err(2, "unsupported").error.message.contains(AUTHORITY));
        send("{\"id\":3,\"op\":\"host_provider\",\"authority\":\"" + AUTHORITY + "\",\"meta\":{\"com.clawseed.tools.authority\":\""
                + AUTHORITY + "\",\"com.clawseed.tools.versions\":\"7\"}}");
        assertTrue(err(3, "unsupported").error.message.contains("1,2"));
        send("{\"id\":4,\"op\":\"host_provider\",\"authority\":\"" + AUTHORITY + "\",\"meta\":" + DUAL_META
                + ",\"package\":\"org.cetp.hostile\"}");
        assertTrue(err(4, "unsupported").error.message.contains(PKG));
        send("{\"id\":5,\"op\":\"host_provider\",\"authority\":\"" + AUTHORITY + "\",\"meta\":" + DUAL_META
                + ",\"authority_package\":\"com.attacker.app\"}");
        err(5, "unsupported");
        send("{\"id\":6,\"op\":\"host_provider\",\"authority\":\"" + AUTHORITY + "\",\"meta\":" + DUAL_META + ",\"exported\":\"yes\"}");
        err(6, "bad_request");
        assertEquals(List.of(), exposed, "nothing is exposed by a refused host_provider");
        assertEquals(HostedProvider.Failure.NOT_HOSTED, hosting.call(1, List.of(), "m", null, null).failure);
        // The v1-only variant is chosen by its meta-data.
        send("{\"id\":7,\"op\":\"host_provider\",\"authority\":\"" + AUTHORITY + "\",\"meta\":{\"com.clawseed.tools.authority\":\""
                + AUTHORITY + "\",\"com.clawseed.tools.version\":\"1\"}}");
        ok(7);
        assertEquals(List.of(PKG + "/.HostileToolService$V1Only"), exposed);
        send("{\"id\":8,\"op\":\"host_provider\",\"authority\":\"" + AUTHORITY + "\",\"meta\":" + DUAL_META + "}");
        assertTrue(err(8, "bad_request").error.message.contains("already"));
        // Another connection cannot take it over.
        HostedProvider.Connection other = hosting.attach(f -> { });
        DeviceError de = assertThrows(DeviceError.class, () -> other.host(
                new com.clawseed.probe.wire.Ops.HostProviderParams(AUTHORITY, meta("com.clawseed.tools.version", "1"))));
        assertEquals("bad_request", de.kind);
        other.close();
        assertEquals(List.of(PKG + "/.HostileToolService$V1Only"), exposed, "a stranger closing hides nothing");
    }

    @Test
    void theProviderGoesAwayWithItsConnection() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("m", null, null);
        event();
        long t0 = System.nanoTime();
        client.close();
        HostedProvider.Answer a = get(call);
        assertEquals(HostedProvider.Failure.HOST_GONE, a.failure);
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 2_000, "a waiting call must fail at once");
        server.join(10_000);
        assertEquals(List.of(PKG + "/.HostileToolService", "none"), exposed);
        assertEquals(HostedProvider.Failure.NOT_HOSTED, hosting.call(1, List.of(), "m", null, null).failure);
        assertEquals(0, hosting.waiting());
        assertNull(hosting.exposed());
    }

    @Test
    void waitingCallsAreBounded() throws Exception {
        host(1);
        List<CompletableFuture<HostedProvider.Answer>> calls = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            calls.add(consumerCalls("m", null, null));
            event();
        }
        HostedProvider.Answer busy = hosting.call(1, List.of(), "m", null, null);
        assertEquals(HostedProvider.Failure.BUSY, busy.failure);
        assertTrue(busy.message.contains("3"), busy.message);
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null}");
        ok(2);
        get(calls.get(0));
        CompletableFuture<HostedProvider.Answer> fourth = consumerCalls("m", null, null);
        // A refused call gets no id.
        assertEquals("c-4", event().fields.get("call"));
        for (String id : List.of("c-2", "c-3", "c-4")) {
            send("{\"id\":3,\"op\":\"reply\",\"call\":\"" + id + "\",\"result\":null}");
            ok(3);
        }
        get(fourth);
    }

    @Test
    void delaysAreBoundedAndFailTimeoutHoldsTheCaller() throws Exception {
        host(1);
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("m", null, null);
        event();
        long t0 = System.nanoTime();
        send("{\"id\":2,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null,\"delay_ms\":18446744073709551615}");
        ok(2);
        get(call);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 150 && ms < 3_000, "a huge delay is cut to the limit (200 ms), took " + ms);

        CompletableFuture<HostedProvider.Answer> held = consumerCalls("m", null, null);
        event();
        t0 = System.nanoTime();
        send("{\"id\":3,\"op\":\"reply\",\"call\":\"c-2\",\"fail\":\"timeout\"}");
        ok(3);
        Thread.sleep(100);
        assertFalse(held.isDone(), "a call that never answers must hold its caller");
        HostedProvider.Answer a = get(held);
        ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertEquals(HostedProvider.Failure.NEVER_ANSWERED, a.failure);
        assertTrue(ms >= 250 && ms < 3_000, "held " + ms + " ms");
    }

    @Test
    void aHostThatDoesNotReadCannotHoldBinderThreads() throws Exception {
        HostedProvider h = new HostedProvider(hostable(), (own, foreign) -> { }, fast().replyWaitMs(300).eventQueue(1), () -> NOW);
        CountDownLatch never = new CountDownLatch(1);
        HostedProvider.Connection c = h.attach(f -> {
            try {
                never.await();
            } catch (InterruptedException e) {
                throw new IOException("interrupted");
            }
        });
        c.host(new com.clawseed.probe.wire.Ops.HostProviderParams(AUTHORITY,
                meta("com.clawseed.tools.version", "1", "com.clawseed.tools.versions", "1,2")));
        List<CompletableFuture<HostedProvider.Answer>> calls = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            CompletableFuture<HostedProvider.Answer> f = new CompletableFuture<>();
            new Thread(() -> f.complete(h.call(1, List.of(), "m", null, null))).start();
            calls.add(f);
        }
        long t0 = System.nanoTime();
        for (CompletableFuture<HostedProvider.Answer> f : calls) {
            assertEquals(HostedProvider.Failure.NO_REPLY, get(f).failure);
        }
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 3_000);
        assertEquals(0, h.busy());
        c.close();
    }

    @Test
    void callsQueuedForAStuckHostFailOnceItsConnectionCloses() throws Exception {
        HostedProvider h = new HostedProvider(hostable(), (own, foreign) -> { }, fast().replyWaitMs(30_000).eventQueue(1), () -> NOW);
        CountDownLatch never = new CountDownLatch(1);
        HostedProvider.Connection c = h.attach(f -> {
            try {
                never.await();
            } catch (InterruptedException e) {
                throw new IOException("interrupted");
            }
        });
        c.host(new com.clawseed.probe.wire.Ops.HostProviderParams(AUTHORITY,
                meta("com.clawseed.tools.version", "1", "com.clawseed.tools.versions", "1,2")));
        List<CompletableFuture<HostedProvider.Answer>> calls = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            CompletableFuture<HostedProvider.Answer> f = new CompletableFuture<>();
            new Thread(() -> f.complete(h.call(1, List.of(), "m", null, null))).start();
            calls.add(f);
        }
        // One event is in the stuck sink, one in the queue, one waits to be queued.
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (h.busy() < 3 && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        Thread.sleep(100);
        long t0 = System.nanoTime();
        c.close();
        for (CompletableFuture<HostedProvider.Answer> f : calls) {
            assertEquals(HostedProvider.Failure.HOST_GONE, get(f).failure);
        }
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 2_000, "callers must not wait out the reply wait");
    }
}
