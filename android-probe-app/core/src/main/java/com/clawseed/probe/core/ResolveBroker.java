package com.clawseed.probe.core;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Hands a PendingIntent ({@code I}) to the resolver activity and its result
 * back to the waiting request, and makes sure the activity is finished
 * whichever side gives up first: a resolver activity left behind is a
 * transparent window over the screen that swallows touches.
 */
public final class ResolveBroker<I> {
    /** Closes the resolver activity and whatever it launched for its result. */
    public interface Finisher {
        void finish();
    }

    public final class Pending {
        public final long token;
        public final I intent;
        private final CountDownLatch launchedLatch = new CountDownLatch(1);
        private final CountDownLatch finishedLatch = new CountDownLatch(1);
        private volatile boolean launched;
        private volatile int resultCode;
        private Finisher finisher;
        private boolean abandoned;

        Pending(long token, I intent) {
            this.token = token;
            this.intent = intent;
        }

        /**
         * The activity arrived. False when the request has already given up:
         * the activity must then finish at once.
         */
        public synchronized boolean attach(Finisher f) {
            if (abandoned) {
                return false;
            }
            finisher = f;
            return true;
        }

        public void launched(boolean ok) {
            launched = ok;
            launchedLatch.countDown();
        }

        public void finished(int code) {
            resultCode = code;
            finishedLatch.countDown();
        }

        /** Whether the PendingIntent was sent; null if the activity never said in time. */
        public Boolean awaitLaunch(long timeoutMs) throws InterruptedException {
            return launchedLatch.await(Math.max(0, timeoutMs), TimeUnit.MILLISECONDS) ? launched : null;
        }

        /** The activity result code, or null on timeout. */
        public Integer awaitResult(long timeoutMs) throws InterruptedException {
            return finishedLatch.await(Math.max(0, timeoutMs), TimeUnit.MILLISECONDS) ? resultCode : null;
        }

        /** The request is over: finish the activity if it came, and refuse it if it comes later. */
        synchronized void abandon() {
            abandoned = true;
            Finisher f = finisher;
            finisher = null;
            if (f != null) {
                f.finish();
            }
        }
    }

    private final Map<Long, Pending> pending = new ConcurrentHashMap<>();
    private final AtomicLong next = new AtomicLong(1);

    public Pending register(I intent) {
        Pending p = new Pending(next.getAndIncrement(), intent);
        pending.put(p.token, p);
        return p;
    }

    public Pending get(long token) {
        return pending.get(token);
    }

    /** Ends a request on every path (call it in a {@code finally}). */
    public void release(Pending p) {
        pending.remove(p.token);
        p.abandon();
    }

    public int size() {
        return pending.size();
    }
}
