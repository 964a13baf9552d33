package com.example.cetp.notes

import android.app.PendingIntent
import android.content.ContentProvider
import android.content.ContentValues
import android.content.Intent
import android.database.Cursor
import android.net.Uri
import android.os.Binder
import android.os.Bundle
import android.util.Base64
import java.security.SecureRandom
import java.text.SimpleDateFormat
import java.util.Date
import java.util.Locale
import java.util.TimeZone
import java.util.concurrent.ConcurrentHashMap
import org.json.JSONArray
import org.json.JSONException
import org.json.JSONObject

/**
 * A small CETP v2 Provider base class: negotiate and sessions bound to the
 * caller's UID (§2.2), the Bundle envelope (§4.1, §5), get_provider_info,
 * list_tools and execute_tool (§4), side-effecting tools de-duplicated by
 * (UID, request_id) through the [Ledger] (§6), and the app's own
 * confirmation screen for the tools that ask the user (§4.3). It offers no
 * optional capability (§2.3): every call is answered synchronously, so
 * get_operation and cancel_operation answer UNSUPPORTED_CAPABILITY. A
 * subclass names itself and lists its [Tool]s.
 *
 * The order this app checks a call in (the spec orders none of it, beyond
 * the deadline before any side effect, §4.1): the envelope, the session,
 * the tool, then for a side-effecting tool the ledger (a replay is answered
 * from it whatever else the retry carries), then the deadline, then the
 * args. So a stale request with bad args is DEADLINE_EXCEEDED here.
 *
 * It is an example of a vendor's own base class, loaded by the JVM device
 * from the vendor's jar (scripts/jvm-jar-check.sh); a real app would build
 * on the ClawSeed SDK's base class instead.
 */
abstract class ToolProviderBase : ContentProvider() {
    /**
     * A tool: its descriptor and its body. [effect] "read" tools run at
     * once; the others go through the ledger. A tool with [confirm] asks the
     * user on this app's own screen first, showing what [confirm] says of
     * the call's args. [confirmation] is the annotation (§3.4): "always"
     * asks for every call, "provider_policy" only for the calls [confirm]
     * answers a summary for (null: this call is safe enough to run).
     */
    class Tool(
        val name: String,
        val title: String,
        val description: String,
        val scope: String,
        val effect: String,
        val risk: String,
        val destructive: Boolean,
        val idempotent: Boolean,
        inputSchema: String,
        outputSchema: String,
        val confirmation: String = "never",
        val confirm: ((JSONObject) -> String?)? = null,
        val run: (JSONObject) -> JSONObject,
    ) {
        init {
            require((confirmation == "never") == (confirm == null)) { "$name: a confirmation needs its summary" }
        }

        val input = JSONObject(inputSchema)
        val output = JSONObject(outputSchema)
        val isRead get() = effect == "read"
    }

    /** A request refused with a CETP error (§5): answered as a Bundle, never thrown to the caller. */
    class Refusal(val code: String, message: String, val retryable: Boolean = false) : Exception(message)

    private class Session(val uid: Int, val expiresAtMs: Long)

    protected abstract val providerName: String
    protected abstract val providerDescription: String
    protected abstract val tools: List<Tool>
    protected abstract val scopes: List<JSONObject>

    /** Whether the app [uid] runs as may use what [scope] guards (§7.1: authorization is the Provider's). */
    protected open fun holds(uid: Int, scope: String): Boolean = true

    private val sessions = ConcurrentHashMap<String, Session>()
    private val random = SecureRandom()

    override fun onCreate(): Boolean = true

    final override fun call(method: String, arg: String?, extras: Bundle?): Bundle {
        // The caller, first, on the Binder thread (§7.1).
        val uid = Binder.getCallingUid()
        val requestId = extras?.let { stringOf(it, "request_id") }
        return try {
            dispatch(uid, method, extras)
        } catch (r: Refusal) {
            error(requestId, r)
        }
    }

