package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.FrameReader;
import com.clawseed.probe.wire.JsonNumber;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A session over a real socket, driven like the host does. */
class ProbeSessionTest {
    private FakeBackend backend;
    private Socket client;
    private Thread server;
    private FrameReader reader;
    private OutputStream out;
    private final List<String> log = new ArrayList<>();

    @BeforeEach
    void connect() throws Exception {
        backend = new FakeBackend();
        ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        server = new Thread(() -> {
            try (ServerSocket l = listener; Socket s = l.accept()) {
                new ProbeSession(s.getInputStream(), s.getOutputStream(), backend, m -> {
                    synchronized (log) {
                        log.add(m);
                    }
                }).run();
            } catch (IOException e) {
                synchronized (log) {
                    log.add("server: " + e);
                }
            }
        });
        server.start();
        client = new Socket(InetAddress.getLoopbackAddress(), listener.getLocalPort());
        client.setSoTimeout(10_000);
        reader = new FrameReader(client.getInputStream());
        out = client.getOutputStream();
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

    private JsonObject ok(Frame f, long id) {
        assertTrue(f instanceof Frame.Ok, "expected ok, got " + new String(FrameCodec.encode(f), StandardCharsets.UTF_8));
        assertEquals(id, ((Frame.Ok) f).id);
        return ((Frame.Ok) f).ok;
    }

    private Frame.Err err(Frame f, long id, String kind) {
        assertTrue(f instanceof Frame.Err, "expected error, got " + new String(FrameCodec.encode(f), StandardCharsets.UTF_8));
        Frame.Err e = (Frame.Err) f;
        assertEquals(id, e.id);
        assertEquals(kind, e.error.kind, e.error.toString());
        return e;
    }

    private static String text(Object json) {
        return JsonWriter.toText(json);
    }

    @Test
    void helloAndDiscover() throws Exception {
        send("{\"id\":1,\"op\":\"hello\"}");
        JsonObject hello = ok(next(), 1);
        assertEquals("1", text(hello.get("wire")));
        assertEquals("[\"hello\",\"discover\",\"call\",\"read_fd\",\"close_fd\",\"resolve\",\"restart_provider\"]", text(hello.get("ops")));
        assertEquals("{\"cert_sha256\":[\"ab\"],\"name\":\"a\",\"packages\":[\"com.clawseed.probe\"],\"uid\":10123}", text(hello.get("identity")));
        send("{\"id\":18446744073709551615,\"op\":\"discover\"}");
        JsonObject d = ok(next(), -1L);
        assertTrue(text(d).contains("\"authority_package\":\"x\""), text(d));
    }

    @Test
    void callEchoesTypedBundlesWithLoneSurrogates() throws Exception {
        String extras = "{\"id\":{\"t\":\"string\",\"v\":\"r-\\ud800\"},\"v\":{\"t\":\"int\",\"v\":2},\"w\":{\"t\":\"long\",\"v\":2}}";
        send("{\"id\":3,\"op\":\"call\",\"authority\":\"x.tools\",\"method\":\"echo\",\"arg\":null,\"extras\":" + extras + ",\"timeout_ms\":5000}");
        JsonObject ok = ok(next(), 3);
        assertEquals(extras, text(ok.get("result")));
        assertEquals("5", text(ok.get("elapsed_us")));
        send("{\"id\":4,\"op\":\"call\",\"authority\":\"x.tools\",\"method\":\"null\",\"timeout_ms\":0}");
        assertEquals("{\"elapsed_us\":1,\"result\":null}", text(ok(next(), 4)));
    }

    @Test
    void callsRunConcurrently() throws Exception {
        send("{\"id\":1,\"op\":\"call\",\"authority\":\"x\",\"method\":\"together\",\"arg\":\"a\",\"timeout_ms\":8000}");
        send("{\"id\":2,\"op\":\"call\",\"authority\":\"x\",\"method\":\"together\",\"arg\":\"b\",\"timeout_ms\":8000}");
        Map<Long, JsonObject> answers = new HashMap<>();
        for (int i = 0; i < 2; i++) {
            Frame f = next();
            answers.put(((Frame.Ok) f).id, ((Frame.Ok) f).ok);
        }
        assertTrue(text(answers.get(1L)).contains("\"v\":\"a\""));
        assertTrue(text(answers.get(2L)).contains("\"v\":\"b\""));
    }

    @Test
    void slowCallTimesOutButTheConnectionGoesOn() throws Exception {
        long start = System.nanoTime();
        send("{\"id\":9,\"op\":\"call\",\"authority\":\"x\",\"method\":\"slow\",\"arg\":null,\"timeout_ms\":100}");
        err(next(), 9, "timeout");
        assertTrue(System.nanoTime() - start < 1_500_000_000L, "timeout not enforced");
        send("{\"id\":10,\"op\":\"hello\"}");
        ok(next(), 10);
    }

    @Test
    void providerFailuresAreErrorAnswers() throws Exception {
        send("{\"id\":1,\"op\":\"call\",\"authority\":\"x\",\"method\":\"throw\",\"arg\":null,\"timeout_ms\":1000}");
        Frame.Err e = err(next(), 1, "provider_exception");
        assertEquals("java.lang.SecurityException", e.error.className);
        send("{\"id\":2,\"op\":\"call\",\"authority\":\"nope\",\"method\":\"m\",\"arg\":null,\"timeout_ms\":1000}");
        err(next(), 2, "unknown_authority");
        send("{\"id\":3,\"op\":\"call\",\"authority\":\"x\",\"method\":\"bug\",\"arg\":null,\"timeout_ms\":1000}");
        Frame.Err bug = err(next(), 3, DeviceError.DEVICE_ERROR);
        assertTrue(bug.error.message.contains("backend bug"));
        send("{\"id\":4,\"op\":\"call\",\"authority\":\"x\",\"method\":\"bug\",\"arg\":null,\"timeout_ms\":0}");
        err(next(), 4, DeviceError.DEVICE_ERROR);
    }

    private static String sha256(byte[] b, int len) throws Exception {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        md.update(b, 0, len);
        return Dispatcher.hex(md.digest());
    }

    private String fileHandle(int size, long id) throws Exception {
        send("{\"id\":" + id + ",\"op\":\"call\",\"authority\":\"x\",\"method\":\"file\",\"arg\":\"" + size + "\",\"timeout_ms\":1000}");
        JsonObject result = (JsonObject) ok(next(), id).get("result");
        JsonObject fd = (JsonObject) ((JsonObject) result.get("result_fd")).get("v");
        return (String) fd.get("handle");
    }

    private static byte[] expected(int size) {
        byte[] data = new byte[size];
        for (int i = 0; i < size; i++) {
            data[i] = (byte) (i * 31);
        }
        return data;
    }

    @Test
    void readFdStreamsChunksThenTheDigest() throws Exception {
        int size = 2 * FrameCodec.MAX_CHUNK_BYTES + 12345;
        String handle = fileHandle(size, 1);
        send("{\"id\":2,\"op\":\"read_fd\",\"handle\":\"" + handle + "\",\"max_bytes\":" + (size + 1) + "}");
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        Frame f;
        int chunks = 0;
        while ((f = next()) instanceof Frame.Chunk) {
            assertEquals(2, ((Frame.Chunk) f).id);
            byte[] data = ((Frame.Chunk) f).data();
            assertTrue(data.length <= FrameCodec.MAX_CHUNK_BYTES);
            got.write(data);
            chunks++;
        }
        assertEquals(3, chunks);
        assertArrayEquals(expected(size), got.toByteArray());
        JsonObject ok = ok(f, 2);
        assertEquals(String.valueOf(size), text(ok.get("bytes")));
        assertEquals("\"" + sha256(expected(size), size) + "\"", text(ok.get("sha256")));
        assertEquals("true", text(ok.get("eof")));
        assertEquals("null", text(ok.get("error")));
        // Used up.
        send("{\"id\":3,\"op\":\"read_fd\",\"handle\":\"" + handle + "\",\"max_bytes\":1}");
        err(next(), 3, "unknown_handle");
    }

    @Test
    void readFdStopsAtMaxBytesAndReportsWriterErrors() throws Exception {
        String handle = fileHandle(100, 1);
        send("{\"id\":2,\"op\":\"read_fd\",\"handle\":\"" + handle + "\",\"max_bytes\":10}");
        Frame.Chunk c = (Frame.Chunk) next();
        assertEquals(10, c.data().length);
        JsonObject ok = ok(next(), 2);
        assertEquals("{\"bytes\":10,\"eof\":false,\"error\":null,\"sha256\":\"" + sha256(expected(100), 10) + "\"}", text(ok));

        // A descriptor open for writing says so; one whose mode is not known says nothing.
        String rw = fileHandle(1, 5);
        backend.writableFds.add(rw);
        send("{\"id\":5,\"op\":\"read_fd\",\"handle\":\"" + rw + "\",\"max_bytes\":8}");
        next();
        assertEquals("true", text(ok(next(), 5).get("writable")));

        String broken = fileHandle(0, 3);
        backend.fdErrors.put(broken, "java.io.IOException: writer crashed");
        send("{\"id\":4,\"op\":\"read_fd\",\"handle\":\"" + broken + "\",\"max_bytes\":1}");
        assertEquals("{\"bytes\":0,\"eof\":true,\"error\":\"java.io.IOException: writer crashed\","
                + "\"sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}", text(ok(next(), 4)));
    }

    @Test
    void closeResolveAndRestart() throws Exception {
        String handle = fileHandle(5, 1);
        send("{\"id\":2,\"op\":\"close_fd\",\"handle\":\"" + handle + "\"}");
        assertEquals("{}", text(ok(next(), 2)));
        send("{\"id\":3,\"op\":\"close_fd\",\"handle\":\"" + handle + "\"}");
        err(next(), 3, "unknown_handle");
        send("{\"id\":4,\"op\":\"resolve\",\"handle\":\"pi-1\",\"decision\":\"approve\",\"timeout_ms\":1000,\"ui\":{}}");
        assertEquals("{\"decision_applied\":true,\"launched\":true,\"result_code\":-1}", text(ok(next(), 4)));
        send("{\"id\":5,\"op\":\"resolve\",\"handle\":\"pi-1\",\"decision\":\"deny\",\"timeout_ms\":1000}");
        err(next(), 5, "unknown_handle");
        // The launched package, when the backend knows it, is reported.
        backend.launchedPackage = "com.example.app";
        String second = backend.intents.add("confirm");
        send("{\"id\":7,\"op\":\"resolve\",\"handle\":\"" + second + "\",\"decision\":\"approve\",\"timeout_ms\":1000}");
        assertEquals("{\"decision_applied\":true,\"launched\":true,\"launched_package\":\"com.example.app\",\"result_code\":-1}",
                text(ok(next(), 7)));
        send("{\"id\":6,\"op\":\"restart_provider\",\"package\":\"com.example.app\"}");
        assertEquals("{}", text(ok(next(), 6)));
        assertEquals(List.of("com.example.app"), backend.restarted);
        send("{\"id\":7,\"op\":\"restart_provider\",\"package\":\"com.protected\"}");
        err(next(), 7, "unsupported");
    }

    @Test
    void badRequestsAreAnsweredAndTheConnectionGoesOn() throws Exception {
        send("{\"id\":1,\"op\":\"frobnicate\"}");
        err(next(), 1, "unknown_op");
        send("{\"id\":2,\"op\":\"call\",\"authority\":\"x\",\"arg\":null,\"timeout_ms\":1}");
        Frame.Err e = err(next(), 2, "bad_request");
        assertTrue(e.error.message.startsWith("missing_field"), e.error.message);
        send("{\"id\":3,\"op\":\"call\",\"authority\":\"x\",\"method\":\"m\",\"arg\":null,\"timeout_ms\":1,\"extras\":{\"a\":{\"t\":\"int\",\"v\":2.0}}}");
        assertTrue(err(next(), 3, "bad_request").error.message.startsWith("not_integer"));
        send("{\"id\":4,\"op\":7}");
        assertTrue(err(next(), 4, "bad_request").error.message.startsWith("wrong_type"));
        send("this is not json");
        Frame ev = next();
        assertTrue(ev instanceof Frame.Event);
        assertEquals("bad_frame", ((Frame.Event) ev).event);
        // A session without a hosted Provider (HostedProviderTest has one):
        // the hosting ops are known, decoded, and refused as not performed here.
        send("{\"id\":5,\"op\":\"host_provider\",\"authority\":\"h\",\"meta\":{}}");
        assertTrue(err(next(), 5, "unsupported").error.message.contains("scripted provider"));
        send("{\"id\":8,\"op\":\"reply\",\"call\":\"c-1\",\"result\":null}");
        err(next(), 8, "unsupported");
        send("{\"id\":6,\"ok\":{}}");
        err(next(), 6, "bad_request");
        send("{\"id\":7,\"op\":\"hello\"}");
        ok(next(), 7);
    }

    @Test
    void oversizedFrameClosesTheConnection() throws Exception {
        byte[] block = new byte[1 << 20];
        java.util.Arrays.fill(block, (byte) 'x');
        try {
            for (int i = 0; i < 17; i++) {
                out.write(block);
            }
            out.flush();
        } catch (IOException e) {
            // The device may close before everything is written.
        }
        try {
            assertNull(reader.readLine());
        } catch (IOException e) {
            // A reset instead of a clean end: the device closed with our bytes unread.
        }
        assertTrue(backend.closed.await(5, TimeUnit.SECONDS));
        synchronized (log) {
            assertTrue(log.stream().anyMatch(m -> m.contains("larger than")), log.toString());
        }
    }

    @Test
    void idsAreUnsigned() {
        assertEquals("18446744073709551615", JsonNumber.ofUnsigned(-1L).canonical());
        assertFalse(JsonNumber.ofUnsigned(5).equals(JsonNumber.ofDouble(5.0)));
    }
}
