package com.example.cetp.tasks;

import android.app.Activity;
import android.app.AlertDialog;
import android.os.Bundle;
import org.json.JSONObject;

/**
 * The app's own confirmation screen (§4.3, §7.2), reached only through the
 * immutable PendingIntent of a USER_ACTION_REQUIRED answer. It shows what
 * will happen with the call's own arguments, records the user's decision
 * against the confirmation, and finishes with RESULT_OK (approved) or
 * RESULT_CANCELED (declined or backed out), so that the Consumer can resume
 * the call with its resume_token.
 */
public final class ConfirmActivity extends Activity {
    static final String EXTRA_CONFIRMATION = "com.example.cetp.tasks.CONFIRMATION";
    private String confirmation;
    private boolean decided;

    @Override
    protected void onCreate(Bundle saved) {
        super.onCreate(saved);
        confirmation = getIntent().getStringExtra(EXTRA_CONFIRMATION);
        String summary;
        try {
            summary = Store.get(this).read(root -> {
                JSONObject c = root.getJSONObject("confirmations").optJSONObject(String.valueOf(confirmation));
                if (c == null || c.optBoolean("used") || System.currentTimeMillis() > c.getLong("expires_at_ms")) {
                    return null;
                }
                Tools.Tool tool = Tools.ALL.get(c.getString("tool"));
                return tool.title + "\n\n" + describe(tool, new JSONObject(c.getString("args")));
            });
        } catch (Envelope.Refusal e) {
            summary = null;
        }
        if (summary == null) {
            setResult(RESULT_CANCELED);
            finish();
            return;
        }
        new AlertDialog.Builder(this)
                .setTitle(TaskToolProvider.PROVIDER_NAME)
                .setMessage(summary)
                .setPositiveButton("Confirm", (d, w) -> decide(true))
                // The seeded defect acts-on-deny (SeededDefect) approves here too.
                .setNegativeButton("Cancel", (d, w) -> decide(SeededDefect.on(SeededDefect.ACTS_ON_DENY)))
                .setOnCancelListener(d -> decide(false))
                .show();
    }

    /** The object, the action and what cannot be undone (§7.2). */
    private static String describe(Tools.Tool tool, JSONObject args) {
        switch (tool.name) {
            case Tools.DELETE_TASK:
                return "Delete task " + args.optString("task_id") + " for good. This cannot be undone.";
            case Tools.ADD_TASK:
                return "Add the urgent task \"" + args.optString("title")
                        + "\". Your team is notified at once.";
            default:
                return tool.description;
        }
    }

    private void decide(boolean approved) {
        if (decided) {
            return;
        }
        decided = true;
        boolean saved = true;
        try {
            Store.get(this).edit(root -> {
                JSONObject c = root.getJSONObject("confirmations").optJSONObject(confirmation);
                if (c != null && !c.has("decision")) {
                    c.put("decision", approved ? "approved" : "denied");
                }
                return null;
            });
        } catch (Envelope.Refusal e) {
            // Not saved: the call cannot go on, so the screen reports no approval.
            saved = false;
        }
        setResult(approved && saved ? RESULT_OK : RESULT_CANCELED);
        finish();
    }
}
