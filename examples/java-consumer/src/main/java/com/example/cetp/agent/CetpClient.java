package com.example.cetp.agent;

import android.app.PendingIntent;
import android.content.ContentProviderClient;
import android.content.Context;
import android.content.Intent;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.content.pm.ResolveInfo;
import android.net.Uri;
import android.os.Bundle;
import android.os.ParcelFileDescriptor;
import android.os.RemoteException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;
import org.json.JSONTokener;

/**
 * A small CETP v2 Consumer client, as an agent app would carry one:
 * discovery (§2.1), negotiation (§2.2), tool lists (§3.3), execution with
 * one request id over retries (§4.1, §5), background operations (§4.4),
 * file results (§4.5) and confirmations (§4.3). It speaks v2 only (a
 * Provider that declares only v1 is not used) and hands its agent only what
 * it checked: bounded, of the declared schema, of the declared digest.
 *
 * <p>Not thread-safe: the agent calls it from one thread.
 */
public final class CetpClient {
    static final String ACTION = "com.clawseed.action.TOOL_PROVIDER";
    static final String META_AUTHORITY = "com.clawseed.tools.authority";
    static final String META_VERSION = "com.clawseed.tools.version";
    static final String META_VERSIONS = "com.clawseed.tools.versions";
    /** What this client can do with a Provider that offers it (§2.2). */
    static final List<String> CAPABILITIES = List.of("async_operations", "cancellation", "large_results");

    /** How long one Binder call may take before the client gives up on it (and retries under the same id). */
    static final long CALL_TIMEOUT_MS = 4_000;
    /** The request deadline it announces (§4.1 deadline_at_ms: absolute, in the device's time). */
    static final long REQUEST_DEADLINE_MS = 60_000;
    /** Attempts of one execution, the first included: its retries are bounded. */
    static final int MAX_ATTEMPTS = 4;
    /** Longest wait it accepts between retries or polls; a Provider asking more is not waited for. */
    static final long MAX_WAIT_MS = 10_000;
    /** How long it follows a background operation before it cancels it (when it may) and stops waiting. */
    static final long OPERATION_BUDGET_MS = 40_000;
    /** Code of a Binder failure that survived every retry (not a CETP code: the client's own). */
    static final String UNREACHABLE = "PROVIDER_UNREACHABLE";

    /** The error codes of §5 this client knows; any other is data, never retried. */
    static final Set<String> KNOWN_CODES = Set.of("UNSUPPORTED_VERSION", "UNSUPPORTED_CAPABILITY",
            "NEGOTIATION_REQUIRED", "AUTH_REQUIRED", "USER_ACTION_REQUIRED", "USER_CANCELLED", "PERMISSION_DENIED",
            "TOOL_NOT_FOUND", "METHOD_NOT_FOUND", "INVALID_ARGS", "INVALID_REQUEST", "CONFLICT", "RATE_LIMITED",
            "DEADLINE_EXCEEDED", "CANCELLED", "RESULT_TOO_LARGE", "RESULT_EXPIRED", "UNAVAILABLE", "INTERNAL_ERROR");

    /** The bounds on Provider data this client enforces (§7.3); its profile declares the same figures. */
    public static final class Limits {
        public int maxNameBytes = 128;
        public int maxDescriptionBytes = 64 * 1024;
        public int maxJsonDepth = 32;
        public int maxInlineBytes = 1024 * 1024;
        public long maxFileBytes = 16L * 1024 * 1024;
        public int maxItems = 256;
    }

    /** How a request ended, for the agent. */
    public static final class Result {
        public final String kind;
        public final String valueJson;
        public final String code;
        public final String text;

        private Result(String kind, String valueJson, String code, String text) {
            this.kind = kind;
            this.valueJson = valueJson;
            this.code = code;
            this.text = text;
        }

        static Result success(Object value) {
            return new Result("success", value == null ? "null" : JSONObject.wrap(value).toString(), null, null);
        }

        static Result error(String code, String message) {
            return new Result("error", null, code, message);
        }

        static Result refused(String detail) {
            return new Result("refused", null, null, detail);
        }

        static Result needsUser(String detail) {
            return new Result("needs_user", null, null, detail);
        }
    }

    /** Launches a resolution for a result and returns the activity's result code (the app's screen). */
    public interface Launcher {
        int launch(PendingIntent resolution) throws Exception;
    }

