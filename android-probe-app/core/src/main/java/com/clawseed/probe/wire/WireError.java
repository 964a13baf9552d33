package com.clawseed.probe.wire;

/** A device-level error answer (never a CETP error). */
public final class WireError {
    public static final String BAD_REQUEST = "bad_request";
    public static final String UNKNOWN_OP = "unknown_op";
    public static final String UNKNOWN_AUTHORITY = "unknown_authority";
    public static final String PROVIDER_EXCEPTION = "provider_exception";
    public static final String PROVIDER_DIED = "provider_died";
    public static final String TRANSACTION_TOO_LARGE = "transaction_too_large";
    public static final String TIMEOUT = "timeout";
    public static final String UNKNOWN_HANDLE = "unknown_handle";
    public static final String UNSUPPORTED = "unsupported";

    public final String kind;
    public final String message;
    /** The exception class, for {@code provider_exception}; may be null. */
    public final String className;
    /** Further members, kept when decoding and written when encoding. */
    public final JsonObject extra;

    public WireError(String kind, String message, String className, JsonObject extra) {
        this.kind = kind;
        this.message = message == null ? "" : message;
        this.className = className;
        this.extra = extra == null ? new JsonObject() : extra;
    }

    public WireError(String kind, String message) {
        this(kind, message, null, null);
    }

    /**
     * The error as a JSON object. Messages and class names are human text
     * that may come from a Provider's exception: a lone surrogate there is
     * replaced, because the host reads them as Unicode strings.
     */
    public JsonObject toJson() {
        JsonObject m = new JsonObject();
        m.putAll(extra);
        m.put("kind", Json.sanitize(kind));
        m.put("message", Json.sanitize(message));
        if (className != null) {
            m.put("class", Json.sanitize(className));
        } else {
            m.remove("class");
        }
        return m;
    }

    static WireError fromJson(JsonObject m, String path) throws WireDecodeException {
        Fields f = new Fields(m, path);
        String kind = f.string("kind");
        String message = f.string("message");
        String className = f.optString("class");
        JsonObject extra = new JsonObject(m);
        extra.remove("kind");
        extra.remove("message");
        extra.remove("class");
        return new WireError(kind, message, className, extra);
    }

    @Override
    public String toString() {
        return kind + (className != null ? " (" + className + ")" : "") + ": " + message;
    }
}
