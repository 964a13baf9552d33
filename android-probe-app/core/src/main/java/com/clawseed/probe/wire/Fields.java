package com.clawseed.probe.wire;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Typed reads of the members of one object, with errors that name the field
 * as a JSON Pointer into the frame, like the Rust codec.
 */
public final class Fields {
    public final JsonObject map;
    public final String path;

    public Fields(JsonObject map, String path) {
        this.map = map;
        this.path = path;
    }

    public static String child(String path, String key) {
        return path + "/" + key.replace("~", "~0").replace("/", "~1");
    }

    static String at(String path) {
        return path.isEmpty() ? "the frame" : "`" + path + "`";
    }

    public static WireDecodeException wrongType(String path, String expected, Object found) {
        return new WireDecodeException(WireDecodeException.WRONG_TYPE,
                "at " + at(path) + ": expected " + expected + ", found " + Json.kind(found));
    }

    static WireDecodeException outOfRange(String path, String expected, String found) {
        return new WireDecodeException(WireDecodeException.OUT_OF_RANGE,
                "at " + at(path) + ": expected " + expected + ", found " + found + " (out of range)");
    }

    public static String string(Object v, String path) throws WireDecodeException {
        if (v instanceof String) {
            String s = (String) v;
            if (Json.hasLoneSurrogate(s)) {
                throw new WireDecodeException(WireDecodeException.LONE_SURROGATE,
                        "lone UTF-16 surrogate at " + at(path) + " (" + Json.describeLoneSurrogate(s) + ")");
            }
            return s;
        }
        throw wrongType(path, "a string", v);
    }

    public static JsonObject object(Object v, String path) throws WireDecodeException {
        if (v instanceof JsonObject) {
            return (JsonObject) v;
        }
        throw wrongType(path, "an object", v);
    }

    @SuppressWarnings("unchecked")
    public static List<Object> array(Object v, String path) throws WireDecodeException {
        if (v instanceof List) {
            return (List<Object>) v;
        }
        throw wrongType(path, "an array", v);
    }

    public static boolean bool(Object v, String path) throws WireDecodeException {
        if (v instanceof Boolean) {
            return (Boolean) v;
        }
        throw wrongType(path, "a boolean", v);
    }

    /** An integer within {@code [min, max]}; {@code expected} names the type. */
    public static BigInteger integer(Object v, String path, String expected, BigInteger min, BigInteger max)
            throws WireDecodeException {
        if (!(v instanceof JsonNumber)) {
            throw wrongType(path, expected, v);
        }
        JsonNumber n = (JsonNumber) v;
        BigInteger i = n.integerValue();
        if (i == null) {
            if (n.integerMismatch() == JsonNumber.Mismatch.OUT_OF_RANGE) {
                throw outOfRange(path, expected, n.canonical());
            }
            throw new WireDecodeException(WireDecodeException.NOT_INTEGER,
                    "at " + at(path) + ": expected " + expected + ", found " + n.canonical() + " (not an integer)");
        }
        if (i.compareTo(min) < 0 || i.compareTo(max) > 0) {
            throw outOfRange(path, expected, i.toString());
        }
        return i;
    }

    public static final BigInteger I32_MIN = BigInteger.valueOf(Integer.MIN_VALUE);
    public static final BigInteger I32_MAX = BigInteger.valueOf(Integer.MAX_VALUE);
    public static final BigInteger I64_MIN = BigInteger.valueOf(Long.MIN_VALUE);
    public static final BigInteger I64_MAX = BigInteger.valueOf(Long.MAX_VALUE);
    public static final BigInteger U32_MAX = BigInteger.valueOf(0xFFFF_FFFFL);
    public static final BigInteger U64_MAX = JsonNumber.MAX_U64;

    public static int int32(Object v, String path) throws WireDecodeException {
        return integer(v, path, "an int (32-bit integer)", I32_MIN, I32_MAX).intValue();
    }

    public static long int64(Object v, String path) throws WireDecodeException {
        return integer(v, path, "a long (64-bit integer)", I64_MIN, I64_MAX).longValue();
    }

    /** An unsigned 64-bit integer in a Java long (two's complement above 2^63-1). */
    public static long uint64(Object v, String path) throws WireDecodeException {
        return integer(v, path, "an unsigned 64-bit integer", BigInteger.ZERO, U64_MAX).longValue();
    }

    public static byte[] base64(Object v, String path) throws WireDecodeException {
        String s = string(v, path);
        try {
            return Base64Strict.decode(s);
        } catch (IllegalArgumentException e) {
            throw new WireDecodeException(WireDecodeException.BAD_BASE64, "at " + at(path) + ": bad base64: " + e.getMessage());
        }
    }

    public static List<String> strings(Object v, String path) throws WireDecodeException {
        List<Object> items = array(v, path);
        List<String> out = new ArrayList<>(items.size());
        for (int i = 0; i < items.size(); i++) {
            out.add(string(items.get(i), path + "/" + i));
        }
        return out;
    }

    public static Map<String, String> stringMap(Object v, String path) throws WireDecodeException {
        JsonObject m = object(v, path);
        Map<String, String> out = new TreeMap<>(JsonObject.CODE_POINT_ORDER);
        for (Map.Entry<String, Object> e : m.entrySet()) {
            out.put(e.getKey(), string(e.getValue(), child(path, e.getKey())));
        }
        return out;
    }

    // Member access

    public Object req(String key, String expected) throws WireDecodeException {
        Object v = map.get(key);
        if (v == null) {
            throw new WireDecodeException(WireDecodeException.MISSING_FIELD,
                    "missing field `" + child(path, key) + "`: expected " + expected);
        }
        return v;
    }

    /** Absent and null both mean "none". */
    public Object opt(String key) {
        Object v = map.get(key);
        return Json.isNull(v) ? null : v;
    }

    public String string(String key) throws WireDecodeException {
        return string(req(key, "a string"), child(path, key));
    }

    public String optString(String key) throws WireDecodeException {
        Object v = opt(key);
        return v == null ? null : string(v, child(path, key));
    }

    public boolean bool(String key) throws WireDecodeException {
        return bool(req(key, "a boolean"), child(path, key));
    }

    public Boolean optBool(String key) throws WireDecodeException {
        Object v = opt(key);
        return v == null ? null : bool(v, child(path, key));
    }

    public long uint64(String key) throws WireDecodeException {
        return uint64(req(key, "an unsigned 64-bit integer"), child(path, key));
    }

    public JsonObject object(String key) throws WireDecodeException {
        return object(req(key, "an object"), child(path, key));
    }

    public Map<String, String> stringMap(String key) throws WireDecodeException {
        return stringMap(req(key, "an object of strings"), child(path, key));
    }

    public List<String> strings(String key) throws WireDecodeException {
        return strings(req(key, "an array of strings"), child(path, key));
    }
}
