package com.clawseed.probe.core;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.FrameReader;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireDecodeException;
import com.clawseed.probe.wire.WireError;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;

/**
 * One connection: reads requests, runs each on a worker (requests may be
 * pipelined and calls must run concurrently), writes answers as they come.
 * Returns when the peer closes the stream, sends a frame over the size limit,
 * or the output fails.
 */
public final class ProbeSession implements Runnable {
    /** Requests in progress at once; further requests wait to be read. */
    public static final int MAX_IN_FLIGHT = 64;

    /** What happened to a connection, for the device log. */
    public interface Log {
        void info(String message);
    }

    private final InputStream in;
    private final OutputStream out;
    private final DeviceBackend backend;
    /** The device's hosted Provider, shared by its connections; null when it hosts none. */
    private final HostedProvider hosting;
    private final Log log;
    private final Object writeLock = new Object();
    private final Semaphore inFlight = new Semaphore(MAX_IN_FLIGHT);

    public ProbeSession(InputStream in, OutputStream out, DeviceBackend backend, Log log) {
        this(in, out, backend, null, log);
    }

    /** A session of a device that hosts a scripted Provider ({@code host_provider}, {@code reply}). */
    public ProbeSession(InputStream in, OutputStream out, DeviceBackend backend, HostedProvider hosting, Log log) {
        this.in = in;
        this.out = out;
        this.backend = backend;
        this.hosting = hosting;
        this.log = log;
    }

    private void send(Frame frame) throws Dispatcher.SinkException {
        byte[] line = FrameCodec.encode(frame);
        synchronized (writeLock) {
            try {
                out.write(line);
                out.flush();
            } catch (IOException e) {
                throw new Dispatcher.SinkException(e);
            }
        }
    }

    private static WireError badRequest(String message) {
        return new WireError(WireError.BAD_REQUEST, message);
    }

    @Override
    public void run() {
        ExecutorService workers = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "cetp-probe-worker");
            t.setDaemon(true);
            return t;
        });
        HostedProvider.Connection hosted = hosting == null ? null : hosting.attach(this::send);
        Dispatcher dispatcher = new Dispatcher(backend, workers, hosting, hosted);
        FrameReader reader = new FrameReader(in);
        try {
            byte[] line;
            while ((line = reader.readLine()) != null) {
                Frame frame;
                try {
                    frame = FrameCodec.decode(line);
                } catch (WireDecodeException e) {
                    Long id = FrameCodec.requestIdHint(line, 0, line.length);
                    if (id != null) {
                        send(new Frame.Err(id, badRequest(e.toString())));
                    } else {
                        send(new Frame.Event("bad_frame", new JsonObject().with("error", badRequest(e.toString()).toJson())));
                    }
                    continue;
                }
                if (frame instanceof Frame.Event) {
                    send(new Frame.Event("bad_frame", new JsonObject().with("error",
                            badRequest("a device reads requests only, not events").toJson())));
                    continue;
                }
                if (!(frame instanceof Frame.Request)) {
                    send(new Frame.Err(idOfAnswer(frame), badRequest("a device reads requests only, not answers")));
                    continue;
                }
                Frame.Request request = (Frame.Request) frame;
                if (!dispatcher.serves(request.op)) {
                    send(new Frame.Err(request.id, new WireError(WireError.UNKNOWN_OP, "unknown op `" + request.op + "`")));
                    continue;
                }
                Object params;
                try {
                    params = Ops.decodeParams(request);
                } catch (WireDecodeException e) {
                    send(new Frame.Err(request.id, badRequest(e.toString())));
                    continue;
                }
                inFlight.acquire();
                workers.execute(() -> {
                    try {
                        dispatcher.handle(request, params, this::send);
                    } catch (IOException e) {
                        log.info("answer to request " + Long.toUnsignedString(request.id) + " not delivered: " + e);
                        closeQuietly();
                    } finally {
                        inFlight.release();
                    }
                });
            }
            log.info("peer closed the connection");
        } catch (FrameReader.FrameTooLargeException e) {
            log.info("closing: " + e.getMessage());
        } catch (IOException e) {
            log.info("connection ended: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (hosted != null) {
                // Before the workers stop: a Consumer's call waiting on this
                // connection must fail now, not when its wait runs out.
                hosted.close();
            }
            workers.shutdownNow();
            backend.close();
            closeQuietly();
        }
    }

    private static long idOfAnswer(Frame f) {
        if (f instanceof Frame.Ok) {
            return ((Frame.Ok) f).id;
        } else if (f instanceof Frame.Err) {
            return ((Frame.Err) f).id;
        } else if (f instanceof Frame.Chunk) {
            return ((Frame.Chunk) f).id;
        }
        return 0;
    }

    private void closeQuietly() {
        try {
            in.close();
        } catch (IOException ignored) {
            // Already closed by the peer.
        }
        try {
            out.close();
        } catch (IOException ignored) {
            // Already closed by the peer.
        }
    }
}
