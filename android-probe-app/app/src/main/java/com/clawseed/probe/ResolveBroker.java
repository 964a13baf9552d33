package com.clawseed.probe;

import android.app.PendingIntent;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Hands a PendingIntent to {@link ResolveActivity} and its activity result
 * back to the waiting request.
 */
final class ResolveBroker {
    private ResolveBroker() {}

    static final class Pending {
        final long token;
        final PendingIntent intent;
        private final CountDownLatch launchedLatch = new CountDownLatch(1);
        private final CountDownLatch finishedLatch = new CountDownLatch(1);
        private volatile boolean launched;
        private volatile int resultCode;

        Pending(long token, PendingIntent intent) {
            this.token = token;
            this.intent = intent;
        }

        void launched(boolean ok) {
            launched = ok;
            launchedLatch.countDown();
        }

        void finished(int code) {
            resultCode = code;
            finishedLatch.countDown();
        }

        /** Whether the PendingIntent was sent; null if the activity never said. */
        Boolean awaitLaunch(long timeoutMs) throws InterruptedException {
            return launchedLatch.await(Math.max(0, timeoutMs), TimeUnit.MILLISECONDS) ? launched : null;
        }

        /** The activity result code, or null on timeout. */
        Integer awaitResult(long timeoutMs) throws InterruptedException {
            return finishedLatch.await(Math.max(0, timeoutMs), TimeUnit.MILLISECONDS) ? resultCode : null;
        }
    }

    private static final Map<Long, Pending> PENDING = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT = new AtomicLong(1);

    static Pending register(PendingIntent intent) {
        Pending p = new Pending(NEXT.getAndIncrement(), intent);
        PENDING.put(p.token, p);
        return p;
    }

    static Pending get(long token) {
        return PENDING.get(token);
    }

    static void unregister(long token) {
        PENDING.remove(token);
    }
}