    /** A negotiated session with one Provider, and its tool list. */
    private static final class Session {
        String token;
        /** Device time after which it is negotiated again; Long.MAX_VALUE when the Provider set none. */
        long expiresAtMs = Long.MAX_VALUE;
        Set<String> granted = new HashSet<>();
        Map<String, JSONObject> tools = new HashMap<>();
    }

    /** An execution waiting for the user (§4.3), resumed under its request id. */
    private static final class Pending {
        String authority;
        String tool;
        String args;
        String requestId;
        String resumeToken;
        PendingIntent resolution;
    }

    /** Why a Binder call did not answer. */
    private static final class CallFailure extends Exception {
        private static final long serialVersionUID = 1L;
        /** True for a timeout or a dead Binder: the call may be tried again under its id. */
        final boolean transientFailure;

        CallFailure(String message, boolean transientFailure) {
            super(message);
            this.transientFailure = transientFailure;
        }
    }

    /** What the Provider sent that this client refuses. */
    private static final class Refusal extends Exception {
        private static final long serialVersionUID = 1L;

        Refusal(String detail) {
            super(detail);
        }
    }

    private static final ExecutorService BINDER = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "cetp-client-call");
        t.setDaemon(true);
        return t;
    });

    private final Context context;
    private final Limits limits;
    /** By authority, in the order they were connected. */
    private final Map<String, Session> sessions = new LinkedHashMap<>();
    private Pending pending;

    public CetpClient(Context context, Limits limits) {
        this.context = context;
        this.limits = limits;
    }

    /** Forgets every session, tool list and waiting confirmation: a restarted app. */
    public void reset() {
        sessions.clear();
        pending = null;
    }

    /** Discovers {@code authority}, negotiates and lists its tools. */
    public Result connect(String authority) {
        try {
            sessions.remove(authority);
            Session s = session(authority);
            return Result.success(new JSONObject().put("tools", new JSONArray(s.tools.keySet())));
        } catch (Refusal r) {
            return Result.refused(r.getMessage());
        } catch (ErrorAnswer e) {
            return e.result;
        } catch (JSONException e) {
            return Result.refused(e.toString());
        }
    }

    /** Lists the tools again (a new read: a new request id). */
    public Result listTools(String authority) {
        try {
            Session s = session(authority);
            listTools(authority, s);
            return Result.success(new JSONObject().put("tools", new JSONArray(s.tools.keySet())));
        } catch (Refusal r) {
            return Result.refused(r.getMessage());
        } catch (ErrorAnswer e) {
            return e.result;
        } catch (JSONException e) {
            return Result.refused(e.toString());
        }
    }

    /** Executes {@code tool}; with {@code cancel}, cancels it once it runs in the background and follows it to its end. */
    public Result call(String authority, String tool, String argsJson, boolean cancel) throws InterruptedException {
        pending = null;
        String requestId = UUID.randomUUID().toString();
        return execute(authority, tool, argsJson, requestId, null, cancel);
    }

    /** The user decided on the resolution the last call is waiting for; on approval the call resumes. */
    public Result decide(String decision, Launcher user) throws Exception {
        Pending p = pending;
        if (p == null || p.resolution == null) {
            return Result.refused("no resolution is waiting for the user");
        }
        pending = null;
        int code = user.launch(p.resolution);
        if (code != android.app.Activity.RESULT_OK || !"approve".equals(decision)) {
            return Result.error("USER_CANCELLED", "the user did not approve");
        }
        return execute(p.authority, p.tool, p.args, p.requestId, p.resumeToken, false);
    }

    /**
     * The defect first-with-tool: the first connected Provider that lists
     * {@code tool}, whichever was asked (§3.1 names a tool by provider and
     * name together).
     */
    private String firstWithTool(String asked, String tool) {
        for (Map.Entry<String, Session> e : sessions.entrySet()) {
            if (e.getValue().tools.containsKey(tool)) {
                return e.getKey();
            }
        }
        return asked;
    }

    // ------------------------------------------------------------------ sessions

    private Session session(String authority) throws Refusal, ErrorAnswer {
        Session s = sessions.get(authority);
        if (s != null && now() < s.expiresAtMs) {
            return s;
        }
        s = negotiate(authority);
        listTools(authority, s);
        sessions.put(authority, s);
        return s;
    }

    /**
     * §2.1: the authority's discovery service, in the package of its
     * ContentProvider, declaring v2. Meta-data values are read untyped
     * (Bundle.get, deprecated from API 33 for typed getters): a version is an
     * Integer or a String, as aapt2 compiles it.
     */
    @SuppressWarnings("deprecation")
    private void discover(String authority) throws Refusal {
        PackageManager pm = context.getPackageManager();
        List<ResolveInfo> found = pm.queryIntentServices(new Intent(ACTION), PackageManager.GET_META_DATA);
        String servicePackage = null;
        boolean v2 = false;
        for (ResolveInfo ri : found) {
            if (ri.serviceInfo == null || ri.serviceInfo.metaData == null) {
                continue;
            }
            Bundle meta = ri.serviceInfo.metaData;
            if (!authority.equals(string(meta.get(META_AUTHORITY)))) {
                continue;
            }
            servicePackage = ri.serviceInfo.packageName;
            v2 = declares(meta.get(META_VERSIONS), 2) || declares(meta.get(META_VERSION), 2);
            break;
        }
        if (servicePackage == null) {
            throw new Refusal("no CETP Provider declares the authority " + authority);
        }
        ProviderInfo provider = pm.resolveContentProvider(authority, 0);
        if (provider == null) {
            throw new Refusal("no ContentProvider serves " + authority);
        }
        if (!provider.packageName.equals(servicePackage) && !Defect.is("trusts-any-package")) {
            throw new Refusal("the ContentProvider of " + authority + " belongs to " + provider.packageName
                    + ", not to the service's package " + servicePackage);
        }
        if (!v2) {
            // This client speaks v2 only (§8 lets a Consumer not use v1).
            throw new Refusal("the Provider of " + authority + " does not declare CETP v2");
        }
    }

    private static String string(Object v) {
        return v instanceof String ? (String) v : null;
    }

    /** A meta-data version declaration: an Integer, or a comma-separated String of integers. */
    private static boolean declares(Object v, int version) {
        if (v instanceof Integer) {
            return (Integer) v == version;
        }
        if (v instanceof String) {
            for (String part : ((String) v).split(",", -1)) {
                if (part.trim().equals(Integer.toString(version))) {
                    return true;
                }
            }
        }
        return false;
    }

    private Session negotiate(String authority) throws Refusal, ErrorAnswer {
        discover(authority);
        Bundle extras = new Bundle();
        extras.putIntArray("consumer_versions", new int[] {2});
        extras.putString("consumer_capabilities",
                new JSONArray(Latitude.is("no-optional-capabilities") ? List.of() : CAPABILITIES).toString());
        Bundle answer;
        try {
            answer = binderWithRetries(authority, "negotiate", extras);
        } catch (CallFailure f) {
            throw new ErrorAnswer(Result.error(UNREACHABLE, f.getMessage()));
        }
        JSONObject data = successData(answer, "negotiate", 256 * 1024);
        if (data.optInt("selected_version", -1) != 2) {
            throw new Refusal("negotiate selected version " + data.opt("selected_version") + ", not 2");
        }
        Session s = new Session();
        s.token = data.optString("session_token", "");
        if (s.token.isEmpty()) {
            throw new Refusal("negotiate gave no session_token");
        }
        JSONArray caps = data.optJSONArray("capabilities");
        for (int i = 0; caps != null && i < caps.length(); i++) {
            if (CAPABILITIES.contains(caps.optString(i))) {
                s.granted.add(caps.optString(i));
            }
        }
        String expires = data.optString("expires_at", "");
        if (!expires.isEmpty()) {
            try {
                s.expiresAtMs = java.time.Instant.parse(expires).toEpochMilli();
            } catch (java.time.format.DateTimeParseException e) {
                throw new Refusal("negotiate's expires_at is not an RFC 3339 time: " + clip(expires));
            }
        }
        return s;
    }

    /** Lists the tools of a new session or again (§3.3), with a new request id. */
    private void listTools(String authority, Session s) throws Refusal, ErrorAnswer {
        Bundle answer;
        try {
            answer = binderWithRetries(authority, "list_tools", common(s, UUID.randomUUID().toString()));
        } catch (CallFailure f) {
            throw new ErrorAnswer(Result.error(UNREACHABLE, f.getMessage()));
        }
        JSONObject data = successData(answer, "list_tools", 8 * 1024 * 1024);
        JSONArray tools = data.optJSONArray("tools");
        if (tools == null) {
            throw new Refusal("list_tools gave no tools array");
        }
        if (tools.length() > limits.maxItems) {
            throw new Refusal("list_tools gave " + tools.length() + " tools, more than " + limits.maxItems);
        }
        Map<String, JSONObject> byName = new HashMap<>();
        for (int i = 0; i < tools.length(); i++) {
            JSONObject t = tools.optJSONObject(i);
            if (t == null || !(t.opt("name") instanceof String)) {
                throw new Refusal("tool " + i + " has no name");
            }
            String name = t.optString("name");
            if (utf8(name) > limits.maxNameBytes) {
                throw new Refusal("a tool name is " + utf8(name) + " bytes, more than " + limits.maxNameBytes);
            }
            int description = utf8(t.optString("description", "")) + utf8(String.valueOf(t.opt("input_schema")));
            if (description > limits.maxDescriptionBytes) {
                throw new Refusal("the description of " + clip(name) + " is " + description + " bytes, more than "
                        + limits.maxDescriptionBytes);
            }
            byName.put(name, t);
        }
        s.tools = byName;
    }

    // ----------------------------------------------------------------- execution

    /** A CETP error answer, ending the request as that error. */
    private static final class ErrorAnswer extends Exception {
        private static final long serialVersionUID = 1L;
        final Result result;

        ErrorAnswer(Result result) {
            super(result.code);
            this.result = result;
        }
    }

    private Result execute(String asked, String tool, String args, String requestId, String resumeToken,
            boolean cancel) throws InterruptedException {
        int renegotiations = 0;
        String authority = Defect.is("first-with-tool") ? firstWithTool(asked, tool) : asked;
        try {
            Session s = session(authority);
            if (!s.tools.containsKey(tool)) {
                return Result.error("TOOL_NOT_FOUND", "the Provider lists no tool " + clip(tool));
            }
            for (int attempt = 1; ; attempt++) {
                String id = Defect.is("new-request-id-on-retry") ? UUID.randomUUID().toString() : requestId;
                Bundle extras = common(s, id);
                extras.putString("tool_name", tool);
                extras.putString("args", args);
                if (resumeToken != null) {
                    extras.putString("resume_token", resumeToken);
                }
                Bundle answer;
                try {
                    answer = binder(authority, "execute_tool", extras);
                } catch (CallFailure f) {
                    if (!f.transientFailure || attempt >= MAX_ATTEMPTS) {
                        return Result.error(UNREACHABLE, f.getMessage());
                    }
                    // A timeout or a dead Binder: the execution may have run, so
                    // it is tried again under the same id (§4.1), which the
                    // Provider deduplicates.
                    Thread.sleep(200);
                    continue;
                }
                try {
                    return answer(authority, s, tool, answer, cancel);
                } catch (ErrorAnswer e) {
                    Result r = e.result;
                    String code = r.code;
                    if ("NEGOTIATION_REQUIRED".equals(code) && renegotiations++ < 2) {
                        sessions.remove(authority);
                        s = session(authority);
                        attempt--;
                        continue;
                    }
                    if ("USER_ACTION_REQUIRED".equals(code) || "AUTH_REQUIRED".equals(code)) {
                        if (Defect.is("retries-without-user") && attempt < MAX_ATTEMPTS) {
                            continue;
                        }
                        Pending p = new Pending();
                        p.authority = authority;
                        p.tool = tool;
                        p.args = args;
                        p.requestId = id;
                        p.resumeToken = lastResumeToken;
                        p.resolution = lastResolution;
                        pending = p;
                        return Result.needsUser(code + ": " + clip(r.text));
                    }
                    // An unknown code is data (§5): never retried, whatever it says.
                    boolean retry = lastRetryable && KNOWN_CODES.contains(code);
                    if (Defect.is("retries-non-retryable") && KNOWN_CODES.contains(code)) {
                        retry = true;
                    }
                    if (Latitude.is("no-automatic-retry")) {
                        // The agent decides whether to try again (§5 allows never retrying).
                        retry = false;
                    }
                    if (retry && attempt < MAX_ATTEMPTS && lastRetryAfterMs <= MAX_WAIT_MS) {
                        if (!Defect.is("ignores-retry-after")) {
                            // §5: at least retry_after_ms; this client's own backoff may add to it.
                            long backoff = Latitude.is("extra-retry-wait") ? 2_000 : 20;
                            Thread.sleep(Math.max(lastRetryAfterMs, 100) + backoff);
                        }
                        continue;
                    }
                    return r;
                }
            }
        } catch (Refusal r) {
            return Result.refused(r.getMessage());
        } catch (ErrorAnswer e) {
            return e.result;
        }
    }

    // Facts of the last error answer, read by execute(): one thread, no sharing.
    private boolean lastRetryable;
    private long lastRetryAfterMs;
    private String lastResumeToken;
    private PendingIntent lastResolution;

    /** The v2 common fields (§4.1). */
    private Bundle common(Session s, String requestId) {
        Bundle b = new Bundle();
        b.putInt("protocol_version", 2);
        b.putString("session_token", s.token);
        if (requestId != null) {
            b.putString("request_id", requestId);
        }
        b.putLong("deadline_at_ms", now() + REQUEST_DEADLINE_MS);
        return b;
    }

    /** An execute_tool answer: a result, a background operation, or an error (thrown as ErrorAnswer). */
    private Result answer(String authority, Session s, String tool, Bundle answer, boolean cancel)
            throws Refusal, ErrorAnswer, InterruptedException {
        ParcelFileDescriptor fd = descriptor(answer);
        try {
            String status = answer == null ? null : answer.getString("status");
            if ("accepted".equals(status)) {
                if (!s.granted.contains("async_operations")) {
                    throw new Refusal("the Provider started a background operation, which was not negotiated");
                }
                JSONObject data = data(answer, "execute_tool", limits.maxInlineBytes);
                return follow(authority, s, tool, data, cancel);
            }
            JSONObject data = successData(answer, "execute_tool", limits.maxInlineBytes);
            return result(s, tool, data, fd);
        } finally {
            if (!(Defect.is("keeps-error-fd") && "error".equals(answer == null ? null : answer.getString("status")))) {
                close(fd);
            }
        }
    }

    /** The result of a success (§4.2, §4.5), checked before the agent sees it. */
    private Result result(Session s, String tool, JSONObject data, ParcelFileDescriptor fd) throws Refusal {
        String kind = data.optString("kind", "");
        Object schema = s.tools.get(tool) == null ? null : s.tools.get(tool).opt("output_schema");
        if (kind.equals("inline")) {
            Object value = data.opt("value");
            checkValue(value, schema);
            return Result.success(value);
        }
        if (!kind.equals("file")) {
            throw new Refusal("a result of unknown kind " + clip(kind));
        }
        if (!s.granted.contains("large_results")) {
            throw new Refusal("a file result, which large_results was not negotiated for");
        }
        if (fd == null) {
            throw new Refusal("a file result without result_fd");
        }
        long size = data.optLong("size_bytes", -1);
        String sha = data.optString("sha256", "");
        if (size < 0 || size > limits.maxFileBytes) {
            throw new Refusal("a file result declaring " + size + " bytes (this client takes at most "
                    + limits.maxFileBytes + ")");
        }
        byte[] bytes = read(fd, Defect.is("trusts-file-size") ? limits.maxFileBytes * 4 : size + 1);
        if (bytes.length != size && !Defect.is("trusts-file-size")) {
            throw new Refusal("the file result holds " + (bytes.length > size ? "more than" : "only " + bytes.length)
                    + " bytes, not the declared " + size);
        }
        if (!Defect.is("skips-sha256") && !sha.equalsIgnoreCase(sha256(bytes))) {
            throw new Refusal("the file result's SHA-256 differs from the declared one");
        }
        String text = new String(bytes, StandardCharsets.UTF_8);
        Object content = text;
        String media = data.optString("media_type", "");
        if (media.startsWith("application/json")) {
            content = parse(text, "the file result");
            checkValue(content, schema);
        }
        JSONObject out = new JSONObject();
        try {
            out.put("media_type", media).put("size_bytes", size).put("content", content);
        } catch (JSONException e) {
            throw new Refusal(e.toString());
        }
        return Result.success(out);
    }

    private void checkValue(Object value, Object schema) throws Refusal {
        if (Schema.depth(value, limits.maxJsonDepth + 1) > limits.maxJsonDepth) {
            throw new Refusal("the result nests deeper than " + limits.maxJsonDepth);
        }
        String mismatch = Defect.is("skips-output-schema") ? null : Schema.mismatch(schema, value, "");
        if (mismatch != null) {
            throw new Refusal("the result does not match the tool's output schema at " + clip(mismatch));
        }
    }

    /** Polls a background operation (§4.4) to its end; cancels it first when asked, or when it runs too long. */
    private Result follow(String authority, Session s, String tool, JSONObject accepted, boolean cancel)
            throws Refusal, ErrorAnswer, InterruptedException {
        String op = accepted.optString("operation_id", "");
        if (op.isEmpty()) {
            throw new Refusal("a background operation without operation_id");
        }
        long wait = accepted.optLong("poll_after_ms", 1000);
        long giveUp = now() + OPERATION_BUDGET_MS;
        boolean cancelled = false;
        if (cancel) {
            if (!s.granted.contains("cancellation")) {
                throw new Refusal("cancellation was not negotiated");
            }
            operation(authority, s, "cancel_operation", op);
            cancelled = true;
        }
        while (true) {
            // poll_after_ms is the earliest next query (§4.4); slow-polling waits twice that.
            long pause = Latitude.is("slow-polling") ? 2 * wait : wait;
            Thread.sleep(Math.min(Math.max(pause, 100), MAX_WAIT_MS));
            JSONObject state = operation(authority, s, "get_operation", op);
            String st = state.optString("state", "");
            switch (st) {
                case "succeeded": {
                    JSONObject result = state.optJSONObject("result");
                    if (result == null) {
                        throw new Refusal("a succeeded operation without its result");
                    }
                    return result(s, tool, result, null);
                }
                case "failed": {
                    JSONObject e = state.optJSONObject("error");
                    return Result.error(e == null ? "INTERNAL_ERROR" : e.optString("error_code", "INTERNAL_ERROR"),
                            e == null ? "the operation failed" : clip(e.optString("error_message", "")));
                }
                case "cancelled":
                    return Result.error("CANCELLED", "the operation was cancelled");
                case "queued":
                case "running":
                case "cancellation_requested":
                    break;
                default:
                    throw new Refusal("an operation in the unknown state " + clip(st));
            }
            wait = state.optLong("poll_after_ms", 1000);
            if (now() > giveUp && !cancelled) {
                if (!s.granted.contains("cancellation")) {
                    return Result.error("DEADLINE_EXCEEDED", "the operation is still running; it is left to run");
                }
                // Stops waiting: cancels it, then follows it to its end (§4.4).
                operation(authority, s, "cancel_operation", op);
                cancelled = true;
                giveUp = now() + OPERATION_BUDGET_MS;
            } else if (now() > giveUp) {
                return Result.error("DEADLINE_EXCEEDED", "the cancelled operation did not end");
            }
        }
    }

    /** get_operation or cancel_operation: a new read, a new request id. */
    private JSONObject operation(String authority, Session s, String method, String op)
            throws Refusal, ErrorAnswer {
        Bundle extras = common(s, UUID.randomUUID().toString());
        extras.putString("operation_id", op);
        Bundle answer;
        try {
            answer = binderWithRetries(authority, method, extras);
        } catch (CallFailure f) {
            throw new ErrorAnswer(Result.error(UNREACHABLE, f.getMessage()));
        }
        ParcelFileDescriptor fd = descriptor(answer);
        try {
            return successData(answer, method, limits.maxInlineBytes);
        } finally {
            close(fd);
        }
    }

    // ------------------------------------------------------------------ answers

    /** The data of a success; an error answer becomes ErrorAnswer, anything else a Refusal. */
    private JSONObject successData(Bundle answer, String method, int maxBytes) throws Refusal, ErrorAnswer {
        String status = answer == null ? null : answer.getString("status");
        if ("error".equals(status)) {
            throw errorOf(answer);
        }
        if (!"success".equals(status)) {
            throw new Refusal(method + " answered with status " + clip(String.valueOf(status)));
        }
        return data(answer, method, maxBytes);
    }

    private JSONObject data(Bundle answer, String method, int maxBytes) throws Refusal {
        String text = answer.getString("data");
        if (text == null) {
            throw new Refusal(method + " answered without data");
        }
        if (utf8(text) > maxBytes) {
            throw new Refusal(method + "'s data is " + utf8(text) + " bytes, more than " + maxBytes);
        }
        Object v = parse(text, method + "'s data");
        if (!(v instanceof JSONObject)) {
            throw new Refusal(method + "'s data is not a JSON object");
        }
        return (JSONObject) v;
    }

    @SuppressWarnings("deprecation")
    private ErrorAnswer errorOf(Bundle b) {
        Object retryable = b.get("retryable");
        lastRetryable = Boolean.TRUE.equals(retryable);
        Object after = b.get("retry_after_ms");
        lastRetryAfterMs = after instanceof Long ? Math.max(0, (Long) after) : 1000;
        lastResumeToken = b.getString("resume_token");
        Object resolution = b.getParcelable("resolution");
        lastResolution = resolution instanceof PendingIntent ? (PendingIntent) resolution : null;
        String code = b.getString("error_code");
        String message = b.getString("error_message");
        return new ErrorAnswer(Result.error(code == null ? "INTERNAL_ERROR" : clip(code), clip(String.valueOf(message))));
    }

    @SuppressWarnings("deprecation")
    private static ParcelFileDescriptor descriptor(Bundle b) {
        if (b == null) {
            return null;
        }
        Object fd = b.getParcelable("result_fd");
        return fd instanceof ParcelFileDescriptor ? (ParcelFileDescriptor) fd : null;
    }

    private static void close(ParcelFileDescriptor fd) {
        if (fd == null) {
            return;
        }
        try {
            fd.close();
        } catch (IOException ignored) {
            // Let go of either way.
        }
    }

    private Object parse(String text, String what) throws Refusal {
        try {
            return new JSONTokener(text).nextValue();
        } catch (JSONException | StackOverflowError e) {
            throw new Refusal(what + " is not JSON: " + clip(e.toString()));
        }
    }

    /** At most {@code max} bytes of the descriptor, within the call timeout twice over. */
    private static byte[] read(ParcelFileDescriptor fd, long max) throws Refusal {
        Future<byte[]> f = BINDER.submit(() -> {
            try (InputStream in = new ParcelFileDescriptor.AutoCloseInputStream(fd.dup())) {
                java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
                byte[] buf = new byte[64 * 1024];
                long left = max;
                int n;
                while (left > 0 && (n = in.read(buf, 0, (int) Math.min(buf.length, left))) > 0) {
                    out.write(buf, 0, n);
                    left -= n;
                }
                return out.toByteArray();
            }
        });
        try {
            return f.get(2 * CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new Refusal("the file result was not readable in time");
        } catch (ExecutionException e) {
            throw new Refusal("the file result could not be read: " + e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Refusal("interrupted");
        }
    }

    // ------------------------------------------------------------------- Binder

    /** A call that is not an execution (negotiate, reads): retried on a timeout or a dead Binder. */
    private Bundle binderWithRetries(String authority, String method, Bundle extras) throws CallFailure {
        for (int attempt = 1; ; attempt++) {
            try {
                return binder(authority, method, extras);
            } catch (CallFailure f) {
                if (!f.transientFailure || attempt >= MAX_ATTEMPTS) {
                    throw f;
                }
            }
        }
    }

    /** One call through an unstable client (a dying Provider does not take this app with it). */
    private Bundle binder(String authority, String method, Bundle extras) throws CallFailure {
        ContentProviderClient client = context.getContentResolver()
                .acquireUnstableContentProviderClient(Uri.parse("content://" + authority));
        if (client == null) {
            throw new CallFailure("no Provider answers at " + authority, true);
        }
        Future<Bundle> f = BINDER.submit(() -> client.call(method, null, extras));
        try {
            return f.get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new CallFailure(method + ": no answer within " + CALL_TIMEOUT_MS + " ms", true);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RemoteException) {
                throw new CallFailure(method + ": the Provider's process died (" + cause + ")", true);
            }
            // What the Provider threw is data: surfaced, never retried.
            throw new CallFailure(method + ": the Provider threw " + clip(String.valueOf(cause)), false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CallFailure(method + ": interrupted", false);
        } finally {
            if (f.isDone()) {
                client.close();
            }
        }
    }

    // ------------------------------------------------------------------- helpers

    private static long now() {
        return System.currentTimeMillis();
    }

    private static int utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8).length;
    }

    /** Provider text in a message: at most 200 characters. */
    static String clip(String s) {
        return s == null ? "" : s.length() <= 200 ? s : s.substring(0, 200) + "…";
    }

    private static String sha256(byte[] bytes) {
        try {
            StringBuilder sb = new StringBuilder();
            for (byte b : MessageDigest.getInstance("SHA-256").digest(bytes)) {
                sb.append(String.format("%02x", b & 0xFF));
            }
            return sb.toString();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** For the agent's log: the tools of a connected Provider. */
    public List<String> tools(String authority) {
        Session s = sessions.get(authority);
        return s == null ? List.of() : new ArrayList<>(s.tools.keySet());
    }
}
