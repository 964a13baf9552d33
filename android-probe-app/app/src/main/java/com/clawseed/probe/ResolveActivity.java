package com.clawseed.probe;

import android.app.Activity;
import android.app.ActivityOptions;
import android.content.Intent;
import android.content.IntentSender;
import android.os.Build;
import android.os.Bundle;

/**
 * A transparent trampoline: sends a Provider's PendingIntent for a result, as
 * a Consumer app would, and reports the result code.
 */
public final class ResolveActivity extends Activity {
    static final String EXTRA_TOKEN = "com.clawseed.probe.extra.TOKEN";
    private static final int REQUEST = 1;

    private ResolveBroker.Pending pending;

    @Override
    protected void onCreate(Bundle savedInstanceState) {
        super.onCreate(savedInstanceState);
        pending = ResolveBroker.get(getIntent().getLongExtra(EXTRA_TOKEN, -1));
        if (pending == null) {
            finish();
            return;
        }
        if (savedInstanceState != null) {
            // Recreated (configuration change): the intent was already sent.
            return;
        }
        try {
            Bundle options = null;
            if (Build.VERSION.SDK_INT >= 34) {
                // From Android 14 a sender must opt in to lend its foreground
                // state to the creator's activity start.
                options = ActivityOptions.makeBasic()
                        .setPendingIntentBackgroundActivityStartMode(ActivityOptions.MODE_BACKGROUND_ACTIVITY_START_ALLOWED)
                        .toBundle();
            }
            startIntentSenderForResult(pending.intent.getIntentSender(), REQUEST, null, 0, 0, 0, options);
            pending.launched(true);
        } catch (IntentSender.SendIntentException | RuntimeException e) {
            pending.launched(false);
            finish();
        }
    }

    @Override
    protected void onActivityResult(int requestCode, int resultCode, Intent data) {
        super.onActivityResult(requestCode, resultCode, data);
        if (requestCode == REQUEST && pending != null) {
            pending.finished(resultCode);
        }
        finish();
    }
}
