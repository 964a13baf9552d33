package com.clawseed.probe;

import android.content.pm.ProviderInfo;
import android.content.pm.ServiceInfo;
import android.os.Bundle;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.jar.JarFile;
import java.util.zip.ZipEntry;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

/**
 * The vendor's app the JVM device hosts (scripts/jvm-device.sh): which class
 * is the Provider of which authority in which package, with which
 * permission and meta-data, and the discovery service that announces it
 * (spec §2.1). Read from the app's {@code AndroidManifest.xml} when one is
 * given, then from the script's flags, which win. The sample of
 * examples/java-provider is one such app: the script passes its manifest and
 * its compiled classes.
 *
 * <p>Before anything is served, {@link #checkLoadable} proves that the
 * vendor's classes can be loaded: a class that is missing is the user's
 * mistake in the command (a jar left out), reported as a usage error naming
 * it, never a Provider FAIL.
 */
final class VendorApp {
    static final String ANDROID = ManifestInstaller.ANDROID;
    static final String DISCOVERY_ACTION = "com.clawseed.action.TOOL_PROVIDER";
    static final String AUTHORITY_KEY = "com.clawseed.tools.authority";

    /** A mistake in the command or its files: the script exits 2 with this message. */
    static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    String pkg;
    ProviderInfo provider = new ProviderInfo();
    ServiceInfo service = new ServiceInfo();
    List<String> serviceActions = new ArrayList<>();
    /**
     * The permissions the app declares ({@code <permission>}): name →
     * android:protectionLevel ("normal" when absent). A --permission the
     * manifest does not declare counts as declared normal, as the spec's
     * ACCESS_TOOLS is (BinderRules.Access decides who holds what).
     */
    Map<String, String> declaredPermissions = new LinkedHashMap<>();
    /** Where the vendor's own classes are (jars or class directories): what is checked before serving. */
    List<File> codePaths = new ArrayList<>();

    /** The app as the system properties set by scripts/jvm-device.sh describe it. */
    static VendorApp fromProperties() throws UsageError {
        VendorApp v = new VendorApp();
        String manifest = System.getProperty("cetp.jvm.manifest", "");
        String cls = System.getProperty("cetp.jvm.provider.class", "");
        String authority = System.getProperty("cetp.jvm.provider.authority", "");
        String pkg = System.getProperty("cetp.jvm.provider.package", "");
        String permission = System.getProperty("cetp.jvm.provider.permission", "");
        for (String p : System.getProperty("cetp.jvm.provider.code", "").split(File.pathSeparator)) {
            if (!p.isEmpty()) {
                v.codePaths.add(new File(p));
            }
        }
        Map<String, String> meta = readPairs("cetp.jvm.meta.");
        Map<String, String> providerMeta = readPairs("cetp.jvm.provider_meta.");
        if (!manifest.isEmpty()) {
            v.readManifest(new File(manifest), pkg, cls, authority);
        } else {
            if (cls.isEmpty() || authority.isEmpty()) {
                throw new UsageError("give --provider-class and --authority, or --manifest");
            }
            v.pkg = pkg.isEmpty() ? packageOf(cls) : pkg;
            v.provider.name = cls;
            v.provider.authority = authority;
            v.provider.exported = true;
            v.provider.metaData = new Bundle();
            v.service.name = v.pkg + ".ToolProviderService";
            v.service.exported = true;
            v.service.metaData = new Bundle();
            v.serviceActions.add(DISCOVERY_ACTION);
        }
        // Flags win over the manifest.
        if (!cls.isEmpty()) {
            v.provider.name = cls;
        }
        if (!authority.isEmpty()) {
            v.provider.authority = authority;
        }
        if (!permission.isEmpty()) {
            v.provider.readPermission = permission;
            v.provider.writePermission = permission;
            v.declaredPermissions.putIfAbsent(permission, "normal");
        }
        if (!v.service.metaData.containsKey(AUTHORITY_KEY) || !authority.isEmpty()) {
            v.service.metaData.putString(AUTHORITY_KEY, v.provider.authority);
        }
        put(v.service.metaData, meta);
        put(v.provider.metaData, providerMeta);
        v.provider.packageName = v.pkg;
        v.service.packageName = v.pkg;
        return v;
    }

