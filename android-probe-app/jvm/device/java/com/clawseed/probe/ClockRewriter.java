package com.clawseed.probe;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipOutputStream;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * Points the clock reads of a Provider's classes at {@link DeviceClock}, so
 * that {@code advance_clock} moves the time the Provider sees (its session
 * and confirmation lifetimes, its deadlines) as the simulated device's does,
 * instead of the host waiting a lifetime out in real time.
 *
 * <p>Run by scripts/jvm-device.sh before the JVM device starts, on every jar
 * and class directory of the Provider's code and dependencies (the bytes
 * the device then loads; the user's files are not touched):
 *
 * <pre>
 *   java -cp DEVICE:ASM com.clawseed.probe.ClockRewriter OUT_DIR REPORT ENTRY…
 * </pre>
 *
 * <p>prints the rewritten entries, ':'-joined, in the order given. A call is
 * replaced only by one with the same stack effect, so the classes' stack map
 * frames stay valid and the JVM still verifies them. A clock read that
 * cannot be redirected (a {@code GregorianCalendar} built for now, a network
 * or GNSS clock, {@code Time.setToNow}) is written to REPORT, one
 * {@code class.method: call} per line: the device then does not offer to
 * move its clock, and says why (a lifetime is waited out in real time, as
 * on a device whose clock cannot move, never judged on a clock the Provider
 * does not read).
 */
public final class ClockRewriter {
    private static final String DC = "com/clawseed/probe/DeviceClock";
    private static final String CLOCK = "Ljava/time/Clock;";
    private static final String ZONE = "Ljava/time/ZoneId;";
    /** java.time types whose {@code now()} and {@code now(ZoneId)} read the system clock. */
    private static final List<String> NOW_TYPES = List.of("LocalDateTime", "LocalDate", "LocalTime",
            "ZonedDateTime", "OffsetDateTime", "OffsetTime", "Instant", "Year", "YearMonth", "MonthDay");
    /** owner.name+desc of a static call → the DeviceClock method with the same descriptor. */
    private static final Map<String, String> STATIC = new TreeMap<>();
    /** Reads that cannot be redirected with the same stack effect, or at all. */
    private static final Map<String, String> UNMOVABLE = new TreeMap<>();

    static {
        STATIC.put("java/lang/System.currentTimeMillis()J", "currentTimeMillis");
        STATIC.put("java/lang/System.nanoTime()J", "nanoTime");
        STATIC.put("android/os/SystemClock.elapsedRealtime()J", "elapsedMillis");
        STATIC.put("android/os/SystemClock.uptimeMillis()J", "elapsedMillis");
        STATIC.put("android/os/SystemClock.elapsedRealtimeNanos()J", "elapsedNanos");
        STATIC.put("android/os/SystemClock.uptimeNanos()J", "elapsedNanos");
        STATIC.put("java/time/Instant.now()Ljava/time/Instant;", "instant");
        STATIC.put("java/time/Clock.systemUTC()" + CLOCK, "systemUTC");
        STATIC.put("java/time/Clock.systemDefaultZone()" + CLOCK, "systemDefaultZone");
        STATIC.put("java/time/Clock.system(" + ZONE + ")" + CLOCK, "system");
        STATIC.put("java/util/Calendar.getInstance()Ljava/util/Calendar;", "calendar");
        STATIC.put("java/util/Calendar.getInstance(Ljava/util/TimeZone;)Ljava/util/Calendar;", "calendar");
        STATIC.put("java/util/Calendar.getInstance(Ljava/util/Locale;)Ljava/util/Calendar;", "calendar");
        STATIC.put("java/util/Calendar.getInstance(Ljava/util/TimeZone;Ljava/util/Locale;)Ljava/util/Calendar;",
                "calendar");
        UNMOVABLE.put("android/os/SystemClock.currentNetworkTimeClock()" + CLOCK, "SystemClock.currentNetworkTimeClock()");
        UNMOVABLE.put("android/os/SystemClock.currentGnssTimeClock()" + CLOCK, "SystemClock.currentGnssTimeClock()");
        UNMOVABLE.put("android/text/format/Time.setToNow()V", "Time.setToNow()");
        for (String d : new String[] {"()V", "(Ljava/util/TimeZone;)V", "(Ljava/util/Locale;)V",
                "(Ljava/util/TimeZone;Ljava/util/Locale;)V"}) {
            UNMOVABLE.put("java/util/GregorianCalendar.<init>" + d, "new GregorianCalendar" + d.replace("V", ""));
        }
    }

