package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.Pipe;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Finding 5 of issue 27: a descriptor whose writer never closes it pinned
 * the read_fd worker (and the descriptor) for good. A real OS pipe whose
 * writer stays open (closing its read end from the watchdog wakes the
 * blocked read, as closing a ParcelFileDescriptor does on Android); short
 * limits so that the test is quick.
 */
class ReadFdDeadlineTest {
    private final ExecutorService workers = Executors.newCachedThreadPool();

    @AfterEach
    void stop() {
        workers.shutdownNow();
    }

    /** A backend whose one descriptor is the read end of {@code in}. */
    private static DeviceBackend backendWith(InputStream in, boolean[] closed) {
        FakeBackend fake = new FakeBackend();
        return new DeviceBackend() {
            @Override
            public Hello hello() {
                return fake.hello();
            }

            @Override
            public List<Ops.ServiceInfo> discover() {
                return fake.discover();
            }

            @Override
            public CallResult call(Ops.CallParams p) throws DeviceError, InterruptedException {
                return fake.call(p);
            }

            @Override
            public FdSource takeFd(String handle) {
                return new FdSource() {
                    @Override
                    public InputStream stream() {
                        return in;
                    }

                    @Override
                    public String checkError() {
                        return null;
                    }

                    @Override
                    public void close() throws IOException {
                        closed[0] = true;
                        in.close();
                    }
                };
            }

            @Override
            public void closeFd(String handle) {}

            @Override
            public ResolveResult resolve(Ops.ResolveParams p) throws DeviceError {
                return fake.resolve(p);
            }

            @Override
            public void restartProvider(String pkg) {}

            @Override
            public void close() {}
        };
    }

    private JsonObject readFd(DeviceBackend backend, Dispatcher.ReadLimits limits, List<Frame> frames) throws Exception {
        Dispatcher d = new Dispatcher(backend, workers, null, null, limits);
        d.handle(new Frame.Request(7, "read_fd", new JsonObject()), new Ops.ReadFdParams("fd-1", 1 << 20), frames::add);
        Frame last = frames.get(frames.size() - 1);
        return ((Frame.Ok) last).ok;
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void a_writer_that_never_closes_is_cut_off_after_the_stall_limit() throws Exception {
        Pipe pipe = Pipe.open();
        InputStream reader = Channels.newInputStream(pipe.source());
        OutputStream writer = Channels.newOutputStream(pipe.sink());
        writer.write(new byte[] {1, 2, 3});
        boolean[] closed = {false};
        List<Frame> frames = new CopyOnWriteArrayList<>();
        long start = System.nanoTime();
        JsonObject ok = readFd(backendWith(reader, closed), new Dispatcher.ReadLimits(300, 10_000), frames);
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(closed[0], "the descriptor is closed");
        assertEquals("3", String.valueOf(ok.get("bytes")));
        assertEquals(Boolean.FALSE, ok.get("eof"));
        assertTrue(String.valueOf(ok.get("error")).startsWith("no data for 300 ms"), String.valueOf(ok.get("error")));
        assertTrue(ms < 5_000, ms + " ms");
        writer.close();
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void a_writer_that_trickles_forever_is_cut_off_after_the_total_limit() throws Exception {
        Pipe pipe = Pipe.open();
        InputStream reader = Channels.newInputStream(pipe.source());
        OutputStream writer = Channels.newOutputStream(pipe.sink());
        Thread trickle = new Thread(() -> {
            try {
                while (true) {
                    writer.write(0);
                    Thread.sleep(50);
                }
            } catch (IOException | InterruptedException e) {
                // The reader closed: done.
            }
        });
        trickle.setDaemon(true);
        trickle.start();
        boolean[] closed = {false};
        JsonObject ok = readFd(backendWith(reader, closed), new Dispatcher.ReadLimits(5_000, 600),
                new CopyOnWriteArrayList<>());
        assertTrue(closed[0]);
        assertEquals(Boolean.FALSE, ok.get("eof"));
        assertTrue(String.valueOf(ok.get("error")).startsWith("not read to its end within 600 ms"),
                String.valueOf(ok.get("error")));
        trickle.interrupt();
    }

    @Test
    void a_descriptor_read_to_its_end_is_untouched_by_the_limits() throws Exception {
        Pipe pipe = Pipe.open();
        InputStream reader = Channels.newInputStream(pipe.source());
        OutputStream writer = Channels.newOutputStream(pipe.sink());
        writer.write(new byte[] {9});
        writer.close();
        boolean[] closed = {false};
        JsonObject ok = readFd(backendWith(reader, closed), new Dispatcher.ReadLimits(300, 600),
                new CopyOnWriteArrayList<>());
        assertEquals(Boolean.TRUE, ok.get("eof"));
        assertEquals("null", String.valueOf(ok.get("error")));
        assertFalse(ok.containsKey("writable"));
    }
}
