package com.clawseed.probe;

import static org.robolectric.Shadows.shadowOf;

import android.app.Activity;
import android.app.Dialog;
import android.app.PendingIntent;
import android.content.ComponentName;
import android.content.Context;
import android.content.ContextWrapper;
import android.content.Intent;
import android.content.pm.ResolveInfo;
import android.content.res.Resources;
import android.os.Handler;
import android.os.Looper;
import android.view.View;
import android.view.ViewGroup;
import android.view.WindowManagerGlobal;
import android.view.accessibility.AccessibilityNodeInfo;
import android.widget.TextView;
import com.clawseed.probe.core.DeviceBackend.ResolveResult;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.Failures;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireError;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;
import org.robolectric.Robolectric;
import org.robolectric.android.controller.ActivityController;
import org.robolectric.shadows.ShadowDialog;
import org.robolectric.shadows.ShadowPendingIntent;

/**
 * {@code resolve} on the JVM device: the user's decision played in the
 * Provider's own confirmation activity, run by Robolectric on its main
 * thread, as the probe's ResolveActivity and UiDecider play it on a phone.
 *
 * <p>The PendingIntent's saved intent is started as its activity
 * ({@code Robolectric.buildActivity(...).setup()}: created, started,
 * resumed, visible). For {@code approve} and {@code deny} the profile's
 * {@code [ui]} selector ({@code resource_id}, {@code text},
 * {@code content_desc}; all given must match one view, read as a phone's
 * UI automation reads it: {@link View#createAccessibilityNodeInfo}) is
 * looked for in the activity's windows, its dialogs included, topmost
 * first, and the view, or its nearest clickable ancestor, is clicked
 * ({@link View#performClick}); {@code dismiss} backs out of the topmost
 * window ({@code onBackPressed} of its dialog or of the activity). What the
 * activity does next (its listeners, posted messages, {@code setResult},
 * {@code finish}) runs on the main looper as on a phone, and the result
 * code is the one it set when it finished, RESULT_CANCELED (0) when it set
 * none.
 *
 * <p>Every step runs on the main looper, posted from the session thread and
 * awaited within the request's deadline; JvmDevice's serve loop runs the
 * looper ({@link #idleMain}). Answers:
 * <ul>
 *   <li>a selector that matches nothing (or none in the profile): the
 *       activity is backed out of, and the answer is a {@code device_error}
 *       naming the selector and the texts on screen: the host reports the
 *       case as not run (INFRA), never PASS or FAIL, with this message;
 *   <li>an activity that throws while it starts or handles the decision
 *       (its own code on the stack): {@code provider_exception} with the
 *       exception's class and message, charged to the Provider as a phone's
 *       crash of its process would be;
 *   <li>a resource the JVM device cannot load (the app's own layouts and
 *       strings are not loaded here): {@code device_error}, never charged.
 * </ul>
 */
final class JvmResolver {
    private JvmResolver() {}

    /** Used when the host sends {@code timeout_ms: 0}, as on a phone. */
    static final long DEFAULT_TIMEOUT_MS = AndroidBackend.DEFAULT_RESOLVE_TIMEOUT_MS;
    /**
     * How long a selector is looked for: the activity's views are there once
     * the main looper is idle, so a few seconds cover one that shows its
     * dialog after some work of its own (a phone looks for up to the
     * deadline, but its screen comes up slowly). The system property
     * {@code cetp.jvm.resolve_look_ms} changes it (the self-test's screens
     * are up at once).
     */
    static final long LOOK_MS = 3_000;
    /** How long backing out may take when the decision could not be played. */
    static final long BACK_OUT_MS = 2_000;
    /** How long closing the activity at the end may take, whatever the deadline. */
    static final long CLOSE_MS = 2_000;
    private static final long POLL_MS = 20;
    /** Bounds the view tree walk of a hostile UI. */
    private static final int MAX_VIEWS = 5_000;
    /** How many on-screen texts an error names. */
    private static final int MAX_TEXTS = 30;

