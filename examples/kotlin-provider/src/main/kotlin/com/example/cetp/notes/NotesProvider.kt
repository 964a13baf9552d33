package com.example.cetp.notes

import android.content.Context
import android.content.pm.PackageManager
import android.content.pm.ProviderInfo
import java.security.MessageDigest
import org.json.JSONArray
import org.json.JSONObject

/**
 * A notes app's CETP v2 Provider, in Kotlin, on its own base class
 * [ToolProviderBase]: `list_notes` reads, `add_note` creates (asking the
 * user first when the note is to be pinned to the lock screen),
 * `rename_note` updates, `delete_note` moves a note to the trash after the
 * user confirms it on this app's screen, `list_trash` shows the trash to
 * the assistants the manifest trusts, `label_sheet` renders a sheet of
 * labels, `notebook_stats` counts what changed.
 */
class NotesProvider : ToolProviderBase() {
    /** SHA-256 digests (hex) of the signing certificates whose apps may read the trash, from the manifest. */
    private var trashReaders = emptySet<String>()

    override fun attachInfo(context: Context, info: ProviderInfo) {
        super.attachInfo(context, info)
        trashReaders = (info.metaData?.getString(META_TRASH_READERS) ?: "")
            .split(',').map { it.trim().lowercase() }.filter { it.isNotEmpty() }.toSet()
    }

    /** Every caller holding the discovery permission reads and changes notes; the trash only trusted assistants see. */
    override fun holds(uid: Int, scope: String): Boolean =
        scope != TRASH || Defect.on(Defect.TRASH_FOR_ALL) || certificatesOf(uid).any { it in trashReaders }

    /** The certificates every package of [uid] is signed with (§7.1: who calls is the Binder UID, never the request). */
    @Suppress("DEPRECATION")
    private fun certificatesOf(uid: Int): Set<String> {
        val pm = context!!.packageManager
        val out = HashSet<String>()
        for (p in pm.getPackagesForUid(uid) ?: emptyArray()) {
            val signing = try {
                pm.getPackageInfo(p, PackageManager.GET_SIGNING_CERTIFICATES).signingInfo
            } catch (gone: PackageManager.NameNotFoundException) {
                null
            } ?: continue
            val signers = if (signing.hasMultipleSigners()) signing.apkContentsSigners else signing.signingCertificateHistory
            for (s in signers ?: emptyArray()) {
                out += MessageDigest.getInstance("SHA-256").digest(s.toByteArray()).joinToString("") { "%02x".format(it) }
            }
        }
        return out
    }