    private static String packageOf(String cls) {
        int dot = cls.lastIndexOf('.');
        return dot < 0 ? cls : cls.substring(0, dot);
    }

    /** KEY=VALUE pairs, in order, from the properties PREFIX0, PREFIX1, … (one per --meta). */
    private static Map<String, String> readPairs(String prefix) throws UsageError {
        Map<String, String> out = new LinkedHashMap<>();
        for (int i = 0; System.getProperty(prefix + i) != null; i++) {
            String kv = System.getProperty(prefix + i);
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new UsageError("not KEY=VALUE: " + kv);
            }
            out.remove(kv.substring(0, eq));
            out.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return out;
    }

    /** Typed as aapt2 compiles {@code android:value}, as a manifest's meta-data would be. */
    private static void put(Bundle md, Map<String, String> pairs) {
        for (Map.Entry<String, String> e : pairs.entrySet()) {
            Object v = ManifestInstaller.typed(e.getValue());
            md.remove(e.getKey());
            if (v instanceof Boolean) {
                md.putBoolean(e.getKey(), (Boolean) v);
            } else if (v instanceof Integer) {
                md.putInt(e.getKey(), (Integer) v);
            } else if (v instanceof Float) {
                md.putFloat(e.getKey(), (Float) v);
            } else {
                md.putString(e.getKey(), (String) v);
            }
        }
    }

    /**
     * The provider (the one named {@code cls}, or the only one), its
     * permission and meta-data, and the discovery service announcing its
     * authority, from the app's manifest source.
     */
    private void readManifest(File file, String pkgFlag, String cls, String authority) throws UsageError {
        Element root;
        try {
            DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
            f.setNamespaceAware(true);
            Document doc = f.newDocumentBuilder().parse(new ByteArrayInputStream(Files.readAllBytes(file.toPath())));
            root = doc.getDocumentElement();
        } catch (Exception e) {
            throw new UsageError("cannot read the manifest " + file + ": " + e.getMessage());
        }
        String declared = root.getAttribute("package");
        pkg = !pkgFlag.isEmpty() ? pkgFlag : declared;
        if (pkg.isEmpty()) {
            throw new UsageError(file + " declares no package: give --package (a Gradle build's applicationId)");
        }
        // Relative class names resolve against the manifest's package (the
        // Java namespace), which a Gradle build may set apart from the applicationId.
        String namespace = declared.isEmpty() ? pkg : declared;
        for (Element e : descendants(root, "permission")) {
            String level = e.getAttributeNS(ANDROID, "protectionLevel");
            declaredPermissions.put(e.getAttributeNS(ANDROID, "name"), level.isEmpty() ? "normal" : level);
        }
        List<Element> providers = descendants(root, "provider");
        Element p = null;
        for (Element e : providers) {
            String name = className(namespace, e.getAttributeNS(ANDROID, "name"));
            if (cls.isEmpty() ? providers.size() == 1 : name.equals(cls)) {
                p = e;
            }
        }
        if (p == null) {
            throw new UsageError(cls.isEmpty()
                    ? file + " declares " + providers.size() + " providers: name one with --provider-class"
                    : file + " declares no provider " + cls);
        }
        provider.name = className(namespace, p.getAttributeNS(ANDROID, "name"));
        provider.authority = placeholders(p.getAttributeNS(ANDROID, "authorities"));
        String exported = p.getAttributeNS(ANDROID, "exported");
        provider.exported = exported.isEmpty() || Boolean.parseBoolean(exported);
        String perm = emptyToNull(p.getAttributeNS(ANDROID, "permission"));
        provider.readPermission = firstNonNull(emptyToNull(p.getAttributeNS(ANDROID, "readPermission")), perm);
        provider.writePermission = firstNonNull(emptyToNull(p.getAttributeNS(ANDROID, "writePermission")), perm);
        provider.metaData = metaData(p);
        String auth = authority.isEmpty() ? provider.authority : authority;
        // The discovery service: the one with the discovery action announcing this authority.
        Element found = null;
        for (Element s : descendants(root, "service")) {
            List<String> actions = new ArrayList<>();
            for (Element i : children(s, "intent-filter")) {
                for (Element a : children(i, "action")) {
                    actions.add(a.getAttributeNS(ANDROID, "name"));
                }
            }
            Bundle md = metaData(s);
            if (actions.contains(DISCOVERY_ACTION)
                    && (!md.containsKey(AUTHORITY_KEY) || auth.equals(md.getString(AUTHORITY_KEY)))) {
                found = s;
                serviceActions = actions;
                service.metaData = md;
            }
        }
        if (found == null) {
            // The flags then declare it (--meta), as for an app without a manifest.
            service.name = pkg + ".ToolProviderService";
            service.exported = true;
            service.metaData = new Bundle();
            serviceActions.add(DISCOVERY_ACTION);
        } else {
            service.name = className(namespace, found.getAttributeNS(ANDROID, "name"));
            String e = found.getAttributeNS(ANDROID, "exported");
            service.exported = e.isEmpty() || Boolean.parseBoolean(e);
            service.permission = emptyToNull(found.getAttributeNS(ANDROID, "permission"));
        }
    }