    /** One resolve at a time: one screen, as on a phone (the host's gate per device). */
    private static final ReentrantLock SCREEN = new ReentrantLock();

    /** What the main looper's own tasks threw while {@link #current} played. */
    private static volatile Play current;

    /** One resolve's activity and what it threw. */
    static final class Play {
        ActivityController<? extends Activity> controller;
        Activity activity;
        /** Thrown by a task the activity posted (a dialog's button handler), caught by {@link #idleMain}. */
        volatile Throwable crash;
    }

    /**
     * Runs what is posted to the main looper; called by JvmDevice's serve
     * loop, which is Robolectric's main thread. What a task throws is the
     * Provider's activity crashing when a resolve plays, and is kept for
     * it; otherwise logged. The loop goes on either way.
     */
    static void idleMain() {
        try {
            shadowOf(Looper.getMainLooper()).idle();
        } catch (RuntimeException | Error e) {
            Play p = current;
            if (p != null) {
                if (p.crash == null) {
                    p.crash = e;
                }
            } else {
                System.err.println("jvm-device: a task on the main thread threw: " + e);
                e.printStackTrace(System.err);
            }
        }
    }

    /** Launches {@code pi} for a result and plays {@code p.decision}; the handle was taken. */
    static ResolveResult resolve(Context app, PendingIntent pi, Ops.ResolveParams p)
            throws DeviceError, InterruptedException {
        ShadowPendingIntent spi = shadowOf(pi);
        if (!spi.isActivity() || spi.getSavedIntent() == null) {
            throw DeviceError.unsupported(p.handle + " does not start an activity");
        }
        Intent intent = new Intent(spi.getSavedIntent());
        long timeout = p.timeoutMs == 0 ? DEFAULT_TIMEOUT_MS : Math.min(p.timeoutMs, 24L * 3600 * 1000);
        long deadline = now() + timeout;
        if (!SCREEN.tryLock(timeout, TimeUnit.MILLISECONDS)) {
            throw new DeviceError(WireError.TIMEOUT, "another resolve held the screen for " + timeout + " ms");
        }
        Play play = new Play();
        current = play;
        try {
            return play(app, intent, p, play, deadline, timeout);
        } finally {
            try {
                close(play);
            } finally {
                current = null;
                SCREEN.unlock();
            }
        }
    }

    private static ResolveResult play(Context app, Intent intent, Ops.ResolveParams p, Play play, long deadline,
            long timeout) throws DeviceError, InterruptedException {
        Boolean started = onMain(() -> launch(app, intent, play), deadline, "starting the activity");
        if (!started) {
            // As a phone's ResolveActivity when sending the intent fails (no such activity).
            return new ResolveResult(false, false, 0);
        }
        String pkg = play.controller.get().getComponentName().getPackageName();
        if (onMain(() -> play.activity.isFinishing(), deadline, "reading the activity's state")) {
            // It finished at once, showing nothing: a phone's probe sees no window come up.
            if (p.decision == Ops.Decision.DISMISS) {
                return new ResolveResult(true, false, resultCode(play, deadline), pkg);
            }
            throw new DeviceError(DeviceError.DEVICE_ERROR, "the " + p.decision.wire + " decision could not be played: "
                    + describe(play) + " finished at once, showing nothing (result code "
                    + resultCode(play, deadline) + ")");
        }
        if (p.decision == Ops.Decision.DISMISS) {
            onMain(() -> backOut(play), deadline, "backing out");
        } else {
            JsonObject selector = selector(p);
            String missed = selector == null ? "the profile gives no [ui." + p.decision.wire + "] selector"
                    : lookAndClick(play, selector, p.decision, deadline);
            if (missed != null) {
                // Leave no confirmation screen behind; then the case is not judged.
                long back = Math.min(deadline, now() + BACK_OUT_MS);
                String texts = onMain(() -> onScreen(play) + shownOtherwise(play, selector), back,
                        "reading the screen");
                onMain(() -> backOut(play), back, "backing out");
                throw new DeviceError(DeviceError.DEVICE_ERROR, "the " + p.decision.wire + " decision was not played: "
                        + missed + " on the screen of " + describe(play) + "; on screen: " + texts
                        + ". Fix [ui." + p.decision.wire + "] in the profile (keys text, resource_id,"
                        + " content_desc; all given must match one view)");
            }
        }
        awaitFinish(play, deadline, timeout);
        return new ResolveResult(true, true, resultCode(play, deadline), pkg);
    }

