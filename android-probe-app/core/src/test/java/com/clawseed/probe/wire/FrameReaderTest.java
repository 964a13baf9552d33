package com.clawseed.probe.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class FrameReaderTest {
    /** Hands out at most {@code step} bytes per read, and counts them. */
    static final class Trickle extends InputStream {
        final InputStream in;
        final int step;
        long pulled;

        Trickle(InputStream in, int step) {
            this.in = in;
            this.step = step;
        }

        @Override
        public int read() throws IOException {
            int b = in.read();
            if (b >= 0) {
                pulled++;
            }
            return b;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            int n = in.read(b, off, Math.min(len, step));
            if (n > 0) {
                pulled += n;
            }
            return n;
        }
    }

    /** An endless stream of one byte. */
    static final class Endless extends InputStream {
        long pulled;

        @Override
        public int read() {
            pulled++;
            return 'x';
        }

        @Override
        public int read(byte[] b, int off, int len) {
            java.util.Arrays.fill(b, off, off + len, (byte) 'x');
            pulled += len;
            return len;
        }
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void splitsLinesWhateverTheChunking() throws IOException {
        for (int step = 1; step < 9; step++) {
            FrameReader r = new FrameReader(new Trickle(new ByteArrayInputStream(bytes("ab\n\ncde\n")), step));
            assertArrayEquals(bytes("ab"), r.readLine());
            assertArrayEquals(new byte[0], r.readLine());
            assertArrayEquals(bytes("cde"), r.readLine());
            assertNull(r.readLine());
        }
    }

    @Test
    void truncatedFrameIsReported() {
        FrameReader r = new FrameReader(new ByteArrayInputStream(bytes("{\"id\":1")));
        assertThrows(FrameReader.TruncatedFrameException.class, r::readLine);
    }

    @Test
    void limitIncludesTheNewlineAndPoisons() throws IOException {
        FrameReader r = new FrameReader(new ByteArrayInputStream(bytes("abcd\nabcde\nok\n")), 5);
        assertArrayEquals(bytes("abcd"), r.readLine());
        assertThrows(FrameReader.FrameTooLargeException.class, r::readLine);
        assertThrows(FrameReader.FrameTooLargeException.class, r::readLine);
    }

    @Test
    void oversizedFrameIsRefusedWithoutReadingItAll() {
        Endless endless = new Endless();
        FrameReader r = new FrameReader(endless);
        assertThrows(FrameReader.FrameTooLargeException.class, r::readLine);
        assertTrue(endless.pulled <= FrameCodec.MAX_FRAME_BYTES + 64 * 1024, "pulled " + endless.pulled);
    }

    @Test
    void largestFrameIsAccepted() throws IOException {
        byte[] data = new byte[FrameCodec.MAX_FRAME_BYTES + 3];
        java.util.Arrays.fill(data, (byte) ' ');
        data[FrameCodec.MAX_FRAME_BYTES - 3] = '{';
        data[FrameCodec.MAX_FRAME_BYTES - 2] = '}';
        data[FrameCodec.MAX_FRAME_BYTES - 1] = '\n';
        data[FrameCodec.MAX_FRAME_BYTES] = '{';
        data[FrameCodec.MAX_FRAME_BYTES + 1] = '}';
        data[FrameCodec.MAX_FRAME_BYTES + 2] = '\n';
        FrameReader r = new FrameReader(new ByteArrayInputStream(data));
        assertEquals(FrameCodec.MAX_FRAME_BYTES - 1, r.readLine().length);
        assertArrayEquals(bytes("{}"), r.readLine());
    }
}
