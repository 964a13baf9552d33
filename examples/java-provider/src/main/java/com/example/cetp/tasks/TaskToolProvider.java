package com.example.cetp.tasks;

import android.app.PendingIntent;
import android.content.ContentProvider;
import android.content.ContentValues;
import android.content.Context;
import android.content.Intent;
import android.content.pm.PackageInfo;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.content.pm.Signature;
import android.database.Cursor;
import android.net.Uri;
import android.os.Binder;
import android.os.Bundle;
import android.os.ParcelFileDescriptor;
import android.util.Log;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * The CETP v2 Provider of a small task app: one ContentProvider whose
 * {@code call()} serves the protocol's methods (§4). Exported, guarded by
 * the normal permission {@code com.clawseed.permission.ACCESS_TOOLS} in the
 * manifest; authorization is this class's business (§7.1), never the
 * permission's.
 *
 * <p>Threads: {@code call()} runs on a Binder thread, several at once. The
 * caller's UID is read first, on that thread (§7.1). Durable state is in
 * {@link Store}, under its lock; sessions are in memory.
 */
public final class TaskToolProvider extends ContentProvider {
    static final String TAG = "CetpTasks";
    /** Provider meta-data: certificate digests (SHA-256, hex, comma-separated) granted tasks.manage. */
    static final String META_MANAGER_CERTS = "com.example.cetp.tasks.manager_certs";
    static final String PROVIDER_NAME = "Sample Tasks";
    static final long CONFIRMATION_TTL_MS = 300_000;
    /** How long this process keeps its copy of a result's read end once the writer is done (see largeResult). */
    static final long RESULT_FD_HOLD_MS = 10_000;
    /** A reader that has not taken the whole result by then is cut off. */
    static final long RESULT_FD_DEADLINE_MS = 120_000;

    private final Sessions sessions = new Sessions();
    private final SecureRandom random = new SecureRandom();
    private final Semaphore inFlight = new Semaphore(Sessions.MAX_CONCURRENT_REQUESTS);
    private final ExecutorService workers = Executors.newFixedThreadPool(2);
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor();
    private Set<String> managerCerts = new HashSet<>();
    private Store store;

    @Override
    public void attachInfo(Context context, ProviderInfo info) {
        super.attachInfo(context, info);
        String certs = info.metaData == null ? null : info.metaData.getString(META_MANAGER_CERTS);
        if (certs != null) {
            for (String c : certs.split(",")) {
                if (!c.trim().isEmpty()) {
                    managerCerts.add(c.trim().toLowerCase(java.util.Locale.ROOT));
                }
            }
        }
    }

    @Override
    public boolean onCreate() {
        store = Store.get(getContext());
        // Operations that were running when the process died go on (§4.4:
        // a restart must neither lose nor repeat them).
        try {
            List<String> unfinished = store.read(root -> {
                List<String> out = new ArrayList<>();
                JSONObject ops = root.getJSONObject("operations");
                for (Iterator<String> it = ops.keys(); it.hasNext(); ) {
                    String id = it.next();
                    String state = ops.getJSONObject(id).getString("state");
                    if (state.equals("queued") || state.equals("running")) {
                        out.add(id);
                    }
                }
                return out;
            });
            for (String id : unfinished) {
                workers.execute(() -> runOperation(id));
            }
        } catch (Envelope.Refusal e) {
            Log.w(TAG, "could not resume operations: " + e.getMessage());
        }
        return true;
    }

    @Override
    public void shutdown() {
        workers.shutdownNow();
        timers.shutdownNow();
    }

    /** Who is calling: captured on the Binder thread before anything else (§7.1). */
    static final class Caller {
        final int uid;
        final List<String> packages;
        final Set<String> certs;

        Caller(int uid, List<String> packages, Set<String> certs) {
            this.uid = uid;
            this.packages = packages;
            this.certs = certs;
        }
    }