    private final List<String> unmovable = new ArrayList<>();
    private int redirected;
    private int classes;

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            System.err.println("usage: ClockRewriter OUT_DIR REPORT ENTRY…");
            System.exit(2);
        }
        long start = System.nanoTime();
        Path out = Path.of(args[0]);
        Files.createDirectories(out);
        ClockRewriter r = new ClockRewriter();
        List<String> written = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            Path in = Path.of(args[i]);
            Path to = out.resolve(i + "-" + in.getFileName() + (Files.isDirectory(in) ? ".jar" : ""));
            if (Files.isDirectory(in)) {
                r.rewriteDir(in, to);
            } else {
                r.rewriteJar(in, to);
            }
            written.add(to.toString());
        }
        Files.write(Path.of(args[1]), r.unmovable, StandardCharsets.UTF_8);
        System.err.printf(Locale.ROOT, "jvm-device: clock: %d clock reads in %d classes now read the device clock;"
                + " %d cannot (%.1f s)%n", r.redirected, r.classes, r.unmovable.size(),
                (System.nanoTime() - start) / 1e9);
        System.out.println(String.join(":", written));
    }

    private void rewriteJar(Path in, Path to) throws IOException {
        try (ZipFile zip = new ZipFile(in.toFile());
                ZipOutputStream zout = new ZipOutputStream(Files.newOutputStream(to))) {
            Enumeration<? extends ZipEntry> entries = zip.entries();
            while (entries.hasMoreElements()) {
                ZipEntry e = entries.nextElement();
                if (e.isDirectory() || isSignature(e.getName())) {
                    // A signed jar's digests no longer match the rewritten classes.
                    continue;
                }
                byte[] bytes;
                try (InputStream s = zip.getInputStream(e)) {
                    bytes = s.readAllBytes();
                }
                put(zout, e.getName(), bytes);
            }
        }
    }

    private void rewriteDir(Path in, Path to) throws IOException {
        try (ZipOutputStream zout = new ZipOutputStream(Files.newOutputStream(to));
                Stream<Path> files = Files.walk(in)) {
            for (Path f : (Iterable<Path>) files.filter(Files::isRegularFile).sorted()::iterator) {
                put(zout, in.relativize(f).toString().replace('\\', '/'), Files.readAllBytes(f));
            }
        }
    }

    private void put(ZipOutputStream zout, String name, byte[] bytes) throws IOException {
        zout.putNextEntry(new ZipEntry(name));
        zout.write(name.endsWith(".class") ? rewrite(bytes) : bytes);
        zout.closeEntry();
    }

    private static boolean isSignature(String name) {
        String n = name.toUpperCase(Locale.ROOT);
        return n.startsWith("META-INF/") && (n.endsWith(".SF") || n.endsWith(".RSA") || n.endsWith(".DSA")
                || n.endsWith(".EC"));
    }

    /** The class with its clock reads redirected; the same bytes when it has none. */
    byte[] rewrite(byte[] bytes) {
        ClassReader reader = new ClassReader(bytes);
        int before = redirected;
        int unmovableBefore = unmovable.size();
        ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
        String[] owner = new String[1];
        reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
            @Override
            public void visit(int version, int access, String name, String sig, String sup, String[] itfs) {
                owner[0] = name;
                super.visit(version, access, name, sig, sup, itfs);
            }

            @Override
            public MethodVisitor visitMethod(int access, String name, String desc, String sig, String[] exc) {
                return new Redirect(super.visitMethod(access, name, desc, sig, exc), owner[0] + "." + name);
            }
        }, 0);
        if (redirected == before && unmovable.size() == unmovableBefore) {
            return bytes;
        }
        classes++;
        return writer.toByteArray();
    }

    private final class Redirect extends MethodVisitor {
        private final String where;

        Redirect(MethodVisitor next, String where) {
            super(Opcodes.ASM9, next);
            this.where = where;
        }

        @Override
        public void visitMethodInsn(int opcode, String owner, String name, String desc, boolean itf) {
            String key = owner + "." + name + desc;
            String bad = UNMOVABLE.get(key);
            if (bad != null && unmovable.size() < 1000) {
                unmovable.add(where.replace('/', '.') + ": " + bad);
            }
            if (opcode == Opcodes.INVOKESTATIC && STATIC.containsKey(key)) {
                redirected++;
                super.visitMethodInsn(Opcodes.INVOKESTATIC, DC, STATIC.get(key), desc, false);
                return;
            }
            if (opcode == Opcodes.INVOKESTATIC && owner.startsWith("java/time/") && name.equals("now")
                    && NOW_TYPES.contains(owner.substring("java/time/".length()))) {
                String ret = "L" + owner + ";";
                if (desc.equals("()" + ret)) {
                    // X.now() == X.now(the default zone's system clock).
                    redirected++;
                    super.visitMethodInsn(Opcodes.INVOKESTATIC, DC, "systemDefaultZone", "()" + CLOCK, false);
                    super.visitMethodInsn(Opcodes.INVOKESTATIC, owner, "now", "(" + CLOCK + ")" + ret, false);
                    return;
                }
                if (desc.equals("(" + ZONE + ")" + ret)) {
                    redirected++;
                    super.visitMethodInsn(Opcodes.INVOKESTATIC, DC, "system", "(" + ZONE + ")" + CLOCK, false);
                    super.visitMethodInsn(Opcodes.INVOKESTATIC, owner, "now", "(" + CLOCK + ")" + ret, false);
                    return;
                }
            }
            if (opcode == Opcodes.INVOKESPECIAL && key.equals("java/util/Date.<init>()V")) {
                // new Date() == new Date(now): the time pushed just before the constructor takes it.
                redirected++;
                super.visitMethodInsn(Opcodes.INVOKESTATIC, DC, "currentTimeMillis", "()J", false);
                super.visitMethodInsn(Opcodes.INVOKESPECIAL, owner, name, "(J)V", false);
                return;
            }
            super.visitMethodInsn(opcode, owner, name, desc, itf);
        }
    }

    /** For tests: rewrites one class's bytes, failing on what an unreadable class would do to a run. */
    static byte[] rewriteOne(byte[] bytes, List<String> unmovableOut) {
        ClockRewriter r = new ClockRewriter();
        byte[] out = r.rewrite(bytes);
        unmovableOut.addAll(r.unmovable);
        return out;
    }
}
