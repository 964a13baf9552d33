package com.clawseed.probe;

import static org.robolectric.Shadows.shadowOf;

import android.content.ComponentName;
import android.content.Context;
import android.content.IntentFilter;
import android.content.pm.ApplicationInfo;
import android.content.pm.ProviderInfo;
import android.content.pm.ServiceInfo;
import android.os.Bundle;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.regex.Pattern;
import javax.xml.parsers.DocumentBuilderFactory;
import org.robolectric.shadows.ShadowPackageManager;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * Installs the components of app/src/main/AndroidManifest.xml into
 * Robolectric's package manager, as Android installs them from the APK.
 *
 * <p>Robolectric parses a manifest only from a resource APK, which only the
 * Android SDK's aapt2 makes; so the providers, services (with their intent
 * filters, enabled state and meta-data) are read from the manifest source
 * here, {@code ${applicationId}} being the test application's package and
 * the other placeholders those app/build.gradle.kts sets for the flavor the
 * tests were built as ({@link #manifestOf}).
 * Meta-data values are typed as aapt2 compiles {@code android:value}:
 * {@code true}/{@code false} a Boolean, a decimal or {@code 0x} integer an
 * Integer, a float a Float, anything else a String.
 */
final class ManifestInstaller {
    private ManifestInstaller() {}

    static final String ANDROID = "http://schemas.android.com/apk/res/android";
    static final String NAMESPACE = "com.clawseed.probe";
    private static final Pattern DEC = Pattern.compile("[-+]?[0-9]+");
    private static final Pattern HEX = Pattern.compile("0[xX][0-9a-fA-F]+");
    private static final Pattern FLOAT = Pattern.compile("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?f?");

    static File manifestFile() {
        String repo = System.getProperty("cetp.repo.dir");
        if (repo == null) {
            throw new IllegalStateException("set -Dcetp.repo.dir to the repository (scripts/probe-app-check.sh does)");
        }
        return new File(repo, "android-probe-app/app/src/main/AndroidManifest.xml");
    }

    /** The value aapt2 compiles {@code android:value="text"} to. */
    static Object typed(String text) {
        if (text.equals("true") || text.equals("false")) {
            return Boolean.valueOf(text);
        }
        if (DEC.matcher(text).matches()) {
            long v = Long.parseLong(text);
            if (v >= Integer.MIN_VALUE && v <= 0xFFFFFFFFL) {
                return (int) v;
            }
        }
        if (HEX.matcher(text).matches() && text.length() <= 10) {
            return (int) Long.parseLong(text.substring(2), 16);
        }
        if (FLOAT.matcher(text).matches()) {
            return Float.parseFloat(text);
        }
        return text;
    }

    /**
     * The {@code manifestPlaceholders["name"] = "value"} lines of product
     * flavor {@code flavor} in app/build.gradle.kts (as jvm/gen-sources.py
     * reads them for the compiled check).
     */
    static java.util.Map<String, String> placeholders(String flavor) throws Exception {
        String gradle = new String(Files.readAllBytes(
                new File(manifestFile().getParentFile().getParentFile().getParentFile(), "build.gradle.kts").toPath()),
                StandardCharsets.UTF_8);
        java.util.regex.Matcher block = Pattern.compile("create\\(\"" + Pattern.quote(flavor) + "\"\\)\\s*\\{([^{}]*)\\}")
                .matcher(gradle);
        if (!block.find()) {
            throw new IllegalStateException("app/build.gradle.kts has no product flavor " + flavor);
        }
        java.util.Map<String, String> out = new java.util.TreeMap<>();
        java.util.regex.Matcher m = Pattern.compile("manifestPlaceholders\\[\"([^\"]+)\"\\]\\s*=\\s*\"([^\"]*)\"")
                .matcher(block.group(1));
        while (m.find()) {
            out.put(m.group(1), m.group(2));
        }
        return out;
    }

    /**
     * The manifest source with {@code ${applicationId}} as {@code pkg} (the
     * test application's package, which Robolectric chooses) and the other
     * placeholders as the flavor these classes were built for sets them
     * ({@code BuildConfig.FLAVOR}: the identity the tests run as).
     */
    static String manifestOf(String pkg) throws Exception {
        return manifestOf(pkg, BuildConfig.FLAVOR);
    }

    /** As {@link #manifestOf(String)}, with the placeholders of product flavor {@code flavor}. */
    static String manifestOf(String pkg, String flavor) throws Exception {
        String xml = new String(Files.readAllBytes(manifestFile().toPath()), StandardCharsets.UTF_8)
                .replace("${applicationId}", pkg);
        for (java.util.Map.Entry<String, String> p : placeholders(flavor).entrySet()) {
            xml = xml.replace("${" + p.getKey() + "}", p.getValue());
        }
        if (xml.contains("${")) {
            throw new IllegalStateException("AndroidManifest.xml has a placeholder that flavor " + flavor
                    + " does not set");
        }
        return xml;
    }

    static void install(Context context) throws Exception {
        install(context, BuildConfig.FLAVOR);
    }

    /**
     * As {@link #install(Context)}, as the probe app of product flavor
     * {@code flavor} (the JVM device installs identity b's probe, flavor
     * {@code b}, beside a's: {@link PeerProbe}).
     */
    static void install(Context context, String flavor) throws Exception {
        String pkg = context.getPackageName();
        String xml = manifestOf(pkg, flavor);
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setNamespaceAware(true);
        Document doc = f.newDocumentBuilder().parse(new java.io.ByteArrayInputStream(xml.getBytes(StandardCharsets.UTF_8)));
        ShadowPackageManager spm = shadowOf(context.getPackageManager());
        ApplicationInfo app = context.getApplicationInfo();
        NodeList providers = doc.getElementsByTagName("provider");
        for (int i = 0; i < providers.getLength(); i++) {
            Element e = (Element) providers.item(i);
            ProviderInfo p = new ProviderInfo();
            p.name = className(pkg, e.getAttributeNS(ANDROID, "name"));
            p.packageName = pkg;
            p.authority = e.getAttributeNS(ANDROID, "authorities");
            p.exported = Boolean.parseBoolean(e.getAttributeNS(ANDROID, "exported"));
            p.processName = processName(pkg, e.getAttributeNS(ANDROID, "process"));
            p.applicationInfo = app;
            spm.addOrUpdateProvider(p);
        }
        NodeList services = doc.getElementsByTagName("service");
        for (int i = 0; i < services.getLength(); i++) {
            Element e = (Element) services.item(i);
            ServiceInfo s = new ServiceInfo();
            s.name = className(pkg, e.getAttributeNS(ANDROID, "name"));
            s.packageName = pkg;
            s.exported = Boolean.parseBoolean(e.getAttributeNS(ANDROID, "exported"));
            String enabled = e.getAttributeNS(ANDROID, "enabled");
            s.enabled = enabled.isEmpty() || Boolean.parseBoolean(enabled);
            s.applicationInfo = app;
            s.metaData = metaData(e);
            spm.addOrUpdateService(s);
            ComponentName name = new ComponentName(pkg, s.name);
            for (Element filter : children(e, "intent-filter")) {
                IntentFilter intentFilter = new IntentFilter();
                for (Element action : children(filter, "action")) {
                    intentFilter.addAction(action.getAttributeNS(ANDROID, "name"));
                }
                spm.addIntentFilterForService(name, intentFilter);
            }
        }
    }

    static Bundle metaData(Element component) {
        Bundle md = new Bundle();
        for (Element m : children(component, "meta-data")) {
            String name = m.getAttributeNS(ANDROID, "name");
            Object v = typed(m.getAttributeNS(ANDROID, "value"));
            if (v instanceof Boolean) {
                md.putBoolean(name, (Boolean) v);
            } else if (v instanceof Integer) {
                md.putInt(name, (Integer) v);
            } else if (v instanceof Float) {
                md.putFloat(name, (Float) v);
            } else {
                md.putString(name, (String) v);
            }
        }
        return md;
    }

    /**
     * The process a component runs in, as Android names it: the package's
     * own by default, {@code package:name} for a private {@code :name}.
     * (Robolectric records it but runs every component in the test's process.)
     */
    static String processName(String pkg, String declared) {
        if (declared.isEmpty()) {
            return pkg;
        }
        return declared.startsWith(":") ? pkg + declared : declared;
    }

    private static String className(String pkg, String name) {
        // Relative names resolve against the namespace (the Java package), not the applicationId.
        return name.startsWith(".") ? NAMESPACE + name : name;
    }

    private static java.util.List<Element> children(Element parent, String tag) {
        java.util.List<Element> out = new java.util.ArrayList<>();
        for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element && tag.equals(((Element) n).getTagName())) {
                out.add((Element) n);
            }
        }
        return out;
    }
}