    /** On the main thread: the activity built and brought up; false when no activity answers the intent. */
    private static boolean launch(Context app, Intent intent, Play play) throws DeviceError {
        ComponentName c = intent.getComponent();
        if (c == null) {
            ResolveInfo ri = app.getPackageManager().resolveActivity(intent, 0);
            if (ri == null || ri.activityInfo == null) {
                return false;
            }
            c = new ComponentName(ri.activityInfo.packageName, ri.activityInfo.name);
            intent.setComponent(c);
        }
        Class<? extends Activity> cls;
        try {
            Class<?> found = Class.forName(c.getClassName(), false, JvmResolver.class.getClassLoader());
            if (!Activity.class.isAssignableFrom(found)) {
                return false;
            }
            cls = found.asSubclass(Activity.class);
        } catch (ClassNotFoundException | LinkageError e) {
            // A phone's ActivityNotFoundException: nothing is launched.
            return false;
        }
        try {
            play.controller = Robolectric.buildActivity(cls, intent);
            play.activity = play.controller.get();
            play.controller.setup();
        } catch (RuntimeException | Error e) {
            throw threw(e, cls, "while it started");
        }
        return true;
    }

    private static JsonObject selector(Ops.ResolveParams p) {
        Object sel = p.ui == null ? null : p.ui.get(p.decision.wire);
        if (!(sel instanceof JsonObject)) {
            return null;
        }
        JsonObject s = (JsonObject) sel;
        return str(s, "resource_id") == null && str(s, "text") == null && str(s, "content_desc") == null ? null : s;
    }

    /** Null when the selector's view was clicked; else what went wrong. */
    private static String lookAndClick(Play play, JsonObject selector, Ops.Decision decision, long deadline)
            throws DeviceError, InterruptedException {
        long stop = Math.min(now() + Long.getLong("cetp.jvm.resolve_look_ms", LOOK_MS), deadline - BACK_OUT_MS);
        while (true) {
            String clicked = onMain(() -> {
                if (play.activity.isFinishing()) {
                    return "the activity finished before the selector was found";
                }
                View v = find(play, selector);
                if (v == null) {
                    return null;
                }
                View target = clickable(v);
                if (target == null) {
                    return "the view that " + json(selector) + " matches, and every view around it, is not"
                            + " clickable and enabled";
                }
                try {
                    target.performClick();
                } catch (RuntimeException | Error e) {
                    throw threw(e, play.activity.getClass(), "when its " + decision.wire + " view was clicked");
                }
                return "";
            }, deadline, "playing the decision");
            if ("".equals(clicked)) {
                return null;
            }
            if (clicked != null) {
                return clicked;
            }
            if (now() >= stop) {
                return json(selector) + " matched no view";
            }
            Thread.sleep(POLL_MS);
        }
    }

    private static void awaitFinish(Play play, long deadline, long timeout) throws DeviceError, InterruptedException {
        while (true) {
            crashed(play);
            if (onMain(() -> play.activity.isFinishing(), deadline, "waiting for the activity to finish")) {
                // Its last posted tasks run before the result is read.
                onMain(() -> null, deadline, "waiting for the activity to finish");
                crashed(play);
                return;
            }
            if (now() >= deadline) {
                throw new DeviceError(WireError.TIMEOUT, "the confirmation activity did not finish within " + timeout
                        + " ms");
            }
            Thread.sleep(POLL_MS);
        }
    }

