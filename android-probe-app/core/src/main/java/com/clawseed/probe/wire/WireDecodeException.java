package com.clawseed.probe.wire;

/**
 * A frame that cannot be decoded. {@link #errorClass()} is one of the stable
 * classes of {@code vectors/wire/README.md}, shared with the Rust codec.
 */
public final class WireDecodeException extends Exception {
    private static final long serialVersionUID = 1L;

    public static final String FRAME_TOO_LARGE = "frame_too_large";
    public static final String BAD_UTF8 = "bad_utf8";
    public static final String BAD_JSON = "bad_json";
    public static final String TOO_DEEP = "too_deep";
    public static final String DUPLICATE_KEY = "duplicate_key";
    public static final String NOT_A_FRAME = "not_a_frame";
    public static final String MISSING_FIELD = "missing_field";
    public static final String WRONG_TYPE = "wrong_type";
    public static final String BAD_TYPE_TAG = "bad_type_tag";
    public static final String NOT_INTEGER = "not_integer";
    public static final String OUT_OF_RANGE = "out_of_range";
    public static final String BAD_BASE64 = "bad_base64";
    public static final String LONE_SURROGATE = "lone_surrogate";
    public static final String BAD_VALUE = "bad_value";

    private final String errorClass;

    public WireDecodeException(String errorClass, String message) {
        super(message);
        this.errorClass = errorClass;
    }

    public String errorClass() {
        return errorClass;
    }

    @Override
    public String toString() {
        return errorClass + ": " + getMessage();
    }
}
