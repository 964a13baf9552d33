package com.clawseed.probe.jvmtest;

import android.app.Activity;
import android.app.AlertDialog;
import android.os.Bundle;

/**
 * Confirmation activities for JvmResolverTest, in a package of their own
 * as a vendor's are (the JVM device tells the Provider's failure from its
 * own by the activity's package on the stack).
 */
public final class Confirmations {
    private Confirmations() {}

    /** What the last activity recorded: "approved", "denied", or null. */
    public static volatile String decision;

    /** A dialog with "Confirm" and "Cancel", as the samples' screens are. */
    public static class Dialog extends Activity {
        @Override
        protected void onCreate(Bundle saved) {
            super.onCreate(saved);
            new AlertDialog.Builder(this)
                    .setTitle("Delete task 7")
                    .setMessage("This cannot be undone.")
                    .setPositiveButton("Confirm", (d, w) -> decide(true))
                    .setNegativeButton("Cancel", (d, w) -> decide(false))
                    .setOnCancelListener(d -> {
                        setResult(RESULT_CANCELED);
                        finish();
                    })
                    .show();
        }

        void decide(boolean approved) {
            decision = approved ? "approved" : "denied";
            setResult(approved ? RESULT_OK : RESULT_CANCELED);
            finish();
        }
    }

    /** Its "Confirm" handler throws, as a Provider's buggy screen would. */
    public static class ThrowsOnConfirm extends Dialog {
        @Override
        void decide(boolean approved) {
            throw new IllegalStateException("confirm handler broke");
        }
    }

    /** Throws while it starts. */
    public static class ThrowsOnCreate extends Activity {
        @Override
        protected void onCreate(Bundle saved) {
            super.onCreate(saved);
            throw new UnsupportedOperationException("no screen today");
        }
    }
}
