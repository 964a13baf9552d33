package com.clawseed.probe.consumer;

import android.content.Context;

/**
 * What a Consumer vendor implements, in a few lines around their own client,
 * so that the JVM device ({@code scripts/jvm-device.sh --consumer-jar …
 * --consumer-class CLASS}) can make the Consumer act for {@code cetp
 * consumer} (probe-wire "driving a Consumer under test"). Each method is one
 * act; it returns the {@link Outcome} the Consumer came to, as its agent
 * would see it. An exception escaping a method is the outcome
 * {@code crashed} (the Consumer threw), except {@link NotSupported}, which
 * tells the harness the Consumer cannot be asked this (a setup gap, never a
 * finding).
 *
 * <p>The device calls the methods one at a time, from one thread, each
 * within the act's deadline; a method still running at the deadline is
 * interrupted and the act is a device timeout. The Consumer's calls go to the
 * hostile Provider the harness scripts, found by ordinary discovery
 * ({@code com.clawseed.action.TOOL_PROVIDER}) through the {@link Context}
 * given to {@link #start}, exactly as on a phone.
 *
 * <p>A public class with a public no-argument constructor.
 */
public interface ConsumerAdapter {
    /**
     * Once, before the first act: the Consumer app's Context (its own package
     * name; its PackageManager and ContentResolver are the device's).
     */
    void start(Context context) throws Exception;

    /** {@code connect}: discover {@code authority}, negotiate (or use v1 where §8 allows), list tools. */
    Outcome connect(String authority) throws Exception;

    /** {@code list_tools}: list tools again, with the Consumer's own cache and {@code revision} rules. */
    Outcome listTools(String authority) throws Exception;

    /**
     * {@code call_tool}: execute {@code tool} with {@code argsJson} (a JSON
     * object's text) as the agent would: retries, waits and polling
     * included, no user present (a confirmation ends the act as
     * {@link Outcome#needsUser}).
     */
    Outcome callTool(String authority, String tool, String argsJson) throws Exception;

    /**
     * {@code cancel_tool} (an extension): execute the tool and, once it runs
     * as a background operation, cancel it and follow it to its end. The
     * default says the Consumer cannot: the scenarios that need it are then
     * named not judged.
     */
    default Outcome cancelTool(String authority, String tool, String argsJson) throws Exception {
        throw new NotSupported("this Consumer's adapter does not implement cancel_tool");
    }

    /**
     * {@code user_decision}: the user decides ({@code approve} or
     * {@code deny}) on the resolution the Consumer is waiting for; the
     * Consumer launches it through {@code user} (as it would start the
     * PendingIntent for a result), then finishes the call.
     */
    Outcome userDecision(String decision, User user) throws Exception;

    /** {@code reset}: forget sessions and caches, as a restarted app would. */
    Outcome reset() throws Exception;

    /** The user of the device, who decides in the screen a resolution shows. */
    interface User {
        /**
         * Launches {@code resolution} for a result, as the Consumer's
         * activity would with {@code startIntentSenderForResult}; the device
         * plays the act's decision in the screen it shows and returns the
         * activity's result code ({@code Activity.RESULT_OK} or
         * {@code RESULT_CANCELED}).
         */
        int launch(android.app.PendingIntent resolution) throws Exception;
    }

    /** The Consumer cannot be asked this act: a setup gap, not a finding. */
    final class NotSupported extends Exception {
        private static final long serialVersionUID = 1L;

        public NotSupported(String why) {
            super(why);
        }
    }
}
