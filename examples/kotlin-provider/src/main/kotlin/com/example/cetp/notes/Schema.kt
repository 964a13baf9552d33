package com.example.cetp.notes

import org.json.JSONArray
import org.json.JSONObject

/**
 * The part of JSON Schema 2020-12 this app's own schemas use (type,
 * properties, required, additionalProperties: false, items, minLength,
 * maxLength, pattern, minimum, maximum). The app checks every args object
 * against its tool's input schema (§7.3: args are untrusted) and every
 * result against the output schema (§4.2) with it. It is not a general
 * validator: a keyword it does not know is a mistake of ours, so it fails
 * loudly instead of passing quietly.
 */
object Schema {
    private val KNOWN = setOf(
        "type", "properties", "required", "additionalProperties", "items",
        "minLength", "maxLength", "pattern", "minimum", "maximum", "description",
    )

    /** The first way [value] breaks [schema], as a short message naming where; null when it fits. */
    fun problem(schema: JSONObject, value: Any?, at: String = "args"): String? {
        val unknown = schema.keys().asSequence().firstOrNull { it !in KNOWN }
        check(unknown == null) { "schema keyword not supported: $unknown" }
        when (schema.optString("type")) {
            "object" -> return objectProblem(schema, value, at)
            "array" -> {
                if (value !is JSONArray) return "$at must be an array"
                val items = schema.optJSONObject("items") ?: return null
                for (i in 0 until value.length()) problem(items, value.opt(i), "$at[$i]")?.let { return it }
            }
            "string" -> {
                if (value !is String) return "$at must be a string"
                val length = value.codePointCount(0, value.length)
                if (schema.has("minLength") && length < schema.getInt("minLength")) return "$at is too short"
                if (schema.has("maxLength") && length > schema.getInt("maxLength")) return "$at is too long"
                if (schema.has("pattern") && !Regex(schema.getString("pattern")).containsMatchIn(value)) {
                    return "$at does not have the expected form"
                }
            }
            "integer" -> {
                val n = integerOf(value) ?: return "$at must be an integer"
                if (schema.has("minimum") && n < schema.getLong("minimum")) return "$at is below its minimum"
                if (schema.has("maximum") && n > schema.getLong("maximum")) return "$at is above its maximum"
            }
            "boolean" -> if (value !is Boolean) return "$at must be true or false"
            else -> error("schema type not supported at $at")
        }
        return null
    }

    private fun objectProblem(schema: JSONObject, value: Any?, at: String): String? {
        if (value !is JSONObject) return "$at must be an object"
        val properties = schema.optJSONObject("properties") ?: JSONObject()
        val required = schema.optJSONArray("required") ?: JSONArray()
        for (i in 0 until required.length()) {
            val key = required.getString(i)
            if (!value.has(key)) return "$at.$key is required"
        }
        for (key in value.keys()) {
            val sub = properties.optJSONObject(key)
            if (sub == null) {
                if (schema.optBoolean("additionalProperties", true)) continue
                return "$at has an unknown member"
            }
            problem(sub, value.opt(key), "$at.$key")?.let { return it }
        }
        return null
    }

    /**
     * A JSON number that is an integer (2020-12 counts 2.0 as one), as a
     * Long; null for anything else, and for a whole number too large for a Long.
     */
    fun integerOf(value: Any?): Long? = when (value) {
        is Int -> value.toLong()
        is Long -> value
        is Double -> if (value % 1.0 == 0.0 && Math.abs(value) < 9.0e15) value.toLong() else null
        else -> null
    }
}
