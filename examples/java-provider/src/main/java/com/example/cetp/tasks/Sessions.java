package com.example.cetp.tasks;

import android.os.Bundle;
import android.util.Base64;
import java.security.SecureRandom;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Date;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TimeZone;
import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * negotiate (§2.2) and the sessions it opens. A session lives in memory
 * only: a restarted Provider process answers NEGOTIATION_REQUIRED, which
 * §2.2 allows. A token is 32 random bytes, bound to the caller's UID, the
 * selected version and the granted capabilities.
 */
final class Sessions {
    static final String ASYNC = "async_operations";
    static final String CANCELLATION = "cancellation";
    static final String LARGE_RESULTS = "large_results";
    /** The optional capabilities this Provider has (§2.3). */
    static final List<String> OFFERED = List.of(ASYNC, CANCELLATION, LARGE_RESULTS);

    static final int MAX_REQUEST_BYTES = 65536;
    static final int MAX_INLINE_RESULT_BYTES = 262144;
    static final int MAX_CONCURRENT_REQUESTS = 4;
    static final long IDEMPOTENCY_WINDOW_SECONDS = 86400;
    static final long SESSION_TTL_MS = 3600_000;

    static final class Session {
        final int uid;
        final Set<String> capabilities;
        final long expiresAtMs;

        Session(int uid, Set<String> capabilities, long expiresAtMs) {
            this.uid = uid;
            this.capabilities = capabilities;
            this.expiresAtMs = expiresAtMs;
        }

        boolean has(String capability) {
            return capabilities.contains(capability);
        }
    }

    private final SecureRandom random = new SecureRandom();
    private final Map<String, Session> sessions = new HashMap<>();

    /** Answers negotiate for {@code uid}; the request carries no session yet. */
    @SuppressWarnings("deprecation")
    Bundle negotiate(int uid, Bundle extras, String providerId, String providerName) throws Envelope.Refusal {
        Object versions = extras == null ? null : extras.get("consumer_versions");
        if (!(versions instanceof int[]) || ((int[]) versions).length == 0) {
            throw Envelope.invalidRequest("consumer_versions must be a non-empty int[]");
        }
        Object caps = extras.get("consumer_capabilities");
        if (!(caps instanceof String)) {
            throw Envelope.invalidRequest("consumer_capabilities must be a JSON array in a String");
        }
        Set<String> asked = new LinkedHashSet<>();
        try {
            JSONArray list = new JSONArray((String) caps);
            for (int i = 0; i < list.length(); i++) {
                Object c = list.get(i);
                if (!(c instanceof String)) {
                    throw Envelope.invalidRequest("consumer_capabilities must hold strings only");
                }
                asked.add((String) c);
            }
        } catch (JSONException e) {
            throw Envelope.invalidRequest("consumer_capabilities is not a JSON array");
        }
        boolean v2 = false;
        for (int v : (int[]) versions) {
            v2 |= v == Envelope.VERSION;
        }
        if (!v2) {
            // No silent fallback to another version (§2.2).
            throw new Envelope.Refusal("UNSUPPORTED_VERSION", "this Provider supports protocol version 2 only", false);
        }
        Set<String> granted = new LinkedHashSet<>();
        for (String c : OFFERED) {
            if (asked.contains(c)) {
                granted.add(c);
            }
        }
        byte[] raw = new byte[32];
        random.nextBytes(raw);
        String token = Base64.encodeToString(raw, Base64.URL_SAFE | Base64.NO_WRAP | Base64.NO_PADDING);
        long expires = System.currentTimeMillis() + SESSION_TTL_MS;
        synchronized (sessions) {
            sessions.put(token, new Session(uid, granted, expires));
        }
        try {
            JSONObject limits = new JSONObject()
                    .put("max_request_bytes", MAX_REQUEST_BYTES)
                    .put("max_inline_result_bytes", MAX_INLINE_RESULT_BYTES)
                    .put("max_concurrent_requests", MAX_CONCURRENT_REQUESTS)
                    .put("idempotency_window_seconds", IDEMPOTENCY_WINDOW_SECONDS);
            JSONObject data = new JSONObject()
                    .put("selected_version", Envelope.VERSION)
                    .put("provider_id", providerId)
                    .put("provider_name", providerName)
                    .put("session_token", token)
                    .put("expires_at", iso(expires))
                    .put("capabilities", new JSONArray(new ArrayList<>(granted)))
                    .put("limits", limits);
            return Envelope.success(null, data);
        } catch (JSONException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The caller's live session, or NEGOTIATION_REQUIRED (retryable, §5). */
    Session require(int uid, String token) throws Envelope.Refusal {
        if (token == null) {
            throw new Envelope.Refusal("NEGOTIATION_REQUIRED", "no session_token: call negotiate first", true);
        }
        synchronized (sessions) {
            Session s = sessions.get(token);
            // A token of another caller is treated as unknown: it proves nothing about this one.
            if (s == null || (s.uid != uid && !SeededDefect.on(SeededDefect.TOKEN_ANY_CALLER))) {
                throw new Envelope.Refusal("NEGOTIATION_REQUIRED", "unknown session: negotiate again", true);
            }
            if (System.currentTimeMillis() >= s.expiresAtMs && !SeededDefect.on(SeededDefect.SESSION_NEVER_EXPIRES)) {
                sessions.remove(token);
                throw new Envelope.Refusal("NEGOTIATION_REQUIRED", "the session expired: negotiate again", true);
            }
            return s;
        }
    }

    private static String iso(long ms) {
        SimpleDateFormat f = new SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss'Z'", Locale.ROOT);
        f.setTimeZone(TimeZone.getTimeZone("UTC"));
        return f.format(new Date(ms));
    }
}
