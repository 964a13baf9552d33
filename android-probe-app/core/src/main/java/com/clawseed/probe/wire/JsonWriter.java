package com.clawseed.probe.wire;

import java.io.ByteArrayOutputStream;
import java.util.List;
import java.util.Map;

/** The canonical writer (see {@code vectors/wire/README.md}). */
public final class JsonWriter {
    private JsonWriter() {}

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    public static byte[] toBytes(Object value) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        write(value, out);
        return out.toByteArray();
    }

    public static String toText(Object value) {
        return new String(toBytes(value), java.nio.charset.StandardCharsets.UTF_8);
    }

    public static void write(Object v, ByteArrayOutputStream out) {
        if (Json.isNull(v)) {
            ascii("null", out);
        } else if (v instanceof Boolean) {
            ascii(((Boolean) v) ? "true" : "false", out);
        } else if (v instanceof JsonNumber) {
            ascii(((JsonNumber) v).canonical(), out);
        } else if (v instanceof String) {
            writeString((String) v, out);
        } else if (v instanceof List) {
            out.write('[');
            boolean first = true;
            for (Object item : (List<?>) v) {
                if (!first) {
                    out.write(',');
                }
                first = false;
                write(item, out);
            }
            out.write(']');
        } else if (v instanceof JsonObject) {
            out.write('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((JsonObject) v).entrySet()) {
                if (!first) {
                    out.write(',');
                }
                first = false;
                writeString(e.getKey(), out);
                out.write(':');
                write(e.getValue(), out);
            }
            out.write('}');
        } else {
            throw new IllegalArgumentException("not a JSON value: " + v.getClass().getName());
        }
    }

    private static void ascii(String s, ByteArrayOutputStream out) {
        for (int i = 0; i < s.length(); i++) {
            out.write(s.charAt(i));
        }
    }

    private static void unitEscape(int unit, ByteArrayOutputStream out) {
        out.write('\\');
        out.write('u');
        out.write(HEX[(unit >> 12) & 0xF]);
        out.write(HEX[(unit >> 8) & 0xF]);
        out.write(HEX[(unit >> 4) & 0xF]);
        out.write(HEX[unit & 0xF]);
    }

    static void writeString(String s, ByteArrayOutputStream out) {
        out.write('"');
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    out.write('\\');
                    out.write('"');
                    continue;
                case '\\':
                    out.write('\\');
                    out.write('\\');
                    continue;
                case '\b':
                    out.write('\\');
                    out.write('b');
                    continue;
                case '\f':
                    out.write('\\');
                    out.write('f');
                    continue;
                case '\n':
                    out.write('\\');
                    out.write('n');
                    continue;
                case '\r':
                    out.write('\\');
                    out.write('r');
                    continue;
                case '\t':
                    out.write('\\');
                    out.write('t');
                    continue;
                default:
                    break;
            }
            if (c < 0x20) {
                unitEscape(c, out);
            } else if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                Utf8.encodeCodePoint(Character.toCodePoint(c, s.charAt(i + 1)), out);
                i++;
            } else if (Character.isSurrogate(c)) {
                unitEscape(c, out);
            } else {
                Utf8.encodeCodePoint(c, out);
            }
        }
        out.write('"');
    }
}
