package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.FrameReader;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.Ops;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@code consumer_act} through a real session: served, with {@code consumers}
 * in {@code hello}, only by a backend that hosts a Consumer (the JVM device);
 * a phone's backend, which hosts none, answers it {@code unknown_op} as before.
 */
class ConsumerActTest {
    /** A device whose one Consumer records each act and answers with what the test set. */
    static final class Backend implements DeviceBackend {
        final List<String> consumers;
        final List<String> acts = Collections.synchronizedList(new ArrayList<>());
        volatile long lastTimeout;

        Backend(List<String> consumers) {
            this.consumers = consumers;
        }

        @Override
        public Hello hello() {
            return new Hello("cetp-probe-test/1", new Ops.Identity("a", 10123, Arrays.asList("p"), Arrays.asList("ab")),
                    new Ops.DeviceInfo(34, "fake", "fake/fp"), 1L);
        }

        @Override
        public List<String> consumers() {
            return consumers;
        }

        @Override
        public JsonObject consumerAct(String consumer, JsonObject action, long timeoutMs) {
            acts.add(consumer + " " + JsonWriter.toText(action));
            lastTimeout = timeoutMs;
            return new JsonObject().with("outcome", "needs_user").with("detail", "waiting");
        }

        @Override
        public List<Ops.ServiceInfo> discover() {
            return List.of();
        }

        @Override
        public CallResult call(Ops.CallParams params) throws DeviceError {
            throw DeviceError.unsupported("no calls here");
        }

        @Override
        public FdSource takeFd(String handle) throws DeviceError {
            throw DeviceError.unsupported("no fds here");
        }

        @Override
        public void closeFd(String handle) throws DeviceError {
            throw DeviceError.unsupported("no fds here");
        }

        @Override
        public ResolveResult resolve(Ops.ResolveParams params) throws DeviceError {
            throw DeviceError.unsupported("no resolve here");
        }

        @Override
        public void restartProvider(String pkg) throws DeviceError {
            throw DeviceError.unsupported("no restart here");
        }

        @Override
        public void close() {}
    }

    private Socket client;
    private Thread server;
    private FrameReader reader;
    private OutputStream out;

    private void connect(DeviceBackend backend) throws Exception {
        ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        server = new Thread(() -> {
            try (ServerSocket l = listener; Socket s = l.accept()) {
                new ProbeSession(s.getInputStream(), s.getOutputStream(), backend, m -> { }).run();
            } catch (IOException ignored) {
                // The test sees the connection end.
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
    }

    private Frame exchange(String line) throws Exception {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        byte[] answer = reader.readLine();
        assertTrue(answer != null, "connection closed");
        return FrameCodec.decode(answer);
    }

    private static String text(Object json) {
        return JsonWriter.toText(json);
    }

    private static String errKind(Frame f) {
        assertTrue(f instanceof Frame.Err, "expected an error, got " + new String(FrameCodec.encode(f), StandardCharsets.UTF_8));
        return ((Frame.Err) f).error.kind;
    }

    @Test
    void aDeviceHostingAConsumerListsItAndMakesItAct() throws Exception {
        Backend b = new Backend(List.of("default"));
        connect(b);
        JsonObject hello = ((Frame.Ok) exchange("{\"id\":1,\"op\":\"hello\"}")).ok;
        assertTrue(text(hello.get("ops")).endsWith(",\"consumer_act\"]"), text(hello.get("ops")));
        assertEquals("[\"default\"]", text(hello.get("consumers")));
        Frame f = exchange("{\"id\":2,\"op\":\"consumer_act\",\"consumer\":\"default\",\"timeout_ms\":5000,"
                + "\"action\":{\"do\":\"call_tool\",\"authority\":\"a.tools\",\"tool\":\"t\",\"args\":{\"x\":1}}}");
        assertEquals("{\"detail\":\"waiting\",\"outcome\":\"needs_user\"}", text(((Frame.Ok) f).ok));
        assertEquals(List.of("default {\"args\":{\"x\":1},\"authority\":\"a.tools\",\"do\":\"call_tool\",\"tool\":\"t\"}"), b.acts);
        assertEquals(5000, b.lastTimeout);
        // No consumer named: the default one; no timeout: 60 s; 0: the cap, never "no limit".
        exchange("{\"id\":3,\"op\":\"consumer_act\",\"action\":{\"do\":\"reset\"}}");
        assertEquals(Dispatcher.DEFAULT_ACT_TIMEOUT_MS, b.lastTimeout);
        exchange("{\"id\":4,\"op\":\"consumer_act\",\"timeout_ms\":0,\"action\":{\"do\":\"reset\"}}");
        assertEquals(Dispatcher.MAX_ACT_TIMEOUT_MS, b.lastTimeout);
        assertEquals(3, b.acts.size());
    }

    @Test
    void malformedActsAndUnknownConsumersAreRefusedBeforeTheConsumerRuns() throws Exception {
        Backend b = new Backend(List.of("default"));
        connect(b);
        assertEquals("bad_request", errKind(exchange("{\"id\":1,\"op\":\"consumer_act\"}")));
        assertEquals("bad_request", errKind(exchange("{\"id\":2,\"op\":\"consumer_act\",\"action\":{\"do\":7}}")));
        assertEquals("bad_request", errKind(exchange("{\"id\":3,\"op\":\"consumer_act\",\"action\":[]}")));
        assertEquals("bad_request", errKind(exchange("{\"id\":4,\"op\":\"consumer_act\",\"timeout_ms\":-1,\"action\":{\"do\":\"reset\"}}")));
        Frame f = exchange("{\"id\":5,\"op\":\"consumer_act\",\"consumer\":\"other\",\"action\":{\"do\":\"reset\"}}");
        assertEquals("unsupported", errKind(f));
        assertTrue(((Frame.Err) f).error.message.contains("\"other\""), ((Frame.Err) f).error.message);
        assertEquals(List.of(), b.acts);
    }

    @Test
    void aDeviceWithoutAConsumerAnswersUnknownOpAsAPhoneDoes() throws Exception {
        connect(new Backend(List.of()));
        JsonObject hello = ((Frame.Ok) exchange("{\"id\":1,\"op\":\"hello\"}")).ok;
        assertTrue(!text(hello.get("ops")).contains("consumer_act"), text(hello.get("ops")));
        assertEquals(null, hello.get("consumers"));
        assertEquals("unknown_op", errKind(exchange("{\"id\":2,\"op\":\"consumer_act\",\"action\":{\"do\":\"reset\"}}")));
    }
}
