package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.JsonWriter;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The result descriptor of an {@code fd_data} reply as a result file, with
 * a fake descriptor factory whose Consumer-side close the test triggers:
 * the {@code fd_closed} event (once, with the call's id and how), nothing
 * once the hosting connection has closed, the probe's own copy let go of
 * after the answer, everything freed at the lifetime bound, and
 * {@code fd_endless} still a pipe that reports nothing.
 */
class ResultFileTest {
    static final long NOW = HostedProviderTest.NOW;
    private static final String FD_DATA = "{\"call\":\"ID\",\"result\":null,\"fd_data\":\"eyJvayI6dHJ1ZX0=\"}";

    /** A result file whose close is played by the test: {@link #close} is the Consumer's. */
    static final class FakeFile implements HostedProvider.ResultFile<InputStream> {
        /** What the Consumer reads: the bytes, as the read-only file holds them. */
        final InputStream stream;
        final byte[] data;
        final HostedProvider.CloseListener listener;
        final AtomicInteger releasedOwn = new AtomicInteger();
        final AtomicInteger disposed = new AtomicInteger();
        final CountDownLatch released = new CountDownLatch(1);
        final CountDownLatch freed = new CountDownLatch(1);

        FakeFile(byte[] data, HostedProvider.CloseListener listener) {
            this.stream = new java.io.ByteArrayInputStream(data);
            this.data = data;
            this.listener = listener;
        }

        @Override
        public InputStream descriptor() {
            return stream;
        }

        @Override
        public void releaseOwn() {
            releasedOwn.incrementAndGet();
            released.countDown();
        }

        @Override
        public void dispose() {
            disposed.incrementAndGet();
            freed.countDown();
        }

        /** The Consumer let go of it, as the descriptor's close listener would hear. */
        void close(FdClose how) {
            listener.closed(how);
        }
    }

    static final class FakeFiles implements HostedProvider.ResultFiles<InputStream> {
        final List<FakeFile> opened = Collections.synchronizedList(new ArrayList<>());

        @Override
        public HostedProvider.ResultFile<InputStream> open(byte[] data, HostedProvider.CloseListener listener) {
            FakeFile f = new FakeFile(data, listener);
            opened.add(f);
            return f;
        }
    }

    private final FakeFiles files = new FakeFiles();
    private final List<HostedProviderTest.NioPipe> pipes = Collections.synchronizedList(new ArrayList<>());
    private HostedTesting t;

    private HostedProvider.Pipes<InputStream> pipes() {
        return () -> {
            HostedProviderTest.NioPipe p = new HostedProviderTest.NioPipe();
            pipes.add(p);
            return p;
        };
    }

    private HostedTesting start(HostedProvider.Limits limits) throws Exception {
        HostedProvider h = new HostedProvider(HostedProviderTest.hostable(), (own, foreign) -> { }, limits, () -> NOW);
        t = new HostedTesting(h);
        t.conn.host(new com.clawseed.probe.wire.Ops.HostProviderParams(HostedProviderTest.AUTHORITY,
                HostedProviderTest.meta("com.clawseed.tools.version", "1", "com.clawseed.tools.versions", "1,2")));
        return t;
    }

    @AfterEach
    void close() {
        if (t != null) {
            t.conn.close();
        }
    }

    /** Opens the descriptor of an {@code fd_data} answer and returns its fake file. */
    private FakeFile openData(HostedProvider.Answer a) throws IOException {
        InputStream d = t.hosting.openFd(a, pipes(), files);
        FakeFile f = files.opened.get(files.opened.size() - 1);
        assertTrue(f.stream == d, "the file's descriptor is the result's");
        return f;
    }

    /** No file is held any more: its slot is given back just after its dispose. */
    private void awaitNoneHeld() throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (t.hosting.heldFiles() != 0 && System.nanoTime() < until) {
            Thread.sleep(5);
        }
        assertEquals(0, t.hosting.heldFiles());
    }

    /** Nothing more is queued for the host within a short wait. */
    private void noMoreEvents() throws InterruptedException {
        Frame f = t.frames.poll(300, TimeUnit.MILLISECONDS);
        assertNull(f, () -> "unexpected " + JsonWriter.toText(((Frame.Event) f).fields));
    }

    @Test
    void theConsumersCloseIsReportedOnceWithTheCallAndHow() throws Exception {
        start(HostedProviderTest.fast());
        HostedProvider.Answer a = t.answered(FD_DATA);
        assertEquals("c-1", a.call);
        FakeFile f = openData(a);
        assertArrayEquals("{\"ok\":true}".getBytes(StandardCharsets.UTF_8), f.data);
        assertTrue(pipes.isEmpty(), "fd_data is a file, not a pipe");
        assertEquals(1, t.hosting.heldFiles());
        // The probe lets go of its own copy after the answer (50 ms here),
        // which is not the Consumer's close: nothing is reported, nothing freed.
        assertTrue(f.released.await(5, TimeUnit.SECONDS));
        noMoreEvents();
        assertEquals(0, f.disposed.get());

        f.close(FdClose.closed());
        Frame.Event e = t.event("fd_closed");
        assertEquals("{\"call\":\"c-1\",\"how\":\"closed\",\"now_ms\":" + NOW + "}", JsonWriter.toText(e.fields));
        assertTrue(f.freed.await(5, TimeUnit.SECONDS), "the file is freed once closed");
        awaitNoneHeld();
        // At most once per call, whatever is heard after.
        f.close(FdClose.of(FdClose.DEAD, null));
        f.close(FdClose.closed());
        noMoreEvents();
        assertEquals(1, f.disposed.get());
        assertEquals(1, f.releasedOwn.get());
    }

    @Test
    void eachHowIsReportedAsHeardAndAnErrorsMessageIsBounded() throws Exception {
        start(HostedProviderTest.fast());
        String longMessage = "x".repeat(FdClose.MAX_MESSAGE_CHARS + 100);
        List<FdClose> hows = List.of(FdClose.of(FdClose.DETACHED, null), FdClose.of(FdClose.LEAKED, null),
                FdClose.of(FdClose.DEAD, null), FdClose.of(FdClose.ERROR, longMessage));
        List<String> calls = new ArrayList<>();
        for (FdClose how : hows) {
            HostedProvider.Answer a = t.answered(FD_DATA);
            calls.add(a.call);
            openData(a).close(how);
            Frame.Event e = t.event("fd_closed");
            assertEquals(a.call, e.fields.get("call"));
            assertEquals(how.how, e.fields.get("how"));
            if (how.how.equals(FdClose.ERROR)) {
                assertEquals("x".repeat(FdClose.MAX_MESSAGE_CHARS), e.fields.get("message"));
            } else {
                assertFalse(e.fields.containsKey("message"), JsonWriter.toText(e.fields));
            }
        }
        assertEquals(List.of("c-1", "c-2", "c-3", "c-4"), calls, "each call's own id");
    }

    @Test
    void nothingIsSentOnceTheHostingConnectionClosed() throws Exception {
        start(HostedProviderTest.fast());
        FakeFile f = openData(t.answered(FD_DATA));
        t.conn.close();
        f.close(FdClose.closed());
        assertTrue(f.freed.await(5, TimeUnit.SECONDS), "its file is freed all the same");
        awaitNoneHeld();
        noMoreEvents();
    }

    @Test
    void aFileNobodyClosesIsFreedAtTheBoundAndNeverReported() throws Exception {
        start(HostedProviderTest.fast().fdDeadlineMs(300));
        FakeFile f = openData(t.answered(FD_DATA));
        long t0 = System.nanoTime();
        assertTrue(f.freed.await(5, TimeUnit.SECONDS), "freed at the bound");
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 200, "freed after " + ms + " ms, before the bound");
        assertEquals(1, f.releasedOwn.get(), "its own copy was let go of after the answer");
        awaitNoneHeld();
        // A close heard after the bound is not reported.
        f.close(FdClose.closed());
        noMoreEvents();
        assertEquals(1, f.disposed.get());
    }

    @Test
    void resultFilesHeldAtOnceAreBounded() throws Exception {
        start(HostedProviderTest.fast().maxFdFiles(2));
        HostedProvider.Answer a = t.answered(FD_DATA);
        FakeFile first = openData(a);
        openData(a);
        IOException e = assertThrows(IOException.class, () -> t.hosting.openFd(a, pipes(), files));
        assertTrue(e.getMessage().contains("at most 2"), e.getMessage());
        first.close(FdClose.closed());
        t.event("fd_closed");
        assertNotNull(openData(a), "a slot comes back once a file is closed");
    }

    @Test
    void aFactoryThatFailsGivesItsSlotBack() throws Exception {
        start(HostedProviderTest.fast().maxFdFiles(1));
        HostedProvider.Answer a = t.answered(FD_DATA);
        HostedProvider.ResultFiles<InputStream> broken = (data, listener) -> {
            throw new IOException("disk full");
        };
        assertThrows(IOException.class, () -> t.hosting.openFd(a, pipes(), broken));
        awaitNoneHeld();
        assertNotNull(openData(a));
    }

    @Test
    void anEndlessDescriptorIsStillAPipeAndItsCloseIsNotReported() throws Exception {
        start(HostedProviderTest.fast());
        HostedProvider.Answer a = t.answered("{\"call\":\"ID\",\"result\":null,\"fd_endless\":3}");
        InputStream in = t.hosting.openFd(a, pipes(), files);
        assertTrue(files.opened.isEmpty(), "no result file for fd_endless");
        assertEquals(1, pipes.size());
        byte[] buf = new byte[1000];
        int got = 0;
        while (got < buf.length) {
            int n = in.read(buf, got, buf.length - got);
            assertTrue(n > 0);
            got += n;
        }
        assertEquals(3, buf[999]);
        in.close();
        assertTrue(pipes.get(0).closedLatch.await(5, TimeUnit.SECONDS), "the writer stops once the reader is gone");
        noMoreEvents();
    }

    @Test
    void anAnswerWithoutADescriptorOpensNone() throws Exception {
        start(HostedProviderTest.fast());
        HostedProvider.Answer a = t.answered("{\"call\":\"ID\",\"result\":null}");
        assertNull(a.fd);
        assertThrows(IllegalArgumentException.class, () -> t.hosting.openFd(a, pipes(), files));
    }
}
