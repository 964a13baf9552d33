package com.clawseed.probe.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Set;

/**
 * Which app's screen a resolve's PendingIntent brought up (probe-wire
 * {@code launched_package}, §7.2), read from the windows on screen.
 *
 * <p>The resolver activity tells that it sent the intent before the
 * launched activity has a window; what is in front at that moment is the
 * probe's own transparent window, with the launcher (or, on a locked phone,
 * systemui) behind it. So the launched activity is the top application
 * window that is neither the probe's nor one that was already on screen
 * before the launch; until there is one, nothing was launched yet (the
 * caller waits, and times out naming what it saw). System windows (status
 * bar, keyguard, input method, overlays) are never an activity's.
 */
public final class LaunchedWindow {
    private LaunchedWindow() {}

    /** One window on screen, as UI automation lists it. */
    public static final class Win {
        public final int id;
        public final String pkg;
        /** An activity's window ({@code AccessibilityWindowInfo.TYPE_APPLICATION}). */
        public final boolean application;
        /** Z-order: higher is in front. */
        public final int layer;

        public Win(int id, String pkg, boolean application, int layer) {
            this.id = id;
            this.pkg = pkg;
            this.application = application;
            this.layer = layer;
        }

        @Override
        public String toString() {
            return pkg + (application ? "" : " (system)") + " #" + id;
        }
    }

    /** The ids of the windows on screen before the launch. */
    public static Set<Integer> ids(Collection<Win> windows) {
        Set<Integer> out = new java.util.HashSet<>();
        for (Win w : windows) {
            out.add(w.id);
        }
        return out;
    }

    /** The top application window, or null. */
    static Win top(List<Win> now) {
        List<Win> apps = new ArrayList<>();
        for (Win w : now) {
            if (w.application && w.pkg != null) {
                apps.add(w);
            }
        }
        apps.sort(Comparator.comparingInt((Win w) -> w.layer).reversed());
        return apps.isEmpty() ? null : apps.get(0);
    }

    /**
     * The launched activity's window, or null while there is none: the top
     * application window, when it is not the probe's and was not on screen
     * before the launch.
     */
    public static Win launched(Set<Integer> before, List<Win> now, String ownPackage) {
        Win top = top(now);
        if (top == null || top.pkg.equals(ownPackage) || before.contains(top.id)) {
            return null;
        }
        return top;
    }

    /** What was on screen, for a timeout's message. */
    public static String describe(Set<Integer> before, List<Win> now) {
        List<String> parts = new ArrayList<>();
        List<Win> sorted = new ArrayList<>(now);
        sorted.sort(Comparator.comparingInt((Win w) -> w.layer).reversed());
        for (Win w : sorted) {
            parts.add(w + (before.contains(w.id) ? " (there before the launch)" : ""));
        }
        return parts.isEmpty() ? "no window" : String.join(", ", parts);
    }
}
