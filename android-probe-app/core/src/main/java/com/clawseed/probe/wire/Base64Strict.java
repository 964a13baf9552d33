package com.clawseed.probe.wire;

/**
 * RFC 4648 §4 base64 with padding, decoded strictly (padding required,
 * trailing bits zero, nothing outside the alphabet), exactly like the Rust
 * codec. {@code java.util.Base64} accepts missing padding, and Android's
 * {@code android.util.Base64} accepts whitespace, so neither is used.
 */
public final class Base64Strict {
    private Base64Strict() {}

    private static final char[] ALPHABET =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".toCharArray();
    private static final int[] VALUES = new int[128];

    static {
        java.util.Arrays.fill(VALUES, -1);
        for (int i = 0; i < ALPHABET.length; i++) {
            VALUES[ALPHABET[i]] = i;
        }
    }

    public static String encode(byte[] data) {
        StringBuilder sb = new StringBuilder((data.length + 2) / 3 * 4);
        int i = 0;
        for (; i + 3 <= data.length; i += 3) {
            int n = ((data[i] & 0xFF) << 16) | ((data[i + 1] & 0xFF) << 8) | (data[i + 2] & 0xFF);
            sb.append(ALPHABET[n >> 18]).append(ALPHABET[(n >> 12) & 63])
                    .append(ALPHABET[(n >> 6) & 63]).append(ALPHABET[n & 63]);
        }
        int rest = data.length - i;
        if (rest == 1) {
            int n = (data[i] & 0xFF) << 16;
            sb.append(ALPHABET[n >> 18]).append(ALPHABET[(n >> 12) & 63]).append("==");
        } else if (rest == 2) {
            int n = ((data[i] & 0xFF) << 16) | ((data[i + 1] & 0xFF) << 8);
            sb.append(ALPHABET[n >> 18]).append(ALPHABET[(n >> 12) & 63]).append(ALPHABET[(n >> 6) & 63]).append('=');
        }
        return sb.toString();
    }

    /** Decodes canonical base64; the message says what is wrong. */
    public static byte[] decode(String s) throws IllegalArgumentException {
        int len = s.length();
        if (len % 4 != 0) {
            throw new IllegalArgumentException("length " + len + " is not a multiple of 4");
        }
        int pad = 0;
        if (len > 0 && s.charAt(len - 1) == '=') {
            pad = (len > 1 && s.charAt(len - 2) == '=') ? 2 : 1;
        }
        byte[] out = new byte[len / 4 * 3 - pad];
        int o = 0;
        for (int i = 0; i < len; i += 4) {
            boolean last = i + 4 == len;
            int n = 0;
            for (int k = 0; k < 4; k++) {
                char c = s.charAt(i + k);
                int v;
                if (c == '=' && last && k >= 4 - pad) {
                    v = 0;
                } else if (c < 128 && VALUES[c] >= 0) {
                    v = VALUES[c];
                } else {
                    throw new IllegalArgumentException(String.format("invalid character U+%04X at offset %d", (int) c, i + k));
                }
                n = (n << 6) | v;
            }
            if (last && pad == 2 && (n & 0xFFFF) != 0) {
                throw new IllegalArgumentException("non-zero trailing bits");
            }
            if (last && pad == 1 && (n & 0xFF) != 0) {
                throw new IllegalArgumentException("non-zero trailing bits");
            }
            out[o++] = (byte) (n >> 16);
            if (!(last && pad == 2)) {
                out[o++] = (byte) (n >> 8);
            }
            if (!(last && pad >= 1)) {
                out[o++] = (byte) n;
            }
        }
        return out;
    }
}
