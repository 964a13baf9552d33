package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Calendar;
import java.util.Date;
import java.util.GregorianCalendar;
import java.util.List;
import org.junit.Test;

/**
 * The clock a Provider reads on the JVM device moves when the host moves it
 * ({@link ClockRewriter}, {@link DeviceClock}); a clock it cannot move is
 * named. Plain JUnit: the rewritten class is loaded by a JVM that verifies
 * it (scripts/jvm-device.sh --self-test).
 */
public class DeviceClockTest {
    private static final long HOUR = 3_600_000L;
    /** Real time a test may take between two reads. */
    private static final long SLACK_MS = 60_000L;

    /** The reads a Provider makes, as a vendor writes them. */
    public static final class Reads {
        public static long millis() {
            return System.currentTimeMillis();
        }

        public static long nanosAsMillis() {
            return System.nanoTime() / 1_000_000L;
        }

        public static long elapsedRealtime() {
            return android.os.SystemClock.elapsedRealtime();
        }

        public static long uptime() {
            return android.os.SystemClock.uptimeMillis();
        }

        public static long instant() {
            return Instant.now().toEpochMilli();
        }

        public static long clockUtc() {
            return Clock.systemUTC().millis();
        }

        public static long localDateTime() {
            return LocalDateTime.now(ZoneOffset.UTC).toInstant(ZoneOffset.UTC).toEpochMilli();
        }

        public static long localDateTimeDefaultZone() {
            return LocalDateTime.now().atZone(java.time.ZoneId.systemDefault()).toInstant().toEpochMilli();
        }

        public static long date() {
            return new Date().getTime();
        }

        public static long calendar() {
            return Calendar.getInstance().getTimeInMillis();
        }
    }

    /** A read no call of the same shape can redirect. */
    public static final class Unmovable {
        public static long gregorian() {
            return new GregorianCalendar().getTimeInMillis();
        }
    }

    @Test
    public void every_clock_a_provider_reads_moves_with_the_device_clock() throws Exception {
        List<String> unmovable = new ArrayList<>();
        Class<?> rewritten = load(Reads.class, ClockRewriter.rewriteOne(bytesOf(Reads.class), unmovable));
        assertTrue(unmovable.isEmpty());
        String[] reads = {"millis", "nanosAsMillis", "elapsedRealtime", "uptime", "instant", "clockUtc",
            "localDateTime", "localDateTimeDefaultZone", "date", "calendar"};
        long[] before = new long[reads.length];
        for (int i = 0; i < reads.length; i++) {
            before[i] = call(rewritten, reads[i]);
        }
        long offset = DeviceClock.offsetMs();
        DeviceClock.advance(HOUR);
        assertEquals(offset + HOUR, DeviceClock.offsetMs());
        for (int i = 0; i < reads.length; i++) {
            long moved = call(rewritten, reads[i]) - before[i];
            assertTrue(reads[i] + " moved " + moved + " ms", moved >= HOUR - 1000 && moved < HOUR + SLACK_MS);
        }
    }

    /** The same class as javac wrote it does not see the move: the rewrite is what makes it. */
    @Test
    public void without_the_rewrite_the_provider_reads_real_time() throws Exception {
        long before = Reads.instant();
        DeviceClock.advance(HOUR);
        assertTrue(Reads.instant() - before < SLACK_MS);
        assertTrue(Reads.date() - DeviceClock.currentTimeMillis() < -HOUR + SLACK_MS);
    }

    @Test
    public void a_clock_it_cannot_move_is_named_and_the_class_still_runs() throws Exception {
        List<String> unmovable = new ArrayList<>();
        Class<?> rewritten = load(Unmovable.class, ClockRewriter.rewriteOne(bytesOf(Unmovable.class), unmovable));
        assertEquals(List.of(Unmovable.class.getName() + ".gregorian: new GregorianCalendar()"), unmovable);
        assertTrue(Math.abs(call(rewritten, "gregorian") - System.currentTimeMillis()) < SLACK_MS);
    }

    @Test
    public void the_device_offers_a_move_only_when_no_read_is_unmovable() throws IOException {
        Path report = Files.createTempFile("unmovable", ".txt");
        String old = System.getProperty("cetp.jvm.clock.unmovable");
        try {
            System.setProperty("cetp.jvm.clock.unmovable", report.toString());
            assertNull(DeviceClock.whyUnmovable());
            Files.writeString(report, "com.example.A.m: new GregorianCalendar()\n");
            String why = DeviceClock.whyUnmovable();
            assertTrue(why, why.contains("com.example.A.m: new GregorianCalendar()") && why.contains("real time"));
            System.clearProperty("cetp.jvm.clock.unmovable");
            assertTrue(DeviceClock.whyUnmovable().contains("not rewritten"));
        } finally {
            if (old != null) {
                System.setProperty("cetp.jvm.clock.unmovable", old);
            }
            Files.delete(report);
        }
    }

    @Test(expected = IllegalArgumentException.class)
    public void the_clock_never_moves_back() {
        DeviceClock.advance(-1);
    }

    private static long call(Class<?> c, String name) throws Exception {
        Method m = c.getMethod(name);
        return (long) m.invoke(null);
    }

    private static byte[] bytesOf(Class<?> c) throws IOException {
        String resource = c.getName().replace('.', '/') + ".class";
        try (InputStream in = c.getClassLoader().getResourceAsStream(resource)) {
            return in.readAllBytes();
        }
    }

    /** {@code bytes} defined as {@code c}'s class in a loader of its own, everything else from the parent. */
    private static Class<?> load(Class<?> c, byte[] bytes) throws ClassNotFoundException {
        ClassLoader parent = DeviceClockTest.class.getClassLoader();
        return new ClassLoader(parent) {
            @Override
            protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
                if (name.equals(c.getName())) {
                    synchronized (getClassLoadingLock(name)) {
                        Class<?> done = findLoadedClass(name);
                        return done != null ? done : defineClass(name, bytes, 0, bytes.length);
                    }
                }
                return super.loadClass(name, resolve);
            }
        }.loadClass(c.getName());
    }
}
