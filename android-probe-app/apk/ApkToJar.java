import com.googlecode.d2j.dex.Dex2jar;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipOutputStream;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.Opcodes;

/**
 * An APK's code as a jar the JVM device loads (scripts/jvm-device.sh --provider-apk): every
 * classes*.dex translated back to class files by dex2jar, then given the stack map frames a JVM
 * verifier needs (dex2jar writes none: "Expecting a stackmap frame at branch target") by ASM's
 * COMPUTE_FRAMES. Verification stays on: a class ASM cannot frame fails here, naming it.
 *
 * <pre>
 *   java -cp ASM:DEX2JAR:. ApkToJar APP.apk OUT.jar FRAMEWORK.jar
 * </pre>
 *
 * <p>Frames need the common superclass of two types; it is found from the APK's own classes, the
 * framework jar (android-all) and the running JDK, never by loading a class.
 */
public final class ApkToJar {
    private final Map<String, byte[]> app = new LinkedHashMap<>();
    private final ZipFile framework;
    private final Map<String, String[]> supers = new HashMap<>();

    private ApkToJar(ZipFile framework) {
        this.framework = framework;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: ApkToJar APP.apk OUT.jar FRAMEWORK.jar");
            System.exit(2);
        }
        long start = System.nanoTime();
        try (ZipFile apk = new ZipFile(args[0]); ZipFile fw = new ZipFile(args[2])) {
            ApkToJar t = new ApkToJar(fw);
            int dexes = t.translate(apk);
            if (dexes == 0) {
                System.err.println("apk-to-jar: no classes.dex in " + args[0]);
                System.exit(2);
            }
            int n = t.write(Path.of(args[1]));
            System.err.printf("apk-to-jar: %d classes from %d dex file(s) of %s, frames computed, in %.1f s%n",
                    n, dexes, args[0], (System.nanoTime() - start) / 1e9);
        }
    }

    private int translate(ZipFile apk) throws IOException {
        int dexes = 0;
        for (Enumeration<? extends ZipEntry> e = apk.entries(); e.hasMoreElements(); ) {
            ZipEntry entry = e.nextElement();
            if (!entry.getName().matches("classes\\d*\\.dex")) {
                continue;
            }
            dexes++;
            byte[] dex;
            try (InputStream in = apk.getInputStream(entry)) {
                dex = in.readAllBytes();
            }
            Path jar = Files.createTempFile("apk-to-jar", ".jar");
            try {
                Dex2jar.from(dex).to(jar);
                try (ZipFile classes = new ZipFile(jar.toFile())) {
                    for (Enumeration<? extends ZipEntry> c = classes.entries(); c.hasMoreElements(); ) {
                        ZipEntry ce = c.nextElement();
                        if (ce.getName().endsWith(".class")) {
                            try (InputStream in = classes.getInputStream(ce)) {
                                app.put(ce.getName(), in.readAllBytes());
                            }
                        }
                    }
                }
            } finally {
                Files.deleteIfExists(jar);
            }
        }
        return dexes;
    }

    private int write(Path out) throws IOException {
        try (OutputStream os = Files.newOutputStream(out); ZipOutputStream zip = new ZipOutputStream(os)) {
            for (Map.Entry<String, byte[]> e : app.entrySet()) {
                ClassReader reader = new ClassReader(e.getValue());
                ClassWriter writer = new ClassWriter(ClassWriter.COMPUTE_FRAMES) {
                    @Override
                    protected String getCommonSuperClass(String a, String b) {
                        return common(a, b);
                    }
                };
                try {
                    reader.accept(writer, ClassReader.SKIP_FRAMES);
                } catch (RuntimeException ex) {
                    throw new IOException("cannot compute the frames of " + e.getKey() + ": " + ex, ex);
                }
                zip.putNextEntry(new ZipEntry(e.getKey()));
                zip.write(writer.toByteArray());
                zip.closeEntry();
            }
        }
        return app.size();
    }

    /** {superName, "i" if an interface}, or null when no class file is found. */
    private String[] info(String name) {
        if (supers.containsKey(name)) {
            return supers.get(name);
        }
        byte[] bytes = app.get(name + ".class");
        try {
            if (bytes == null) {
                ZipEntry e = framework.getEntry(name + ".class");
                if (e != null) {
                    try (InputStream in = framework.getInputStream(e)) {
                        bytes = in.readAllBytes();
                    }
                } else {
                    try (InputStream in = ClassLoader.getSystemResourceAsStream(name + ".class")) {
                        bytes = in == null ? null : in.readAllBytes();
                    }
                }
            }
        } catch (IOException ex) {
            bytes = null;
        }
        String[] result = null;
        if (bytes != null) {
            ClassReader r = new ClassReader(bytes);
            result = new String[] {r.getSuperName(), (r.getAccess() & Opcodes.ACC_INTERFACE) != 0 ? "i" : ""};
        }
        supers.put(name, result);
        return result;
    }

    /** The nearest common superclass; Object for interfaces or types not found (as the verifier treats them). */
    private String common(String a, String b) {
        String[] ia = info(a);
        String[] ib = info(b);
        if (ia == null || ib == null || !ia[1].isEmpty() || !ib[1].isEmpty()) {
            return "java/lang/Object";
        }
        Set<String> chain = new HashSet<>();
        for (String c = a; c != null; ) {
            chain.add(c);
            String[] i = info(c);
            c = i == null ? null : i[0];
        }
        for (String c = b; c != null; ) {
            if (chain.contains(c)) {
                return c;
            }
            String[] i = info(c);
            c = i == null ? null : i[0];
        }
        return "java/lang/Object";
    }
}
