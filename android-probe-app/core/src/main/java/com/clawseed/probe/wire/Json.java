package com.clawseed.probe.wire;

import java.util.List;

/**
 * JSON values as plain Java objects: {@link #NULL}, {@link Boolean},
 * {@link JsonNumber}, {@link String} (which, like the wire, may hold lone
 * surrogates), {@link List} and {@link JsonObject}.
 */
public final class Json {
    private Json() {}

    /** JSON {@code null}; Java {@code null} is never stored in a value. */
    public static final Object NULL = new Object() {
        @Override
        public String toString() {
            return "null";
        }
    };

    public static boolean isNull(Object v) {
        return v == null || v == NULL;
    }

    /** A short description of a value's kind, for error messages. */
    public static String kind(Object v) {
        if (isNull(v)) {
            return "null";
        } else if (v instanceof Boolean) {
            return "a boolean";
        } else if (v instanceof JsonNumber) {
            return "a number";
        } else if (v instanceof String) {
            return hasLoneSurrogate((String) v) ? "a string with a lone surrogate" : "a string";
        } else if (v instanceof List) {
            return "an array";
        } else if (v instanceof JsonObject) {
            return "an object";
        }
        return v.getClass().getName();
    }

    /** Index of the first lone surrogate, or -1. */
    public static int loneSurrogateIndex(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    i++;
                    continue;
                }
                return i;
            }
            if (Character.isLowSurrogate(c)) {
                return i;
            }
        }
        return -1;
    }

    public static boolean hasLoneSurrogate(String s) {
        return loneSurrogateIndex(s) >= 0;
    }

    /** Replaces lone surrogates with U+FFFD, for human-readable text only. */
    public static String sanitize(String s) {
        if (s == null || !hasLoneSurrogate(s)) {
            return s;
        }
        StringBuilder sb = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                sb.append(c).append(s.charAt(++i));
            } else if (Character.isSurrogate(c)) {
                sb.append('\uFFFD');
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }

    /** Describes where a string holds its first lone surrogate. */
    public static String describeLoneSurrogate(String s) {
        int i = loneSurrogateIndex(s);
        if (i < 0) {
            return "no lone surrogate";
        }
        char c = s.charAt(i);
        return String.format("lone %s surrogate U+%04X at UTF-16 index %d",
                Character.isHighSurrogate(c) ? "high" : "low", (int) c, i);
    }
}
