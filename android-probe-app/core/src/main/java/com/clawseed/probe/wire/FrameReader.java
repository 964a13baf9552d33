package com.clawseed.probe.wire;

import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;

/**
 * Reads lines of at most {@link FrameCodec#MAX_FRAME_BYTES} bytes including
 * the newline, refusing a longer one as soon as the limit is passed, without
 * buffering the rest. After a refusal the stream is unusable (the peer must
 * be disconnected) and every call fails again.
 */
public final class FrameReader {
    /** A frame over the limit; close the connection. */
    public static final class FrameTooLargeException extends IOException {
        private static final long serialVersionUID = 1L;

        FrameTooLargeException(int limit) {
            super("frame is larger than " + limit + " bytes including its newline");
        }
    }

    /** The stream ended inside a frame. */
    public static final class TruncatedFrameException extends IOException {
        private static final long serialVersionUID = 1L;

        TruncatedFrameException(int len) {
            super("connection closed in the middle of a frame (" + len + " bytes without a newline)");
        }
    }

    private final InputStream in;
    private final int limit;
    private final byte[] buf = new byte[64 * 1024];
    private int start;
    private int end;
    private byte[] line = new byte[4096];
    private int lineLen;
    private boolean poisoned;

    public FrameReader(InputStream in) {
        this(in, FrameCodec.MAX_FRAME_BYTES);
    }

    /** A reader with a smaller limit (tests). */
    public FrameReader(InputStream in, int limit) {
        this.in = in;
        this.limit = Math.min(limit, FrameCodec.MAX_FRAME_BYTES);
    }

    /** The next line without its newline, or null at a clean end of stream. */
    public byte[] readLine() throws IOException {
        if (poisoned) {
            throw new FrameTooLargeException(limit);
        }
        lineLen = 0;
        while (true) {
            if (start == end) {
                int n = in.read(buf, 0, buf.length);
                if (n < 0) {
                    if (lineLen == 0) {
                        return null;
                    }
                    throw new TruncatedFrameException(lineLen);
                }
                start = 0;
                end = n;
                continue;
            }
            int nl = -1;
            for (int i = start; i < end; i++) {
                if (buf[i] == '\n') {
                    nl = i;
                    break;
                }
            }
            int take = (nl >= 0 ? nl : end) - start;
            // With its newline still to come, the line reaches at least lineLen + take + 1 bytes.
            if ((long) lineLen + take + 1 > limit) {
                poisoned = true;
                throw new FrameTooLargeException(limit);
            }
            append(take);
            if (nl >= 0) {
                start = nl + 1;
                byte[] out = Arrays.copyOf(line, lineLen);
                if (line.length > (1 << 20)) {
                    line = new byte[4096];
                }
                return out;
            }
            start = end;
        }
    }

    private void append(int n) {
        if (lineLen + n > line.length) {
            int cap = line.length;
            while (cap < lineLen + n) {
                cap = (int) Math.min((long) cap * 2, limit);
            }
            line = Arrays.copyOf(line, cap);
        }
        System.arraycopy(buf, start, line, lineLen, n);
        lineLen += n;
    }
}