    @Override
    public Bundle call(String method, String arg, Bundle extras) {
        int uid = Binder.getCallingUid();
        if (!inFlight.tryAcquire()) {
            Envelope.Refusal busy = new Envelope.Refusal("RATE_LIMITED", "too many requests at once", true);
            busy.retryAfterMs = 200;
            return Envelope.error(Envelope.requestIdOf(extras), busy);
        }
        long token = Binder.clearCallingIdentity();
        try {
            return dispatch(uid, method, extras);
        } catch (Envelope.Refusal r) {
            return Envelope.error(Envelope.requestIdOf(extras), r);
        } catch (RuntimeException e) {
            // Never a stack trace or internals to the caller (§5).
            Log.e(TAG, "call " + method + " failed", e);
            return Envelope.error(Envelope.requestIdOf(extras),
                    new Envelope.Refusal("INTERNAL_ERROR", "the app failed to handle the request", false));
        } finally {
            Binder.restoreCallingIdentity(token);
            inFlight.release();
        }
    }

    private Bundle dispatch(int uid, String method, Bundle extras) throws Envelope.Refusal {
        switch (method) {
            case "negotiate":
                return sessions.negotiate(uid, extras, providerId(), PROVIDER_NAME);
            case "get_provider_info":
            case "list_tools":
            case "execute_tool":
            case "get_operation":
            case "cancel_operation":
                break;
            default:
                throw new Envelope.Refusal("METHOD_NOT_FOUND", "unknown method", false);
        }
        Envelope.Common common = Envelope.common(extras);
        Sessions.Session session = sessions.require(uid, common.sessionToken);
        switch (method) {
            case "get_provider_info":
                return Envelope.success(common.requestId, providerInfo());
            case "list_tools":
                return Envelope.success(common.requestId, toolList(session));
            case "execute_tool":
                return execute(caller(uid), session, common, extras);
            case "get_operation":
                return getOperation(uid, session, common, extras);
            default:
                return cancelOperation(uid, session, common, extras);
        }
    }

    /** §3.1: the package name. */
    private String providerId() {
        return getContext().getPackageName();
    }

    private JSONObject providerInfo() {
        try {
            JSONArray scopes = new JSONArray()
                    .put(scope(Tools.READ, "Read tasks", "See your tasks and their state", "read"))
                    .put(scope(Tools.WRITE, "Change tasks", "Add and delete tasks", "write"))
                    .put(scope(Tools.MANAGE, "Manage tasks", "Complete many tasks at once", "write"));
            return new JSONObject()
                    .put("provider_id", providerId())
                    .put("provider_name", PROVIDER_NAME)
                    .put("description", "A to-do list: read, add, complete and delete tasks.")
                    .put("schema_dialect", "https://json-schema.org/draft/2020-12/schema")
                    .put("scopes", scopes);
        } catch (JSONException e) {
            throw new IllegalStateException(e);
        }
    }

    private static JSONObject scope(String name, String title, String description, String access)
            throws JSONException {
        return new JSONObject().put("name", name).put("title", title).put("description", description)
                .put("access", access).put("sensitivity", "personal");
    }

    private static JSONObject toolList(Sessions.Session session) {
        boolean async = session.has(Sessions.ASYNC);
        try {
            JSONArray tools = new JSONArray();
            for (Tools.Tool t : Tools.ALL.values()) {
                tools.put(t.descriptor(async));
            }
            // The revision names what the list depends on: the catalogue and whether tools may run in the background.
            return new JSONObject().put("revision", async ? "tasks-1-async" : "tasks-1-sync").put("tools", tools);
        } catch (JSONException e) {
            throw new IllegalStateException(e);
        }
    }

    // ---- callers and scopes (§7.1) ----

    @SuppressWarnings("deprecation")
    private Caller caller(int uid) {
        PackageManager pm = getContext().getPackageManager();
        String[] pkgs = pm.getPackagesForUid(uid);
        List<String> packages = new ArrayList<>();
        Set<String> certs = new HashSet<>();
        for (String p : pkgs == null ? new String[0] : pkgs) {
            packages.add(p);
            try {
                PackageInfo info = pm.getPackageInfo(p, PackageManager.GET_SIGNING_CERTIFICATES);
                if (info.signingInfo != null) {
                    Signature[] sigs = info.signingInfo.hasMultipleSigners()
                            ? info.signingInfo.getApkContentsSigners()
                            : info.signingInfo.getSigningCertificateHistory();
                    for (Signature s : sigs == null ? new Signature[0] : sigs) {
                        certs.add(sha256(s.toByteArray()));
                    }
                }
            } catch (PackageManager.NameNotFoundException e) {
                // A package that vanished grants nothing.
            }
        }
        return new Caller(uid, packages, certs);
    }

