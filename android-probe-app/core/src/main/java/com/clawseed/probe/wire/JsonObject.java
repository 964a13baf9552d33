package com.clawseed.probe.wire;

import java.util.Comparator;
import java.util.Map;
import java.util.TreeMap;

/**
 * A JSON object whose members iterate in canonical order: by Unicode code
 * point, which is not {@link String#compareTo} (that compares UTF-16 units
 * and puts U+1F600 before U+FFFD).
 */
public final class JsonObject extends TreeMap<String, Object> {
    private static final long serialVersionUID = 1L;

    /** Code point order, the same as comparing UTF-8 bytes. */
    public static final Comparator<String> CODE_POINT_ORDER = (a, b) -> {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    };

    public JsonObject() {
        super(CODE_POINT_ORDER);
    }

    public JsonObject(Map<String, ?> m) {
        super(CODE_POINT_ORDER);
        putAll(m);
    }

    /** Fluent put, for building payloads. */
    public JsonObject with(String key, Object value) {
        put(key, value == null ? Json.NULL : value);
        return this;
    }
}