    private String placeholders(String s) {
        return s.replace("${applicationId}", pkg);
    }

    private Bundle metaData(Element component) {
        Bundle md = ManifestInstaller.metaData(component);
        for (String k : new ArrayList<>(md.keySet())) {
            // getString answers null for a value that is not a String.
            String v = md.getString(k);
            if (v != null) {
                md.putString(k, placeholders(v));
            }
        }
        return md;
    }

    /**
     * Proves the vendor's classes load before anything is served: the
     * Provider class itself, that it is a ContentProvider, and every class
     * the vendor's own code (its jars and class directories) names in its
     * constant pools, through {@code loader} (Robolectric's sandbox, where
     * the Provider will run). A class missing there would fail on a phone
     * too, but as a crash at some later call: here it is the command's
     * mistake (a dependency jar left out), named now.
     */
    void checkLoadable(ClassLoader loader) throws UsageError {
        Class<?> cls;
        try {
            cls = Class.forName(provider.name, false, loader);
        } catch (ClassNotFoundException e) {
            throw new UsageError("the Provider class " + provider.name + " is not found in " + describeCode()
                    + " nor in --classpath");
        } catch (LinkageError e) {
            throw new UsageError("the Provider class " + provider.name + " cannot be loaded: " + missingName(e)
                    + " is missing (add the jar that holds it with --classpath)");
        }
        if (!android.content.ContentProvider.class.isAssignableFrom(cls)) {
            throw new UsageError(provider.name + " does not extend android.content.ContentProvider");
        }
        Map<String, String> referenced = new TreeMap<>();
        Set<String> own = new LinkedHashSet<>();
        for (File f : codePaths) {
            try {
                scan(f, own, referenced);
            } catch (IOException e) {
                throw new UsageError("cannot read " + f + ": " + e.getMessage());
            }
        }
        List<String> missing = new ArrayList<>();
        for (Map.Entry<String, String> r : referenced.entrySet()) {
            if (own.contains(r.getKey())) {
                continue;
            }
            try {
                Class.forName(r.getKey(), false, loader);
            } catch (ClassNotFoundException | LinkageError e) {
                String name = e instanceof LinkageError ? missingName((LinkageError) e) : r.getKey();
                missing.add(name + " (named by " + r.getValue() + ")");
            }
        }
        if (!missing.isEmpty()) {
            int shown = Math.min(missing.size(), 10);
            throw new UsageError(missing.size() + " class(es) the Provider's code uses cannot be loaded: "
                    + String.join(", ", missing.subList(0, shown)) + (shown < missing.size() ? ", …" : "")
                    + "; add the jars that hold them with --classpath");
        }
    }

    private String describeCode() {
        List<String> names = new ArrayList<>();
        for (File f : codePaths) {
            names.add(f.getPath());
        }
        return names.isEmpty() ? "--provider-jar (none given)" : String.join(", ", names);
    }

