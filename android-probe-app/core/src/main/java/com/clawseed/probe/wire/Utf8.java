package com.clawseed.probe.wire;

import java.io.ByteArrayOutputStream;

/**
 * Strict UTF-8, written out rather than taken from {@code CharsetDecoder}:
 * platform decoders differ on edge cases (encoded surrogates, overlong forms),
 * and both codecs must refuse exactly the same bytes.
 */
final class Utf8 {
    private Utf8() {}

    /** Decodes well-formed UTF-8 (Unicode Table 3-7) or fails with the byte offset. */
    static String decode(byte[] b, int off, int len) throws WireDecodeException {
        StringBuilder sb = new StringBuilder(len);
        int i = off;
        int end = off + len;
        while (i < end) {
            int b0 = b[i] & 0xFF;
            if (b0 < 0x80) {
                sb.append((char) b0);
                i++;
                continue;
            }
            int need;
            int cp;
            int lo = 0x80;
            int hi = 0xBF;
            if (b0 >= 0xC2 && b0 <= 0xDF) {
                need = 1;
                cp = b0 & 0x1F;
            } else if (b0 >= 0xE0 && b0 <= 0xEF) {
                need = 2;
                cp = b0 & 0x0F;
                if (b0 == 0xE0) {
                    lo = 0xA0;
                } else if (b0 == 0xED) {
                    hi = 0x9F; // no surrogates
                }
            } else if (b0 >= 0xF0 && b0 <= 0xF4) {
                need = 3;
                cp = b0 & 0x07;
                if (b0 == 0xF0) {
                    lo = 0x90;
                } else if (b0 == 0xF4) {
                    hi = 0x8F;
                }
            } else {
                throw bad(i - off);
            }
            for (int k = 1; k <= need; k++) {
                if (i + k >= end) {
                    throw bad(i - off);
                }
                int bk = b[i + k] & 0xFF;
                int min = k == 1 ? lo : 0x80;
                int max = k == 1 ? hi : 0xBF;
                if (bk < min || bk > max) {
                    throw bad(i - off);
                }
                cp = (cp << 6) | (bk & 0x3F);
            }
            sb.appendCodePoint(cp);
            i += need + 1;
        }
        return sb.toString();
    }

    private static WireDecodeException bad(int offset) {
        return new WireDecodeException(WireDecodeException.BAD_UTF8, "invalid UTF-8 at byte " + offset);
    }

    /**
     * Encodes a Java string. A lone surrogate cannot be UTF-8; callers escape
     * it first (see {@link JsonWriter}), so here it only appears if a caller
     * forgot, and becomes U+FFFD rather than corrupt output.
     */
    static void encode(CharSequence s, ByteArrayOutputStream out) {
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            int cp = c;
            if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                cp = Character.toCodePoint(c, s.charAt(i + 1));
                i++;
            } else if (Character.isSurrogate(c)) {
                cp = 0xFFFD;
            }
            encodeCodePoint(cp, out);
        }
    }

    static void encodeCodePoint(int cp, ByteArrayOutputStream out) {
        if (cp < 0x80) {
            out.write(cp);
        } else if (cp < 0x800) {
            out.write(0xC0 | (cp >> 6));
            out.write(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out.write(0xE0 | (cp >> 12));
            out.write(0x80 | ((cp >> 6) & 0x3F));
            out.write(0x80 | (cp & 0x3F));
        } else {
            out.write(0xF0 | (cp >> 18));
            out.write(0x80 | ((cp >> 12) & 0x3F));
            out.write(0x80 | ((cp >> 6) & 0x3F));
            out.write(0x80 | (cp & 0x3F));
        }
    }
}
