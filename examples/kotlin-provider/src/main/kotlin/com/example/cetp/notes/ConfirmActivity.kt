package com.example.cetp.notes

import android.app.Activity
import android.app.AlertDialog
import android.os.Bundle

/**
 * This app's own confirmation screen (§4.3, §7.2), started only through the
 * immutable PendingIntent of a USER_ACTION_REQUIRED answer. It shows what the
 * call will do, with its own args, and records the user's answer in the
 * [Ledger]: "Continue" approves, "Cancel" declines (the call then ends in
 * USER_CANCELLED). Backing out decides nothing: the call stays unconfirmed
 * and asks again. It finishes with RESULT_OK only for an approval.
 */
class ConfirmActivity : Activity() {
    private var decided = false

    override fun onCreate(saved: Bundle?) {
        super.onCreate(saved)
        val token = intent.getStringExtra(EXTRA_TOKEN)
        val summary = Ledger.pending(token)
        if (token == null || summary == null) {
            // Used, expired or unknown: nothing to decide.
            setResult(RESULT_CANCELED)
            finish()
            return
        }
        AlertDialog.Builder(this)
            .setTitle("Sample Notes")
            .setMessage(summary)
            .setPositiveButton("Continue") { _, _ -> decide(token, true) }
            // The seeded defect acts-on-deny (Defect.kt) approves here too.
            .setNegativeButton("Cancel") { _, _ -> decide(token, Defect.on(Defect.ACTS_ON_DENY)) }
            .setOnCancelListener { leave() }
            .show()
    }

    private fun decide(token: String, approved: Boolean) {
        if (decided) return
        decided = true
        Ledger.decide(token, approved)
        setResult(if (approved) RESULT_OK else RESULT_CANCELED)
        finish()
    }

    private fun leave() {
        if (decided) return
        decided = true
        setResult(RESULT_CANCELED)
        finish()
    }

    companion object {
        const val EXTRA_TOKEN = "com.example.cetp.notes.CONFIRMATION"
    }
}
