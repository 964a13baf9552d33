package com.clawseed.probe;

import android.accessibilityservice.AccessibilityServiceInfo;
import android.app.Instrumentation;
import android.app.UiAutomation;
import android.os.Build;
import android.os.ParcelFileDescriptor;
import android.os.SystemClock;
import android.util.Log;
import com.clawseed.probe.core.Abilities;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.wire.WireError;
import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The probe's one UiAutomation, shared by its connections.
 *
 * <p>Android registers one accessibility UiAutomation per device: with both
 * probes running, the second one to ask gets none. From Android 12 (API 31)
 * the probe holds a connection without accessibility
 * ({@code FLAG_DONT_USE_ACCESSIBILITY}, enough for shell commands) and takes
 * the accessibility side only for the length of a {@code resolve}, so that
 * each identity can resolve in turn. Below API 31 there is no such flag: the
 * probe that connects first keeps it, and the other one reports in
 * {@code hello} that it can neither resolve nor restart.
 *
 * <p>{@link Instrumentation#getUiAutomation(int)} reconnects when the flags
 * change and is not thread-safe, so every use goes through {@link #lock},
 * which no request waits for past its own deadline.
 */
final class UiAccess {
    interface Work<T> {
        T run(UiAutomation ui) throws DeviceError, InterruptedException;
    }

    private static final long RETRY_MS = 250;

    private final Instrumentation instrumentation;
    private final Abilities abilities;
    /** Fair: waiting requests get it in turn. */
    private final ReentrantLock lock = new ReentrantLock(true);

    private UiAccess(Instrumentation instrumentation, Abilities abilities) {
        this.instrumentation = instrumentation;
        this.abilities = abilities;
    }

    /** Flags while no resolve is in progress. */
    private static int idleFlags() {
        return Build.VERSION.SDK_INT >= 31
                ? UiAutomation.FLAG_DONT_USE_ACCESSIBILITY | UiAutomation.FLAG_DONT_SUPPRESS_ACCESSIBILITY_SERVICES
                : UiAutomation.FLAG_DONT_SUPPRESS_ACCESSIBILITY_SERVICES;
    }

    /**
     * Leaves the user's accessibility services running while the probe plays
     * a decision: the device may be someone's phone.
     */
    private static final int RESOLVE_FLAGS = UiAutomation.FLAG_DONT_SUPPRESS_ACCESSIBILITY_SERVICES;

    /** Connects once, on the instrumentation thread, and decides what the probe can do. */
    static UiAccess connect(Instrumentation instrumentation) {
        Abilities abilities;
        try {
            UiAutomation ui = instrumentation.getUiAutomation(idleFlags());
            // Null when `am instrument` ran without -w: Android then hands the
            // instrumentation no UiAutomation connection at all.
            abilities = ui != null ? Abilities.FULL : Abilities.of(Abilities.UiConnection.NOT_GIVEN, null);
        } catch (RuntimeException e) {
            Log.w(ProbeInstrumentation.TAG, "no UI automation; resolve and restart_provider are left out of hello", e);
            abilities = Abilities.of(Abilities.UiConnection.REFUSED, e.toString());
        }
        return new UiAccess(instrumentation, abilities);
    }

    Abilities abilities() {
        return abilities;
    }

    /**
     * Runs a shell command as the shell user and waits for it to finish
     * (its output drained, so that it runs to completion).
     */
    static void shell(UiAutomation ui, String command) throws DeviceError {
        ParcelFileDescriptor out = ui.executeShellCommand(command);
        try (InputStream in = new ParcelFileDescriptor.AutoCloseInputStream(out)) {
            byte[] buf = new byte[4096];
            while (in.read(buf) >= 0) {
                // Nothing to keep: these commands print nothing on success.
            }
        } catch (IOException e) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "`" + command + "` failed: " + e);
        }
    }

    /**
     * Takes the lock by {@code deadline} (elapsed realtime), or fails: a
     * resolve holds it for as long as the host allowed (up to 24 h), and no
     * other request may wait that long without a word (finding 5).
     */
    private void lock(long deadline, String what) throws DeviceError, InterruptedException {
        long wait = deadline - SystemClock.elapsedRealtime();
        if (!lock.tryLock(Math.max(0, wait), TimeUnit.MILLISECONDS)) {
            throw new DeviceError(WireError.TIMEOUT, what + ": the probe's UiAutomation stayed busy (a resolve"
                    + " in progress) for " + Math.max(0, wait) + " ms");
        }
    }

    /** Runs {@code work} with the idle connection (shell commands), waiting at most {@code waitMs} for it. */
    <T> T withShell(long waitMs, Work<T> work) throws DeviceError, InterruptedException {
        lock(SystemClock.elapsedRealtime() + waitMs, "shell command");
        try {
            UiAutomation ui;
            try {
                ui = instrumentation.getUiAutomation(idleFlags());
            } catch (RuntimeException e) {
                throw new DeviceError(DeviceError.DEVICE_ERROR, "the probe lost its UiAutomation: " + e);
            }
            if (ui == null) {
                throw new DeviceError(DeviceError.DEVICE_ERROR, "the probe lost its UiAutomation");
            }
            return work.run(ui);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Runs {@code work} with accessibility, waiting until {@code deadline}
     * (elapsed realtime) while another probe holds it, and gives it back
     * afterwards where Android allows.
     */
    <T> T withAccessibility(long deadline, Work<T> work) throws DeviceError, InterruptedException {
        lock(deadline, "resolve");
        try {
            UiAutomation ui = null;
            RuntimeException last = null;
            while (ui == null) {
                try {
                    ui = instrumentation.getUiAutomation(RESOLVE_FLAGS);
                    if (ui == null) {
                        throw new DeviceError(DeviceError.DEVICE_ERROR, "the probe lost its UiAutomation");
                    }
                } catch (RuntimeException e) {
                    // Most likely the other probe is in the middle of a resolve.
                    last = e;
                    if (SystemClock.elapsedRealtime() + RETRY_MS >= deadline) {
                        throw DeviceError.unsupported("UI automation stayed in use by another instrumentation"
                                + " (the other probe resolving at the same time?): " + last);
                    }
                    Thread.sleep(RETRY_MS);
                }
            }
            retrieveWindows(ui);
            try {
                return work.run(ui);
            } finally {
                if (Build.VERSION.SDK_INT >= 31) {
                    try {
                        instrumentation.getUiAutomation(idleFlags());
                    } catch (RuntimeException e) {
                        Log.w(ProbeInstrumentation.TAG, "could not hand accessibility back", e);
                    }
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** getWindows() lists the windows on screen only with this flag. */
    private static void retrieveWindows(UiAutomation ui) {
        AccessibilityServiceInfo info = ui.getServiceInfo();
        if (info != null && (info.flags & AccessibilityServiceInfo.FLAG_RETRIEVE_INTERACTIVE_WINDOWS) == 0) {
            info.flags |= AccessibilityServiceInfo.FLAG_RETRIEVE_INTERACTIVE_WINDOWS;
            ui.setServiceInfo(info);
        }
    }
}
