package com.clawseed.probe;

import android.app.Activity;
import android.app.ActivityOptions;
import android.app.PendingIntent;
import android.content.Intent;
import android.content.IntentSender;
import android.os.Build;
import android.os.Bundle;
import com.clawseed.probe.core.ResolveBroker;
import com.clawseed.probe.core.ResolveUri;
import java.security.SecureRandom;

/**
 * A transparent trampoline: sends a Provider's PendingIntent for a result, as
 * a Consumer app would, and reports the result code. Each launch carries its
 * own data URI ({@link ResolveUri}), so that Android starts a new activity
 * instead of bringing back a leftover one.
 */
public final class ResolveActivity extends Activity {
    static final ResolveBroker<PendingIntent> BROKER = new ResolveBroker<>();
    /** Tells this process's launches from those of an earlier probe process. */
    static final String NONCE = Long.toHexString(new SecureRandom().nextLong() & Long.MAX_VALUE);

    private static final int REQUEST = 1;

    private ResolveBroker<PendingIntent>.Pending pending;

    @Override
    protected void onCreate(Bundle savedInstanceState) {
        super.onCreate(savedInstanceState);
        Long token = ResolveUri.token(getIntent().getDataString(), NONCE);
        pending = token == null ? null : BROKER.get(token);
        // Turned away when the request already gave up (its deadline passed
        // before this activity came up): nothing may stay on screen.
        if (pending == null || !pending.attach(this::closeAll)) {
            pending = null;
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

    /**
     * Called when the request ends, on any path: closes the Provider's screen
     * this activity started, if it is still up, and this activity, whose
     * transparent window would otherwise swallow the next touches.
     */
    private void closeAll() {
        runOnUiThread(() -> {
            finishActivity(REQUEST);
            finish();
        });
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
