package com.clawseed.probe.core;

import java.util.Map;

/**
 * Meta-data values as a phone has them. Android compiles each
 * {@code android:value} when the APK is built (aapt2): {@code "1"} becomes
 * the Integer 1, {@code "true"} a Boolean, {@code "1.5"} a Float, and only
 * what is none of these stays a String. The APK keeps no text of a compiled
 * value (unless built with {@code --keep-raw-values}), so {@code "01"} and
 * {@code "1"} are the same Integer on the device: the probe reports the text
 * Android gives it back ({@code meta}) and, for every value that is not a
 * String, the type it was compiled to ({@code meta_types}), so that the host
 * can tell {@code version=1} (an Integer) from {@code versions="1,2"} (a
 * String) and knows which texts are re-printed.
 */
public final class MetaValues {
    private MetaValues() {}

    /** The text of a compiled value, as {@code String.valueOf} prints it. */
    public static String text(Object v) {
        return String.valueOf(v);
    }

    /** The wire name of a value's type: {@code string}, {@code int}, {@code bool}, {@code float}, or its class. */
    public static String type(Object v) {
        if (v instanceof String) {
            return "string";
        } else if (v instanceof Integer) {
            return "int";
        } else if (v instanceof Boolean) {
            return "bool";
        } else if (v instanceof Float) {
            return "float";
        }
        return v.getClass().getName();
    }

    /** Adds one value: its text to {@code meta}, its type to {@code types} unless it is a String. */
    public static void put(String key, Object v, Map<String, String> meta, Map<String, String> types) {
        if (v == null) {
            return;
        }
        meta.put(key, text(v));
        String t = type(v);
        if (!t.equals("string")) {
            types.put(key, t);
        }
    }
}