    /** Every caller may read and change tasks; only callers signed with a listed certificate may manage them. */
    private boolean granted(Caller caller, String scope) {
        if (scope.equals(Tools.MANAGE)) {
            for (String c : caller.certs) {
                if (managerCerts.contains(c)) {
                    return true;
                }
            }
            return false;
        }
        return !caller.packages.isEmpty();
    }

    // ---- execute_tool (§4.1-4.5, §6) ----

    @SuppressWarnings("deprecation")
    private Bundle execute(Caller caller, Sessions.Session session, Envelope.Common common, Bundle extras)
            throws Envelope.Refusal {
        Object name = extras.get("tool_name");
        if (!(name instanceof String)) {
            throw Envelope.invalidRequest("tool_name must be a String");
        }
        Tools.Tool tool = Tools.ALL.get(name);
        if (tool == null) {
            throw new Envelope.Refusal("TOOL_NOT_FOUND", "no such tool", false);
        }
        Object rawArgs = extras.get("args");
        if (!(rawArgs instanceof String)) {
            throw Envelope.invalidRequest("args must be a JSON object in a String");
        }
        String argsText = (String) rawArgs;
        if (argsText.getBytes(StandardCharsets.UTF_8).length > Sessions.MAX_REQUEST_BYTES) {
            throw Envelope.invalidRequest("args are larger than max_request_bytes");
        }
        JSONObject args;
        try {
            args = new JSONObject(argsText);
        } catch (JSONException e) {
            throw Tools.invalidArgs("args are not a JSON object");
        }
        for (String scope : tool.scopes) {
            if (!granted(caller, scope)) {
                throw new Envelope.Refusal("PERMISSION_DENIED", "this app is not allowed to " + tool.title, false);
            }
        }
        Tools.validate(tool, args);
        Object resume = extras.get("resume_token");
        if (resume != null && !(resume instanceof String)) {
            throw Envelope.invalidRequest("resume_token must be a String");
        }
        if (tool.isRead()) {
            checkDeadline(common);
            JSONObject out = runRead(tool, args);
            return inlineOrFile(session, common.requestId, out);
        }
        return executeOnce(caller, session, common, tool, argsText, args, (String) resume);
    }

    private static void checkDeadline(Envelope.Common common) throws Envelope.Refusal {
        if (System.currentTimeMillis() > common.deadlineAtMs) {
            throw new Envelope.Refusal("DEADLINE_EXCEEDED", "the request's deadline has passed", false);
        }
    }

