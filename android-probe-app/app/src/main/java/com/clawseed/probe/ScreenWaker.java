package com.clawseed.probe;

import android.app.KeyguardManager;
import android.content.Context;
import android.os.PowerManager;
import android.os.SystemClock;
import com.clawseed.probe.core.DeviceError;

/**
 * Wakes the screen and dismisses the keyguard before a resolve (finding 7 of
 * issue 27): on a phone left alone during a run the screen goes off, and a
 * Provider's confirmation screen would start behind the keyguard, where UI
 * automation cannot play a decision. A keyguard with a PIN, pattern or
 * password cannot be dismissed by anyone but its owner: the probe then says
 * so as a device error naming the fix, never charging the Provider.
 */
final class ScreenWaker {
    private ScreenWaker() {}

    /** Runs a shell command as the shell user (UiAutomation.executeShellCommand). */
    interface Shell {
        void run(String command) throws DeviceError, InterruptedException;
    }

    static final long SETTLE_MS = 5_000;
    private static final long POLL_MS = 100;

    static void wake(Context context, Shell shell, long deadline) throws DeviceError, InterruptedException {
        wake(context, shell, deadline, SETTLE_MS);
    }

    /**
     * Polls at most {@code settleMs / POLL_MS} times, and never past
     * {@code deadline}: a count, not only a clock, bounds the wait (a frozen
     * test clock must not make it endless).
     */
    static void wake(Context context, Shell shell, long deadline, long settleMs)
            throws DeviceError, InterruptedException {
        PowerManager power = context.getSystemService(PowerManager.class);
        KeyguardManager keyguard = context.getSystemService(KeyguardManager.class);
        if (power == null || keyguard == null) {
            return;
        }
        if (power.isInteractive() && !keyguard.isKeyguardLocked()) {
            return;
        }
        if (!power.isInteractive()) {
            shell.run("input keyevent KEYCODE_WAKEUP");
        }
        boolean asked = false;
        long polls = Math.max(1, settleMs / POLL_MS);
        for (long i = 0; ; i++) {
            boolean awake = power.isInteractive();
            boolean locked = keyguard.isKeyguardLocked();
            if (awake && !locked) {
                return;
            }
            if (awake && !asked) {
                // Dismisses an insecure keyguard; a secure one asks its owner.
                shell.run("wm dismiss-keyguard");
                asked = true;
                continue;
            }
            if (i >= polls || SystemClock.elapsedRealtime() >= deadline) {
                if (!awake) {
                    throw new DeviceError(DeviceError.DEVICE_ERROR,
                            "the screen stayed off after KEYCODE_WAKEUP: turn it on (and keep it on: "
                                    + "adb shell svc power stayon usb) and run again");
                }
                throw new DeviceError(DeviceError.DEVICE_ERROR, keyguard.isDeviceSecure()
                        ? "the phone is locked with a PIN, pattern or password, which only its owner can dismiss:"
                                + " unlock it (or remove the screen lock on a test phone) and run again"
                        : "the keyguard stayed up after `wm dismiss-keyguard`: unlock the phone and run again");
            }
            Thread.sleep(POLL_MS);
        }
    }
}