    private fun dispatch(uid: Int, method: String, extras: Bundle?): Bundle {
        if (method == "negotiate") return negotiate(uid, extras)
        if (method !in METHODS) throw Refusal("METHOD_NOT_FOUND", "unknown method")
        val e = extras ?: throw invalid("the request has no extras")
        val version = valueOf(e, "protocol_version")
        if (version !is Int) throw invalid("protocol_version must be the Int 2")
        if (version != VERSION) throw Refusal("UNSUPPORTED_VERSION", "this Provider speaks protocol version 2 only")
        val requestId = valueOf(e, "request_id")
        if (requestId !is String || !UUID.matches(requestId)) throw invalid("request_id must be a UUID string")
        val deadline = valueOf(e, "deadline_at_ms")
        if (deadline !is Long) throw invalid("deadline_at_ms must be a Long (Unix epoch milliseconds)")
        requireSession(uid, valueOf(e, "session_token") as? String)
        return when (method) {
            "get_provider_info" -> success(requestId, providerInfo())
            "list_tools" -> success(requestId, JSONObject().put("revision", REVISION).put("tools", toolList()))
            "execute_tool" -> execute(uid, requestId, deadline, e)
            "get_operation" -> throw Refusal("UNSUPPORTED_CAPABILITY", "async_operations was not negotiated")
            else -> throw Refusal("UNSUPPORTED_CAPABILITY", "cancellation was not negotiated")
        }
    }
    private fun negotiate(uid: Int, extras: Bundle?): Bundle {
        val versions = extras?.let { valueOf(it, "consumer_versions") }
        // An empty int[] is well-formed: it offers no version, so none is common (UNSUPPORTED_VERSION below).
        if (versions !is IntArray) throw invalid("consumer_versions must be an int[]")
        val caps = valueOf(extras, "consumer_capabilities")
        if (caps !is String) throw invalid("consumer_capabilities must be a JSON array in a String")
        try {
            val list = JSONArray(caps)
            for (i in 0 until list.length()) {
                if (list.get(i) !is String) throw invalid("consumer_capabilities must hold strings only")
            }
        } catch (x: JSONException) {
            throw invalid("consumer_capabilities is not a JSON array")
        }
        // No silent fallback to another version (§2.2).
        if (VERSION !in versions) throw Refusal("UNSUPPORTED_VERSION", "this Provider supports protocol version 2 only")
        val raw = ByteArray(32).also(random::nextBytes)
        val token = Base64.encodeToString(raw, Base64.URL_SAFE or Base64.NO_WRAP or Base64.NO_PADDING)
        val expires = System.currentTimeMillis() + SESSION_TTL_MS
        sessions[token] = Session(uid, expires)
        val limits = JSONObject()
            .put("max_request_bytes", MAX_REQUEST_BYTES)
            .put("max_inline_result_bytes", MAX_INLINE_RESULT_BYTES)
            .put("max_concurrent_requests", 4)
            .put("idempotency_window_seconds", 86400)
        val data = JSONObject()
            .put("selected_version", VERSION)
            .put("provider_id", context!!.packageName)
            .put("provider_name", providerName)
            .put("session_token", token)
            .put("expires_at", iso(expires))
            .put("capabilities", JSONArray())
            .put("limits", limits)
        return success(null, data)
    }

    private fun requireSession(uid: Int, token: String?) {
        if (token == null) throw Refusal("NEGOTIATION_REQUIRED", "no session_token: call negotiate first", true)
        val s = sessions[token]
        // Another caller's token is unknown here: it proves nothing about this caller.
        val anyCaller = Defect.on(Defect.SESSION_ANY_CALLER)
        if (s == null || (s.uid != uid && !anyCaller)) throw Refusal("NEGOTIATION_REQUIRED", "unknown session: negotiate again", true)
        if (System.currentTimeMillis() >= s.expiresAtMs) {
            sessions.remove(token)
            throw Refusal("NEGOTIATION_REQUIRED", "the session expired: negotiate again", true)
        }
    }

    private fun providerInfo(): JSONObject = JSONObject()
        .put("provider_id", context!!.packageName)
        .put("provider_name", providerName)
        .put("description", providerDescription)
        .put("schema_dialect", "https://json-schema.org/draft/2020-12/schema")
        .put("scopes", JSONArray(scopes))

