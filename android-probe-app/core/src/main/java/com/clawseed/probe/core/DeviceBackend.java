package com.clawseed.probe.core;

import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireBundle;
import java.util.List;

/**
 * What a device does for one connection (one caller identity). The Android
 * app implements it with ContentResolver and PackageManager; tests use a
 * fake. Methods may block; they are called from worker threads, several at
 * once (calls run concurrently).
 */
public interface DeviceBackend {
    final class Hello {
        public final String probe;
        public final Ops.Identity identity;
        public final Ops.DeviceInfo device;
        public final long nowMs;
        /** Optional members of the answer (compatible extensions); never null. */
        public final JsonObject extra;

        public Hello(String probe, Ops.Identity identity, Ops.DeviceInfo device, long nowMs) {
            this(probe, identity, device, nowMs, new JsonObject());
        }

        public Hello(String probe, Ops.Identity identity, Ops.DeviceInfo device, long nowMs, JsonObject extra) {
            this.probe = probe;
            this.identity = identity;
            this.device = device;
            this.nowMs = nowMs;
            this.extra = extra;
        }
    }

    final class CallResult {
        /** Null when {@code call()} returned null. */
        public final WireBundle result;
        public final long elapsedUs;
        /**
         * Keys of the result that could not be read at all (below Android 13
         * nothing after an unreadable Parcelable can be), 0 normally.
         */
        public final int unreadKeys;

        public CallResult(WireBundle result, long elapsedUs) {
            this(result, elapsedUs, 0);
        }

        public CallResult(WireBundle result, long elapsedUs, int unreadKeys) {
            this.result = result;
            this.elapsedUs = elapsedUs;
            this.unreadKeys = unreadKeys;
        }
    }

    final class ResolveResult {
        public final boolean launched;
        public final boolean decisionApplied;
        public final int resultCode;
        /** The package of the activity that came up, or null when not known. */
        public final String launchedPackage;

        public ResolveResult(boolean launched, boolean decisionApplied, int resultCode) {
            this(launched, decisionApplied, resultCode, null);
        }

        public ResolveResult(boolean launched, boolean decisionApplied, int resultCode, String launchedPackage) {
            this.launched = launched;
            this.decisionApplied = decisionApplied;
            this.resultCode = resultCode;
            this.launchedPackage = launchedPackage;
        }
    }

    Hello hello() throws DeviceError;

    /** What this probe can do here; decides the ops {@code hello} lists. */
    default Abilities abilities() {
        return Abilities.FULL;
    }

    List<Ops.ServiceInfo> discover() throws DeviceError;

    /** {@code ContentResolver.call}; PendingIntents and descriptors in the result become handles. */
    CallResult call(Ops.CallParams params) throws DeviceError, InterruptedException;

    /** Takes a descriptor for reading; the handle is used up. */
    FdSource takeFd(String handle) throws DeviceError;

    /** Closes a descriptor unread; the handle is used up. */
    void closeFd(String handle) throws DeviceError;

    /** Launches a PendingIntent for a result and plays the decision; the handle is used up. */
    ResolveResult resolve(Ops.ResolveParams params) throws DeviceError, InterruptedException;

    /** Kills the Provider's process as {@code am force-stop} does. */
    void restartProvider(String pkg) throws DeviceError, InterruptedException;

    /**
     * Lets {@code ms} of device time pass at once and returns the new device
     * time (Unix epoch ms): only on a device whose {@link #abilities} list
     * {@link Abilities#ADVANCE_CLOCK}. {@code ms} is unsigned, as on the wire.
     */
    default long advanceClock(long ms) throws DeviceError {
        throw DeviceError.unsupported("this device cannot move its clock");
    }

    /**
     * The names of the Consumers under test this device makes act
     * ({@code consumer_act}, probe-wire "driving a Consumer under test"),
     * which {@code hello} lists as {@code consumers}. Empty on a phone: the
     * probe cannot make another app act there, and the host runs the
     * vendor's driver instead; then {@code consumer_act} stays unknown.
     */
    default List<String> consumers() {
        return List.of();
    }

    /**
     * Makes {@code consumer} (one of {@link #consumers}) perform
     * {@code action} (an object with a string {@code do}) and returns its
     * outcome object ({@code outcome} and its members) as the host reads it.
     * The device bounds the act by {@code timeoutMs} (never 0 here).
     */
    default JsonObject consumerAct(String consumer, JsonObject action, long timeoutMs)
            throws DeviceError, InterruptedException {
        throw DeviceError.unsupported("this device hosts no Consumer under test");
    }

    /** The connection closed: release every handle. */
    void close();
}
