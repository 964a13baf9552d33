import com.googlecode.d2j.dex.Dex2jar;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;
import org.objectweb.asm.tree.AbstractInsnNode;
import org.objectweb.asm.tree.ClassNode;
import org.objectweb.asm.tree.FieldInsnNode;
import org.objectweb.asm.tree.FieldNode;
import org.objectweb.asm.tree.IincInsnNode;
import org.objectweb.asm.tree.InsnList;
import org.objectweb.asm.tree.IntInsnNode;
import org.objectweb.asm.tree.JumpInsnNode;
import org.objectweb.asm.tree.LdcInsnNode;
import org.objectweb.asm.tree.MethodInsnNode;
import org.objectweb.asm.tree.MethodNode;
import org.objectweb.asm.tree.TypeInsnNode;
import org.objectweb.asm.tree.VarInsnNode;

/**
 * The API-level check of an APK's dex (scripts/apk-check.sh): every {@code android.*} class, method
 * and field its code references exists in the framework of the APK's minSdk (Robolectric's
 * android-all of that level), unless the reference sits behind a {@code Build.VERSION.SDK_INT}
 * comparison with a constant, or is listed in the exceptions file with a reason.
 *
 * <pre>
 *   java -cp ASM:DEX2JAR:. ApiCheck --apk APP.apk --name NAME --framework android-all-N.jar
 *       --min-sdk N --exceptions api-exceptions.tsv
 * </pre>
 *
 * <p>The dex is read back into class files with dex2jar, so what is checked is what D8 put in the
 * APK (bundled libraries included), not what javac wrote. A member counts as present when the
 * class that declares it, or one of its supertypes, does at that level: the framework jar is the
 * whole framework, hidden members included, so the check finds what would be missing on a phone of
 * minSdk (NoSuchMethodError, NoClassDefFoundError), not what the public SDK hides.
 *
 * <p>A guard is recognised in the shapes D8 and dex2jar leave: {@code SDK_INT} (read there, or
 * from a local last stored from it) and an int constant compared by one {@code if_icmp*}. The code it protects is the branch taken when the
 * level is high enough: up to the jump's target when the jump skips it, or from the target to the
 * end of the method when the jump goes to it. The guard's level is not compared with the level the
 * API needs: a guard is taken as written for that API. A guard in another method (a helper called
 * only after a check) is not seen: such a call goes to the exceptions file with its reason.
 *
 * <p>Exit 0: nothing missing; 1: references missing at minSdk (each printed) or an exception that
 * no longer matches anything (stale data); 2: usage or unreadable input.
 */
public final class ApiCheck {
    private static final String SDK_INT_OWNER = "android/os/Build$VERSION";

    private final ZipFile framework;
    private final int minSdk;
    private final Map<String, ClassNode> app = new HashMap<>();
    private final Map<String, ClassNode> frameworkCache = new HashMap<>();
    private final Set<String> missingFrameworkClasses = new HashSet<>();
    /** caller TAB reference TAB why, sorted. */
    private final Set<String> findings = new TreeSet<>();

