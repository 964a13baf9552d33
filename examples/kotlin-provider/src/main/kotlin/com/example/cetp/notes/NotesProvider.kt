package com.example.cetp.notes

import org.json.JSONArray
import org.json.JSONObject

/**
 * A notes app's CETP v2 Provider, in Kotlin, on its own base class
 * [ToolProviderBase]: `list_notes` reads, `add_note` creates, `rename_note`
 * updates, `delete_note` deletes after the user confirms it on this app's
 * screen.
 */
class NotesProvider : ToolProviderBase() {
    override val providerName = "Sample Notes"
    override val providerDescription = "A notebook: list, add, rename and delete the user's notes."
    override val scopes = listOf(
        JSONObject().put("name", READ).put("title", "Read notes").put("description", "See your notes")
            .put("access", "read").put("sensitivity", "personal"),
        JSONObject().put("name", WRITE).put("title", "Change notes").put("description", "Add and delete notes")
            .put("access", "write").put("sensitivity", "personal"),
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
            description = "Adds a note with this title.",
            scope = WRITE, effect = "create", risk = "low", destructive = false, idempotent = false,
            inputSchema = """{"type":"object","properties":{"title":{"type":"string","minLength":1,""" +
                """"maxLength":$MAX_TITLE}},"required":["title"],"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"note_id":{"type":"string"}},"required":["note_id"]}""",
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
            description = "Deletes one note for good, after you confirm it in Sample Notes.",
            scope = WRITE, effect = "delete", risk = "moderate", destructive = true, idempotent = true,
            inputSchema = """{"type":"object","properties":{"note_id":{"type":"string","pattern":"^n[0-9]{1,9}$"}},""" +
                """"required":["note_id"],"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"note_id":{"type":"string"}},"required":["note_id"]}""",
            confirm = { args -> "Delete the note \"${titleOf(args.getString("note_id"))}\" for good? This cannot be undone." },
            run = ::deleteNote,
        ),
    )

    private fun listNotes(args: JSONObject): JSONObject = synchronized(NOTES) {
        val limit = Schema.integerOf(args.opt("limit"))?.toInt() ?: 20
        val page = JSONArray()
        for ((id, title) in NOTES.entries.toList().asReversed().take(limit)) {
            page.put(JSONObject().put("note_id", id).put("title", title))
        }
        JSONObject().put("count", NOTES.size).put("notes", page)
    }

    private fun addNote(args: JSONObject): JSONObject = synchronized(NOTES) {
        if (NOTES.size >= MAX_NOTES) throw Refusal("CONFLICT", "the notebook is full; delete a note first")
        val id = "n${++lastId}"
        NOTES[id] = args.getString("title")
        JSONObject().put("note_id", id)
    }

    private fun renameNote(args: JSONObject): JSONObject = synchronized(NOTES) {
        val id = args.getString("note_id")
        if (id !in NOTES) throw Refusal("CONFLICT", "there is no note $id")
        NOTES[id] = args.getString("title")
        JSONObject().put("note_id", id).put("title", NOTES[id])
    }

    private fun deleteNote(args: JSONObject): JSONObject = synchronized(NOTES) {
        val id = args.getString("note_id")
        NOTES.remove(id) ?: throw Refusal("CONFLICT", "there is no note $id")
        JSONObject().put("note_id", id)
    }

    private fun titleOf(id: String): String = synchronized(NOTES) { NOTES[id] ?: id }

    companion object {
        const val READ = "notes.read"
        const val WRITE = "notes.write"
        const val MAX_TITLE = 200
        const val MAX_NOTES = 100_000
        private const val NOTE = """{"type":"object","properties":{"note_id":{"type":"string"},""" +
            """"title":{"type":"string"}},"required":["note_id","title"]}"""

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
    }
}
