package com.example.cetp.tasks;

import android.os.Bundle;
import java.util.regex.Pattern;
import org.json.JSONObject;

/**
 * The CETP v2 Bundle envelope (§4.1, §4.2, §5): reading the common request
 * fields and writing success and error answers. Every error answer carries
 * status, error_code, error_message, retryable and echoes protocol_version
 * and request_id.
 */
final class Envelope {
    private Envelope() {}

    static final int VERSION = 2;
    private static final Pattern UUID = Pattern.compile(
            "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");

    /** A request refused with a CETP error; the Provider answers it as a Bundle, never as an exception. */
    static final class Refusal extends Exception {
        private static final long serialVersionUID = 1L;
        final String code;
        final boolean retryable;
        final JSONObject details;
        long retryAfterMs;

        Refusal(String code, String message, boolean retryable) {
            this(code, message, retryable, null);
        }

        Refusal(String code, String message, boolean retryable, JSONObject details) {
            super(message);
            this.code = code;
            this.retryable = retryable;
            this.details = details;
        }
    }

    static Refusal invalidRequest(String message) {
        return new Refusal("INVALID_REQUEST", message, false);
    }

    /** The fields every v2 method but negotiate carries. */
    static final class Common {
        final String sessionToken;
        final String requestId;
        final long deadlineAtMs;

        Common(String sessionToken, String requestId, long deadlineAtMs) {
            this.sessionToken = sessionToken;
            this.requestId = requestId;
            this.deadlineAtMs = deadlineAtMs;
        }
    }

    /**
     * Reads and checks the common fields. The session token is checked by
     * the caller (Sessions), after the envelope is known to be v2.
     */
    @SuppressWarnings("deprecation")
    static Common common(Bundle extras) throws Refusal {
        if (extras == null) {
            throw invalidRequest("the request has no extras");
        }
        Object version = extras.get("protocol_version");
        if (!(version instanceof Integer)) {
            // A Long or a String is not the Int the protocol asks for.
            throw invalidRequest("protocol_version must be the Int 2");
        }
        if ((Integer) version != VERSION) {
            throw new Refusal("UNSUPPORTED_VERSION", "this Provider speaks protocol version 2 only", false);
        }
        Object requestId = extras.get("request_id");
        if (!(requestId instanceof String) || !UUID.matcher((String) requestId).matches()) {
            throw invalidRequest("request_id must be a UUID string");
        }
        Object deadline = extras.get("deadline_at_ms");
        if (!(deadline instanceof Long)) {
            throw invalidRequest("deadline_at_ms must be a Long (Unix epoch milliseconds)");
        }
        Object token = extras.get("session_token");
        return new Common(token instanceof String ? (String) token : null, (String) requestId, (Long) deadline);
    }

    /** The request_id to echo in an error answer, when the request carried a string one. */
    @SuppressWarnings("deprecation")
    static String requestIdOf(Bundle extras) {
        Object id = extras == null ? null : extras.get("request_id");
        return id instanceof String ? (String) id : null;
    }

    static Bundle success(String requestId, JSONObject data) {
        Bundle out = new Bundle();
        out.putString("status", "success");
        out.putInt("protocol_version", VERSION);
        if (requestId != null) {
            out.putString("request_id", requestId);
        }
        out.putString("data", data.toString());
        return out;
    }

    static Bundle accepted(String requestId, JSONObject data) {
        Bundle out = success(requestId, data);
        out.putString("status", "accepted");
        return out;
    }

    static Bundle error(String requestId, Refusal r) {
        Bundle out = new Bundle();
        out.putString("status", "error");
        out.putInt("protocol_version", VERSION);
        if (requestId != null) {
            out.putString("request_id", requestId);
        }
        out.putString("error_code", r.code);
        out.putString("error_message", r.getMessage());
        if (!SeededDefect.on(SeededDefect.NO_RETRYABLE)) {
            out.putBoolean("retryable", r.retryable);
        }
        if (r.retryAfterMs > 0) {
            out.putLong("retry_after_ms", r.retryAfterMs);
        }
        if (r.details != null) {
            out.putString("error_details", r.details.toString());
        }
        return out;
    }

    /** The error object of a failed operation (§4.4: the fields of §5). */
    static JSONObject errorObject(Refusal r) {
        JSONObject e = new JSONObject();
        try {
            e.put("error_code", r.code);
            e.put("error_message", r.getMessage());
            e.put("retryable", r.retryable);
        } catch (org.json.JSONException impossible) {
            throw new IllegalStateException(impossible);
        }
        return e;
    }
}