    private ApiCheck(ZipFile framework, int minSdk) {
        this.framework = framework;
        this.minSdk = minSdk;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opt.put(args[i], args[i + 1]);
        }
        for (String k : List.of("--apk", "--name", "--framework", "--min-sdk", "--exceptions")) {
            if (!opt.containsKey(k) || args.length != 10) {
                System.err.println("usage: ApiCheck --apk APK --name NAME --framework JAR --min-sdk N --exceptions TSV");
                System.exit(2);
            }
        }
        String name = opt.get("--name");
        int minSdk = Integer.parseInt(opt.get("--min-sdk"));
        try (ZipFile fw = new ZipFile(opt.get("--framework")); ZipFile apk = new ZipFile(opt.get("--apk"))) {
            ApiCheck check = new ApiCheck(fw, minSdk);
            int dexes = check.loadDexes(apk);
            if (dexes == 0) {
                System.err.println("api-check: " + name + ": no classes.dex in " + opt.get("--apk"));
                System.exit(2);
            }
            check.run();
            System.exit(check.report(name, dexes, Path.of(opt.get("--exceptions"))));
        }
    }

    /** Every classes*.dex of the APK, translated back to class files by dex2jar. */
    private int loadDexes(ZipFile apk) throws IOException {
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
            Path jar = Files.createTempFile("api-check", ".jar");
            try {
                Dex2jar.from(dex).to(jar);
                try (ZipFile classes = new ZipFile(jar.toFile())) {
                    for (Enumeration<? extends ZipEntry> c = classes.entries(); c.hasMoreElements(); ) {
                        ZipEntry ce = c.nextElement();
                        if (ce.getName().endsWith(".class")) {
                            try (InputStream in = classes.getInputStream(ce)) {
                                ClassNode node = read(in.readAllBytes());
                                app.put(node.name, node);
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

    private static ClassNode read(byte[] bytes) {
        ClassNode node = new ClassNode();
        new ClassReader(bytes).accept(node, ClassReader.SKIP_DEBUG | ClassReader.SKIP_FRAMES);
        return node;
    }

    /** The class as the APK or the framework of minSdk declares it, or null. */
    private ClassNode lookup(String internalName) throws IOException {
        ClassNode own = app.get(internalName);
        if (own != null) {
            return own;
        }
        if (frameworkCache.containsKey(internalName)) {
            return frameworkCache.get(internalName);
        }
        ZipEntry e = framework.getEntry(internalName + ".class");
        ClassNode node = null;
        if (e != null) {
            try (InputStream in = framework.getInputStream(e)) {
                node = read(in.readAllBytes());
            }
        } else if (internalName.startsWith("java/") || internalName.startsWith("javax/")) {
            // Robolectric's android-all leaves the core library out (the JVM provides it): the
            // running JDK's classes stand in for walking up to java.lang.Object and the like.
            try (InputStream in = ClassLoader.getSystemResourceAsStream(internalName + ".class")) {
                node = in == null ? null : read(in.readAllBytes());
            }
        }
        frameworkCache.put(internalName, node);
        return node;
    }

    private void run() throws IOException {
        for (ClassNode c : app.values()) {
            String where = c.name.replace('/', '.');
            if (c.superName != null) {
                needClass(where, c.superName);
            }
            for (String i : c.interfaces) {
                needClass(where, i);
            }
            for (MethodNode m : c.methods) {
                scan(where + "." + m.name, m);
            }
        }
    }

    private void scan(String caller, MethodNode m) throws IOException {
        InsnList insns = m.instructions;
        boolean[] guarded = guardedInstructions(insns);
        for (int i = 0; i < insns.size(); i++) {
            if (guarded[i]) {
                continue;
            }
            AbstractInsnNode insn = insns.get(i);
            if (insn instanceof MethodInsnNode mi) {
                needMember(caller, mi.owner, mi.name, mi.desc, false);
            } else if (insn instanceof FieldInsnNode fi) {
                needMember(caller, fi.owner, fi.name, fi.desc, true);
            } else if (insn instanceof TypeInsnNode ti) {
                needClass(caller, ti.desc);
            } else if (insn instanceof LdcInsnNode li && li.cst instanceof Type t && t.getSort() == Type.OBJECT) {
                needClass(caller, t.getInternalName());
            }
        }
    }

    private void needClass(String caller, String internalName) throws IOException {
        String name = Type.getObjectType(internalName).getSort() == Type.ARRAY
                ? Type.getObjectType(internalName).getElementType().getInternalName()
                : internalName;
        if (name.startsWith("android/") && lookup(name) == null) {
            findings.add(caller + "\t" + name.replace('/', '.') + "\tclass not in API " + minSdk);
        }
    }

    /**
     * Resolves owner.name as the runtime would (the class, then its supertypes). Missing when an
     * android class on the way is absent, or when the walk went through an android class and found
     * no declaration.
     */
    private void needMember(String caller, String owner, String name, String desc, boolean field) throws IOException {
        if (owner.startsWith("[")) {
            return;
        }
        Deque<String> todo = new ArrayDeque<>(List.of(owner));
        Set<String> seen = new HashSet<>();
        boolean viaAndroid = false;
        String reference = owner.replace('/', '.') + "." + name + (field ? "" : desc);
        while (!todo.isEmpty()) {
            String c = todo.pop();
            if (!seen.add(c)) {
                continue;
            }
            ClassNode node = lookup(c);
            if (node == null) {
                if (c.startsWith("android/")) {
                    findings.add(caller + "\t" + reference + "\tclass " + c.replace('/', '.') + " not in API " + minSdk);
                }
                // A class neither the APK, the framework nor the JDK has: its branch is not judged.
                continue;
            }
            viaAndroid |= c.startsWith("android/");
            if (declares(node, name, desc, field)) {
                return;
            }
            if (node.superName != null) {
                todo.add(node.superName);
            }
            todo.addAll(node.interfaces);
        }
        if (viaAndroid) {
            findings.add(caller + "\t" + reference + "\t" + (field ? "field" : "method") + " not in API " + minSdk);
        }
    }

    private static boolean declares(ClassNode node, String name, String desc, boolean field) {
        if (field) {
            for (FieldNode f : node.fields) {
                if (f.name.equals(name) && f.desc.equals(desc)) {
                    return true;
                }
            }
            return false;
        }
        for (MethodNode m : node.methods) {
            if (m.name.equals(name) && m.desc.equals(desc)) {
                return true;
            }
        }
        return false;
    }

    /** Which instructions run only when SDK_INT passed a comparison with a constant (class comment). */
    private static boolean[] guardedInstructions(InsnList insns) {
        boolean[] guarded = new boolean[insns.size()];
        for (int i = 0; i < insns.size(); i++) {
            if (!(insns.get(i) instanceof JumpInsnNode jump)) {
                continue;
            }
            int op = jump.getOpcode();
            if (op < Opcodes.IF_ICMPEQ || op > Opcodes.IF_ICMPLE) {
                continue;
            }
            AbstractInsnNode second = real(jump.getPrevious());
            AbstractInsnNode first = second == null ? null : real(second.getPrevious());
            boolean sdkFirst = isSdkInt(first) && isIntConstant(second);
            boolean sdkSecond = isIntConstant(first) && isSdkInt(second);
            if (!sdkFirst && !sdkSecond) {
                continue;
            }
            // The sense of "jump when the level is low", with SDK_INT on the left.
            boolean jumpsWhenLow = sdkFirst
                    ? op == Opcodes.IF_ICMPLT || op == Opcodes.IF_ICMPLE
                    : op == Opcodes.IF_ICMPGT || op == Opcodes.IF_ICMPGE;
            boolean jumpsWhenHigh = sdkFirst
                    ? op == Opcodes.IF_ICMPGE || op == Opcodes.IF_ICMPGT
                    : op == Opcodes.IF_ICMPLE || op == Opcodes.IF_ICMPLT;
            int target = insns.indexOf(jump.label);
            if (jumpsWhenLow && target > i) {
                for (int k = i + 1; k < target; k++) {
                    guarded[k] = true;
                }
            } else if (jumpsWhenHigh) {
                for (int k = target; k < insns.size(); k++) {
                    guarded[k] = true;
                }
            }
        }
        return guarded;
    }

    /** The nearest instruction at or before insn that is code (labels, lines and frames skipped). */
    private static AbstractInsnNode real(AbstractInsnNode insn) {
        while (insn != null && insn.getOpcode() < 0) {
            insn = insn.getPrevious();
        }
        return insn;
    }

    /**
     * SDK_INT read, or loaded from a local whose last store before the load (in code order) was
     * SDK_INT just read: dex2jar keeps D8's register, and reuses the slot further on.
     */
    private static boolean isSdkInt(AbstractInsnNode insn) {
        if (insn instanceof VarInsnNode v && v.getOpcode() == Opcodes.ILOAD) {
            for (AbstractInsnNode p = v.getPrevious(); p != null; p = p.getPrevious()) {
                if (p instanceof VarInsnNode s && s.var == v.var && s.getOpcode() == Opcodes.ISTORE) {
                    return isSdkInt(real(s.getPrevious()));
                }
                if (p instanceof IincInsnNode inc && inc.var == v.var) {
                    return false;
                }
            }
            return false;
        }
        return insn instanceof FieldInsnNode f && f.getOpcode() == Opcodes.GETSTATIC
                && f.owner.equals(SDK_INT_OWNER) && f.name.equals("SDK_INT");
    }

    private static boolean isIntConstant(AbstractInsnNode insn) {
        if (insn == null) {
            return false;
        }
        int op = insn.getOpcode();
        return (op >= Opcodes.ICONST_M1 && op <= Opcodes.ICONST_5)
                || (insn instanceof IntInsnNode && (op == Opcodes.BIPUSH || op == Opcodes.SIPUSH))
                || (insn instanceof LdcInsnNode l && l.cst instanceof Integer);
    }

    /** Prints what is missing, less the listed exceptions; an exception that matches nothing fails too. */
    private int report(String name, int dexes, Path exceptionsFile) throws IOException {
        List<String[]> exceptions = new ArrayList<>();
        for (String line : Files.readAllLines(exceptionsFile)) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split("\t");
            if (f.length != 4 || f[3].isBlank()) {
                System.err.println("api-check: " + exceptionsFile + ": want APK, caller, reference, reason (tabs): " + line);
                return 2;
            }
            if (f[0].equals(name)) {
                exceptions.add(f);
            }
        }
        Set<String[]> used = new HashSet<>();
        int missing = 0;
        for (String finding : findings) {
            String[] f = finding.split("\t");
            String[] excused = null;
            for (String[] e : exceptions) {
                if (e[1].equals(f[0]) && e[2].equals(f[1])) {
                    excused = e;
                }
            }
            if (excused != null) {
                used.add(excused);
                System.out.println("api-check: " + name + ": allowed: " + f[0] + " -> " + f[1] + " (" + excused[3] + ")");
            } else {
                missing++;
                System.out.println("api-check: " + name + ": MISSING at minSdk " + minSdk + ": " + f[0] + " -> " + f[1] + ": " + f[2]);
            }
        }
        int stale = 0;
        for (String[] e : exceptions) {
            if (!used.contains(e)) {
                stale++;
                System.out.println("api-check: " + name + ": exception matches nothing (remove it): " + e[1] + " -> " + e[2]);
            }
        }
        System.out.println("api-check: " + name + ": " + app.size() + " classes from " + dexes + " dex file(s), "
                + missing + " reference(s) missing at API " + minSdk + ", " + used.size() + " allowed by exception");
        return missing + stale == 0 ? 0 : 1;
    }
}
