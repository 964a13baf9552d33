package com.clawseed.probe.core;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.Fields;
import com.clawseed.probe.wire.Json;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireDecodeException;
import com.clawseed.probe.wire.WireError;
import java.io.IOException;
import java.io.InputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Maps one decoded request to the backend and sends its answer: chunks, then
 * exactly one final frame. Backend failures become error answers; nothing a
 * Provider does escapes as an exception.
 */
public final class Dispatcher {
    /** Where answers go; must be safe to call from several threads. */
    public interface Sink {
        void send(Frame frame) throws IOException;
    }

    /** The optional ops of a device that hosts a scripted Provider, in the order {@code hello} lists them. */
    public static final List<String> HOSTING_OPS = Collections.unmodifiableList(Arrays.asList("host_provider", "reply"));

    /**
     * Not in {@link Ops#KNOWN}: served only by a device that hosts a
     * Consumer under test ({@link DeviceBackend#consumers}); a phone's probe
     * answers it {@code unknown_op}, as before.
     */
    public static final String CONSUMER_ACT = "consumer_act";
    /** An act's deadline when the host names none (the simulated device's too). */
    static final long DEFAULT_ACT_TIMEOUT_MS = 60_000;
    /** The longest act a host may ask for: a stuck Consumer must not hold a worker for ever. */
    static final long MAX_ACT_TIMEOUT_MS = 600_000;

    private final DeviceBackend backend;
    private final ExecutorService workers;
    /** This connection's side of the hosted Provider; null when the device hosts none. */
    private final HostedProvider.Connection hosted;
    private final HostedProvider hosting;

    private final ReadLimits readLimits;

    /**
     * Bounds of one {@code read_fd} (finding 5 of issue 27): a Provider that
     * neither writes to nor closes its descriptor would otherwise pin a
     * worker thread and the descriptor for as long as the probe runs. The
     * descriptor is closed (which wakes the blocked read) when no byte came
     * for {@code stallMs}, or the read lasted {@code totalMs}; the answer
     * then says so in {@code error}, with {@code eof} false.
     */
    public static final class ReadLimits {
        public final long stallMs;
        public final long totalMs;

        public ReadLimits(long stallMs, long totalMs) {
            this.stallMs = stallMs;
            this.totalMs = totalMs;
        }

        /** 30 s without data; 120 s in all (the host itself gives up after 60 s). */
        public static ReadLimits defaults() {
            return new ReadLimits(30_000, 120_000);
        }
    }

