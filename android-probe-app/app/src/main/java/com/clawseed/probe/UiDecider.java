package com.clawseed.probe;

import android.accessibilityservice.AccessibilityService;
import android.app.UiAutomation;
import android.os.SystemClock;
import android.view.accessibility.AccessibilityNodeInfo;
import android.view.accessibility.AccessibilityWindowInfo;
import com.clawseed.probe.core.LaunchedWindow;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Plays a user's decision in a Provider's confirmation UI with UI automation.
 *
 * <p>The {@code ui} object of {@code resolve} (from the vendor's profile) maps
 * {@code approve} and {@code deny} to a selector: an object with any of
 * {@code resource_id} (e.g. {@code com.example.app:id/allow}), {@code text}
 * and {@code content_desc}, all of which must match one element, searched in
 * the window the PendingIntent brought up only. {@code dismiss} presses
 * Back, once that window is on screen, and needs no selector.
 */
final class UiDecider {
    private UiDecider() {}

    private static final long POLL_MS = 200;
    /** Bounds the tree walk of a hostile UI. */
    private static final int MAX_NODES = 5000;

    /**
     * True when the decision was played in {@code launched}, the window the
     * PendingIntent brought up ({@link #awaitLaunched}); null when none came
     * up, and then nothing is played: Back or a click would land in whatever
     * else is on screen.
     */
    static boolean apply(UiAutomation ui, Ops.Decision decision, JsonObject selectors, LaunchedWindow.Win launched,
            String ownPackage, long deadline) throws InterruptedException {
        if (ui == null || launched == null) {
            return false;
        }
        if (decision == Ops.Decision.DISMISS) {
            // The launched window exists (it was waited for): Back reaches it.
            return back(ui);
        }
        // Keep time for backing out if the decision cannot be played.
        long stop = deadline - Math.min(5_000, Math.max(0, (deadline - SystemClock.elapsedRealtime()) / 4));
        Object sel = selectors == null ? null : selectors.get(decision.wire);
        if (!(sel instanceof JsonObject)) {
            return false;
        }
        JsonObject selector = (JsonObject) sel;
        while (SystemClock.elapsedRealtime() < stop) {
            AccessibilityNodeInfo root = rootOf(ui, launched, ownPackage);
            if (root != null) {
                AccessibilityNodeInfo node = find(root, selector);
                if (node != null && click(node)) {
                    return true;
                }
            }
            Thread.sleep(POLL_MS);
        }
        return false;
    }

    /** The windows on screen (needs FLAG_RETRIEVE_INTERACTIVE_WINDOWS, which UiAccess sets). */
    static List<LaunchedWindow.Win> windows(UiAutomation ui) {
        List<LaunchedWindow.Win> out = new ArrayList<>();
        for (AccessibilityWindowInfo w : ui.getWindows()) {
            AccessibilityNodeInfo root = w.getRoot();
            CharSequence pkg = root == null ? null : root.getPackageName();
            out.add(new LaunchedWindow.Win(w.getId(), pkg == null ? null : pkg.toString(),
                    w.getType() == AccessibilityWindowInfo.TYPE_APPLICATION, w.getLayer()));
        }
        return out;
    }

    /**
     * The root of the launched window, or of the top window of its package
     * when the Provider moved on to another of its own activities.
     */
    private static AccessibilityNodeInfo rootOf(UiAutomation ui, LaunchedWindow.Win launched, String ownPackage) {
        AccessibilityNodeInfo samePackage = null;
        int layer = Integer.MIN_VALUE;
        for (AccessibilityWindowInfo w : ui.getWindows()) {
            AccessibilityNodeInfo root = w.getRoot();
            if (root == null || root.getPackageName() == null) {
                continue;
            }
            if (w.getId() == launched.id) {
                return root;
            }
            if (w.getType() == AccessibilityWindowInfo.TYPE_APPLICATION && w.getLayer() > layer
                    && launched.pkg.contentEquals(root.getPackageName())
                    && !ownPackage.contentEquals(root.getPackageName())) {
                samePackage = root;
                layer = w.getLayer();
            }
        }
        return samePackage;
    }

    static boolean back(UiAutomation ui) {
        return ui != null && ui.performGlobalAction(AccessibilityService.GLOBAL_ACTION_BACK);
    }

    /**
     * Waits until the PendingIntent's activity has a window on screen and
     * returns it (probe-wire {@code launched_package} is its package), or
     * null when none came up before {@code stop}. {@code before}: the ids of
     * the windows on screen before the launch ({@link LaunchedWindow} says
     * why the front window alone is not enough).
     */
    static LaunchedWindow.Win awaitLaunched(UiAutomation ui, Set<Integer> before, String ownPackage, long stop)
            throws InterruptedException {
        while (true) {
            LaunchedWindow.Win w = LaunchedWindow.launched(before, windows(ui), ownPackage);
            if (w != null || SystemClock.elapsedRealtime() >= stop) {
                return w;
            }
            Thread.sleep(POLL_MS);
        }
    }

    private static String str(JsonObject o, String key) {
        Object v = o.get(key);
        return v instanceof String ? (String) v : null;
    }

    private static boolean matches(AccessibilityNodeInfo n, String id, String text, String desc) {
        if (id != null && !id.equals(n.getViewIdResourceName())) {
            return false;
        }
        if (text != null && (n.getText() == null || !text.contentEquals(n.getText()))) {
            return false;
        }
        return desc == null || (n.getContentDescription() != null && desc.contentEquals(n.getContentDescription()));
    }

    private static AccessibilityNodeInfo find(AccessibilityNodeInfo root, JsonObject selector) {
        String id = str(selector, "resource_id");
        String text = str(selector, "text");
        String desc = str(selector, "content_desc");
        if (id == null && text == null && desc == null) {
            return null;
        }
        List<AccessibilityNodeInfo> candidates;
        if (id != null) {
            candidates = root.findAccessibilityNodeInfosByViewId(id);
        } else if (text != null) {
            candidates = root.findAccessibilityNodeInfosByText(text);
        } else {
            candidates = walk(root);
        }
        for (AccessibilityNodeInfo n : candidates) {
            if (n != null && matches(n, id, text, desc)) {
                return n;
            }
        }
        return null;
    }

    private static List<AccessibilityNodeInfo> walk(AccessibilityNodeInfo root) {
        List<AccessibilityNodeInfo> out = new ArrayList<>();
        ArrayDeque<AccessibilityNodeInfo> queue = new ArrayDeque<>();
        queue.add(root);
        while (!queue.isEmpty() && out.size() < MAX_NODES) {
            AccessibilityNodeInfo n = queue.poll();
            out.add(n);
            for (int i = 0; i < n.getChildCount(); i++) {
                AccessibilityNodeInfo c = n.getChild(i);
                if (c != null) {
                    queue.add(c);
                }
            }
        }
        return out;
    }

    /** Clicks the node or its nearest clickable ancestor. */
    private static boolean click(AccessibilityNodeInfo node) {
        AccessibilityNodeInfo n = node;
        for (int depth = 0; n != null && depth < 32; depth++) {
            if (n.isClickable() && n.isEnabled()) {
                return n.performAction(AccessibilityNodeInfo.ACTION_CLICK);
            }
            n = n.getParent();
        }
        return false;
    }
}
