package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.robolectric.Shadows.shadowOf;

import android.app.KeyguardManager;
import android.content.Context;
import android.os.PowerManager;
import android.os.SystemClock;
import com.clawseed.probe.core.DeviceError;
import java.util.ArrayList;
import java.util.List;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;
import org.robolectric.annotation.LooperMode;

/**
 * Finding 7 of issue 27: nothing woke the screen or dismissed the keyguard
 * before a resolve. Robolectric's PowerManager and KeyguardManager stand for
 * the phone's; the shell commands are recorded and play their effect on
 * them (on a phone, `input keyevent KEYCODE_WAKEUP` and `wm dismiss-keyguard`
 * do; that part needs a phone: README, "First phone run").
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34)
@LooperMode(LooperMode.Mode.PAUSED)
public class ScreenWakerTest {
    private Context ctx;
    private final List<String> commands = new ArrayList<>();

    @Before
    public void setUp() {
        ctx = RuntimeEnvironment.getApplication();
    }

    private PowerManager power() {
        return ctx.getSystemService(PowerManager.class);
    }

    private KeyguardManager keyguard() {
        return ctx.getSystemService(KeyguardManager.class);
    }

    /** A shell whose commands do what they do on a phone with an insecure keyguard. */
    private final ScreenWaker.Shell phone = command -> {
        commands.add(command);
        if (command.equals("input keyevent KEYCODE_WAKEUP")) {
            shadowOf(power()).turnScreenOn(true);
        } else if (command.equals("wm dismiss-keyguard") && !keyguard().isDeviceSecure()) {
            shadowOf(keyguard()).setKeyguardLocked(false);
        }
    };

    private long soon() {
        return SystemClock.elapsedRealtime() + 60_000;
    }

    @Test
    public void an_awake_unlocked_phone_is_left_alone() throws Exception {
        shadowOf(power()).turnScreenOn(true);
        shadowOf(keyguard()).setKeyguardLocked(false);
        ScreenWaker.wake(ctx, phone, soon());
        assertEquals(List.of(), commands);
    }

    @Test
    public void a_sleeping_locked_phone_is_woken_and_its_keyguard_dismissed() throws Exception {
        shadowOf(power()).turnScreenOn(false);
        shadowOf(keyguard()).setKeyguardLocked(true);
        ScreenWaker.wake(ctx, phone, soon());
        assertEquals(List.of("input keyevent KEYCODE_WAKEUP", "wm dismiss-keyguard"), commands);
        assertTrue(power().isInteractive());
        assertTrue(!keyguard().isKeyguardLocked());
    }

    @Test
    public void a_pin_locked_phone_is_a_device_error_naming_the_fix() throws Exception {
        shadowOf(power()).turnScreenOn(true);
        shadowOf(keyguard()).setKeyguardLocked(true);
        shadowOf(keyguard()).setIsDeviceSecure(true);
        try {
            // A short settle time: the probe waits (5 s on a phone) for a lock that stays.
            ScreenWaker.wake(ctx, phone, soon(), 300);
            fail("a PIN-locked phone went unnoticed");
        } catch (DeviceError e) {
            assertEquals(DeviceError.DEVICE_ERROR, e.kind);
            assertTrue(e.getMessage(), e.getMessage().contains("unlock it"));
        }
        assertEquals(List.of("wm dismiss-keyguard"), commands);
    }
}