    override val providerName = "Sample Notes"
    override val providerDescription = "A notebook: list, add, rename and delete the user's notes."
    override val scopes = listOf(
        JSONObject().put("name", READ).put("title", "Read notes").put("description", "See your notes")
            .put("access", "read").put("sensitivity", "personal"),
        JSONObject().put("name", WRITE).put("title", "Change notes").put("description", "Add and delete notes")
            .put("access", "write").put("sensitivity", "personal"),
        JSONObject().put("name", TRASH).put("title", "Read the trash")
            .put("description", "See the notes you deleted").put("access", "read").put("sensitivity", "personal"),
    )
    override val tools = listOf(
        Tool(
            name = "list_notes",
            title = "List notes",
            description = "Lists the user's notes, the newest first, at most `limit` of them (20 unless said), " +
                "and how many there are in all.",
            scope = READ, effect = "read", risk = "low", destructive = false, idempotent = true,
            inputSchema = """{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":50}},""" +
                """"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"count":{"type":"integer","minimum":0},""" +
                """"notes":{"type":"array","items":$NOTE}},"required":["count","notes"]}""",
            run = ::listNotes,
        ),
        Tool(
            name = "add_note",
            title = "Add a note",
            description = "Adds a note with this title. A pinned note shows on the lock screen, where anyone " +
                "holding the phone reads it: pinning one asks you first in Sample Notes.",
            scope = WRITE, effect = "create", risk = "low", destructive = false, idempotent = false,
            inputSchema = """{"type":"object","properties":{"title":{"type":"string","minLength":1,""" +
                """"maxLength":$MAX_TITLE},"pinned":{"type":"boolean"}},"required":["title"],""" +
                """"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"note_id":{"type":"string"}},"required":["note_id"]}""",
            // Riskier than its annotation when pinned (§3.4): the lock screen shows it to anyone.
            confirmation = "provider_policy",
            confirm = { args ->
                if (args.optBoolean("pinned") && !Defect.on(Defect.PIN_UNCONFIRMED)) {
                    "Pin \"${args.getString("title")}\" to the lock screen, where anyone holding the phone can read it?"
                } else {
                    null
                }
            },
            run = ::addNote,
        ),
        Tool(
            name = "rename_note",
            title = "Rename a note",
            description = "Gives a note a new title.",
            scope = WRITE, effect = "update", risk = "low", destructive = false, idempotent = true,
            inputSchema = """{"type":"object","properties":{"note_id":{"type":"string","pattern":"^n[0-9]{1,9}$"},""" +
                """"title":{"type":"string","minLength":1,"maxLength":$MAX_TITLE}},"required":["note_id","title"],""" +
                """"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"note_id":{"type":"string"},"title":{"type":"string"}},""" +
                """"required":["note_id","title"]}""",
            run = ::renameNote,
        ),
        Tool(
            name = "delete_note",
            title = "Delete a note",
            description = "Moves one note to the trash, after you confirm it in Sample Notes.",
            scope = WRITE, effect = "delete", risk = "moderate", destructive = true, idempotent = true,
            inputSchema = """{"type":"object","properties":{"note_id":{"type":"string","pattern":"^n[0-9]{1,9}$"}},""" +
                """"required":["note_id"],"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"note_id":{"type":"string"}},"required":["note_id"]}""",
            confirmation = "always",
            confirm = { args -> "Delete the note \"${titleOf(args.getString("note_id"))}\"? Only trusted assistants can see the trash." },
            run = ::deleteNote,
        ),
        Tool(
            name = "list_trash",
            title = "List deleted notes",
            description = "Lists the notes in the trash, the last deleted first, at most `limit` of them (20 " +
                "unless said), and how many there are in all.",
            scope = TRASH, effect = "read", risk = "low", destructive = false, idempotent = true,
            inputSchema = """{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":50}},""" +
                """"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"count":{"type":"integer","minimum":0},""" +
                """"notes":{"type":"array","items":$NOTE}},"required":["count","notes"]}""",
            run = ::listTrash,
        ),
        Tool(
            name = "label_sheet",
            title = "Print labels",
            description = "A sheet of `copies` printable labels reading `text`, one string per label.",
            scope = READ, effect = "read", risk = "low", destructive = false, idempotent = true,
            inputSchema = """{"type":"object","properties":{"text":{"type":"string","minLength":1,""" +
                """"maxLength":$MAX_TITLE},"copies":{"type":"integer","minimum":1,"maximum":$MAX_COPIES}},""" +
                """"required":["text","copies"],"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"labels":{"type":"array","items":{"type":"string"}}},""" +
                """"required":["labels"]}""",
            run = ::labelSheet,
        ),
        Tool(
            name = "notebook_stats",
            title = "Notebook statistics",
            description = "How many notes there are, how many are in the trash, and how many changes " +
                "(notes added, renamed or deleted) the notebook has had.",
            scope = READ, effect = "read", risk = "low", destructive = false, idempotent = true,
            inputSchema = """{"type":"object","properties":{},"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"notes":{"type":"integer","minimum":0},""" +
                """"trashed":{"type":"integer","minimum":0},"changes":{"type":"integer","minimum":0}},""" +
                """"required":["notes","trashed","changes"]}""",
            run = { _ -> stats() },
        ),
    )