    /**
     * A side-effecting tool, de-duplicated by (UID, request_id) whatever its
     * annotations (§6): the record binds the tool and a digest of the raw
     * args, and holds the terminal answer, the operation, or the pending
     * confirmation. Everything from the look-up to the commit happens under
     * the store's lock, so two identical requests have one executor.
     */
    private Bundle executeOnce(Caller caller, Sessions.Session session, Envelope.Common common, Tools.Tool tool,
            String argsText, JSONObject args, String resumeToken) throws Envelope.Refusal {
        String key = caller.uid + "/" + common.requestId;
        String digest = sha256((tool.name + "\n" + argsText).getBytes(StandardCharsets.UTF_8));
        boolean dedupe = !SeededDefect.on(SeededDefect.NO_DEDUPE);
        String[] startOperation = new String[1];
        Bundle answer = store.edit(root -> {
            JSONObject records = root.getJSONObject("records");
            JSONObject record = dedupe ? records.optJSONObject(key) : null;
            if (record != null) {
                if (!record.getString("tool").equals(tool.name) || !record.getString("digest").equals(digest)) {
                    throw Envelope.invalidRequest("this request_id was used for another request");
                }
                if (record.has("answer")) {
                    return replay(common.requestId, record.getJSONObject("answer"));
                }
                if (record.has("operation_id")) {
                    String id = record.getString("operation_id");
                    // An operation is announced only to a session that
                    // negotiated async_operations (§2.3); another session of
                    // the caller gets its end, or is asked to come back.
                    if (session.has(Sessions.ASYNC)) {
                        return acceptedAnswer(common.requestId, id);
                    }
                    return operationEnd(common.requestId, root.getJSONObject("operations").optJSONObject(id));
                }
            } else if (resumeToken != null) {
                throw Envelope.invalidRequest("resume_token does not belong to this request");
            }
            checkDeadline(common);
            if (Tools.needsConfirmation(tool, args)) {
                String confirmation = record == null ? null : record.optString("confirmation", null);
                if (confirmation == null) {
                    confirmation = newConfirmation(root, caller, tool, digest, common.requestId, argsText);
                    record = new JSONObject().put("tool", tool.name).put("digest", digest)
                            .put("confirmation", confirmation);
                    records.put(key, record);
                    return askUser(common.requestId, confirmation, tool);
                }
                JSONObject c = root.getJSONObject("confirmations").getJSONObject(confirmation);
                if (resumeToken == null) {
                    return askUser(common.requestId, confirmation, tool);
                }
                if (!resumeToken.equals(confirmation) || c.optBoolean("used")) {
                    throw Envelope.invalidRequest("resume_token is not valid for this request");
                }
                if (System.currentTimeMillis() > c.getLong("expires_at_ms")) {
                    throw Envelope.invalidRequest("the confirmation expired; start a new request");
                }
                String decision = c.optString("decision", "");
                if (decision.isEmpty()) {
                    return askUser(common.requestId, confirmation, tool);
                }
                c.put("used", true);
                if (!decision.equals("approved")) {
                    Envelope.Refusal cancelled = new Envelope.Refusal("USER_CANCELLED", "the user declined", false);
                    record.put("answer", errorRecord(cancelled));
                    return Envelope.error(common.requestId, cancelled);
                }
            }
            if (session.has(Sessions.ASYNC) && Tools.wantsBackground(tool, args)) {
                String id = "op_" + hex(16);
                JSONObject op = new JSONObject().put("uid", caller.uid).put("request_id", common.requestId)
                        .put("tool", tool.name).put("args", argsText).put("state", "queued")
                        .put("created_ms", System.currentTimeMillis());
                root.getJSONObject("operations").put(id, op);
                records.put(key, new JSONObject().put("tool", tool.name).put("digest", digest).put("operation_id", id));
                startOperation[0] = id;
                return acceptedAnswer(common.requestId, id);
            }
            JSONObject stored;
            Bundle out;
            try {
                JSONObject value = commit(root, tool, args);
                JSONObject data = new JSONObject().put("kind", "inline").put("value", value);
                out = Envelope.success(common.requestId, data);
                stored = new JSONObject().put("status", "success").put("data", data.toString());
            } catch (Envelope.Refusal business) {
                out = Envelope.error(common.requestId, business);
                stored = errorRecord(business);
            }
            records.put(key, new JSONObject().put("tool", tool.name).put("digest", digest).put("answer", stored));
            return out;
        });
        if (startOperation[0] != null) {
            String id = startOperation[0];
            workers.execute(() -> runOperation(id));
        }
        return answer;
    }

    private static JSONObject errorRecord(Envelope.Refusal r) throws JSONException {
        return new JSONObject().put("status", "error").put("error", Envelope.errorObject(r));
    }

    private static Bundle replay(String requestId, JSONObject answer) throws JSONException {
        if (answer.getString("status").equals("success")) {
            Bundle out = new Bundle();
            out.putString("status", "success");
            out.putInt("protocol_version", Envelope.VERSION);
            out.putString("request_id", requestId);
            out.putString("data", answer.getString("data"));
            return out;
        }
        JSONObject e = answer.getJSONObject("error");
        return Envelope.error(requestId, new Envelope.Refusal(e.getString("error_code"), e.getString("error_message"),
                e.getBoolean("retryable")));
    }

