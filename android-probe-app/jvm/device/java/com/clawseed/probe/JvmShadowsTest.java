package com.clawseed.probe;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import android.os.Handler;
import android.os.HandlerThread;
import android.os.ParcelFileDescriptor;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.annotation.Config;

/**
 * What the JVM device's shadows promise, each shown on the case that
 * broke without it (scripts/jvm-device.sh --self-test, run by
 * scripts/jvm-device-check.sh).
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = {JvmShadows.RealPipe.class})
public class JvmShadowsTest {
    /**
     * A reader that starts before the Provider's writer thread gets every
     * byte, then the end: Robolectric's own pipe (a file opened twice) gave
     * this reader nothing, and the harness charged the Provider with a
     * result that did not match its declared size.
     */
    @Test
    public void a_reader_that_starts_before_the_writer_gets_every_byte() throws Exception {
        ParcelFileDescriptor[] pipe = ParcelFileDescriptor.createReliablePipe();
        byte[] bytes = new byte[400_011];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) (i * 31 + 7);
        }
        Thread writer = new Thread(() -> {
            try {
                Thread.sleep(300);
                try (OutputStream out = new ParcelFileDescriptor.AutoCloseOutputStream(pipe[1])) {
                    out.write(bytes);
                }
            } catch (IOException | InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        writer.start();
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        try (InputStream in = new FileInputStream(pipe[0].getFileDescriptor())) {
            // A phone's pipe read end is read-only: the probe's RES-002 check sees that.
            assertEquals(Boolean.FALSE, JvmDevice.accessModeWritable(in));
            byte[] buf = new byte[8192];
            for (int n; (n = in.read(buf)) >= 0; ) {
                got.write(buf, 0, n);
            }
        }
        writer.join(10_000);
        assertArrayEquals(bytes, got.toByteArray());
        pipe[0].close();
    }

    /** Closing the last read end fails a writer blocked on a full pipe, as on a phone (no hang). */
    @Test(timeout = 20_000)
    public void closing_the_read_end_fails_a_blocked_writer() throws Exception {
        ParcelFileDescriptor[] pipe = ParcelFileDescriptor.createPipe();
        Throwable[] failed = new Throwable[1];
        Thread writer = new Thread(() -> {
            try (OutputStream out = new ParcelFileDescriptor.AutoCloseOutputStream(pipe[1])) {
                out.write(new byte[1 << 20]);
            } catch (IOException e) {
                failed[0] = e;
            }
        });
        writer.start();
        Thread.sleep(300);
        pipe[0].close();
        writer.join(15_000);
        assertEquals(false, writer.isAlive());
        assertEquals(true, failed[0] instanceof IOException);
    }

    /** {@code f} opened read-only as the probe opens a result file: what its listener hears goes to {@code q}. */
    private static ParcelFileDescriptor openHeard(File f, Handler handler, LinkedBlockingQueue<Object> q)
            throws IOException {
        return ParcelFileDescriptor.open(f, ParcelFileDescriptor.MODE_READ_ONLY, handler,
                e -> q.add(e == null ? "closed" : e));
    }

    /** What a result file's close listener heard, or "nothing" within the wait. */
    private static Object heard(LinkedBlockingQueue<Object> q, long ms) throws InterruptedException {
        Object o = q.poll(ms, TimeUnit.MILLISECONDS);
        return o == null ? "nothing" : o;
    }

    /**
     * A result file's close listener (the probe's {@code fd_closed}) hears
     * the copy Binder handed the caller, never the opener's own: under
     * Robolectric's own shadow the probe's silent release of its copy was
     * heard as the Consumer's close, so a Consumer that never closed its
     * descriptor passed CFILE-006.
     */
    @Test(timeout = 30_000)
    public void a_result_files_listener_hears_the_callers_copy_not_the_openers() throws Exception {
        HandlerThread t = new HandlerThread("close-listener");
        t.start();
        Handler handler = new Handler(t.getLooper());
        File f = File.createTempFile("result-", ".bin");
        Files.write(f.toPath(), new byte[] {1, 2, 3});
        LinkedBlockingQueue<Object> q = new LinkedBlockingQueue<>();
        ParcelFileDescriptor own = openHeard(f, handler, q);
        ParcelFileDescriptor callers = BinderRules.dup(own);
        // The probe lets go of its own copy: the listener hears nothing.
        own.close();
        assertEquals("nothing", heard(q, 500));
        // The caller reads its copy, then closes it: heard once, as a close.
        try (InputStream in = new FileInputStream(callers.getFileDescriptor())) {
            assertEquals(1, in.read());
        }
        callers.close();
        assertEquals("closed", heard(q, 10_000));
        assertEquals("nothing", heard(q, 300));
        t.quitSafely();
        assertTrue(f.delete());
    }

    /** Taking the raw descriptor of the caller's copy is heard as detached, as on a phone. */
    @Test(timeout = 30_000)
    public void a_callers_detached_copy_is_heard_as_detached() throws Exception {
        HandlerThread t = new HandlerThread("close-listener");
        t.start();
        File f = File.createTempFile("result-", ".bin");
        LinkedBlockingQueue<Object> q = new LinkedBlockingQueue<>();
        ParcelFileDescriptor callers = BinderRules.dup(openHeard(f, new Handler(t.getLooper()), q));
        int raw = callers.detachFd();
        assertTrue(raw >= 0);
        Object got = heard(q, 10_000);
        assertTrue(String.valueOf(got), got instanceof ParcelFileDescriptor.FileDescriptorDetachedException);
        assertEquals(com.clawseed.probe.core.FdClose.DETACHED,
                com.clawseed.probe.core.FdClose.of((java.io.IOException) got).how);
        assertNull(q.poll(300, TimeUnit.MILLISECONDS));
        t.quitSafely();
        assertTrue(f.delete());
    }
}