    /** The class a NoClassDefFoundError names, as a dotted name. */
    private static String missingName(LinkageError e) {
        String m = String.valueOf(e.getMessage());
        return e instanceof NoClassDefFoundError ? m.replace('/', '.') : e.toString();
    }

    private static void scan(File f, Set<String> own, Map<String, String> referenced) throws IOException {
        if (f.isDirectory()) {
            try (java.util.stream.Stream<java.nio.file.Path> walk = Files.walk(f.toPath())) {
                for (java.nio.file.Path p : (Iterable<java.nio.file.Path>) walk::iterator) {
                    if (p.toString().endsWith(".class")) {
                        try (InputStream in = Files.newInputStream(p)) {
                            classFile(in, own, referenced);
                        }
                    }
                }
            }
        } else if (f.isFile()) {
            try (JarFile jar = new JarFile(f)) {
                for (Enumeration<? extends ZipEntry> en = jar.entries(); en.hasMoreElements();) {
                    ZipEntry z = en.nextElement();
                    // Multi-release and module descriptors are not the app's classes on Android.
                    if (z.getName().endsWith(".class") && !z.getName().startsWith("META-INF/")
                            && !z.getName().endsWith("module-info.class")) {
                        try (InputStream in = jar.getInputStream(z)) {
                            classFile(in, own, referenced);
                        }
                    }
                }
            }
        } else {
            throw new IOException("no such file or directory");
        }
    }

    /** The class a class file defines (into {@code own}) and the classes its constant pool names. */
    private static void classFile(InputStream raw, Set<String> own, Map<String, String> referenced) throws IOException {
        DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(raw));
        if (in.readInt() != 0xCAFEBABE) {
            throw new IOException("not a class file");
        }
        in.readUnsignedShort();
        in.readUnsignedShort();
        int count = in.readUnsignedShort();
        String[] utf8 = new String[count];
        int[] classIndex = new int[count];
        for (int i = 1; i < count; i++) {
            int tag = in.readUnsignedByte();
            switch (tag) {
                case 1: utf8[i] = in.readUTF(); break;
                case 7: classIndex[i] = in.readUnsignedShort(); break;
                case 8: case 16: case 19: case 20: in.readUnsignedShort(); break;
                case 15: in.readUnsignedByte(); in.readUnsignedShort(); break;
                case 3: case 4: case 9: case 10: case 11: case 12: case 17: case 18: in.readInt(); break;
                case 5: case 6: in.readLong(); i++; break;
                default: throw new IOException("unknown constant pool tag " + tag);
            }
        }
        in.readUnsignedShort();
        int thisClass = in.readUnsignedShort();
        String self = dotted(utf8[classIndex[thisClass]]);
        own.add(self);
        for (int i = 1; i < count; i++) {
            if (classIndex[i] != 0 && i != thisClass) {
                String n = utf8[classIndex[i]];
                // An array's element type, if it is a class.
                n = n.replaceFirst("^\\[+", "");
                if (n.startsWith("L") && n.endsWith(";")) {
                    n = n.substring(1, n.length() - 1);
                } else if (n.length() == 1 && utf8[classIndex[i]].startsWith("[")) {
                    continue;
                }
                referenced.putIfAbsent(dotted(n), self);
            }
        }
    }

    private static String dotted(String internal) {
        return internal.replace('/', '.');
    }

    private static String className(String pkg, String name) {
        if (name.startsWith(".")) {
            return pkg + name;
        }
        return name.contains(".") ? name : pkg + "." + name;
    }

    private static String emptyToNull(String s) {
        return s == null || s.isEmpty() ? null : s;
    }

    private static String firstNonNull(String a, String b) {
        return a != null ? a : b;
    }

    private static List<Element> descendants(Element root, String tag) {
        List<Element> out = new ArrayList<>();
        org.w3c.dom.NodeList l = root.getElementsByTagName(tag);
        for (int i = 0; i < l.getLength(); i++) {
            out.add((Element) l.item(i));
        }
        return out;
    }

    static List<Element> children(Element parent, String tag) {
        List<Element> out = new ArrayList<>();
        for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element && tag.equals(((Element) n).getTagName())) {
                out.add((Element) n);
            }
        }
        return out;
    }
}
