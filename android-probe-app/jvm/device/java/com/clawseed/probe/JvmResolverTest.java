package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import android.app.Activity;
import android.app.PendingIntent;
import android.content.Context;
import android.content.Intent;
import com.clawseed.probe.core.DeviceBackend.ResolveResult;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.jvmtest.Confirmations;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireError;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;

/**
 * The JVM device's {@code resolve} (JvmResolver): a selector found is
 * clicked and the activity's result comes back; one that matches nothing
 * plays nothing and names what was on screen; an activity that throws is
 * the Provider's failure. Run as the device runs it: resolve on a session
 * thread, this (main) thread running the looper.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34)
public class JvmResolverTest {
    private Context app;

    @Before
    public void setUp() {
        app = RuntimeEnvironment.getApplication();
        Confirmations.decision = null;
        // These screens are up once the activity starts: no need to look for 3 s.
        System.setProperty("cetp.jvm.resolve_look_ms", "300");
    }

    private static JsonObject ui(String decision, String key, String value) {
        return new JsonObject().with(decision, new JsonObject().with(key, value));
    }

    /** resolve on another thread, as a session runs it, while this thread runs the main looper. */
    private ResolveResult resolve(Class<? extends Activity> activity, Ops.Decision decision, JsonObject ui)
            throws Exception {
        PendingIntent pi = PendingIntent.getActivity(app, 0, new Intent(app, activity), PendingIntent.FLAG_IMMUTABLE);
        // A minute: the first activity of a fresh JVM loads the framework's
        // resources and themes, seconds on a loaded 2-core machine (10 s
        // failed once beside a cargo build). These tests judge what resolve
        // does, not how fast.
        Ops.ResolveParams p = new Ops.ResolveParams("pi-1", decision, 60_000, ui);
        Object[] out = new Object[1];
        Thread session = new Thread(() -> {
            try {
                out[0] = JvmResolver.resolve(app, pi, p);
            } catch (DeviceError | RuntimeException | InterruptedException e) {
                out[0] = e;
            }
        });
        session.start();
        long stop = JvmResolver.now() + 90_000;
        while (session.isAlive() && JvmResolver.now() < stop) {
            JvmResolver.idleMain();
            Thread.sleep(5);
        }
        assertTrue("resolve did not return within 90 s", !session.isAlive());
        if (out[0] instanceof Exception) {
            throw (Exception) out[0];
        }
        return (ResolveResult) out[0];
    }

    private DeviceError refused(Class<? extends Activity> activity, Ops.Decision decision, JsonObject ui)
            throws Exception {
        try {
            ResolveResult r = resolve(activity, decision, ui);
            fail("resolve answered launched=" + r.launched + " applied=" + r.decisionApplied + " code=" + r.resultCode);
            return null;
        } catch (DeviceError e) {
            return e;
        }
    }

    @Test
    public void the_approve_selector_found_is_clicked_and_the_result_comes_back() throws Exception {
        // AOSP's theme shows a dialog's buttons in capitals: the text a phone's UI automation reads.
        ResolveResult r = resolve(Confirmations.Dialog.class, Ops.Decision.APPROVE, ui("approve", "text", "CONFIRM"));
        assertTrue(r.launched);
        assertTrue(r.decisionApplied);
        assertEquals(Activity.RESULT_OK, r.resultCode);
        assertEquals(app.getPackageName(), r.launchedPackage);
        assertEquals("approved", Confirmations.decision);
    }

    @Test
    public void a_deny_selector_by_resource_id_denies() throws Exception {
        ResolveResult r = resolve(Confirmations.Dialog.class, Ops.Decision.DENY,
                ui("deny", "resource_id", "android:id/button2"));
        assertTrue(r.decisionApplied);
        assertEquals(Activity.RESULT_CANCELED, r.resultCode);
        assertEquals("denied", Confirmations.decision);
    }

    @Test
    public void dismiss_backs_out_of_the_dialog() throws Exception {
        ResolveResult r = resolve(Confirmations.Dialog.class, Ops.Decision.DISMISS, null);
        assertTrue(r.launched);
        assertEquals(Activity.RESULT_CANCELED, r.resultCode);
        assertNull(Confirmations.decision);
    }

    @Test
    public void a_selector_matching_nothing_plays_nothing_and_names_the_screen() throws Exception {
        DeviceError e = refused(Confirmations.Dialog.class, Ops.Decision.APPROVE, ui("approve", "text", "Allow"));
        assertEquals(DeviceError.DEVICE_ERROR, e.kind);
        String m = e.getMessage();
        assertTrue(m, m.contains("text = \"Allow\"") && m.contains("matched no view"));
        assertTrue(m, m.contains("text \"CONFIRM\" (resource_id \"android:id/button1\")") && m.contains("text \"CANCEL\"")
                && m.contains("text \"This cannot be undone.\""));
        assertTrue(m, m.contains("[ui.approve]"));
        assertNull("a click was played", Confirmations.decision);
    }

    /** The text as the app sets it is not what is shown, nor what a phone's UI automation reads: named so. */
    @Test
    public void a_text_as_written_but_shown_in_capitals_is_named() throws Exception {
        DeviceError e = refused(Confirmations.Dialog.class, Ops.Decision.APPROVE, ui("approve", "text", "Confirm"));
        assertEquals(DeviceError.DEVICE_ERROR, e.kind);
        assertTrue(e.getMessage(), e.getMessage().contains("android:id/button1, shown as \"CONFIRM\""));
        assertNull(Confirmations.decision);
    }

    @Test
    public void text_and_content_desc_must_both_match() throws Exception {
        JsonObject both = new JsonObject().with("approve",
                new JsonObject().with("text", "CONFIRM").with("content_desc", "not there"));
        DeviceError e = refused(Confirmations.Dialog.class, Ops.Decision.APPROVE, both);
        assertEquals(DeviceError.DEVICE_ERROR, e.kind);
        assertNull(Confirmations.decision);
    }

    @Test
    public void an_activity_that_throws_on_the_click_is_the_providers_failure() throws Exception {
        DeviceError e = refused(Confirmations.ThrowsOnConfirm.class, Ops.Decision.APPROVE,
                ui("approve", "text", "CONFIRM"));
        assertEquals(WireError.PROVIDER_EXCEPTION, e.kind);
        assertEquals(IllegalStateException.class.getName(), e.className);
        assertTrue(e.getMessage(), e.getMessage().contains("confirm handler broke"));
    }

    @Test
    public void an_activity_that_throws_while_it_starts_is_the_providers_failure() throws Exception {
        DeviceError e = refused(Confirmations.ThrowsOnCreate.class, Ops.Decision.APPROVE,
                ui("approve", "text", "Confirm"));
        assertEquals(WireError.PROVIDER_EXCEPTION, e.kind);
        assertEquals(UnsupportedOperationException.class.getName(), e.className);
        assertTrue(e.getMessage(), e.getMessage().contains("no screen today") && e.getMessage().contains("started"));
    }
}
