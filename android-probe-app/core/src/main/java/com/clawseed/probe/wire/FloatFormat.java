package com.clawseed.probe.wire;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * Canonical text of floats and doubles, and exact decimal-to-binary
 * conversion, computed with {@link BigDecimal} so that the result does not
 * depend on the platform's {@code Double.toString} (not shortest before
 * JDK 19, and different again on Android).
 *
 * <p>The rule (see {@code vectors/wire/README.md}): the shortest digits that
 * read back to the same value of the value's own width; between two equally
 * short candidates the one closest to the exact value, then an even last
 * digit; fixed notation for decimal exponents -5..15, scientific otherwise.
 */
public final class FloatFormat {
    private FloatFormat() {}

    private static final BigDecimal HALF = new BigDecimal("0.5");
    private static final BigDecimal DOUBLE_OVERFLOW = new BigDecimal(Double.MAX_VALUE)
            .add(new BigDecimal(Math.ulp(Double.MAX_VALUE)).multiply(HALF));
    private static final BigDecimal FLOAT_OVERFLOW = new BigDecimal((double) Float.MAX_VALUE)
            .add(new BigDecimal((double) Math.ulp(Float.MAX_VALUE)).multiply(HALF));
    private static final BigDecimal DOUBLE_ZERO_LIMIT = new BigDecimal(Double.MIN_VALUE).multiply(HALF);
    private static final BigDecimal FLOAT_ZERO_LIMIT = new BigDecimal((double) Float.MIN_VALUE).multiply(HALF);

    /** The interval of decimals that round to a positive finite value. */
    private static final class Interval {
        final BigDecimal lo;
        final BigDecimal hi;
        /** Round half to even: the bounds belong to a value with an even significand. */
        final boolean inclusive;

        Interval(BigDecimal lo, BigDecimal hi, boolean inclusive) {
            this.lo = lo;
            this.hi = hi;
            this.inclusive = inclusive;
        }

        /** -1 below, 0 inside, +1 above. */
        int position(BigDecimal x) {
            int cl = x.compareTo(lo);
            if (cl < 0 || (cl == 0 && !inclusive)) {
                return -1;
            }
            int ch = x.compareTo(hi);
            if (ch > 0 || (ch == 0 && !inclusive)) {
                return 1;
            }
            return 0;
        }
    }

    private static Interval doubleInterval(double a) {
        BigDecimal exact = new BigDecimal(a);
        BigDecimal lo = exact.add(new BigDecimal(Math.nextDown(a))).multiply(HALF);
        double up = Math.nextUp(a);
        BigDecimal hi = Double.isInfinite(up)
                ? exact.add(new BigDecimal(Math.ulp(a)).multiply(HALF))
                : exact.add(new BigDecimal(up)).multiply(HALF);
        return new Interval(lo, hi, (Double.doubleToRawLongBits(a) & 1) == 0);
    }

    private static Interval floatInterval(float a) {
        BigDecimal exact = new BigDecimal((double) a);
        BigDecimal lo = exact.add(new BigDecimal((double) Math.nextDown(a))).multiply(HALF);
        float up = Math.nextUp(a);
        BigDecimal hi = Float.isInfinite(up)
                ? exact.add(new BigDecimal((double) Math.ulp(a)).multiply(HALF))
                : exact.add(new BigDecimal((double) up)).multiply(HALF);
        return new Interval(lo, hi, (Float.floatToRawIntBits(a) & 1) == 0);
    }

    /** The best candidate with at most {@code p} significant digits, or null. */
    private static BigDecimal candidate(BigDecimal exact, Interval in, int p) {
        BigDecimal down = exact.round(new MathContext(p, RoundingMode.FLOOR));
        BigDecimal up = exact.round(new MathContext(p, RoundingMode.CEILING));
        boolean downOk = in.position(down) == 0;
        boolean upOk = in.position(up) == 0;
        if (downOk && upOk && down.compareTo(up) != 0) {
            int cmp = exact.subtract(down).compareTo(up.subtract(exact));
            if (cmp != 0) {
                return cmp < 0 ? down : up;
            }
            return down.unscaledValue().testBit(0) ? up : down;
        }
        if (downOk) {
            return down;
        }
        return upOk ? up : null;
    }

