package com.example.cetp.notes

import android.content.ContentProvider
import android.content.ContentValues
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
 * A small CETP v2 Provider base class for read-only tools: negotiate and
 * sessions bound to the caller's UID (§2.2), the Bundle envelope (§4.1,
 * §5), get_provider_info, list_tools and execute_tool (§4). It offers no
 * optional capability (§2.3), so get_operation and cancel_operation answer
 * UNSUPPORTED_CAPABILITY. A subclass names itself and lists its [ReadTool]s.
 *
 * It is an example of a vendor's own base class, loaded by the JVM device
 * from the vendor's jar (scripts/jvm-jar-check.sh); a real app would build
 * on the ClawSeed SDK's base class instead.
 */
abstract class ToolProviderBase : ContentProvider() {
    /** A read tool: its descriptor fields and its body. */
    class ReadTool(
        val name: String,
        val title: String,
        val description: String,
        val scope: String,
        val inputSchema: String,
        val outputSchema: String,
        val run: (JSONObject) -> JSONObject,
    )

    /** A request refused with a CETP error (§5): answered as a Bundle, never thrown to the caller. */
    class Refusal(val code: String, message: String, val retryable: Boolean = false) : Exception(message)

    private class Session(val uid: Int, val expiresAtMs: Long)

    protected abstract val providerName: String
    protected abstract val providerDescription: String
    protected abstract val tools: List<ReadTool>
    protected abstract val scopes: List<JSONObject>

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
            "list_tools" -> success(requestId, JSONObject().put("revision", "notes-1").put("tools", toolList()))
            "execute_tool" -> execute(requestId, deadline, e)
            "get_operation" -> throw Refusal("UNSUPPORTED_CAPABILITY", "async_operations was not negotiated")
            else -> throw Refusal("UNSUPPORTED_CAPABILITY", "cancellation was not negotiated")
        }
    }

    private fun negotiate(uid: Int, extras: Bundle?): Bundle {
        val versions = extras?.let { valueOf(it, "consumer_versions") }
        if (versions !is IntArray || versions.isEmpty()) throw invalid("consumer_versions must be a non-empty int[]")
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
        if (s == null || s.uid != uid) throw Refusal("NEGOTIATION_REQUIRED", "unknown session: negotiate again", true)
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
                .put("effect", "read").put("risk", "low").put("destructive", false).put("idempotent", true)
                .put("open_world", false).put("confirmation", "never").put("execution", "sync")
            out.put(
                JSONObject().put("name", t.name).put("title", t.title).put("description", t.description)
                    .put("input_schema", JSONObject(t.inputSchema)).put("output_schema", JSONObject(t.outputSchema))
                    .put("scopes", JSONArray(listOf(t.scope))).put("annotations", annotations),
            )
        }
        return out
    }

    private fun execute(requestId: String, deadline: Long, e: Bundle): Bundle {
        val name = valueOf(e, "tool_name") as? String ?: throw invalid("tool_name must be a String")
        val tool = tools.firstOrNull { it.name == name } ?: throw Refusal("TOOL_NOT_FOUND", "no such tool")
        val argsText = valueOf(e, "args") as? String ?: throw invalid("args must be a JSON object in a String")
        if (argsText.toByteArray().size > MAX_REQUEST_BYTES) throw invalid("args are larger than max_request_bytes")
        val args = try {
            JSONObject(argsText)
        } catch (x: JSONException) {
            throw Refusal("INVALID_ARGS", "args are not a JSON object")
        }
        val resume = valueOf(e, "resume_token")
        if (resume != null && resume !is String) throw invalid("resume_token must be a String")
        if (System.currentTimeMillis() > deadline) throw Refusal("DEADLINE_EXCEEDED", "the request's deadline has passed")
        val inline = JSONObject().put("kind", "inline").put("value", tool.run(args))
        if (inline.toString().toByteArray().size > MAX_INLINE_RESULT_BYTES) {
            throw Refusal("RESULT_TOO_LARGE", "the result is too large to return inline")
        }
        return success(requestId, inline)
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
        private val METHODS = setOf("get_provider_info", "list_tools", "execute_tool", "get_operation", "cancel_operation")
        private val UUID = Regex("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

        fun invalid(message: String) = Refusal("INVALID_REQUEST", message)

        @Suppress("DEPRECATION")
        private fun valueOf(b: Bundle, key: String): Any? = b.get(key)

        private fun stringOf(b: Bundle, key: String): String? = valueOf(b, key) as? String

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
            putBoolean("retryable", r.retryable)
        }

        private fun iso(ms: Long): String = SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss'Z'", Locale.ROOT)
            .apply { timeZone = TimeZone.getTimeZone("UTC") }
            .format(Date(ms))
    }
}
