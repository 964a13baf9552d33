package com.clawseed.probe.wire;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Typed Bundles on the wire: {@code {"key": {"t": tag, "v": value}}}. NaN and
 * infinities travel as the strings "NaN", "Infinity", "-Infinity".
 */
public final class BundleCodec {
    private BundleCodec() {}

    /** Deepest nesting of Bundles accepted; a top-level Bundle is level 1. */
    public static final int MAX_DEPTH = 32;

    private static final String DOUBLE = "a double (number, or \"NaN\", \"Infinity\", \"-Infinity\")";
    private static final String FLOAT = "a float (number, or \"NaN\", \"Infinity\", \"-Infinity\")";

    // Encoding

    public static JsonObject toJson(WireBundle b) {
        JsonObject m = new JsonObject();
        for (Map.Entry<String, WireValue> e : b.entrySet()) {
            m.put(e.getKey(), valueToJson(e.getValue()));
        }
        return m;
    }

    /** A Bundle, or JSON null for none. */
    public static Object toJsonOrNull(WireBundle b) {
        return b == null ? Json.NULL : toJson(b);
    }

    private static Object doubleJson(double d) {
        if (Double.isNaN(d)) {
            return "NaN";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "Infinity" : "-Infinity";
        }
        return JsonNumber.ofDouble(d);
    }

    private static Object floatJson(float f) {
        if (Float.isNaN(f)) {
            return "NaN";
        }
        if (Float.isInfinite(f)) {
            return f > 0 ? "Infinity" : "-Infinity";
        }
        return JsonNumber.ofFloat(f);
    }

    public static JsonObject valueToJson(WireValue w) {
        Object v;
        switch (w.type) {
            case NULL:
                v = Json.NULL;
                break;
            case BOOL:
                v = w.asBool();
                break;
            case INT:
                v = JsonNumber.of(w.asInt());
                break;
            case LONG:
                v = JsonNumber.of(w.asLong());
                break;
            case FLOAT:
                v = floatJson(w.asFloat());
                break;
            case DOUBLE:
                v = doubleJson(w.asDouble());
                break;
            case STRING:
                v = w.asString();
                break;
            case INT_ARRAY: {
                List<Object> a = new ArrayList<>();
                for (int x : w.asIntArray()) {
                    a.add(JsonNumber.of(x));
                }
                v = a;
                break;
            }
            case LONG_ARRAY: {
                List<Object> a = new ArrayList<>();
                for (long x : w.asLongArray()) {
                    a.add(JsonNumber.of(x));
                }
                v = a;
                break;
            }
            case BOOL_ARRAY: {
                List<Object> a = new ArrayList<>();
                for (boolean x : w.asBoolArray()) {
                    a.add(x);
                }
                v = a;
                break;
            }
            case DOUBLE_ARRAY: {
                List<Object> a = new ArrayList<>();
                for (double x : w.asDoubleArray()) {
                    a.add(doubleJson(x));
                }
                v = a;
                break;
            }
            case STRING_ARRAY:
            case STRING_LIST:
                v = new ArrayList<Object>(w.asStrings());
                break;
            case BYTES:
                v = Base64Strict.encode(w.asBytes());
                break;
            case BUNDLE:
                v = toJson(w.asBundle());
                break;
            case PENDING_INTENT: {
                WireValue.PendingIntentInfo pi = w.asPendingIntent();
                v = new JsonObject()
                        .with("handle", pi.handle)
                        .with("creator_package", pi.creatorPackage)
                        .with("creator_uid", pi.creatorUid == null ? null : JsonNumber.of(pi.creatorUid))
                        .with("immutable", pi.immutable)
                        .with("activity", pi.activity);
                break;
            }
            case FD:
                v = new JsonObject().with("handle", w.asString());
                break;
            case OTHER:
                v = new JsonObject().with("class", w.asString());
                break;
            default:
                throw new IllegalStateException(w.type.tag);
        }
        return new JsonObject().with("t", w.type.tag).with("v", v);
    }

    // Decoding

    public static WireBundle fromJson(Object json, String path) throws WireDecodeException {
        return bundleAt(json, path, 1);
    }

    /** A Bundle member that may be null or absent. */
    public static WireBundle optBundle(Fields f, String key) throws WireDecodeException {
        Object v = f.opt(key);
        return v == null ? null : fromJson(v, Fields.child(f.path, key));
    }

    private static WireBundle bundleAt(Object json, String path, int depth) throws WireDecodeException {
        if (depth > MAX_DEPTH) {
            throw new WireDecodeException(WireDecodeException.TOO_DEEP,
                    "nesting deeper than " + MAX_DEPTH + " levels at " + Fields.at(path));
        }
        JsonObject map = Fields.object(json, path);
        WireBundle b = new WireBundle();
        for (Map.Entry<String, Object> e : map.entrySet()) {
            b.put(e.getKey(), valueAt(e.getValue(), Fields.child(path, e.getKey()), depth));
        }
        return b;
    }

