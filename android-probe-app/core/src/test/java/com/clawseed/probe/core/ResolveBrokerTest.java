package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The resolver activity is finished whichever side gives up first. */
class ResolveBrokerTest {
    @Test
    void anActivityThatCameIsFinishedWhenTheRequestEnds() throws Exception {
        ResolveBroker<String> broker = new ResolveBroker<>();
        ResolveBroker<String>.Pending p = broker.register("pi");
        AtomicInteger finished = new AtomicInteger();
        assertTrue(p.attach(finished::incrementAndGet));
        p.launched(true);
        assertEquals(Boolean.TRUE, p.awaitLaunch(10));
        assertNull(p.awaitResult(10), "no result yet: a timeout path");
        broker.release(p);
        assertEquals(1, finished.get());
        broker.release(p);
        assertEquals(1, finished.get(), "finished once");
        assertNull(broker.get(p.token));
        assertEquals(0, broker.size());
    }

    @Test
    void anActivityArrivingAfterTheRequestGaveUpIsTurnedAway() {
        ResolveBroker<String> broker = new ResolveBroker<>();
        ResolveBroker<String>.Pending p = broker.register("pi");
        broker.release(p);
        AtomicInteger finished = new AtomicInteger();
        assertFalse(p.attach(finished::incrementAndGet));
        assertEquals(0, finished.get(), "the activity finishes itself when turned away");
    }

    @Test
    void aResultIsHandedBack() throws Exception {
        ResolveBroker<String> broker = new ResolveBroker<>();
        ResolveBroker<String>.Pending p = broker.register("pi");
        assertNull(p.awaitLaunch(0));
        p.launched(true);
        p.finished(-1);
        assertEquals(Integer.valueOf(-1), p.awaitResult(0));
        broker.release(p);
    }
}