    private fun toolList(): JSONArray {
        val out = JSONArray()
        for (t in tools) {
            val annotations = JSONObject()
                .put("effect", t.effect).put("risk", t.risk).put("destructive", t.destructive)
                .put("idempotent", t.idempotent).put("open_world", false)
                .put("confirmation", t.confirmation).put("execution", "sync")
            out.put(
                JSONObject().put("name", t.name).put("title", t.title).put("description", t.description)
                    .put("input_schema", t.input).put("output_schema", t.output)
                    .put("scopes", JSONArray(listOf(t.scope))).put("annotations", annotations),
            )
        }
        return out
    }

    private fun execute(uid: Int, requestId: String, deadline: Long, e: Bundle): Bundle {
        val name = valueOf(e, "tool_name") as? String ?: throw invalid("tool_name must be a String")
        val tool = tools.firstOrNull { it.name == name } ?: throw Refusal("TOOL_NOT_FOUND", "no such tool")
        // Before anything about the call is looked at: a caller without the scope learns nothing more (§3.4, §7.2).
        if (!holds(uid, tool.scope)) throw Refusal("PERMISSION_DENIED", "this app may not ${tool.title.lowercase()}")
        val argsText = valueOf(e, "args") as? String ?: throw invalid("args must be a JSON object in a String")
        if (argsText.toByteArray().size > MAX_REQUEST_BYTES) throw invalid("args are larger than max_request_bytes")
        val resume = valueOf(e, "resume_token")
        if (resume != null && resume !is String) throw invalid("resume_token must be a String")
        if (tool.isRead) {
            if (resume != null) throw invalid("a read tool takes no resume_token")
            checkDeadline(deadline)
            return success(requestId, inline(tool, parseArgs(tool, argsText)))
        }
        val key = Ledger.key(uid, requestId)
        val digest = Ledger.digest(tool.name, argsText)
        // One lock from the look-up to the commit: one executor per request (§6).
        synchronized(Ledger) {
            var record = if (Defect.on(Defect.NO_DEDUPE)) null else Ledger.find(key)
            if (record != null && (record.tool != tool.name || record.digest != digest) &&
                !Defect.on(Defect.DIGEST_IGNORED)
            ) {
                throw invalid("this request_id was used for another request")
            }
            record?.answer?.let { return replay(requestId, it) }
            if (!Defect.on(Defect.DEADLINE_IGNORED)) checkDeadline(deadline)
            val args = parseArgs(tool, argsText)
            // What the user is asked, or null when this call needs no asking (provider_policy, §3.4).
            val summary = tool.confirm?.invoke(args)
            if (summary != null) {
                var c = record?.confirmation
                if (c != null && System.currentTimeMillis() > c.expiresAtMs) {
                    // The user has to be asked again: the next call without a token starts over.
                    record!!.confirmation = null
                    if (resume != null) throw invalid("the confirmation expired; call again without the resume_token")
                    c = null
                }
                if (c == null) {
                    if (resume != null) throw invalid("this resume_token belongs to no confirmation of this request")
                    val fresh = record ?: Ledger.open(key, tool.name, digest).also { record = it }
                    fresh.confirmation = Ledger.confirmation(uid, requestId, summary)
                    return askUser(requestId, fresh.confirmation!!)
                }
                if (resume == null || c.approved == null) return askUser(requestId, c)
                if (resume != c.token) throw invalid("this resume_token is not valid for this request")
                c.used = true
                if (c.approved != true) {
                    val no = Refusal("USER_CANCELLED", "you declined in $providerName")
                    record!!.answer = Ledger.Answer(null, no)
                    throw no
                }
            } else if (resume != null) {
                // A token belongs to one confirmation of one request's args bytes (§4.3): this call asked for none.
                throw invalid("this call needs no confirmation; the resume_token belongs to another request")
            }
            val done = record ?: Ledger.open(key, tool.name, digest)
            val answer = try {
                Ledger.Answer(inline(tool, args).toString(), null)
            } catch (business: Refusal) {
                Ledger.Answer(null, business)
            }
            done.answer = answer
            return replay(requestId, answer)
        }
    }

