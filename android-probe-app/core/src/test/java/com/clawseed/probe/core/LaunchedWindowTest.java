package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.core.LaunchedWindow.Win;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Finding 1 of issue 27: launched_package was read as the first front
 * window not the probe's, while the launched activity had no window yet.
 * Window lists as UiAutomation.getWindows gives them on a phone at each
 * moment of a resolve (the shapes, not a recording: no phone ran this).
 */
class LaunchedWindowTest {
    static final String PROBE = "com.clawseed.probe";
    static final Win LAUNCHER = new Win(1, "com.android.launcher3", true, 10);
    static final Win STATUS_BAR = new Win(2, "com.android.systemui", false, 30);
    static final Win KEYGUARD = new Win(3, "com.android.systemui", false, 25);
    static final Win TRAMPOLINE = new Win(4, PROBE, true, 11);
    static final Win PROVIDER = new Win(5, "com.example.app", true, 12);

    @Test
    void the_launcher_behind_the_transparent_trampoline_is_not_the_launched_app() {
        Set<Integer> before = LaunchedWindow.ids(List.of(LAUNCHER, STATUS_BAR));
        // The resolver activity said "launched" from onCreate: the Provider's
        // activity has no window yet, the launcher shows through ours.
        assertNull(LaunchedWindow.launched(before, List.of(LAUNCHER, STATUS_BAR, TRAMPOLINE), PROBE));
        // Our window gone before the Provider's came: still the launcher, still nothing.
        assertNull(LaunchedWindow.launched(before, List.of(LAUNCHER, STATUS_BAR), PROBE));
        Win w = LaunchedWindow.launched(before, List.of(LAUNCHER, STATUS_BAR, TRAMPOLINE, PROVIDER), PROBE);
        assertEquals("com.example.app", w.pkg);
    }

    @Test
    void on_a_locked_phone_systemui_is_never_the_launched_app() {
        Set<Integer> before = LaunchedWindow.ids(List.of(KEYGUARD, STATUS_BAR));
        assertNull(LaunchedWindow.launched(before, List.of(KEYGUARD, STATUS_BAR), PROBE));
        // Even a systemui window that came up after the launch is not an activity's.
        Win shade = new Win(9, "com.android.systemui", false, 40);
        assertNull(LaunchedWindow.launched(before, List.of(KEYGUARD, STATUS_BAR, shade, TRAMPOLINE), PROBE));
        Win overKeyguard = new Win(6, "com.example.app", true, 26);
        assertEquals("com.example.app", LaunchedWindow.launched(before, List.of(KEYGUARD, overKeyguard), PROBE).pkg);
    }

    @Test
    void another_apps_activity_is_reported_as_that_app() {
        // A Provider whose intent opens another app: that app is what came up.
        Set<Integer> before = LaunchedWindow.ids(List.of(LAUNCHER));
        Win browser = new Win(7, "com.android.chrome", true, 12);
        assertEquals("com.android.chrome", LaunchedWindow.launched(before, List.of(LAUNCHER, browser), PROBE).pkg);
    }

    @Test
    void an_app_already_in_front_before_the_launch_is_not_taken_for_the_launched_one() {
        Win providerBefore = new Win(8, "com.example.app", true, 10);
        Set<Integer> before = LaunchedWindow.ids(List.of(providerBefore));
        assertNull(LaunchedWindow.launched(before, List.of(providerBefore, TRAMPOLINE), PROBE));
        assertEquals(PROVIDER, LaunchedWindow.launched(before, List.of(providerBefore, PROVIDER), PROBE));
    }

    @Test
    void the_timeout_message_names_what_was_on_screen() {
        Set<Integer> before = LaunchedWindow.ids(List.of(LAUNCHER));
        String d = LaunchedWindow.describe(before, List.of(LAUNCHER, STATUS_BAR));
        assertTrue(d.startsWith("com.android.systemui (system) #2, com.android.launcher3 #1 (there before the launch)"), d);
    }
}
