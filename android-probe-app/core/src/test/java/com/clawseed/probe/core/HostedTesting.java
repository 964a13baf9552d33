package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.Ops;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One connection's side of a {@link HostedProvider} without a socket: its
 * events land in a queue, its requests are decoded from probe-wire JSON as
 * the session decodes them, and Consumers call from threads of their own, as
 * Binder threads do.
 */
final class HostedTesting {
    final HostedProvider hosting;
    final HostedProvider.Connection conn;
    final BlockingQueue<Frame> frames = new LinkedBlockingQueue<>();

    HostedTesting(HostedProvider hosting) {
        this.hosting = hosting;
        this.conn = hosting.attach(frames::add);
    }

    /** The parameters of {@code {"op":"host_provider", ...json}}, decoded as a session would. */
    static Ops.HostProviderParams hostParams(JsonObject members) throws Exception {
        return (Ops.HostProviderParams) decode("host_provider", members);
    }

    static Ops.ReplyParams replyParams(String json) throws Exception {
        Frame.Request r = (Frame.Request) FrameCodec.decode(
                ("{\"id\":1,\"op\":\"reply\"," + json.substring(1)).getBytes(StandardCharsets.UTF_8));
        return (Ops.ReplyParams) Ops.decodeParams(r);
    }

    private static Object decode(String op, JsonObject members) throws Exception {
        JsonObject f = new JsonObject();
        f.putAll(members);
        f.with("id", com.clawseed.probe.wire.JsonNumber.of(1)).with("op", op);
        Frame.Request r = (Frame.Request) FrameCodec.decode(JsonWriter.toText(f).getBytes(StandardCharsets.UTF_8));
        return Ops.decodeParams(r);
    }

    static JsonObject meta(Map<String, String> m) {
        JsonObject o = new JsonObject();
        o.putAll(m);
        return o;
    }

    /** A Consumer's call on its own thread. */
    CompletableFuture<HostedProvider.Answer> consumerCalls(String method) {
        CompletableFuture<HostedProvider.Answer> f = new CompletableFuture<>();
        Thread t = new Thread(() -> f.complete(hosting.call(10200, List.of("com.example.consumer"), method, null, null)));
        t.setDaemon(true);
        t.start();
        return f;
    }

    Frame.Event event(String name) throws InterruptedException {
        Frame f = frames.poll(10, TimeUnit.SECONDS);
        assertNotNull(f, "no " + name + " event");
        assertTrue(f instanceof Frame.Event, f.toString());
        Frame.Event e = (Frame.Event) f;
        assertTrue(name.equals(e.event), "expected " + name + ", got " + e.event + " " + JsonWriter.toText(e.fields));
        return e;
    }

    /** A call answered by {@code replyJson} (with {@code "call":"ID"} filled in). */
    HostedProvider.Answer answered(String replyJson) throws Exception {
        CompletableFuture<HostedProvider.Answer> call = consumerCalls("execute");
        String id = (String) event("incoming_call").fields.get("call");
        conn.reply(replyParams(replyJson.replace("ID", id)));
        return call.get(10, TimeUnit.SECONDS);
    }
}
