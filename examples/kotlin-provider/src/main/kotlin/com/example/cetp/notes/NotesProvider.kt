package com.example.cetp.notes

import org.json.JSONArray
import org.json.JSONObject

/**
 * A notes app's CETP v2 Provider, in Kotlin, on its own base class
 * [ToolProviderBase]: one read tool, `list_notes`.
 */
class NotesProvider : ToolProviderBase() {
    override val providerName = "Sample Notes"
    override val providerDescription = "A notebook: list the user's notes."
    override val scopes = listOf(
        JSONObject().put("name", READ).put("title", "Read notes").put("description", "See your notes")
            .put("access", "read").put("sensitivity", "personal"),
    )
    override val tools = listOf(
        ReadTool(
            name = "list_notes",
            title = "List notes",
            description = "Lists the user's notes, the newest first.",
            scope = READ,
            inputSchema = """{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":50}},""" +
                """"additionalProperties":false}""",
            outputSchema = """{"type":"object","properties":{"notes":{"type":"array","items":{"type":"string"}}},""" +
                """"required":["notes"]}""",
            run = ::listNotes,
        ),
    )

    private fun listNotes(args: JSONObject): JSONObject {
        val extra = args.keys().asSequence().firstOrNull { it != "limit" }
        if (extra != null) throw Refusal("INVALID_ARGS", "unknown argument: $extra")
        val limit = when (val l = args.opt("limit")) {
            null -> NOTES.size
            is Int -> if (l in 1..50) l else throw Refusal("INVALID_ARGS", "limit must be 1 to 50")
            else -> throw Refusal("INVALID_ARGS", "limit must be an integer")
        }
        return JSONObject().put("notes", JSONArray(NOTES.take(limit)))
    }

    companion object {
        const val READ = "notes.read"
        private val NOTES = listOf("buy milk", "call the plumber", "book the train")
    }
}
