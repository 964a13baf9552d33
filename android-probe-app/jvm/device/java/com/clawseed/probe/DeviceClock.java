package com.clawseed.probe;

import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.util.Calendar;
import java.util.Locale;
import java.util.TimeZone;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The JVM device's clock: real time plus how far the host moved it
 * ({@code advance_clock}). The Provider's classes read it wherever they read
 * a clock, because {@link ClockRewriter} redirected their calls here before
 * the JVM loaded them: {@code System.currentTimeMillis}/{@code nanoTime},
 * {@code SystemClock}'s elapsed and uptime clocks, {@code java.time}'s
 * {@code now()} and system clocks, {@code new Date()} and
 * {@code Calendar.getInstance}. A move only ever goes forward, so every
 * clock stays monotonic, as time passing does on a phone.
 *
 * <p>Public and static: the Provider's rewritten code calls it from its own
 * package, in the same class loader as the device.
 */
public final class DeviceClock {
    private DeviceClock() {}

    /** At most a year per move, as the simulated device: every window the spec defines, far from overflow. */
    static final long MAX_ADVANCE_MS = 366L * 24 * 3_600_000;

    /** How far the host moved the clock, in ms; only grows. */
    private static final AtomicLong OFFSET_MS = new AtomicLong();

    /** Lets {@code ms} of device time pass at once; returns the new wall time. */
    static long advance(long ms) {
        if (ms < 0) {
            throw new IllegalArgumentException("the device clock only moves forward");
        }
        OFFSET_MS.addAndGet(ms);
        return currentTimeMillis();
    }

    static long offsetMs() {
        return OFFSET_MS.get();
    }

    /**
     * Why the clock must not be moved for this Provider, or null when it may:
     * scripts/jvm-device.sh ran {@link ClockRewriter} on its code and names
     * the report in {@code cetp.jvm.clock.unmovable}; each line there is a
     * clock read the rewrite could not redirect. Moving the clock past such
     * a Provider would judge it on a time it never reads.
     */
    static String whyUnmovable() {
        String report = System.getProperty("cetp.jvm.clock.unmovable");
        if (report == null) {
            return "the Provider's classes were not rewritten to read the device clock"
                    + " (start the device with scripts/jvm-device.sh)";
        }
        java.util.List<String> lines;
        try {
            lines = java.nio.file.Files.readAllLines(java.nio.file.Path.of(report));
        } catch (java.io.IOException e) {
            return "the clock rewrite's report cannot be read: " + e.getMessage();
        }
        lines.removeIf(String::isBlank);
        if (lines.isEmpty()) {
            return null;
        }
        return "the Provider reads a clock the JVM device cannot move (" + String.join("; ",
                lines.subList(0, Math.min(3, lines.size()))) + (lines.size() > 3 ? "; and " + (lines.size() - 3)
                + " more" : "") + "): its lifetimes are waited out in real time";
    }

    public static long currentTimeMillis() {
        return System.currentTimeMillis() + OFFSET_MS.get();
    }

    public static long nanoTime() {
        return System.nanoTime() + OFFSET_MS.get() * 1_000_000L;
    }

    /** {@code SystemClock.elapsedRealtime} and {@code uptimeMillis}: the JVM's monotonic clock, moved. */
    public static long elapsedMillis() {
        return nanoTime() / 1_000_000L;
    }

    /** {@code SystemClock.elapsedRealtimeNanos} and {@code uptimeNanos}. */
    public static long elapsedNanos() {
        return nanoTime();
    }

    public static Instant instant() {
        return Instant.ofEpochMilli(currentTimeMillis());
    }

    /** {@code Clock.systemUTC()}, moved. */
    public static Clock systemUTC() {
        return new Moved(ZoneId.of("UTC"));
    }

    /** {@code Clock.systemDefaultZone()}, moved. */
    public static Clock systemDefaultZone() {
        return new Moved(ZoneId.systemDefault());
    }

    /** {@code Clock.system(zone)} and the clock behind {@code X.now(zone)}, moved. */
    public static Clock system(ZoneId zone) {
        return new Moved(zone);
    }

    public static Calendar calendar() {
        return moved(Calendar.getInstance());
    }

    public static Calendar calendar(TimeZone zone) {
        return moved(Calendar.getInstance(zone));
    }

    public static Calendar calendar(Locale locale) {
        return moved(Calendar.getInstance(locale));
    }

    public static Calendar calendar(TimeZone zone, Locale locale) {
        return moved(Calendar.getInstance(zone, locale));
    }

    private static Calendar moved(Calendar c) {
        c.setTimeInMillis(currentTimeMillis());
        return c;
    }

    /** A {@link Clock} that reads {@link DeviceClock}. */
    static final class Moved extends Clock {
        private final ZoneId zone;

        Moved(ZoneId zone) {
            this.zone = zone;
        }

        @Override
        public ZoneId getZone() {
            return zone;
        }

        @Override
        public Clock withZone(ZoneId z) {
            return new Moved(z);
        }

        @Override
        public long millis() {
            return currentTimeMillis();
        }

        @Override
        public Instant instant() {
            return DeviceClock.instant();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Moved && ((Moved) o).zone.equals(zone);
        }

        @Override
        public int hashCode() {
            return zone.hashCode() ^ 0x6d6f7665;
        }
    }
}