    /**
     * The end of an operation as the answer of the request that started it:
     * its result, its error, CANCELLED; while it still runs, UNAVAILABLE
     * with a time to ask again (§5: retryable).
     */
    private static Bundle operationEnd(String requestId, JSONObject op) throws JSONException {
        String state = op == null ? "" : op.getString("state");
        switch (state) {
            case "succeeded":
                return Envelope.success(requestId, op.getJSONObject("result"));
            case "failed":
            case "cancelled":
                JSONObject e = op.getJSONObject("error");
                return Envelope.error(requestId, new Envelope.Refusal(e.getString("error_code"),
                        e.getString("error_message"), e.getBoolean("retryable")));
            default:
                Envelope.Refusal later = new Envelope.Refusal("UNAVAILABLE",
                        "the execution started under this request_id is still running; ask again with the same request_id",
                        true);
                later.retryAfterMs = 500;
                return Envelope.error(requestId, later);
        }
    }

    private static Bundle acceptedAnswer(String requestId, String operationId) throws JSONException {
        return Envelope.accepted(requestId, new JSONObject().put("operation_id", operationId).put("poll_after_ms", 500));
    }

    /** Applies a side-effecting tool to the tasks; called under the store's lock. One call, one effect. */
    private static JSONObject commit(JSONObject root, Tools.Tool tool, JSONObject args)
            throws JSONException, Envelope.Refusal {
        JSONObject tasks = root.getJSONObject("tasks");
        JSONObject out = new JSONObject();
        switch (tool.name) {
            case Tools.ADD_TASK: {
                long n = root.getLong("next_id");
                root.put("next_id", n + 1);
                String id = "t" + n;
                tasks.put(id, new JSONObject().put("title", args.getString("title")).put("done", false));
                out.put("task_id", id);
                break;
            }
            case Tools.DELETE_TASK: {
                String id = args.getString("task_id");
                if (!tasks.has(id)) {
                    throw new Envelope.Refusal("CONFLICT", "there is no task " + id, false);
                }
                tasks.remove(id);
                out.put("deleted", true);
                break;
            }
            case Tools.COMPLETE_TASKS: {
                List<String> ids = new ArrayList<>();
                JSONArray named = args.optJSONArray("task_ids");
                if (args.optBoolean("all", false)) {
                    for (Iterator<String> it = tasks.keys(); it.hasNext(); ) {
                        ids.add(it.next());
                    }
                }
                for (int i = 0; named != null && i < named.length(); i++) {
                    String id = named.getString(i);
                    if (!tasks.has(id)) {
                        throw new Envelope.Refusal("CONFLICT", "there is no task " + id, false);
                    }
                    ids.add(id);
                }
                for (String id : ids) {
                    tasks.getJSONObject(id).put("done", true);
                }
                out.put("completed", ids.size());
                break;
            }
            default:
                throw new IllegalStateException("not a side-effecting tool: " + tool.name);
        }
        root.put("effects", root.getLong("effects") + 1);
        return out;
    }

    private JSONObject runRead(Tools.Tool tool, JSONObject args) throws Envelope.Refusal {
        return store.read(root -> {
            JSONObject tasks = root.getJSONObject("tasks");
            switch (tool.name) {
                case Tools.GET_STATS:
                    return new JSONObject().put("tasks", tasks.length()).put("effects", root.getLong("effects"));
                case Tools.LIST_TASKS: {
                    boolean done = args.optBoolean("include_done", true);
                    JSONArray list = new JSONArray();
                    for (Iterator<String> it = tasks.keys(); it.hasNext(); ) {
                        String id = it.next();
                        JSONObject t = tasks.getJSONObject(id);
                        if (done || !t.getBoolean("done")) {
                            list.put(new JSONObject().put("task_id", id).put("title", t.getString("title"))
                                    .put("done", t.getBoolean("done")));
                        }
                    }
                    return new JSONObject().put("tasks", list);
                }
                case Tools.EXPORT_TASKS: {
                    JSONArray lines = new JSONArray();
                    int copies = args.getInt("copies");
                    for (int i = 0; i < copies; i++) {
                        lines.put(String.format(java.util.Locale.ROOT, "%06d export of %d tasks, %d changes so far",
                                i, tasks.length(), root.getLong("effects")));
                    }
                    return new JSONObject().put("lines", lines);
                }
                default:
                    throw new IllegalStateException("not a read tool: " + tool.name);
            }
        });
    }