    /**
     * Shortest digits: having a candidate is monotone in the digit count (a
     * p-digit candidate is also a (p+1)-digit one), so binary search it.
     */
    private static BigDecimal shortest(BigDecimal exact, Interval in, int maxDigits) {
        int lo = 1;
        int hi = maxDigits;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (candidate(exact, in, mid) != null) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        BigDecimal c = candidate(exact, in, lo);
        return c != null ? c : exact;
    }

    public static String doubleText(double v) {
        if (v == 0) {
            return (Double.doubleToRawLongBits(v) < 0) ? "-0.0" : "0.0";
        }
        double a = Math.abs(v);
        return layout(v < 0, shortest(new BigDecimal(a), doubleInterval(a), 17));
    }

    public static String floatText(float v) {
        if (v == 0) {
            return (Float.floatToRawIntBits(v) < 0) ? "-0.0" : "0.0";
        }
        float a = Math.abs(v);
        return layout(v < 0, shortest(new BigDecimal((double) a), floatInterval(a), 9));
    }

    static String layout(boolean negative, BigDecimal value) {
        BigDecimal d = value.stripTrailingZeros();
        String digits = d.unscaledValue().abs().toString();
        int n = digits.length();
        int e = n - 1 - d.scale();
        StringBuilder sb = new StringBuilder(n + 8);
        if (negative) {
            sb.append('-');
        }
        if (e >= -5 && e <= 15) {
            if (e >= n - 1) {
                sb.append(digits);
                for (int i = 0; i < e - (n - 1); i++) {
                    sb.append('0');
                }
                sb.append(".0");
            } else if (e >= 0) {
                sb.append(digits, 0, e + 1).append('.').append(digits, e + 1, n);
            } else {
                sb.append("0.");
                for (int i = 0; i < -e - 1; i++) {
                    sb.append('0');
                }
                sb.append(digits);
            }
        } else {
            sb.append(digits.charAt(0));
            if (n > 1) {
                sb.append('.').append(digits, 1, n);
            }
            sb.append('e').append(e < 0 ? '-' : '+').append(Math.abs(e));
        }
        return sb.toString();
    }

    /** The exact decimal value of a JSON number literal, or null when its exponent is beyond reach. */
    private static BigDecimal exactOf(String literal) {
        try {
            return new BigDecimal(literal).abs();
        } catch (NumberFormatException | ArithmeticException e) {
            return null;
        }
    }

    /**
     * A JSON number literal as the nearest double (ties to even), infinite when
     * it overflows. The platform parser gives a first guess; the exact check
     * corrects it when it is off.
     */
    public static double parseDouble(String literal) {
        boolean negative = literal.startsWith("-");
        double guess = Math.abs(Double.parseDouble(literal));
        BigDecimal exact = exactOf(literal);
        if (exact == null) {
            // An exponent beyond int range: only 0 or infinity are possible.
            return negative ? -guess : guess;
        }
        double a;
        if (exact.compareTo(DOUBLE_OVERFLOW) >= 0) {
            a = Double.POSITIVE_INFINITY;
        } else {
            a = Math.min(guess, Double.MAX_VALUE);
            for (int i = 0; i < 8; i++) {
                int where = a == 0
                        ? (exact.compareTo(DOUBLE_ZERO_LIMIT) <= 0 ? 0 : 1)
                        : doubleInterval(a).position(exact);
                if (where == 0) {
                    break;
                }
                a = where < 0 ? Math.nextDown(a) : Math.nextUp(a);
            }
        }
        return negative ? -a : a;
    }

    /** A JSON number literal as the nearest float, rounded once; infinite when it overflows. */
    public static float parseFloat(String literal) {
        boolean negative = literal.startsWith("-");
        BigDecimal exact = exactOf(literal);
        float a;
        if (exact == null) {
            a = (float) Math.abs(Double.parseDouble(literal));
        } else if (exact.compareTo(FLOAT_OVERFLOW) >= 0) {
            a = Float.POSITIVE_INFINITY;
        } else {
            a = Math.min((float) Math.abs(Double.parseDouble(literal)), Float.MAX_VALUE);
            for (int i = 0; i < 8; i++) {
                int where = a == 0
                        ? (exact.compareTo(FLOAT_ZERO_LIMIT) <= 0 ? 0 : 1)
                        : floatInterval(a).position(exact);
                if (where == 0) {
                    break;
                }
                a = where < 0 ? Math.nextDown(a) : Math.nextUp(a);
            }
        }
        return negative ? -a : a;
    }
}
