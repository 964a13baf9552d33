package com.clawseed.probe;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;

import android.os.ParcelFileDescriptor;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
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
}
