package com.clawseed.probe.wire;

import java.math.BigInteger;

/**
 * A JSON number. An integer literal within {@code -2^63 .. 2^64-1} stays exact;
 * any other number is a double, as in the Rust codec. The literal text is
 * kept so that a {@code float} is rounded once, from the decimal text.
 */
public final class JsonNumber {
    static final BigInteger MIN_I64 = BigInteger.valueOf(Long.MIN_VALUE);
    static final BigInteger MAX_U64 = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

    /** Exact integer, or null for a double. */
    private final BigInteger integer;
    private final double doubleValue;
    /** The decimal literal this number was read from, if any. */
    private final String literal;
    /** An integer literal outside the exact range. */
    private final boolean bigInteger;
    /** Written with the shortest digits of a 32-bit float. */
    private final boolean single;
    private final float floatValue;

    private JsonNumber(BigInteger integer, double d, String literal, boolean bigInteger, boolean single, float f) {
        this.integer = integer;
        this.doubleValue = d;
        this.literal = literal;
        this.bigInteger = bigInteger;
        this.single = single;
        this.floatValue = f;
    }

    public static JsonNumber of(long v) {
        return new JsonNumber(BigInteger.valueOf(v), 0, null, false, false, 0);
    }

    public static JsonNumber ofUnsigned(long v) {
        BigInteger b = BigInteger.valueOf(v);
        if (v < 0) {
            b = b.add(BigInteger.ONE.shiftLeft(64));
        }
        return new JsonNumber(b, 0, null, false, false, 0);
    }

    /** A finite double. */
    public static JsonNumber ofDouble(double v) {
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            throw new IllegalArgumentException("JSON numbers are finite");
        }
        return new JsonNumber(null, v, null, false, false, 0);
    }

    /** A finite float, written with its own shortest digits. */
    public static JsonNumber ofFloat(float v) {
        if (Float.isNaN(v) || Float.isInfinite(v)) {
            throw new IllegalArgumentException("JSON numbers are finite");
        }
        return new JsonNumber(null, v, null, false, true, v);
    }

    /** From a literal that matched the JSON number grammar. */
    static JsonNumber parse(String text, boolean integral, int offset) throws WireDecodeException {
        if (integral) {
            BigInteger b = new BigInteger(text);
            if (b.compareTo(MIN_I64) >= 0 && b.compareTo(MAX_U64) <= 0) {
                return new JsonNumber(b, 0, null, false, false, 0);
            }
        }
        double d = FloatFormat.parseDouble(text);
        if (Double.isInfinite(d)) {
            throw new WireDecodeException(WireDecodeException.OUT_OF_RANGE,
                    "at byte " + offset + ": expected a number within the range of a double, found "
                            + (text.length() > 40 ? text.substring(0, 40) : text) + " (out of range)");
        }
        return new JsonNumber(null, d, text, integral, false, 0);
    }

    /** Why a number does not fit where it was found. */
    public enum Mismatch { NOT_INTEGER, OUT_OF_RANGE }

    /** The exact integer, or null with {@link #integerMismatch()} saying why. */
    public BigInteger integerValue() {
        return integer;
    }

    public Mismatch integerMismatch() {
        if (integer != null) {
            return null;
        }
        return bigInteger ? Mismatch.OUT_OF_RANGE : Mismatch.NOT_INTEGER;
    }

    public double doubleValue() {
        if (integer != null) {
            return FloatFormat.parseDouble(integer.toString());
        }
        return doubleValue;
    }

    /** The value as a float rounded once from the literal; infinite when it overflows. */
    public float floatValue() {
        if (single) {
            return floatValue;
        }
        if (integer != null) {
            return FloatFormat.parseFloat(integer.toString());
        }
        if (literal != null) {
            return FloatFormat.parseFloat(literal);
        }
        return (float) doubleValue;
    }

    /** The canonical text of this number. */
    public String canonical() {
        if (integer != null) {
            return integer.toString();
        }
        return single ? FloatFormat.floatText(floatValue) : FloatFormat.doubleText(doubleValue);
    }

    @Override
    public String toString() {
        return canonical();
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof JsonNumber)) {
            return false;
        }
        JsonNumber n = (JsonNumber) o;
        if ((integer == null) != (n.integer == null)) {
            return false;
        }
        return canonical().equals(n.canonical());
    }

    @Override
    public int hashCode() {
        return canonical().hashCode();
    }
}