    private static double doubleOf(Object v, String path, String expected) throws WireDecodeException {
        if (v instanceof JsonNumber) {
            return ((JsonNumber) v).doubleValue();
        }
        if (v instanceof String) {
            switch ((String) v) {
                case "NaN":
                    return Double.NaN;
                case "Infinity":
                    return Double.POSITIVE_INFINITY;
                case "-Infinity":
                    return Double.NEGATIVE_INFINITY;
                default:
                    throw new WireDecodeException(WireDecodeException.BAD_VALUE, "at " + Fields.at(path)
                            + ": expected " + expected + ", found the string \"" + Json.sanitize((String) v) + "\"");
            }
        }
        throw Fields.wrongType(path, expected, v);
    }

    private static float floatOf(Object v, String path) throws WireDecodeException {
        if (v instanceof JsonNumber) {
            float f = ((JsonNumber) v).floatValue();
            if (Float.isInfinite(f)) {
                throw Fields.outOfRange(path, "a float", ((JsonNumber) v).canonical());
            }
            return f;
        }
        return (float) doubleOf(v, path, FLOAT);
    }

    private static WireValue valueAt(Object entry, String path, int depth) throws WireDecodeException {
        Fields f = new Fields(Fields.object(entry, path), path);
        String tag = f.string("t");
        WireValue.Type type = WireValue.Type.ofTag(tag);
        if (type == null) {
            throw new WireDecodeException(WireDecodeException.BAD_TYPE_TAG,
                    "at " + Fields.at(Fields.child(path, "t")) + ": unknown Bundle type tag \"" + tag + "\"");
        }
        Object v = f.req("v", "the value `v`");
        String vp = Fields.child(path, "v");
        switch (type) {
            case NULL:
                if (!Json.isNull(v)) {
                    throw Fields.wrongType(vp, "null", v);
                }
                return WireValue.NULL;
            case BOOL:
                return WireValue.ofBool(Fields.bool(v, vp));
            case INT:
                return WireValue.ofInt(Fields.int32(v, vp));
            case LONG:
                return WireValue.ofLong(Fields.int64(v, vp));
            case FLOAT:
                return WireValue.ofFloat(floatOf(v, vp));
            case DOUBLE:
                return WireValue.ofDouble(doubleOf(v, vp, DOUBLE));
            case STRING:
                if (!(v instanceof String)) {
                    throw Fields.wrongType(vp, "a string", v);
                }
                return WireValue.ofString((String) v);
            case INT_ARRAY: {
                List<Object> items = Fields.array(v, vp);
                int[] out = new int[items.size()];
                for (int i = 0; i < out.length; i++) {
                    out[i] = Fields.int32(items.get(i), vp + "/" + i);
                }
                return WireValue.ofIntArray(out);
            }
            case LONG_ARRAY: {
                List<Object> items = Fields.array(v, vp);
                long[] out = new long[items.size()];
                for (int i = 0; i < out.length; i++) {
                    out[i] = Fields.int64(items.get(i), vp + "/" + i);
                }
                return WireValue.ofLongArray(out);
            }
            case BOOL_ARRAY: {
                List<Object> items = Fields.array(v, vp);
                boolean[] out = new boolean[items.size()];
                for (int i = 0; i < out.length; i++) {
                    out[i] = Fields.bool(items.get(i), vp + "/" + i);
                }
                return WireValue.ofBoolArray(out);
            }
            case DOUBLE_ARRAY: {
                List<Object> items = Fields.array(v, vp);
                double[] out = new double[items.size()];
                for (int i = 0; i < out.length; i++) {
                    out[i] = doubleOf(items.get(i), vp + "/" + i, DOUBLE);
                }
                return WireValue.ofDoubleArray(out);
            }
            case STRING_ARRAY:
                return WireValue.ofStringArray(Fields.strings(v, vp));
            case STRING_LIST:
                return WireValue.ofStringList(Fields.strings(v, vp));
            case BYTES:
                return WireValue.ofBytes(Fields.base64(v, vp));
            case BUNDLE:
                return WireValue.ofBundle(bundleAt(v, vp, depth + 1));
            case PENDING_INTENT: {
                Fields p = new Fields(Fields.object(v, vp), vp);
                String handle = p.string("handle");
                String creatorPackage = p.optString("creator_package");
                Object uid = p.opt("creator_uid");
                Long creatorUid = uid == null ? null
                        : Fields.integer(uid, Fields.child(vp, "creator_uid"), "a uid (64-bit integer)",
                                Fields.I64_MIN, Fields.I64_MAX).longValue();
                return WireValue.ofPendingIntent(new WireValue.PendingIntentInfo(
                        handle, creatorPackage, creatorUid, p.optBool("immutable"), p.optBool("activity")));
            }
            case FD:
                return WireValue.ofFd(new Fields(Fields.object(v, vp), vp).string("handle"));
            case OTHER:
            default:
                return WireValue.ofOther(new Fields(Fields.object(v, vp), vp).string("class"));
        }
    }
}