    private static int resultCode(Play play, long deadline) throws DeviceError, InterruptedException {
        return onMain(() -> shadowOf(play.activity).getResultCode(), Math.max(deadline,
                now() + CLOSE_MS), "reading the result");
    }

    /** What a task the activity posted threw, as the Provider's failure. */
    private static void crashed(Play play) throws DeviceError {
        Throwable t = play.crash;
        if (t != null) {
            throw threw(t, play.activity.getClass(), "in a task it posted to the main thread");
        }
    }

    /**
     * The Provider's failure when its own code is on the stack (a phone's
     * crash of its process); a resource the JVM device does not load, or a
     * failure of the device alone, is the device's.
     */
    static DeviceError threw(Throwable e, Class<?> activity, String when) {
        Throwable root = e;
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof Resources.NotFoundException) {
                return new DeviceError(DeviceError.DEVICE_ERROR, "the JVM device cannot load a resource "
                        + activity.getName() + " needs " + when + " (" + t.getMessage() + "): the app's own resources"
                        + " are not loaded here; play this decision on a phone");
            }
            root = t;
        }
        String pkg = activity.getPackage() == null ? "" : activity.getPackage().getName() + ".";
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            for (StackTraceElement f : t.getStackTrace()) {
                if (f.getClassName().startsWith(pkg)) {
                    e.printStackTrace(System.err);
                    return Failures.providerThrew(root.getClass().getName(), "the Provider's activity "
                            + activity.getName() + " threw " + when + ": " + root);
                }
            }
        }
        e.printStackTrace(System.err);
        return new DeviceError(DeviceError.DEVICE_ERROR, "the JVM device failed to run " + activity.getName() + " "
                + when + ", with none of its code on the stack: " + root);
    }

    /**
     * Back, once, in the topmost window of the activity: its dialog's or its
     * own. {@code onBackPressed} is what Back ends in for an app that has not
     * opted in to predictive back, as neither sample has.
     */
    @SuppressWarnings("deprecation")
    private static Void backOut(Play play) throws DeviceError {
        if (play.activity == null || play.activity.isFinishing()) {
            return null;
        }
        List<View> roots = windows(play.activity);
        View top = roots.isEmpty() ? null : roots.get(0);
        try {
            for (Dialog d : ShadowDialog.getShownDialogs()) {
                if (d.isShowing() && d.getWindow() != null && d.getWindow().peekDecorView() == top) {
                    d.onBackPressed();
                    return null;
                }
            }
            play.activity.onBackPressed();
        } catch (RuntimeException | Error e) {
            throw threw(e, play.activity.getClass(), "when the user backed out");
        }
        return null;
    }

    /** The root views of the activity's windows, topmost first. */
    static List<View> windows(Activity activity) {
        List<View> out = new ArrayList<>();
        for (View v : WindowManagerGlobal.getInstance().getWindowViews()) {
            // The activity's own window too: a floating one (a Dialog
            // theme, as the probe's ConfirmActivity has) is built with a
            // DecorContext over the application, not the activity.
            boolean own = activity.getWindow() != null && v == activity.getWindow().peekDecorView();
            if ((own || belongsTo(v.getContext(), activity)) && v.isShown()) {
                out.add(0, v);
            }
        }
        return out;
    }

    private static boolean belongsTo(Context c, Activity activity) {
        for (int depth = 0; c != null && depth < 16; depth++) {
            if (c == activity) {
                return true;
            }
            c = c instanceof ContextWrapper ? ((ContextWrapper) c).getBaseContext() : null;
        }
        return false;
    }

    /** Every shown view of the activity's windows, topmost window first, breadth first within each. */
    private static List<View> views(Activity activity) {
        List<View> out = new ArrayList<>();
        for (View root : windows(activity)) {
            ArrayDeque<View> queue = new ArrayDeque<>();
            queue.add(root);
            while (!queue.isEmpty() && out.size() < MAX_VIEWS) {
                View v = queue.poll();
                if (!v.isShown()) {
                    continue;
                }
                out.add(v);
                if (v instanceof ViewGroup) {
                    ViewGroup g = (ViewGroup) v;
                    for (int i = 0; i < g.getChildCount(); i++) {
                        queue.add(g.getChildAt(i));
                    }
                }
            }
        }
        return out;
    }

    /** The first view all the selector's keys match, as UiDecider matches a node. */
    static View find(Play play, JsonObject selector) {
        String id = str(selector, "resource_id");
        String text = str(selector, "text");
        String desc = str(selector, "content_desc");
        for (View v : views(play.activity)) {
            if (id != null && !id.equals(resourceName(v))) {
                continue;
            }
            AccessibilityNodeInfo n = v.createAccessibilityNodeInfo();
            if (text != null && (n.getText() == null || !text.contentEquals(n.getText()))) {
                continue;
            }
            if (desc != null && (n.getContentDescription() == null || !desc.contentEquals(n.getContentDescription()))) {
                continue;
            }
            return v;
        }
        return null;
    }

    /** The view or its nearest clickable, enabled ancestor (UiDecider.click). */
    private static View clickable(View v) {
        Object n = v;
        for (int depth = 0; n instanceof View && depth < 32; depth++) {
            View x = (View) n;
            if (x.isClickable() && x.isEnabled()) {
                return x;
            }
            n = x.getParent();
        }
        return null;
    }

    /** {@code package:id/name}, as UI automation reports a view's id; null without one. */
    private static String resourceName(View v) {
        if (v.getId() == View.NO_ID || v.getResources() == null) {
            return null;
        }
        try {
            return v.getResources().getResourceName(v.getId());
        } catch (Resources.NotFoundException e) {
            return null;
        }
    }

    /** The texts and descriptions on screen, as a user reads them, with the ids of their views. */
    static String onScreen(Play play) {
        if (play.activity == null) {
            return "nothing";
        }
        List<String> out = new ArrayList<>();
        int more = 0;
        for (View v : views(play.activity)) {
            AccessibilityNodeInfo n = v.createAccessibilityNodeInfo();
            CharSequence text = n.getText();
            CharSequence desc = n.getContentDescription();
            if ((text == null || text.length() == 0) && (desc == null || desc.length() == 0)) {
                continue;
            }
            if (out.size() >= MAX_TEXTS) {
                more++;
                continue;
            }
            StringBuilder sb = new StringBuilder();
            if (text != null && text.length() > 0) {
                sb.append("text ").append(quote(text));
            }
            if (desc != null && desc.length() > 0) {
                sb.append(sb.length() > 0 ? ", " : "").append("content_desc ").append(quote(desc));
            }
            String id = resourceName(v);
            if (id != null) {
                sb.append(" (resource_id ").append(quote(id)).append(')');
            }
            if (!(v instanceof TextView) && v.isClickable()) {
                sb.append(" [clickable]");
            }
            out.add(sb.toString());
        }
        if (out.isEmpty()) {
            return "no text";
        }
        return String.join("; ", out) + (more > 0 ? "; and " + more + " more" : "");
    }

    /**
     * When the selector's text is a view's text as the app sets it but the
     * screen shows it otherwise (a theme's capitals: AOSP's buttons read
     * "CONFIRM" for "Confirm"): UI automation, on a phone as here, reads
     * what is shown. Empty otherwise.
     */
    static String shownOtherwise(Play play, JsonObject selector) {
        String text = selector == null ? null : str(selector, "text");
        if (text == null || play.activity == null) {
            return "";
        }
        for (View v : views(play.activity)) {
            CharSequence shown = v.createAccessibilityNodeInfo().getText();
            if (v instanceof TextView && text.contentEquals(((TextView) v).getText()) && shown != null
                    && !text.contentEquals(shown)) {
                return " (" + quote(text) + " is the text the app gives " + (resourceName(v) == null ? "a view"
                        : resourceName(v)) + ", shown as " + quote(shown) + ": the text a selector matches is the"
                        + " one shown, as UI automation reads it on a phone; a resource_id holds whatever the theme)";
            }
        }
        return "";
    }

    private static String quote(CharSequence s) {
        String t = s.toString();
        if (t.length() > 80) {
            t = t.substring(0, 80) + "…";
        }
        return "\"" + t.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    private static String json(JsonObject selector) {
        StringBuilder sb = new StringBuilder("{");
        for (String k : new String[] {"text", "resource_id", "content_desc"}) {
            String v = str(selector, k);
            if (v != null) {
                sb.append(sb.length() > 1 ? ", " : "").append(k).append(" = ").append(quote(v));
            }
        }
        return "the selector " + sb.append('}');
    }

    private static String describe(Play play) {
        return play.activity == null ? "the activity" : play.activity.getClass().getName();
    }

    private static String str(JsonObject o, String key) {
        Object v = o.get(key);
        return v instanceof String ? (String) v : null;
    }

    /** The activity a dialog's context wraps, or null. */
    private static Activity activityOf(android.content.Context c) {
        for (int i = 0; c != null && i < 16; i++) {
            if (c instanceof Activity) {
                return (Activity) c;
            }
            if (!(c instanceof android.content.ContextWrapper)) {
                return null;
            }
            c = ((android.content.ContextWrapper) c).getBaseContext();
        }
        return null;
    }

    /** Finishes and destroys the activity, and closes its dialogs, on every way out. */
    private static void close(Play play) throws InterruptedException {
        if (play.controller == null) {
            return;
        }
        try {
            onMain(() -> {
                Activity a = play.activity;
                if (a.isDestroyed()) {
                    return null;
                }
                try {
                    for (View v : windows(a)) {
                        if (v != a.getWindow().peekDecorView()) {
                            a.getWindowManager().removeViewImmediate(v);
                        }
                    }
                    if (!a.isFinishing()) {
                        a.finish();
                    }
                    play.controller.pause().stop().destroy();
                    // Robolectric keeps every dialog ever shown in a static
                    // list, cleared between tests and so never on this
                    // device; each holds its activity and its themes. A
                    // ten-minute fuzz run that resolved thousands of times
                    // held 2.5 GB of themes and slowed to a quarter.
                    ShadowDialog.getShownDialogs().removeIf(d -> !d.isShowing() || activityOf(d.getContext()) == a);
                } catch (RuntimeException | Error e) {
                    // A phone would close it too; what it throws now decides nothing.
                    System.err.println("jvm-device: closing " + a.getClass().getName() + " after a resolve: " + e);
                }
                return null;
            }, now() + CLOSE_MS, "closing the activity");
        } catch (DeviceError e) {
            System.err.println("jvm-device: " + e.getMessage());
        }
    }

    /**
     * Milliseconds of the JVM's own monotonic clock: Robolectric's
     * SystemClock stands still unless a test moves it, and a device clock
     * may be moved by the host, so neither bounds a real wait.
     */
    static long now() {
        return System.nanoTime() / 1_000_000;
    }

    /** A step on the main thread, within the deadline; what it throws comes back here. */
    static <T> T onMain(Callable<T> step, long deadline, String what) throws DeviceError, InterruptedException {
        FutureTask<T> task = new FutureTask<>(step);
        if (Looper.myLooper() == Looper.getMainLooper()) {
            task.run();
        } else {
            new Handler(Looper.getMainLooper()).post(task);
        }
        try {
            return task.get(Math.max(0, deadline - now()), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            task.cancel(false);
            throw new DeviceError(WireError.TIMEOUT, "the main thread did not get to " + what + " in time");
        } catch (ExecutionException e) {
            Throwable t = e.getCause();
            if (t instanceof DeviceError) {
                throw (DeviceError) t;
            }
            if (t instanceof RuntimeException) {
                throw (RuntimeException) t;
            }
            if (t instanceof Error) {
                throw (Error) t;
            }
            throw new DeviceError(DeviceError.DEVICE_ERROR, what + ": " + t);
        }
    }
}
