package com.example.cetp.notes

import java.security.MessageDigest
import java.security.SecureRandom

/**
 * What this app remembers of side-effecting requests: for each (caller UID,
 * request_id) the tool and a digest of the raw args it came with, and its
 * terminal answer once there is one (§6), or the confirmation it waits for
 * (§4.3). The provider_id is part of the key implicitly: one ledger per app.
 *
 * Held in memory, in this process, for the process's lifetime. That is
 * enough on the JVM device (one process per run, never restarted) and for
 * the spec's 86400 s window there, but NOT for a phone, where the process
 * dies whenever Android needs the memory: a real app keeps this in the same
 * database transaction as its notes (§4.4, §10). Every access holds the
 * ledger's lock, which also serializes the commits: two identical requests
 * arriving together have one executor (§6).
 */
object Ledger {
    /** A terminal answer as it is replayed: a success's data, or a refusal. */
    class Answer(val data: String?, val refusal: ToolProviderBase.Refusal?)

    class Record(val tool: String, val digest: String) {
        var answer: Answer? = null
        var confirmation: Confirmation? = null
    }

    /** A confirmation the app's own screen asks the user for (§4.3), and what the user said. */
    class Confirmation(
        val token: String,
        val uid: Int,
        val requestId: String,
        val summary: String,
        val expiresAtMs: Long,
    ) {
        var approved: Boolean? = null
        var used = false
    }

    /** Records kept at most; beyond it new side effects wait (UNAVAILABLE) rather than the memory grow unbounded. */
    const val MAX_RECORDS = 200_000

    /** How long the user has to decide, and the resume_token lives (§4.3). Declared in profile.toml's [timing]. */
    const val CONFIRMATION_TTL_MS = 60_000L

    private val records = HashMap<String, Record>()
    private val byToken = HashMap<String, Confirmation>()
    private val random = SecureRandom()

    fun key(uid: Int, requestId: String) = "$uid/$requestId"

    /** Call only under `synchronized(Ledger)`. */
    fun find(key: String): Record? = records[key]

    /** Call only under `synchronized(Ledger)`. */
    fun open(key: String, tool: String, digest: String): Record {
        if (records.size >= MAX_RECORDS) {
            throw ToolProviderBase.Refusal("UNAVAILABLE", "too many requests remembered; try again later", true)
        }
        return Record(tool, digest).also { records[key] = it }
    }

    /** Call only under `synchronized(Ledger)`. */
    fun forget(key: String) {
        records.remove(key)
    }

    /** Call only under `synchronized(Ledger)`: a new confirmation for [uid]'s request. */
    fun confirmation(uid: Int, requestId: String, summary: String): Confirmation {
        val token = token()
        val c = Confirmation(token, uid, requestId, summary, System.currentTimeMillis() + CONFIRMATION_TTL_MS)
        byToken[token] = c
        return c
    }

    /** The confirmation screen's view: the summary to show, or null when there is nothing left to decide. */
    fun pending(token: String?): String? = synchronized(this) {
        val c = byToken[token ?: return null] ?: return null
        if (c.used || c.approved != null || System.currentTimeMillis() > c.expiresAtMs) null else c.summary
    }

    /** The user's decision on the confirmation screen; only the first counts. */
    fun decide(token: String, approved: Boolean) = synchronized(this) {
        val c = byToken[token]
        if (c != null && c.approved == null && !c.used) c.approved = approved
    }

    fun digest(tool: String, argsText: String): String {
        val sha = MessageDigest.getInstance("SHA-256")
        // The raw args bytes, not their meaning: {"a":1,"b":2} and {"b":2,"a":1} are other content (§4.3, §6).
        sha.update(tool.toByteArray())
        sha.update(0)
        sha.update(argsText.toByteArray(Charsets.UTF_8))
        return sha.digest().joinToString("") { "%02x".format(it) }
    }

    fun token(): String {
        val raw = ByteArray(24).also(random::nextBytes)
        return raw.joinToString("") { "%02x".format(it) }
    }
}
