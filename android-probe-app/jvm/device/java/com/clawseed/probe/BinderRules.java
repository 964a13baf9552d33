package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.pm.ProviderInfo;
import android.os.Bundle;
import android.os.ParcelFileDescriptor;
import android.os.Parcelable;
import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What Binder and the system server enforce between two apps on a phone,
 * which the JVM device's single process would otherwise skip (the shadows
 * of {@link JvmShadows} apply them):
 * <ul>
 *   <li>{@link Access}: whether a caller may acquire the vendor's provider,
 *       as ActivityManagerService's content-provider permission check
 *       decides it;
 *   <li>{@link #requestBytes} and {@link #replyBytes}: the size of the
 *       transaction a {@code call} makes, against {@link #LIMIT_BYTES}. A
 *       Consumer calling through {@code ContentResolver.call} would get
 *       null (it swallows the RemoteException); the probe calls through an
 *       unstable ContentProviderClient, which passes the
 *       TransactionTooLargeException or DeadObjectException on, and reports
 *       {@code transaction_too_large} (AndroidBackend.call, Failures);
 *   <li>{@link #dup}: the caller receives its own copy of each descriptor.
 * </ul>
 */
final class BinderRules {
    private BinderRules() {}

    /**
     * A process's Binder buffer: ProcessState maps {@code 1 MiB − 2 pages}
     * (BINDER_VM_SIZE; 1,040,384 bytes with 4 KiB pages), and one
     * synchronous transaction's data and object offsets must fit in it. The
     * request lands in the Provider's buffer, the reply in the caller's.
     * Other transactions in flight share the buffer, so on a phone a
     * transaction a little smaller than this can fail too: this is the most
     * a transaction can ever carry, never less.
     */
    static final int LIMIT_BYTES = 1024 * 1024 - 2 * 4096;
    /**
     * libbinder's threshold (android_util_Binder.cpp, signalExceptionForError):
     * a failed transaction whose request parcel is larger than this throws
     * TransactionTooLargeException, a smaller one DeadObjectException
     * ("Transaction failed on small parcel; …"), whichever side overflowed.
     */
    static final int TOO_LARGE_THRESHOLD_BYTES = 200 * 1024;
    /** A flat_binder_object (a binder, or a descriptor) in a 64-bit parcel, and its entry in the offsets array. */
    private static final int OBJECT_BYTES = 24;
    private static final int OFFSET_BYTES = 8;

    // ---- acquiring a provider ----

    /**
     * Who may acquire the vendor's provider, as a phone decides when
     * {@code acquireUnstableContentProviderClient} asks the system server
     * for it (ActivityManagerService, checkContentProviderPermission): the
     * provider's own UID always; another UID only if the provider is
     * exported and the caller holds its read permission or its write
     * permission, a permission that is not set counting as held (so a
     * provider with only a writePermission is served to everyone, as on a
     * phone). Path permissions and URI grants are not modelled (the device
     * reads neither from the manifest).
     *
     * <p>What each UID holds is decided at install as the package manager
     * decides it, for the permissions its manifest requests: a normal
     * permission is granted when some installed app declares it; a
     * dangerous one is not (the harness installs the probes with
     * {@code pm install -r -t}, without {@code -g}, and nobody taps
     * "Allow"); a signature one only to an app signed with the declaring
     * app's certificate, which no probe is; one no installed app declares
     * is not granted at all.
     */
    static final class Access {
        final ProviderInfo provider;
        /** Per UID, the permissions it holds. */
        final Map<Integer, Set<String>> held;

        Access(ProviderInfo provider, Map<Integer, Set<String>> held) {
            this.provider = provider;
            this.held = held;
        }

        /** Null when {@code uid} may acquire the provider, else the system server's refusal. */
        String refusal(int uid) {
            int owner = provider.applicationInfo == null ? -1 : provider.applicationInfo.uid;
            if (uid == owner) {
                return null;
            }
            Set<String> mine = held.getOrDefault(uid, Collections.emptySet());
            if (provider.exported && (granted(provider.readPermission, mine) || granted(provider.writePermission, mine))) {
                return null;
            }
            // The text ActivityManagerService gives the SecurityException.
            String from = "from ProcessRecord{jvm-device uid=" + uid + "} (pid=" + android.os.Process.myPid()
                    + ", uid=" + uid + ")";
            if (!provider.exported) {
                return "Permission Denial: opening provider " + provider.name + " " + from
                        + " that is not exported from UID " + owner;
            }
            return "Permission Denial: opening provider " + provider.name + " " + from + " requires "
                    + provider.readPermission + " or " + provider.writePermission;
        }

        private static boolean granted(String permission, Set<String> mine) {
            return permission == null || mine.contains(permission);
        }
    }

    /** Framework permissions the probes request, with their protection level (frameworks/base core/res). */
    private static final Map<String, String> FRAMEWORK_LEVELS = Map.of(
            "android.permission.QUERY_ALL_PACKAGES", "normal");

    /**
     * What an app holds of the permissions it {@code requested}, given those
     * the installed apps {@code declared} (name → android:protectionLevel)
     * and whether it is signed with the declaring app's certificate.
     */
    static Set<String> held(List<String> requested, Map<String, String> declared, boolean sameCertAsDeclarer) {
        Set<String> out = new LinkedHashSet<>();
        for (String p : requested) {
            String level = declared.containsKey(p) ? declared.get(p) : FRAMEWORK_LEVELS.get(p);
            if (level == null) {
                continue;
            }
            String base = baseLevel(level);
            if (base.equals("normal") || (base.equals("signature") && sameCertAsDeclarer)) {
                out.add(p);
            }
        }
        return out;
    }

    /**
     * The base of android:protectionLevel ("signature|privileged" is
     * signature; absent is normal). A compiled manifest (an APK's, through
     * apk-manifest.py) has the number: its low 4 bits are the base
     * (PermissionInfo.PROTECTION_MASK_BASE).
     */
    static String baseLevel(String level) {
        String t = level.trim();
        if (t.matches("(0x[0-9a-fA-F]+|[0-9]+)")) {
            int n = t.startsWith("0x") ? Integer.parseUnsignedInt(t.substring(2), 16) : Integer.parseInt(t);
            switch (n & 0xf) {
                case 1: return "dangerous";
                case 2: case 3: return "signature";
                case 4: return "internal";
                default: return "normal";
            }
        }
        List<String> parts = new ArrayList<>();
        for (String s : level.split("\\|")) {
            parts.add(s.trim());
        }
        if (parts.contains("signature") || parts.contains("signatureOrSystem")) {
            return "signature";
        }
        if (parts.contains("dangerous")) {
            return "dangerous";
        }
        if (parts.contains("internal")) {
            return "internal";
        }
        return "normal";
    }

    /** The permissions a manifest requests ({@code <uses-permission>}). */
    static List<String> requested(File manifest) throws IOException {
        try {
            javax.xml.parsers.DocumentBuilderFactory f = javax.xml.parsers.DocumentBuilderFactory.newInstance();
            f.setNamespaceAware(true);
            org.w3c.dom.Element root = f.newDocumentBuilder().parse(manifest).getDocumentElement();
            List<String> out = new ArrayList<>();
            for (org.w3c.dom.Element e : VendorApp.children(root, "uses-permission")) {
                out.add(e.getAttributeNS(VendorApp.ANDROID, "name"));
            }
            return out;
        } catch (javax.xml.parsers.ParserConfigurationException | org.xml.sax.SAXException e) {
            throw new IOException("cannot read " + manifest + ": " + e.getMessage(), e);
        }
    }

    /**
     * Installs the rules for the vendor's {@code provider}: identities a
     * ({@code uidA}) and b ({@code uidB}) request what the probe app's
     * manifest requests (both flavours share android-probe-app/app's
     * manifest) and hold what {@link #held} grants them; the vendor's
     * declared permissions are defined in the package manager, and the
     * held ones granted there too, so that the probe's own
     * checkSelfPermission (AndroidBackend.refusal) answers as on a phone.
     */
    @SuppressWarnings("deprecation")
    static void install(android.content.Context app, org.robolectric.shadows.ShadowPackageManager spm, VendorApp spec,
            ProviderInfo provider, int uidA, int uidB) throws IOException {
        String repo = System.getProperty("cetp.repo.dir");
        List<String> requested = requested(new File(repo, "android-probe-app/app/src/main/AndroidManifest.xml"));
        // The probes are signed with their own test keys, never the vendor's.
        Set<String> mine = held(requested, spec.declaredPermissions, false);
        for (Map.Entry<String, String> e : spec.declaredPermissions.entrySet()) {
            android.content.pm.PermissionInfo info = new android.content.pm.PermissionInfo();
            info.name = e.getKey();
            info.packageName = spec.pkg;
            String base = baseLevel(e.getValue());
            info.protectionLevel = base.equals("signature") ? android.content.pm.PermissionInfo.PROTECTION_SIGNATURE
                    : base.equals("dangerous") ? android.content.pm.PermissionInfo.PROTECTION_DANGEROUS
                    : base.equals("internal") ? android.content.pm.PermissionInfo.PROTECTION_INTERNAL
                    : android.content.pm.PermissionInfo.PROTECTION_NORMAL;
            spm.addPermissionInfo(info);
        }
        // What each identity's package records: requested, and granted or not (PackageInfo GET_PERMISSIONS).
        for (int uid : new int[] {uidA, uidB}) {
            String[] pkgs = app.getPackageManager().getPackagesForUid(uid);
            for (String pkg : pkgs == null ? new String[0] : pkgs) {
                android.content.pm.PackageInfo info = spm.getInternalMutablePackageInfo(pkg);
                if (info == null) {
                    continue;
                }
                info.requestedPermissions = requested.toArray(new String[0]);
                info.requestedPermissionsFlags = new int[requested.size()];
                for (int i = 0; i < requested.size(); i++) {
                    info.requestedPermissionsFlags[i] = android.content.pm.PackageInfo.REQUESTED_PERMISSION_GRANTED
                            & (mine.contains(requested.get(i)) ? -1 : 0);
                }
            }
        }
        org.robolectric.shadows.ShadowApplication shadow = org.robolectric.Shadows.shadowOf((android.app.Application) app);
        String[] granted = mine.toArray(new String[0]);
        shadow.grantPermissions(granted);
        shadow.grantPermissions(android.os.Process.myPid(), uidB, granted);
        access = new Access(provider, Map.of(uidA, mine, uidB, mine));
        System.err.println("jvm-device: the probes hold " + mine + " (they request " + requested + "; the vendor declares "
                + spec.declaredPermissions + "); the Provider is " + (provider.exported ? "exported" : "not exported")
                + (provider.readPermission == null && provider.writePermission == null ? ""
                        : ", read permission " + provider.readPermission + ", write permission "
                                + provider.writePermission));
    }

    /** Installed by the JVM device once the vendor's app is; null: nothing is checked. */
    static volatile Access access;

    /**
     * Null when the UID on this thread may acquire the provider of
     * {@code authority}, else the SecurityException's message. Only the
     * vendor's provider is checked (the probes' own are not called across
     * apps here).
     */
    static String refusal(String authority) {
        Access a = access;
        if (a == null || authority == null || !authority.equals(a.provider.authority)) {
            return null;
        }
        Integer uid = JvmShadows.CALLING_UID.get();
        return a.refusal(uid == null ? android.os.Process.myUid() : uid);
    }

    // ---- transaction size ----

    /**
     * The bytes of the transaction {@code ContentProviderProxy.call} sends
     * (Android 14): the interface token (strict-mode policy, work source,
     * header, descriptor), the AttributionSource, the authority, method and
     * arg strings, and the extras Bundle; with 8 bytes of offsets per
     * binder or descriptor.
     */
    static long requestBytes(String packageName, String authority, String method, String arg, Bundle extras) {
        long n = 3 * 4 + string("android.content.IContentProvider");
        // AttributionSource: a parcelable (non-null marker, its size header),
        // uid, pid, package, attribution tag, the token binder,
        // renounced permissions (null), device id, next (null).
        n += 4 + 4 + 4 + 4 + string(packageName) + string(null) + OBJECT_BYTES + OFFSET_BYTES + 4 + 4 + 4;
        n += string(authority) + string(method) + string(arg);
        return n + bundle(extras);
    }

    /** The reply's bytes: writeNoException's 0, then the result Bundle. */
    static long replyBytes(Bundle result) {
        return 4 + bundle(result);
    }

    /**
     * What {@code Parcel.writeBundle} writes (BaseBundle.writeToParcelInner,
     * Parcel.writeValue, Android 14): -1 for null, 0 for empty; else the
     * length, the magic, the count, and per entry the key (String16) and
     * the value (its type int, a length int for the length-prefixed types,
     * its bytes). Strings are UTF-16 with a terminating 0, padded to 4
     * bytes; each binder or descriptor is a 24-byte object plus its 8-byte
     * offset. Robolectric's Parcel measures strings and byte arrays the same
     * way (BinderRulesTest checks it), but cannot write a PendingIntent or
     * a pipe's descriptor, so the whole Bundle is measured here.
     */
    static long bundle(Bundle b) {
        if (b == null) {
            return 4;
        }
        if (b.isEmpty()) {
            return 4;
        }
        long n = 4 + 4 + 4;
        for (String key : b.keySet()) {
            @SuppressWarnings("deprecation")
            Object v = b.get(key);
            n += string(key) + value(v);
        }
        return n;
    }

    private static long value(Object v) {
        if (v == null || v instanceof Boolean || v instanceof Integer || v instanceof Float
                || v instanceof Short || v instanceof Byte || v instanceof Character) {
            return 4 + 4;
        }
        if (v instanceof Long || v instanceof Double) {
            return 4 + 8;
        }
        if (v instanceof String) {
            return 4 + string((String) v);
        }
        if (v instanceof CharSequence) {
            // TextUtils.writeToParcel: a kind int, then the text.
            return 4 + 4 + string(v.toString());
        }
        if (v instanceof byte[]) {
            return 4 + 4 + pad(((byte[]) v).length);
        }
        if (v instanceof int[] || v instanceof boolean[]) {
            return 4 + 4 + 4L * java.lang.reflect.Array.getLength(v);
        }
        if (v instanceof long[] || v instanceof double[]) {
            return 4 + 4 + 8L * java.lang.reflect.Array.getLength(v);
        }
        if (v instanceof String[]) {
            long n = 4 + 4;
            for (String s : (String[]) v) {
                n += string(s);
            }
            return n;
        }
        if (v instanceof Bundle) {
            return 4 + bundle((Bundle) v);
        }
        if (v instanceof List) {
            // VAL_LIST, length-prefixed: the count, then each value.
            long n = 4 + 4 + 4;
            for (Object o : (List<?>) v) {
                n += value(o);
            }
            return n;
        }
        if (v instanceof Parcelable[]) {
            long n = 4 + 4 + 4;
            for (Parcelable p : (Parcelable[]) v) {
                n += p == null ? 4 : parcelable(p);
            }
            return n;
        }
        if (v instanceof Parcelable) {
            // VAL_PARCELABLE, length-prefixed.
            return 4 + 4 + parcelable((Parcelable) v);
        }
        // A Serializable or anything else: its class name and some bytes; rare in a reply.
        return 4 + 4 + string(v.getClass().getName()) + 64;
    }

    /** writeParcelable: the creator's class name, then what writeToParcel writes. */
    private static long parcelable(Parcelable p) {
        long n = string(p.getClass().getName());
        if (p instanceof ParcelFileDescriptor) {
            // A comm-channel flag, then the descriptor.
            return n + 4 + OBJECT_BYTES + OFFSET_BYTES;
        }
        if (p instanceof PendingIntent) {
            return n + OBJECT_BYTES + OFFSET_BYTES;
        }
        android.os.Parcel parcel = android.os.Parcel.obtain();
        try {
            p.writeToParcel(parcel, 0);
            return n + parcel.dataSize();
        } catch (RuntimeException e) {
            return n + 64;
        } finally {
            parcel.recycle();
        }
    }

    /** A String16: its length, then (length + 1) UTF-16 units padded to 4 bytes; null is -1. */
    static long string(String s) {
        return s == null ? 4 : 4 + pad(2L * (s.length() + 1));
    }

    private static long pad(long n) {
        return (n + 3) & ~3L;
    }

    // ---- descriptors ----

    /**
     * {@code b} as the other side of Binder receives it: the same values,
     * each ParcelFileDescriptor (in nested Bundles too) replaced by a
     * duplicate, which the kernel installs in the receiving process while
     * the sender keeps its own. {@code b} itself is not changed: a Provider
     * may keep and return the same Bundle again (a replayed answer).
     * Only Bundles nest here (the probe's mapper reads no other container
     * of descriptors).
     */
    static Bundle withDuplicates(Bundle b) throws IOException {
        if (b == null || !hasDescriptor(b)) {
            return b;
        }
        Bundle out = new Bundle(b);
        for (String key : b.keySet()) {
            @SuppressWarnings("deprecation")
            Object v = b.get(key);
            if (v instanceof ParcelFileDescriptor) {
                ParcelFileDescriptor pfd = (ParcelFileDescriptor) v;
                java.io.FileDescriptor fd = pfd.getFileDescriptor();
                // One the Provider closed before returning reaches the caller
                // closed, as before: what a phone's Parcel does with it (an
                // error while writing the reply, in the Provider's process)
                // is not modelled.
                out.putParcelable(key, fd == null || !fd.valid() ? pfd : dup(pfd));
            } else if (v instanceof Bundle) {
                out.putBundle(key, withDuplicates((Bundle) v));
            }
        }
        return out;
    }

    private static boolean hasDescriptor(Bundle b) {
        for (String key : b.keySet()) {
            @SuppressWarnings("deprecation")
            Object v = b.get(key);
            if (v instanceof ParcelFileDescriptor || (v instanceof Bundle && hasDescriptor((Bundle) v))) {
                return true;
            }
        }
        return false;
    }

    /** Whether the descriptor was opened for writing (O_ACCMODE from /proc/self/fdinfo). */
    static boolean writable(java.io.FileDescriptor fd) throws IOException {
        int n = fdNumber(fd);
        for (String line : java.nio.file.Files.readAllLines(new File("/proc/self/fdinfo/" + n).toPath())) {
            if (line.startsWith("flags:")) {
                return (Integer.parseInt(line.substring(6).trim(), 8) & 3) != 0;
            }
        }
        throw new IOException("no flags for descriptor " + n);
    }

    static int fdNumber(java.io.FileDescriptor fd) throws IOException {
        try {
            java.lang.reflect.Field f = java.io.FileDescriptor.class.getDeclaredField("fd");
            f.setAccessible(true);
            return f.getInt(fd);
        } catch (ReflectiveOperationException e) {
            throw new IOException(e);
        }
    }

    /**
     * A new ParcelFileDescriptor over {@code dup(2)} of {@code pfd}'s
     * descriptor: the same open file (offset and access mode shared, as
     * Binder's copy shares them), closed independently of {@code pfd}.
     * The JDK has no dup, but its FileDispatcherImpl.dup0 is dup2: a fresh
     * descriptor (of /dev/null) is replaced by the duplicate. Needs
     * {@code --add-opens java.base/sun.nio.ch} (scripts/jvm-device.sh).
     */
    static ParcelFileDescriptor dup(ParcelFileDescriptor pfd) throws IOException {
        java.io.FileDescriptor from = pfd.getFileDescriptor();
        if (from == null || !from.valid()) {
            throw new IOException("the descriptor is closed");
        }
        boolean writable = writable(from);
        java.io.Closeable end = writable ? new java.io.FileOutputStream("/dev/null")
                : new java.io.FileInputStream("/dev/null");
        java.io.FileDescriptor to = end instanceof java.io.FileOutputStream
                ? ((java.io.FileOutputStream) end).getFD() : ((java.io.FileInputStream) end).getFD();
        try {
            java.lang.reflect.Method dup2 = Class.forName("sun.nio.ch.FileDispatcherImpl")
                    .getDeclaredMethod("dup0", java.io.FileDescriptor.class, java.io.FileDescriptor.class);
            dup2.setAccessible(true);
            dup2.invoke(null, from, to);
        } catch (java.lang.reflect.InvocationTargetException e) {
            end.close();
            throw new IOException("dup failed: " + e.getCause(), e.getCause());
        } catch (ReflectiveOperationException | RuntimeException e) {
            end.close();
            throw new IOException("cannot duplicate a descriptor (run with --add-opens java.base/sun.nio.ch=ALL-UNNAMED): "
                    + e, e);
        }
        ParcelFileDescriptor copy = JvmShadows.RealPipe.wrap(end, to, JvmShadows.RealPipe.isPipe(pfd));
        // A result file's close listener hears this copy (the caller's), as on a phone.
        JvmShadows.RealPipe.shareChannel(pfd, copy);
        return copy;
    }
}
