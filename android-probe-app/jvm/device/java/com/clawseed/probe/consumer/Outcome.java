package com.clawseed.probe.consumer;

/**
 * How an act ended for the Consumer (probe-wire "driving a Consumer under
 * test", the {@code outcome} of {@code consumer_act}). {@code crashed} is not
 * made here: the device reports it when an act throws.
 */
public final class Outcome {
    /** {@code success}, {@code error}, {@code needs_user} or {@code refused}. */
    public final String kind;
    /** The JSON text of the value handed to the agent ({@code success}); else null. */
    public final String valueJson;
    /** The CETP error code ({@code error}); else null. */
    public final String errorCode;
    /** The error's message, or the detail of {@code needs_user} / {@code refused}; may be null. */
    public final String text;

    private Outcome(String kind, String valueJson, String errorCode, String text) {
        this.kind = kind;
        this.valueJson = valueJson;
        this.errorCode = errorCode;
        this.text = text;
    }

    /** The Consumer got a result and would hand {@code valueJson} (JSON text; null for JSON null) to its agent. */
    public static Outcome success(String valueJson) {
        return new Outcome("success", valueJson == null ? "null" : valueJson, null, null);
    }

    /** The Consumer surfaced a CETP error: its {@code code} and message. */
    public static Outcome error(String code, String message) {
        return new Outcome("error", null, code, message);
    }

    /** The Consumer is waiting for the user (a confirmation, a sign-in). */
    public static Outcome needsUser(String detail) {
        return new Outcome("needs_user", null, null, detail);
    }

    /** The Consumer rejected what the Provider sent (size, digest, schema, shape, length). */
    public static Outcome refused(String detail) {
        return new Outcome("refused", null, null, detail);
    }

    @Override
    public String toString() {
        return kind + (errorCode != null ? " " + errorCode : "") + (text != null ? ": " + text : "");
    }
}