    /** Closes stalled descriptors; one daemon thread for the process. */
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "cetp-read-fd-watchdog");
        t.setDaemon(true);
        return t;
    });

    /** {@code workers} runs the backend call while the request thread waits with its timeout. */
    public Dispatcher(DeviceBackend backend, ExecutorService workers) {
        this(backend, workers, null, null);
    }

    /** A device that hosts {@code hosting}; {@code hosted} is this connection's side of it. */
    public Dispatcher(DeviceBackend backend, ExecutorService workers, HostedProvider hosting,
            HostedProvider.Connection hosted) {
        this(backend, workers, hosting, hosted, ReadLimits.defaults());
    }

    public Dispatcher(DeviceBackend backend, ExecutorService workers, HostedProvider hosting,
            HostedProvider.Connection hosted, ReadLimits readLimits) {
        this.readLimits = readLimits;
        this.backend = backend;
        this.workers = workers;
        this.hosting = hosting;
        this.hosted = hosted;
    }

    /** Whether this connection performs {@code op}: a known op, or {@code consumer_act} where a Consumer is hosted. */
    public boolean serves(String op) {
        return Ops.isKnown(op) || (CONSUMER_ACT.equals(op) && !backend.consumers().isEmpty());
    }

    /**
     * Answers {@code request}, whose parameters were decoded by
     * {@link Ops#decodeParams}. Only an I/O failure of the sink escapes.
     */
    public void handle(Frame.Request request, Object params, Sink sink) throws IOException {
        long id = request.id;
        try {
            JsonObject ok = CONSUMER_ACT.equals(request.op) ? consumerAct(request.params)
                    : perform(request.op, id, params, sink);
            sink.send(new Frame.Ok(id, ok));
        } catch (DeviceError e) {
            sink.send(new Frame.Err(id, e.toWire()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            sink.send(new Frame.Err(id, new WireError(DeviceError.DEVICE_ERROR, "the probe is shutting down")));
        } catch (IOException e) {
            throw e;
        } catch (RuntimeException e) {
            sink.send(new Frame.Err(id, new WireError(DeviceError.DEVICE_ERROR,
                    "probe failure: " + e, e.getClass().getName(), null)));
        }
    }

    private JsonObject perform(String op, long id, Object params, Sink sink)
            throws DeviceError, InterruptedException, IOException {
        switch (op) {
            case "hello": {
                DeviceBackend.Hello h = backend.hello();
                Abilities abilities = backend.abilities();
                List<String> ops = new ArrayList<>(abilities.ops());
                JsonObject extra = new JsonObject();
                if (hosted != null) {
                    // Listed only where they work: the host then knows at
                    // once whether it can test a Consumer here. `consumer_act`
                    // stays out: a phone cannot make another app act.
                    ops.addAll(HOSTING_OPS);
                    extra.putAll(hosting.helloMembers());
                }
                // The backend's own members win: a device that cannot play
                // one of the hosting's abilities says so (the JVM device
                // cannot hear a Consumer close a descriptor).
                extra.putAll(h.extra);
                List<String> consumers = backend.consumers();
                if (!consumers.isEmpty()) {
                    // A device that makes a Consumer act (the JVM device with
                    // a vendor's Consumer classes): `cetp consumer --target
                    // tcp:…,consumer=NAME` then works against it unchanged.
                    ops.add(CONSUMER_ACT);
                    extra.put("consumers", new ArrayList<Object>(consumers));
                }
                return Ops.helloOk(h.probe, h.identity, h.device, h.nowMs, ops, abilities.unavailable(), extra);
            }
            case "discover":
                return Ops.discoverOk(backend.discover());
            case "call":
                return call((Ops.CallParams) params);
            case "read_fd":
                return readFd(id, (Ops.ReadFdParams) params, sink);
            case "close_fd":
                backend.closeFd(((Ops.CloseFdParams) params).handle);
                return new JsonObject();
            case "resolve": {
                requireAbility(Abilities.RESOLVE);
                DeviceBackend.ResolveResult r = backend.resolve((Ops.ResolveParams) params);
                return Ops.resolveOk(r.launched, r.decisionApplied, r.resultCode, r.launchedPackage);
            }
            case "restart_provider":
                requireAbility(Abilities.RESTART_PROVIDER);
                backend.restartProvider(((Ops.RestartProviderParams) params).pkg);
                return new JsonObject();
            case "advance_clock": {
                requireAbility(Abilities.ADVANCE_CLOCK);
                return Ops.advanceClockOk(backend.advanceClock(((Ops.AdvanceClockParams) params).ms));
            }
            case "host_provider":
                if (hosted == null) {
                    throw DeviceError.unsupported("this device does not host a scripted provider");
                }
                return hosted.host((Ops.HostProviderParams) params);
            case "reply":
                if (hosted == null) {
                    throw DeviceError.unsupported("this device does not host a scripted provider");
                }
                return hosted.reply((Ops.ReplyParams) params);
            default:
                if (Ops.isKnown(op)) {
                    throw DeviceError.unsupported("this device does not perform `" + op + "`");
                }
                throw new DeviceError(WireError.UNKNOWN_OP, "unknown op `" + op + "`");
        }
    }

    /**
     * {@code consumer_act}: {@code consumer} (default {@code default}), an
     * {@code action} object with a string {@code do}, {@code timeout_ms}
     * (default 60 s, at most {@link #MAX_ACT_TIMEOUT_MS}). The action's
     * other members are the backend's to read.
     */
    private JsonObject consumerAct(JsonObject params) throws DeviceError, InterruptedException {
        List<String> consumers = backend.consumers();
        if (consumers.isEmpty()) {
            throw new DeviceError(WireError.UNKNOWN_OP, "unknown op `" + CONSUMER_ACT + "`");
        }
        Fields f = new Fields(params, "");
        String consumer;
        JsonObject action;
        long timeout;
        try {
            String named = f.optString("consumer");
            consumer = named == null ? "default" : named;
            action = f.object("action");
            Fields.string(action.get("do"), "/action/do");
            timeout = f.opt("timeout_ms") == null ? DEFAULT_ACT_TIMEOUT_MS : f.uint64("timeout_ms");
        } catch (WireDecodeException e) {
            throw new DeviceError(WireError.BAD_REQUEST, e.toString());
        }
        if (!consumers.contains(consumer)) {
            throw DeviceError.unsupported("this device hosts no Consumer named \"" + Json.sanitize(consumer)
                    + "\" (it hosts " + consumers + ")");
        }
        // 0 or more than the cap: the cap. The host always names one.
        long bounded = timeout == 0 || Long.compareUnsigned(timeout, MAX_ACT_TIMEOUT_MS) > 0 ? MAX_ACT_TIMEOUT_MS : timeout;
        return backend.consumerAct(consumer, action, bounded);
    }

    /** An op that {@code hello} left out is refused the same way whoever asks. */
    private void requireAbility(String op) throws DeviceError {
        Abilities abilities = backend.abilities();
        if (!abilities.can(op)) {
            throw abilities.refusal(op);
        }
    }

    private JsonObject call(Ops.CallParams p) throws DeviceError, InterruptedException {
        if (p.timeoutMs == 0) {
            DeviceBackend.CallResult r = backend.call(p);
            return Ops.callOk(r.result, r.elapsedUs, r.unreadKeys);
        }
        Future<DeviceBackend.CallResult> f = workers.submit(() -> backend.call(p));
        try {
            DeviceBackend.CallResult r = f.get(clampMs(p.timeoutMs), TimeUnit.MILLISECONDS);
            return Ops.callOk(r.result, r.elapsedUs, r.unreadKeys);
        } catch (TimeoutException e) {
            // The Binder call cannot be cancelled; it may still complete on the Provider side.
            throw new DeviceError(WireError.TIMEOUT, "no answer within " + Long.toUnsignedString(p.timeoutMs) + " ms");
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof DeviceError) {
                throw (DeviceError) cause;
            }
            if (cause instanceof InterruptedException) {
                throw (InterruptedException) cause;
            }
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new DeviceError(DeviceError.DEVICE_ERROR, "probe failure: " + cause);
        }
    }

    /** Unsigned milliseconds, capped where a {@code long} of nanoseconds would overflow. */
    private static long clampMs(long unsignedMs) {
        long cap = Long.MAX_VALUE / 1_000_000L;
        return (unsignedMs < 0 || unsignedMs > cap) ? cap : unsignedMs;
    }

    private JsonObject readFd(long id, Ops.ReadFdParams p, Sink sink) throws DeviceError, IOException {
        FdSource src = backend.takeFd(p.handle);
        MessageDigest sha;
        try {
            sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "no SHA-256 on this device");
        }
        byte[] chunk = new byte[FrameCodec.MAX_CHUNK_BYTES];
        long total = 0;
        boolean eof = false;
        String error = null;
        // Read before the descriptor is drained and closed.
        Boolean writable = src.writable();
        final long started = System.nanoTime();
        final AtomicLong progress = new AtomicLong(started);
        final AtomicReference<String> cut = new AtomicReference<>();
        long period = Math.max(10, Math.min(readLimits.stallMs, readLimits.totalMs) / 4);
        ScheduledFuture<?> watch = WATCHDOG.scheduleWithFixedDelay(() -> {
            long now = System.nanoTime();
            String why = null;
            if (now - progress.get() >= readLimits.stallMs * 1_000_000L) {
                why = "no data for " + readLimits.stallMs + " ms: the writer neither wrote nor closed its end";
            } else if (now - started >= readLimits.totalMs * 1_000_000L) {
                why = "not read to its end within " + readLimits.totalMs + " ms";
            }
            if (why != null && cut.compareAndSet(null, why + "; the probe stopped reading and closed it")) {
                try {
                    src.close();
                } catch (IOException ignored) {
                    // Closed either way; the reader wakes.
                }
            }
        }, period, period, TimeUnit.MILLISECONDS);
        try {
            InputStream in = src.stream();
            while (!eof && Long.compareUnsigned(total, p.maxBytes) < 0) {
                long remaining = p.maxBytes - total;
                int want = Long.compareUnsigned(remaining, chunk.length) < 0 ? (int) remaining : chunk.length;
                int filled = 0;
                try {
                    while (filled < want) {
                        int n = in.read(chunk, filled, want - filled);
                        if (n < 0) {
                            eof = true;
                            break;
                        }
                        // Counted as read, so that a read cut off later still answers for these bytes.
                        sha.update(chunk, filled, n);
                        total += n;
                        filled += n;
                        progress.set(System.nanoTime());
                    }
                } finally {
                    if (filled > 0) {
                        sink.send(new Frame.Chunk(id, Arrays.copyOf(chunk, filled)));
                    }
                }
            }
            if (eof && cut.get() == null) {
                error = src.checkError();
            }
        } catch (IOException e) {
            if (sinkFailure(e)) {
                throw e;
            }
            error = e.toString();
        } finally {
            // Done reading: a watchdog run that comes now finds the slot
            // taken and leaves the descriptor alone.
            cut.compareAndSet(null, "");
            watch.cancel(false);
            try {
                src.close();
            } catch (IOException ignored) {
                // Nothing left to report: the bytes and any writer error are in the answer.
            }
        }
        String why = cut.get();
        if (!why.isEmpty()) {
            // Whatever the read saw after the watchdog closed the descriptor.
            eof = false;
            error = why;
        }
        return Ops.readFdOk(total, hex(sha.digest()), eof, error, writable);
    }

    /** Sink failures are wrapped so that they are told apart from descriptor read errors. */
    private static boolean sinkFailure(IOException e) {
        return e instanceof SinkException;
    }

    /** An I/O failure writing to the host, as opposed to reading a descriptor. */
    public static final class SinkException extends IOException {
        private static final long serialVersionUID = 1L;

        public SinkException(IOException cause) {
            super(cause);
        }
    }

    static String hex(byte[] bytes) {
        char[] digits = "0123456789abcdef".toCharArray();
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(digits[(b >> 4) & 0xF]).append(digits[b & 0xF]);
        }
        return sb.toString();
    }
}