    private fun listNotes(args: JSONObject): JSONObject = synchronized(NOTES) {
        val limit = Schema.integerOf(args.opt("limit"))?.toInt() ?: 20
        val page = JSONArray()
        for ((id, title) in NOTES.entries.toList().asReversed().take(limit)) {
            page.put(JSONObject().put("note_id", id).put("title", title).put("pinned", id in PINNED))
        }
        JSONObject().put("count", NOTES.size).put("notes", page)
    }

    private fun listTrash(args: JSONObject): JSONObject = synchronized(NOTES) {
        val limit = Schema.integerOf(args.opt("limit"))?.toInt() ?: 20
        val page = JSONArray()
        for ((id, title) in TRASH_BIN.entries.toList().asReversed().take(limit)) {
            page.put(JSONObject().put("note_id", id).put("title", title))
        }
        JSONObject().put("count", TRASH_BIN.size).put("notes", page)
    }

    private fun labelSheet(args: JSONObject): JSONObject {
        val text = args.getString("text")
        val labels = JSONArray()
        repeat(args.getInt("copies")) { labels.put(text) }
        return JSONObject().put("labels", labels)
    }

    private fun stats(): JSONObject = synchronized(NOTES) {
        JSONObject().put("notes", NOTES.size).put("trashed", TRASH_BIN.size).put("changes", changes)
    }

    private fun addNote(args: JSONObject): JSONObject = synchronized(NOTES) {
        if (NOTES.size >= MAX_NOTES) throw Refusal("CONFLICT", "the notebook is full; delete a note first")
        val id = "n${++lastId}"
        NOTES[id] = args.getString("title")
        if (args.optBoolean("pinned")) PINNED += id
        changes++
        JSONObject().put("note_id", id)
    }

    private fun renameNote(args: JSONObject): JSONObject = synchronized(NOTES) {
        val id = args.getString("note_id")
        if (id !in NOTES) throw Refusal("CONFLICT", "there is no note $id")
        NOTES[id] = args.getString("title")
        changes++
        JSONObject().put("note_id", id).put("title", NOTES[id])
    }

    private fun deleteNote(args: JSONObject): JSONObject = synchronized(NOTES) {
        val id = args.getString("note_id")
        val title = NOTES.remove(id) ?: throw Refusal("CONFLICT", "there is no note $id")
        PINNED -= id
        // The trash keeps the newest deletions only: the memory stays bounded.
        if (TRASH_BIN.size >= MAX_NOTES) TRASH_BIN.remove(TRASH_BIN.keys.first())
        TRASH_BIN[id] = title
        changes++
        JSONObject().put("note_id", id)
    }

    private fun titleOf(id: String): String = synchronized(NOTES) { NOTES[id] ?: id }

    companion object {
        const val READ = "notes.read"
        const val WRITE = "notes.write"
        const val TRASH = "notes.trash"
        const val MAX_COPIES = 20_000

        /** Provider meta-data: certificate digests (SHA-256, hex, comma-separated) of the apps that may read the trash. */
        const val META_TRASH_READERS = "com.example.cetp.notes.trash_readers"
        const val MAX_TITLE = 200
        const val MAX_NOTES = 100_000
        private const val NOTE = """{"type":"object","properties":{"note_id":{"type":"string"},""" +
            """"title":{"type":"string"},"pinned":{"type":"boolean"}},"required":["note_id","title"]}"""

        /**
         * The notebook, oldest first, in memory for the process's lifetime
         * (see [Ledger] for why that is enough on the JVM device only).
         */
        private val NOTES = LinkedHashMap<String, String>().apply {
            put("n1", "buy milk")
            put("n2", "call the plumber")
            put("n3", "book the train")
        }
        private var lastId = 3

        /** The notes shown on the lock screen. */
        private val PINNED = HashSet<String>()

        /** Deleted notes, oldest first. */
        private val TRASH_BIN = LinkedHashMap<String, String>()

        /** Committed changes since the process started: the count `notebook_stats` reports. */
        private var changes = 0L
    }
}
