package com.example.cetp.agent;

import java.util.Iterator;
import org.json.JSONArray;
import org.json.JSONObject;

/**
 * The part of JSON Schema this Consumer checks a result against before its
 * agent sees it (§4.2: a result that does not match the tool's output
 * schema is refused): type, properties, required, items, enum,
 * additionalProperties false. Keywords it does not know constrain nothing
 * (a Provider's richer schema is not refused for them).
 */
final class Schema {
    private Schema() {}

    /** Null when {@code value} matches {@code schema}; else where and why it does not. */
    static String mismatch(Object schema, Object value, String at) {
        if (!(schema instanceof JSONObject)) {
            return null;
        }
        JSONObject s = (JSONObject) schema;
        Object type = s.opt("type");
        if (type instanceof String && !hasType((String) type, value)) {
            return at + ": expected " + type + ", found " + typeOf(value);
        }
        if (type instanceof JSONArray) {
            JSONArray types = (JSONArray) type;
            boolean any = false;
            for (int i = 0; i < types.length(); i++) {
                any |= hasType(types.optString(i), value);
            }
            if (!any) {
                return at + ": expected one of " + types + ", found " + typeOf(value);
            }
        }
        JSONArray allowed = s.optJSONArray("enum");
        if (allowed != null && !contains(allowed, value)) {
            return at + ": not one of the enum's values";
        }
        if (value instanceof JSONObject) {
            JSONObject o = (JSONObject) value;
            JSONArray required = s.optJSONArray("required");
            for (int i = 0; required != null && i < required.length(); i++) {
                if (!o.has(required.optString(i))) {
                    return at + ": lacks the required member " + required.optString(i);
                }
            }
            JSONObject props = s.optJSONObject("properties");
            boolean closed = Boolean.FALSE.equals(s.opt("additionalProperties"));
            for (Iterator<String> it = o.keys(); it.hasNext(); ) {
                String k = it.next();
                Object sub = props == null ? null : props.opt(k);
                if (sub == null && closed) {
                    return at + ": has the member " + k + ", which the schema does not allow";
                }
                String m = mismatch(sub, o.opt(k), at + "/" + k);
                if (m != null) {
                    return m;
                }
            }
        }
        if (value instanceof JSONArray) {
            JSONArray a = (JSONArray) value;
            Object items = s.opt("items");
            for (int i = 0; i < a.length(); i++) {
                String m = mismatch(items, a.opt(i), at + "/" + i);
                if (m != null) {
                    return m;
                }
            }
        }
        return null;
    }

    private static boolean hasType(String type, Object v) {
        switch (type) {
            case "object":
                return v instanceof JSONObject;
            case "array":
                return v instanceof JSONArray;
            case "string":
                return v instanceof String;
            case "boolean":
                return v instanceof Boolean;
            case "null":
                return v == JSONObject.NULL;
            case "integer":
                return v instanceof Integer || v instanceof Long
                        || (v instanceof Number && ((Number) v).doubleValue() == Math.rint(((Number) v).doubleValue()));
            case "number":
                return v instanceof Number;
            default:
                return true;
        }
    }

    private static String typeOf(Object v) {
        if (v instanceof JSONObject) {
            return "an object";
        }
        if (v instanceof JSONArray) {
            return "an array";
        }
        if (v instanceof String) {
            return "a string";
        }
        if (v instanceof Number) {
            return "a number";
        }
        if (v instanceof Boolean) {
            return "a boolean";
        }
        return "null";
    }

    private static boolean contains(JSONArray a, Object v) {
        for (int i = 0; i < a.length(); i++) {
            if (String.valueOf(a.opt(i)).equals(String.valueOf(v))) {
                return true;
            }
        }
        return false;
    }

    /** How deep {@code v} nests (a scalar is 0); stops counting past {@code cap}. */
    static int depth(Object v, int cap) {
        if (cap < 0) {
            return 0;
        }
        int inner = 0;
        if (v instanceof JSONObject) {
            JSONObject o = (JSONObject) v;
            for (Iterator<String> it = o.keys(); it.hasNext() && inner <= cap; ) {
                inner = Math.max(inner, depth(o.opt(it.next()), cap - 1));
            }
            return inner + 1;
        }
        if (v instanceof JSONArray) {
            JSONArray a = (JSONArray) v;
            for (int i = 0; i < a.length() && inner <= cap; i++) {
                inner = Math.max(inner, depth(a.opt(i), cap - 1));
            }
            return inner + 1;
        }
        return 0;
    }
}