    /**
     * §4.2 inline, or §4.5 a file when the JSON is over
     * max_inline_result_bytes: then only with large_results negotiated, else
     * RESULT_TOO_LARGE.
     */
    private Bundle inlineOrFile(Sessions.Session session, String requestId, JSONObject value)
            throws Envelope.Refusal {
        try {
            JSONObject inline = new JSONObject().put("kind", "inline").put("value", value);
            if (inline.toString().getBytes(StandardCharsets.UTF_8).length <= Sessions.MAX_INLINE_RESULT_BYTES) {
                return Envelope.success(requestId, inline);
            }
            if (!session.has(Sessions.LARGE_RESULTS)) {
                throw new Envelope.Refusal("RESULT_TOO_LARGE", "the result is too large to return inline", false);
            }
            return largeResult(requestId, value.toString().getBytes(StandardCharsets.UTF_8));
        } catch (JSONException e) {
            throw new IllegalStateException(e);
        }
    }

    private Bundle largeResult(String requestId, byte[] bytes) throws Envelope.Refusal {
        if (SeededDefect.on(SeededDefect.WRITABLE_RESULT_FD)) {
            return fileResult(requestId, writableCopy(bytes), bytes);
        }
        ParcelFileDescriptor[] pipe;
        try {
            // A reliable pipe: the reader learns from checkError whether the writer finished.
            pipe = ParcelFileDescriptor.createReliablePipe();
        } catch (IOException e) {
            throw new Envelope.Refusal("UNAVAILABLE", "could not open a pipe for the result", true);
        }
        ParcelFileDescriptor readEnd = pipe[0];
        ParcelFileDescriptor writeEnd = pipe[1];
        // A reader that never reads must not hold the writer forever: past
        // the deadline both ends close, which wakes a blocked write.
        java.util.concurrent.ScheduledFuture<?> cutOff = timers.schedule(() -> {
            closeQuietly(writeEnd);
            closeQuietly(readEnd);
        }, RESULT_FD_DEADLINE_MS, TimeUnit.MILLISECONDS);
        // One thread per result, not the operations' pool: a result must
        // never wait behind background work.
        Thread writer = new Thread(() -> {
            try (OutputStream out = new ParcelFileDescriptor.AutoCloseOutputStream(writeEnd)) {
                out.write(bytes);
            } catch (IOException e) {
                // The reader closed early or was cut off.
                Log.w(TAG, "result pipe: " + e.getMessage());
            }
            // Binder duplicated the read end into the reply long ago; this
            // process's own copy goes once the reader has had the bytes.
            try {
                Thread.sleep(RESULT_FD_HOLD_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            cutOff.cancel(false);
            closeQuietly(readEnd);
        }, "cetp-result-writer");
        writer.setDaemon(true);
        writer.start();
        return fileResult(requestId, readEnd, bytes);
    }

    private static Bundle fileResult(String requestId, ParcelFileDescriptor fd, byte[] bytes) {
        try {
            JSONObject data = new JSONObject().put("kind", "file").put("media_type", "application/json")
                    .put("size_bytes", bytes.length).put("sha256", sha256(bytes));
            Bundle out = Envelope.success(requestId, data);
            out.putParcelable("result_fd", fd);
            return out;
        } catch (JSONException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The seeded defect's result: a file opened for reading and writing. */
    private ParcelFileDescriptor writableCopy(byte[] bytes) throws Envelope.Refusal {
        try {
            java.io.File f = java.io.File.createTempFile("result", ".json", getContext().getCacheDir());
            java.nio.file.Files.write(f.toPath(), bytes);
            ParcelFileDescriptor fd = ParcelFileDescriptor.open(f, ParcelFileDescriptor.MODE_READ_WRITE);
            if (!f.delete()) {
                Log.w(TAG, "could not delete " + f);
            }
            return fd;
        } catch (IOException e) {
            throw new Envelope.Refusal("UNAVAILABLE", "could not write the result", true);
        }
    }

    // ---- confirmation (§4.3, §7.2) ----

    private String newConfirmation(JSONObject root, Caller caller, Tools.Tool tool, String digest, String requestId,
            String argsText) throws JSONException {
        String id = hex(32);
        root.getJSONObject("confirmations").put(id, new JSONObject().put("uid", caller.uid).put("tool", tool.name)
                .put("digest", digest).put("request_id", requestId).put("args", argsText)
                .put("expires_at_ms", System.currentTimeMillis() + CONFIRMATION_TTL_MS));
        return id;
    }

    /** USER_ACTION_REQUIRED with an explicit, immutable PendingIntent to this app's own screen (§4.3, §7.2). */
    private Bundle askUser(String requestId, String confirmation, Tools.Tool tool) {
        Intent intent = new Intent(getContext(), ConfirmActivity.class)
                .setData(Uri.parse("cetp-confirm:" + confirmation))
                .putExtra(ConfirmActivity.EXTRA_CONFIRMATION, confirmation);
        int flags = SeededDefect.on(SeededDefect.MUTABLE_PENDING_INTENT)
                ? PendingIntent.FLAG_MUTABLE
                : PendingIntent.FLAG_IMMUTABLE;
        PendingIntent pi = PendingIntent.getActivity(getContext(), 0, intent, flags | PendingIntent.FLAG_UPDATE_CURRENT);
        Bundle out = Envelope.error(requestId, new Envelope.Refusal("USER_ACTION_REQUIRED",
                "Confirm in " + PROVIDER_NAME + ": " + tool.title, false));
        out.putParcelable("resolution", pi);
        out.putString("resume_token", confirmation);
        return out;
    }

    // ---- operations (§4.4) ----

    private void runOperation(String id) {
        try {
            for (int step = 0; step < 4; step++) {
                int current = step;
                boolean goOn = store.edit(root -> {
                    JSONObject op = root.getJSONObject("operations").getJSONObject(id);
                    if (op.optBoolean("cancel")) {
                        op.put("state", "cancelled");
                        op.put("error", Envelope.errorObject(
                                new Envelope.Refusal("CANCELLED", "the operation was cancelled", false)));
                        return false;
                    }
                    if (!op.getString("state").equals("queued") && !op.getString("state").equals("running")) {
                        return false;
                    }
                    op.put("state", "running");
                    op.put("progress", new JSONObject().put("current", current).put("total", 4));
                    return true;
                });
                if (!goOn) {
                    return;
                }
                Thread.sleep(300);
            }
            store.edit(root -> {
                JSONObject op = root.getJSONObject("operations").getJSONObject(id);
                if (!op.getString("state").equals("running")) {
                    return null;
                }
                if (op.optBoolean("cancel")) {
                    op.put("state", "cancelled");
                    op.put("error", Envelope.errorObject(
                            new Envelope.Refusal("CANCELLED", "the operation was cancelled", false)));
                    return null;
                }
                Tools.Tool tool = Tools.ALL.get(op.getString("tool"));
                try {
                    JSONObject value = commit(root, tool, new JSONObject(op.getString("args")));
                    op.put("state", "succeeded");
                    op.put("result", new JSONObject().put("kind", "inline").put("value", value));
                } catch (Envelope.Refusal business) {
                    op.put("state", "failed");
                    op.put("error", Envelope.errorObject(business));
                }
                op.remove("progress");
                return null;
            });
        } catch (InterruptedException e) {
            // The process is going away; the operation resumes when it comes back.
            Thread.currentThread().interrupt();
        } catch (Envelope.Refusal e) {
            Log.w(TAG, "operation " + id + ": " + e.getMessage());
        }
    }

    /** The caller's own operation, created with this request_id (§4.1, §4.4). */
    @SuppressWarnings("deprecation")
    private static JSONObject ownOperation(JSONObject root, int uid, Envelope.Common common, Bundle extras)
            throws JSONException, Envelope.Refusal {
        Object id = extras.get("operation_id");
        if (!(id instanceof String)) {
            throw Envelope.invalidRequest("operation_id must be a String");
        }
        JSONObject op = root.getJSONObject("operations").optJSONObject((String) id);
        // Another caller's operation is answered as an unknown one: it does not exist for them.
        if (op == null || op.getInt("uid") != uid) {
            throw Envelope.invalidRequest("no such operation");
        }
        if (!op.getString("request_id").equals(common.requestId)) {
            throw Envelope.invalidRequest("request_id is not the one that created this operation");
        }
        return op;
    }

    private Bundle getOperation(int uid, Sessions.Session session, Envelope.Common common, Bundle extras)
            throws Envelope.Refusal {
        if (!session.has(Sessions.ASYNC)) {
            throw new Envelope.Refusal("UNSUPPORTED_CAPABILITY", "async_operations was not negotiated", false);
        }
        return store.read(root -> {
            JSONObject op = ownOperation(root, uid, common, extras);
            Object id = extras.getString("operation_id");
            String state = op.getString("state");
            JSONObject data = new JSONObject().put("operation_id", id).put("state", state);
            if (op.has("progress")) {
                data.put("progress", op.getJSONObject("progress"));
            }
            if (state.equals("queued") || state.equals("running")) {
                data.put("poll_after_ms", 300);
            }
            if (op.has("result")) {
                data.put("result", op.getJSONObject("result"));
            }
            if (op.has("error")) {
                data.put("error", op.getJSONObject("error"));
            }
            return Envelope.success(common.requestId, data);
        });
    }

    private Bundle cancelOperation(int uid, Sessions.Session session, Envelope.Common common, Bundle extras)
            throws Envelope.Refusal {
        if (!session.has(Sessions.CANCELLATION)) {
            throw new Envelope.Refusal("UNSUPPORTED_CAPABILITY", "cancellation was not negotiated", false);
        }
        return store.edit(root -> {
            JSONObject op = ownOperation(root, uid, common, extras);
            String state = op.getString("state");
            if (!state.equals("queued") && !state.equals("running")) {
                // Finished: its effect is committed, or it never had one (§4.4).
                throw new Envelope.Refusal("CONFLICT", "the operation has already finished", false);
            }
            op.put("cancel", true);
            return Envelope.success(common.requestId,
                    new JSONObject().put("operation_id", extras.getString("operation_id"))
                            .put("state", "cancellation_requested"));
        });
    }

    // ---- helpers ----

    private static void closeQuietly(ParcelFileDescriptor pfd) {
        try {
            pfd.close();
        } catch (IOException ignored) {
            // Closing anyway.
        }
    }

    private String hex(int bytes) {
        byte[] raw = new byte[bytes];
        random.nextBytes(raw);
        StringBuilder sb = new StringBuilder();
        for (byte b : raw) {
            sb.append(String.format("%02x", b & 0xFF));
        }
        return sb.toString();
    }

    static String sha256(byte[] data) {
        try {
            StringBuilder sb = new StringBuilder();
            for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
                sb.append(String.format("%02x", b & 0xFF));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    // A tool Provider serves call() only; the table methods answer nothing.

    @Override
    public Cursor query(Uri uri, String[] projection, String selection, String[] selectionArgs, String sortOrder) {
        return null;
    }

    @Override
    public String getType(Uri uri) {
        return null;
    }

    @Override
    public Uri insert(Uri uri, ContentValues values) {
        return null;
    }

    @Override
    public int delete(Uri uri, String selection, String[] selectionArgs) {
        return 0;
    }

    @Override
    public int update(Uri uri, ContentValues values, String selection, String[] selectionArgs) {
        return 0;
    }
}
