package com.clawseed.probe;

import android.accessibilityservice.AccessibilityService;
import android.app.UiAutomation;
import android.os.SystemClock;
import android.view.accessibility.AccessibilityNodeInfo;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * Plays a user's decision in a Provider's confirmation UI with UI automation.
 *
 * <p>The {@code ui} object of {@code resolve} (from the vendor's profile) maps
 * {@code approve} and {@code deny} to a selector: an object with any of
 * {@code resource_id} (e.g. {@code com.example.app:id/allow}), {@code text}
 * and {@code content_desc}, all of which must match one element. {@code dismiss}
 * presses Back and needs no selector.
 */
final class UiDecider {
    private UiDecider() {}

    private static final long POLL_MS = 200;
    /** Bounds the tree walk of a hostile UI. */
    private static final int MAX_NODES = 5000;

    /** True when the decision was played. */
    static boolean apply(UiAutomation ui, Ops.Decision decision, JsonObject selectors, String ownPackage, long deadline)
            throws InterruptedException {
        if (ui == null) {
            return false;
        }
        // Keep time for backing out if the decision cannot be played.
        long stop = deadline - Math.min(5_000, Math.max(0, (deadline - SystemClock.elapsedRealtime()) / 4));
        if (decision == Ops.Decision.DISMISS) {
            return waitForForeignWindow(ui, ownPackage, stop) && back(ui);
        }
        Object sel = selectors == null ? null : selectors.get(decision.wire);
        if (!(sel instanceof JsonObject)) {
            return false;
        }
        JsonObject selector = (JsonObject) sel;
        while (SystemClock.elapsedRealtime() < stop) {
            AccessibilityNodeInfo root = ui.getRootInActiveWindow();
            if (root != null && root.getPackageName() != null && !ownPackage.contentEquals(root.getPackageName())) {
                AccessibilityNodeInfo node = find(root, selector);
                if (node != null && click(node)) {
                    return true;
                }
            }
            Thread.sleep(POLL_MS);
        }
        return false;
    }

    static boolean back(UiAutomation ui) {
        return ui != null && ui.performGlobalAction(AccessibilityService.GLOBAL_ACTION_BACK);
    }

    /**
     * The package of the first front window that is not the probe's: the
     * activity the PendingIntent started (probe-wire {@code launched_package}),
     * or null when none came up before {@code stop}. A Provider whose own
     * activity at once hands over to another app's would be seen as that app.
     */
    static String foregroundPackage(UiAutomation ui, String ownPackage, long stop) throws InterruptedException {
        if (ui == null) {
            return null;
        }
        while (SystemClock.elapsedRealtime() < stop) {
            AccessibilityNodeInfo root = ui.getRootInActiveWindow();
            if (root != null && root.getPackageName() != null && !ownPackage.contentEquals(root.getPackageName())) {
                return root.getPackageName().toString();
            }
            Thread.sleep(POLL_MS);
        }
        return null;
    }

    /** Waits until the front window belongs to another app (the Provider's screen). */
    private static boolean waitForForeignWindow(UiAutomation ui, String ownPackage, long stop) throws InterruptedException {
        while (SystemClock.elapsedRealtime() < stop) {
            AccessibilityNodeInfo root = ui.getRootInActiveWindow();
            if (root != null && root.getPackageName() != null && !ownPackage.contentEquals(root.getPackageName())) {
                return true;
            }
            Thread.sleep(POLL_MS);
        }
        return false;
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
