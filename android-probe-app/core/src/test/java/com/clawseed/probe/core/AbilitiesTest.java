package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireError;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The ops {@code hello} lists follow what the probe can do, and missing ops are refused. */
class AbilitiesTest {
    private final ExecutorService workers = Executors.newCachedThreadPool();

    @AfterEach
    void stop() {
        workers.shutdownNow();
    }

    /** A backend that counts what reaches it beyond hello. */
    private static final class Limited implements DeviceBackend {
        private final Abilities abilities;
        int backendCalls;

        Limited(Abilities abilities) {
            this.abilities = abilities;
        }

        @Override
        public Abilities abilities() {
            return abilities;
        }

        @Override
        public Hello hello() {
            return new Hello("t/1", new Ops.Identity("b", 10124, List.of("com.clawseed.probe.b"), List.of()),
                    new Ops.DeviceInfo(30, "m", "f"), 1L);
        }

        @Override
        public List<Ops.ServiceInfo> discover() {
            backendCalls++;
            return List.of();
        }

        @Override
        public long advanceClock(long ms) {
            backendCalls++;
            return 1L + ms;
        }

        @Override
        public CallResult call(Ops.CallParams params) {
            backendCalls++;
            return new CallResult(null, 0);
        }

        @Override
        public FdSource takeFd(String handle) throws DeviceError {
            backendCalls++;
            throw DeviceError.unknownHandle(handle);
        }

        @Override
        public void closeFd(String handle) {
            backendCalls++;
        }

        @Override
        public ResolveResult resolve(Ops.ResolveParams params) {
            backendCalls++;
            return new ResolveResult(true, true, -1);
        }

        @Override
        public void restartProvider(String pkg) {
            backendCalls++;
        }

        @Override
        public void close() {
            // Nothing held.
        }
    }

    /** Runs one request through a Dispatcher and returns the final frame. */
    private Frame answer(DeviceBackend backend, String op, Object params) throws Exception {
        List<Frame> sent = new ArrayList<>();
        new Dispatcher(backend, workers).handle(new Frame.Request(1, op, new JsonObject()), params, sent::add);
        assertEquals(1, sent.size());
        return sent.get(0);
    }

    private static String text(Object json) {
        return JsonWriter.toText(json);
    }

    @Test
    void aFullProbeListsEveryOpAndNoReasons() throws Exception {
        JsonObject ok = ((Frame.Ok) answer(new Limited(Abilities.FULL), "hello", null)).ok;
        assertEquals("[\"hello\",\"discover\",\"call\",\"read_fd\",\"close_fd\",\"resolve\",\"restart_provider\"]",
                text(ok.get("ops")));
        assertFalse(ok.containsKey("ops_unavailable"));
    }

    @Test
    void withoutUiAutomationResolveAndRestartAreLeftOutWithTheirReason() throws Exception {
        for (Abilities.UiConnection ui : new Abilities.UiConnection[] {
            Abilities.UiConnection.NOT_GIVEN, Abilities.UiConnection.REFUSED}) {
            Abilities a = Abilities.of(ui, null);
            JsonObject ok = ((Frame.Ok) answer(new Limited(a), "hello", null)).ok;
            assertEquals("[\"hello\",\"discover\",\"call\",\"read_fd\",\"close_fd\"]", text(ok.get("ops")), ui.name());
            JsonObject why = (JsonObject) ok.get("ops_unavailable");
            assertEquals(List.of("resolve", "restart_provider"), new ArrayList<>(why.keySet()));
            String reason = (String) why.get("resolve");
            assertTrue(reason.contains("UiAutomation"), reason);
            if (ui == Abilities.UiConnection.NOT_GIVEN) {
                assertTrue(reason.contains("am instrument -w"), reason);
            } else {
                assertTrue(reason.contains("another instrumentation"), reason);
            }
        }
        assertEquals(Abilities.FULL, Abilities.of(Abilities.UiConnection.CONNECTED, "ignored"));
    }

    @Test
    void aMissingOpIsRefusedAsUnsupportedBeforeTheBackendIsAsked() throws Exception {
        Limited backend = new Limited(Abilities.of(Abilities.UiConnection.NOT_GIVEN, "getUiAutomation() returned null"));
        Frame resolve = answer(backend, "resolve",
                new Ops.ResolveParams("pi-1", Ops.Decision.APPROVE, 1000, null));
        WireError e = ((Frame.Err) resolve).error;
        assertEquals(WireError.UNSUPPORTED, e.kind);
        assertTrue(e.message.contains("cannot `resolve`") && e.message.contains("returned null"), e.message);
        Frame restart = answer(backend, "restart_provider", new Ops.RestartProviderParams("com.example.app"));
        assertEquals(WireError.UNSUPPORTED, ((Frame.Err) restart).error.kind);
        assertEquals(0, backend.backendCalls, "the backend was asked anyway");
    }

    @Test
    void advanceClockIsListedOnlyWhereTheDeviceMovesItsClock() throws Exception {
        Limited phone = new Limited(Abilities.FULL);
        Frame refused = answer(phone, "advance_clock", new Ops.AdvanceClockParams(60_000));
        assertEquals(WireError.UNSUPPORTED, ((Frame.Err) refused).error.kind);
        assertEquals(0, phone.backendCalls, "the backend was asked anyway");

        Limited moving = new Limited(Abilities.FULL.plus(Abilities.ADVANCE_CLOCK));
        JsonObject hello = ((Frame.Ok) answer(moving, "hello", null)).ok;
        assertEquals("[\"hello\",\"discover\",\"call\",\"read_fd\",\"close_fd\",\"resolve\",\"restart_provider\","
                + "\"advance_clock\"]", text(hello.get("ops")));
        JsonObject ok = ((Frame.Ok) answer(moving, "advance_clock", new Ops.AdvanceClockParams(60_000))).ok;
        assertEquals("{\"now_ms\":60001}", text(ok));

        // A device that could move it but not for this Provider says why, and refuses.
        Limited stuck = new Limited(Abilities.without(java.util.Map.of(Abilities.ADVANCE_CLOCK, "reads GregorianCalendar")));
        JsonObject why = (JsonObject) ((Frame.Ok) answer(stuck, "hello", null)).ok.get("ops_unavailable");
        assertEquals("reads GregorianCalendar", why.get("advance_clock"));
        WireError e = ((Frame.Err) answer(stuck, "advance_clock", new Ops.AdvanceClockParams(1))).error;
        assertTrue(e.message.contains("reads GregorianCalendar"), e.message);
        assertEquals(0, stuck.backendCalls);
    }
}
