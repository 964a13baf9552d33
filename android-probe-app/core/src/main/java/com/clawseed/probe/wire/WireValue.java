package com.clawseed.probe.wire;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * One typed Bundle value of the wire: the type tag is kept exactly (an
 * {@code int} 2 and a {@code long} 2 differ).
 */
public final class WireValue {
    public enum Type {
        NULL("null"), BOOL("bool"), INT("int"), LONG("long"), FLOAT("float"), DOUBLE("double"),
        STRING("string"), INT_ARRAY("int[]"), LONG_ARRAY("long[]"), BOOL_ARRAY("bool[]"),
        DOUBLE_ARRAY("double[]"), STRING_ARRAY("string[]"), STRING_LIST("string_list"), BYTES("bytes"),
        BUNDLE("bundle"), PENDING_INTENT("pending_intent"), FD("fd"), OTHER("other");

        public final String tag;

        Type(String tag) {
            this.tag = tag;
        }

        public static Type ofTag(String tag) {
            for (Type t : values()) {
                if (t.tag.equals(tag)) {
                    return t;
                }
            }
            return null;
        }
    }

    /** A PendingIntent as the device describes it; null fields are unknown. */
    public static final class PendingIntentInfo {
        public final String handle;
        public final String creatorPackage;
        public final Long creatorUid;
        public final Boolean immutable;
        public final Boolean activity;

        public PendingIntentInfo(String handle, String creatorPackage, Long creatorUid, Boolean immutable, Boolean activity) {
            this.handle = Objects.requireNonNull(handle);
            this.creatorPackage = creatorPackage;
            this.creatorUid = creatorUid;
            this.immutable = immutable;
            this.activity = activity;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof PendingIntentInfo)) {
                return false;
            }
            PendingIntentInfo p = (PendingIntentInfo) o;
            return handle.equals(p.handle) && Objects.equals(creatorPackage, p.creatorPackage)
                    && Objects.equals(creatorUid, p.creatorUid) && Objects.equals(immutable, p.immutable)
                    && Objects.equals(activity, p.activity);
        }

        @Override
        public int hashCode() {
            return Objects.hash(handle, creatorPackage, creatorUid, immutable, activity);
        }
    }

    public final Type type;
    /** Boolean, Integer, Long, Float, Double, String, int[], long[], boolean[], double[], List of String, byte[], WireBundle, PendingIntentInfo, or a String (fd handle, other class). */
    private final Object value;

    private WireValue(Type type, Object value) {
        this.type = type;
        this.value = value;
    }

    public static final WireValue NULL = new WireValue(Type.NULL, null);

    public static WireValue ofBool(boolean v) {
        return new WireValue(Type.BOOL, v);
    }

    public static WireValue ofInt(int v) {
        return new WireValue(Type.INT, v);
    }

    public static WireValue ofLong(long v) {
        return new WireValue(Type.LONG, v);
    }

    public static WireValue ofFloat(float v) {
        return new WireValue(Type.FLOAT, v);
    }

    public static WireValue ofDouble(double v) {
        return new WireValue(Type.DOUBLE, v);
    }

    /** A string; it may hold lone surrogates. */
    public static WireValue ofString(String v) {
        return new WireValue(Type.STRING, Objects.requireNonNull(v));
    }

    public static WireValue ofIntArray(int[] v) {
        return new WireValue(Type.INT_ARRAY, v.clone());
    }

    public static WireValue ofLongArray(long[] v) {
        return new WireValue(Type.LONG_ARRAY, v.clone());
    }

    public static WireValue ofBoolArray(boolean[] v) {
        return new WireValue(Type.BOOL_ARRAY, v.clone());
    }

    public static WireValue ofDoubleArray(double[] v) {
        return new WireValue(Type.DOUBLE_ARRAY, v.clone());
    }

    public static WireValue ofStringArray(List<String> v) {
        return new WireValue(Type.STRING_ARRAY, Collections.unmodifiableList(new ArrayList<>(v)));
    }

    public static WireValue ofStringList(List<String> v) {
        return new WireValue(Type.STRING_LIST, Collections.unmodifiableList(new ArrayList<>(v)));
    }

    public static WireValue ofBytes(byte[] v) {
        return new WireValue(Type.BYTES, v.clone());
    }

    public static WireValue ofBundle(WireBundle v) {
        return new WireValue(Type.BUNDLE, Objects.requireNonNull(v));
    }

    public static WireValue ofPendingIntent(PendingIntentInfo v) {
        return new WireValue(Type.PENDING_INTENT, Objects.requireNonNull(v));
    }

    public static WireValue ofFd(String handle) {
        return new WireValue(Type.FD, Objects.requireNonNull(handle));
    }

    public static WireValue ofOther(String className) {
        return new WireValue(Type.OTHER, Objects.requireNonNull(className));
    }

    public boolean asBool() {
        return (Boolean) value;
    }

    public int asInt() {
        return (Integer) value;
    }

    public long asLong() {
        return (Long) value;
    }

    public float asFloat() {
        return (Float) value;
    }

    public double asDouble() {
        return (Double) value;
    }

    /** The string of a STRING, the handle of an FD, the class of an OTHER. */
    public String asString() {
        return (String) value;
    }

    public int[] asIntArray() {
        return ((int[]) value).clone();
    }

    public long[] asLongArray() {
        return ((long[]) value).clone();
    }

    public boolean[] asBoolArray() {
        return ((boolean[]) value).clone();
    }

    public double[] asDoubleArray() {
        return ((double[]) value).clone();
    }

    @SuppressWarnings("unchecked")
    public List<String> asStrings() {
        return Collections.unmodifiableList((List<String>) value);
    }

    public byte[] asBytes() {
        return ((byte[]) value).clone();
    }

    public WireBundle asBundle() {
        return (WireBundle) value;
    }

    public PendingIntentInfo asPendingIntent() {
        return (PendingIntentInfo) value;
    }

    /**
     * Equality as the wire sees it: every NaN alike, -0.0 apart from 0.0
     * (which {@link Double#equals} and {@link Arrays#equals(double[], double[])} already do).
     */
    @Override
    public boolean equals(Object o) {
        if (!(o instanceof WireValue)) {
            return false;
        }
        WireValue w = (WireValue) o;
        if (type != w.type) {
            return false;
        }
        switch (type) {
            case INT_ARRAY:
                return Arrays.equals((int[]) value, (int[]) w.value);
            case LONG_ARRAY:
                return Arrays.equals((long[]) value, (long[]) w.value);
            case BOOL_ARRAY:
                return Arrays.equals((boolean[]) value, (boolean[]) w.value);
            case DOUBLE_ARRAY:
                return Arrays.equals((double[]) value, (double[]) w.value);
            case BYTES:
                return Arrays.equals((byte[]) value, (byte[]) w.value);
            default:
                return Objects.equals(value, w.value);
        }
    }

    @Override
    public int hashCode() {
        return type.hashCode();
    }

    @Override
    public String toString() {
        return type.tag + ":" + (value instanceof byte[] ? Arrays.toString((byte[]) value) : String.valueOf(value));
    }
}
