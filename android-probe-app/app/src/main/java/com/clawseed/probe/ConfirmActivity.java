package com.clawseed.probe;

import android.app.Activity;
import android.content.pm.PackageManager;
import android.net.Uri;
import android.os.Bundle;
import android.os.Handler;
import android.os.Looper;
import android.util.Log;
import android.widget.Button;
import android.widget.LinearLayout;
import android.widget.TextView;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HostedProvider;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * The hosted Provider's own confirmation screen: the target of every
 * PendingIntent a scripted reply hands a Consumer (§4.3, a resolution the
 * user completes in the Provider's UI). It shows two buttons; the user (or a
 * Consumer's test driver, through UI automation: content descriptions
 * {@code cetp-approve} and {@code cetp-deny}, or Back) decides, and the
 * activity finishes with that decision as its result ({@code RESULT_OK} for
 * approve, {@code RESULT_CANCELED} otherwise), after telling the host
 * ({@code intent_launched}, with the script's handle). Not exported: only
 * the probe's own immutable PendingIntents start it.
 */
public final class ConfirmActivity extends Activity {
    /** Content descriptions of the two buttons, for UI automation. */
    static final String APPROVE = "cetp-approve";
    static final String DENY = "cetp-deny";
    /** A screen nobody decides on is dismissed after this long (bounded, as every wait of the probe). */
    static final long DECISION_TIMEOUT_MS = 120_000;

    private final Handler handler = new Handler(Looper.getMainLooper());
    private String token;
    private boolean decided;

    @Override
    protected void onCreate(Bundle savedInstanceState) {
        super.onCreate(savedInstanceState);
        token = tokenOf(getIntent().getData());
        if (token == null) {
            // Not one of this process's confirmations (an earlier probe's).
            decided = true;
            setResult(RESULT_CANCELED);
            finish();
            return;
        }
        setFinishOnTouchOutside(false);
        LinearLayout layout = new LinearLayout(this);
        layout.setOrientation(LinearLayout.VERTICAL);
        int pad = (int) (16 * getResources().getDisplayMetrics().density);
        layout.setPadding(pad, pad, pad, pad);
        TextView text = new TextView(this);
        text.setText("CETP probe: a scripted Provider asks you to confirm");
        layout.addView(text);
        layout.addView(button("Approve", APPROVE, "approve"));
        layout.addView(button("Deny", DENY, "deny"));
        setContentView(layout);
        handler.postDelayed(() -> decide("dismiss"), DECISION_TIMEOUT_MS);
    }

    private Button button(String label, String description, String decision) {
        Button b = new Button(this);
        b.setText(label);
        b.setContentDescription(description);
        b.setOnClickListener(v -> decide(decision));
        return b;
    }

    /** The token of one of this process's confirmation URIs, or null. */
    static String tokenOf(Uri data) {
        if (data == null || !HostedBridge.CONFIRM_SCHEME.equals(data.getScheme())) {
            return null;
        }
        List<String> path = data.getPathSegments();
        if (path.size() != 2 || !ResolveActivity.NONCE.equals(path.get(0))) {
            return null;
        }
        return path.get(1);
    }

    /**
     * Tells the host, then finishes with the decision: the event is queued
     * before the Consumer can have the result, so the host sees the launch
     * before any call the Consumer makes after it.
     */
    void decide(String decision) {
        if (decided) {
            return;
        }
        decided = true;
        handler.removeCallbacksAndMessages(null);
        List<String> launcher = launcherPackages();
        long uid = launcherUid(launcher);
        try {
            if (!Hosting.forConfirmation(this, getIntent().getData()).launched(token, decision, uid, launcher)) {
                Log.w(ProbeInstrumentation.TAG, "confirmation " + token + ": no host to tell of " + decision);
            }
        } catch (DeviceError e) {
            Log.w(ProbeInstrumentation.TAG, "confirmation " + token + ": " + e.getMessage());
        }
        setResult("approve".equals(decision) ? RESULT_OK : RESULT_CANCELED);
        finish();
    }

    /** Who asked for the result (the app that sent the PendingIntent for one), when Android says. */
    private List<String> launcherPackages() {
        String pkg = getCallingPackage();
        return pkg == null ? Collections.emptyList() : Arrays.asList(pkg);
    }

    private long launcherUid(List<String> packages) {
        if (packages.isEmpty()) {
            return -1;
        }
        try {
            return getPackageManager().getPackageUid(packages.get(0), 0);
        } catch (PackageManager.NameNotFoundException e) {
            return -1;
        }
    }

    @Override
    protected void onPause() {
        super.onPause();
        // Backed out (Back, another app's screen): the user decided nothing.
        if (isFinishing()) {
            decide("dismiss");
        }
    }

    @Override
    protected void onDestroy() {
        handler.removeCallbacksAndMessages(null);
        super.onDestroy();
    }
}