    private fun checkDeadline(deadline: Long) {
        if (System.currentTimeMillis() > deadline) throw Refusal("DEADLINE_EXCEEDED", "the request's deadline has passed")
    }

    private fun parseArgs(tool: Tool, argsText: String): JSONObject {
        val args = try {
            JSONObject(argsText)
        } catch (x: JSONException) {
            throw Refusal("INVALID_ARGS", "args are not a JSON object")
        }
        Schema.problem(tool.input, args)?.let { throw Refusal("INVALID_ARGS", it) }
        return args
    }

    /** The tool's result, checked against its own output schema first (§4.2). */
    private fun inline(tool: Tool, args: JSONObject): JSONObject {
        val value = tool.run(args)
        if (Schema.problem(tool.output, value, "result") != null) {
            throw Refusal("INTERNAL_ERROR", "$providerName could not produce a valid result")
        }
        val data = JSONObject().put("kind", "inline").put("value", value)
        if (data.toString().toByteArray().size > MAX_INLINE_RESULT_BYTES) {
            throw Refusal("RESULT_TOO_LARGE", "the result is too large to return inline")
        }
        return data
    }

    /** USER_ACTION_REQUIRED with an explicit, immutable PendingIntent to this app's own screen (§4.3, §7.2). */
    private fun askUser(requestId: String, c: Ledger.Confirmation): Bundle {
        val intent = Intent(context, ConfirmActivity::class.java)
            .setData(Uri.parse("notes-confirm:" + c.token))
            .putExtra(ConfirmActivity.EXTRA_TOKEN, c.token)
        val pi = PendingIntent.getActivity(context, 0, intent, PendingIntent.FLAG_IMMUTABLE)
        return error(requestId, Refusal("USER_ACTION_REQUIRED", "Confirm in $providerName first")).apply {
            putParcelable("resolution", pi)
            putString("resume_token", c.token)
        }
    }

    // A ContentProvider's data methods: this Provider serves call() only.
    override fun query(uri: Uri, p: Array<String>?, s: String?, a: Array<String>?, o: String?): Cursor? = null
    override fun getType(uri: Uri): String? = null
    override fun insert(uri: Uri, values: ContentValues?): Uri? = null
    override fun delete(uri: Uri, s: String?, a: Array<String>?): Int = 0
    override fun update(uri: Uri, v: ContentValues?, s: String?, a: Array<String>?): Int = 0

    companion object {
        const val VERSION = 2
        const val MAX_REQUEST_BYTES = 65536
        const val MAX_INLINE_RESULT_BYTES = 262144
        const val SESSION_TTL_MS = 3_600_000L
        const val REVISION = "notes-3"
        private val METHODS = setOf("get_provider_info", "list_tools", "execute_tool", "get_operation", "cancel_operation")
        private val UUID = Regex("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

        fun invalid(message: String) = Refusal("INVALID_REQUEST", message)

        @Suppress("DEPRECATION")
        private fun valueOf(b: Bundle, key: String): Any? = b.get(key)

        private fun stringOf(b: Bundle, key: String): String? = valueOf(b, key) as? String

        private fun replay(requestId: String, a: Ledger.Answer): Bundle =
            a.refusal?.let { error(requestId, it) } ?: Bundle().apply {
                putString("status", "success")
                putInt("protocol_version", VERSION)
                putString("request_id", requestId)
                putString("data", a.data)
            }

        private fun success(requestId: String?, data: JSONObject): Bundle = Bundle().apply {
            putString("status", "success")
            putInt("protocol_version", VERSION)
            requestId?.let { putString("request_id", it) }
            putString("data", data.toString())
        }

        private fun error(requestId: String?, r: Refusal): Bundle = Bundle().apply {
            putString("status", "error")
            putInt("protocol_version", VERSION)
            requestId?.let { putString("request_id", it) }
            putString("error_code", r.code)
            putString("error_message", r.message)
            if (!Defect.on(Defect.RETRYABLE_MISSING)) putBoolean("retryable", r.retryable)
        }

        private fun iso(ms: Long): String = SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss'Z'", Locale.ROOT)
            .apply { timeZone = TimeZone.getTimeZone("UTC") }
            .format(Date(ms))
    }
}
