package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.ComponentName;
import android.content.ContentProviderClient;
import android.content.Context;
import android.content.Intent;
import android.content.pm.PackageInfo;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import android.content.pm.ResolveInfo;
import android.content.pm.ServiceInfo;
import android.content.pm.Signature;
import android.content.pm.SigningInfo;
import android.net.Uri;
import android.os.Build;
import android.os.Bundle;
import android.os.DeadObjectException;
import android.os.ParcelFileDescriptor;
import android.os.Process;
import android.os.RemoteException;
import android.os.SystemClock;
import android.os.TransactionTooLargeException;
import android.system.ErrnoException;
import android.system.Os;
import android.system.OsConstants;
import android.util.Log;
import com.clawseed.probe.core.Abilities;
import com.clawseed.probe.core.DeviceBackend;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.Failures;
import com.clawseed.probe.core.FdSource;
import com.clawseed.probe.core.HandleTable;
import com.clawseed.probe.core.LaunchedWindow;
import com.clawseed.probe.core.MetaValues;
import com.clawseed.probe.core.ResolveBroker;
import com.clawseed.probe.core.ResolveUri;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireError;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Pattern;

/** The device side of one connection, as this app's identity. */
final class AndroidBackend implements DeviceBackend {
    static final String ACTION_TOOL_PROVIDER = "com.clawseed.action.TOOL_PROVIDER";
    static final String META_AUTHORITY = "com.clawseed.tools.authority";
    /** The normal permission conforming Providers guard their ContentProvider with. */
    static final String TOOL_PERMISSION = "com.clawseed.permission.ACCESS_TOOLS";
    /** Used when the host sends {@code timeout_ms: 0} to {@code resolve}. */
    static final long DEFAULT_RESOLVE_TIMEOUT_MS = 30_000;
    /** How long a resolve waits for the launched activity's window. */
    static final long LAUNCH_LOOK_MS = 10_000;
    /**
     * How long {@code restart_provider} waits for the UiAutomation while a
     * resolve holds it (finding 5): a resolve may last up to 24 h.
     */
    static final long SHELL_WAIT_MS = 60_000;
    private static final Pattern PACKAGE = Pattern.compile("[A-Za-z0-9_]+(\\.[A-Za-z0-9_]+)*");

    private final Context context;
    private final UiAccess ui;
    private final HandleTable<PendingIntent> intents = new HandleTable<>("pi-");
    private final HandleTable<ParcelFileDescriptor> fds = new HandleTable<>("fd-");
    private final BundleMapper mapper = new BundleMapper(intents, fds);

    AndroidBackend(Context context, UiAccess ui) {
        this.context = context;
        this.ui = ui;
    }

    @Override
    public Abilities abilities() {
        return ui.abilities();
    }

    @Override
    public Hello hello() throws DeviceError {
        PackageManager pm = context.getPackageManager();
        int uid = Process.myUid();
        String[] pkgs = pm.getPackagesForUid(uid);
        List<String> packages = pkgs == null ? Collections.emptyList() : Arrays.asList(pkgs);
        return new Hello("cetp-probe-android/" + BuildConfig.VERSION_NAME,
                new Ops.Identity(BuildConfig.IDENTITY_NAME, uid, packages, signingCerts(pm, context.getPackageName())),
                new Ops.DeviceInfo(Build.VERSION.SDK_INT, Build.MODEL, Build.FINGERPRINT),
                System.currentTimeMillis());
    }

    /** A discovered package's signing certificates; none when it cannot be read. */
    private static List<String> providerCerts(PackageManager pm, String pkg) {
        try {
            return signingCerts(pm, pkg);
        } catch (DeviceError e) {
            return new ArrayList<>();
        }
    }

    /** SHA-256 of the certificates this package is signed with now. */
    @SuppressWarnings("deprecation")
    private static List<String> signingCerts(PackageManager pm, String pkg) throws DeviceError {
        Signature[] sigs;
        try {
            if (Build.VERSION.SDK_INT >= 28) {
                PackageInfo info = pm.getPackageInfo(pkg, PackageManager.GET_SIGNING_CERTIFICATES);
                SigningInfo si = info.signingInfo;
                if (si == null) {
                    sigs = new Signature[0];
                } else if (si.hasMultipleSigners()) {
                    sigs = si.getApkContentsSigners();
                } else {
                    // The history ends with the current certificate.
                    Signature[] history = si.getSigningCertificateHistory();
                    sigs = history.length == 0 ? history : new Signature[] {history[history.length - 1]};
                }
            } else {
                sigs = pm.getPackageInfo(pkg, PackageManager.GET_SIGNATURES).signatures;
            }
        } catch (PackageManager.NameNotFoundException e) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "own package not found: " + pkg);
        }
        List<String> out = new ArrayList<>();
        for (Signature s : sigs == null ? new Signature[0] : sigs) {
            out.add(sha256Hex(s.toByteArray()));
        }
        return out;
    }

    private static String sha256Hex(byte[] data) throws DeviceError {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(data);
            StringBuilder sb = new StringBuilder();
            for (byte b : d) {
                sb.append(String.format("%02x", b & 0xFF));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "no SHA-256 on this device");
        }
    }

    @Override
    @SuppressWarnings("deprecation")
    public List<Ops.ServiceInfo> discover() {
        PackageManager pm = context.getPackageManager();
        Intent intent = new Intent(ACTION_TOOL_PROVIDER);
        List<ResolveInfo> found = Build.VERSION.SDK_INT >= 33
                ? pm.queryIntentServices(intent, PackageManager.ResolveInfoFlags.of(PackageManager.GET_META_DATA))
                : pm.queryIntentServices(intent, PackageManager.GET_META_DATA);
        List<Ops.ServiceInfo> out = new ArrayList<>();
        for (ResolveInfo ri : found) {
            ServiceInfo si = ri.serviceInfo;
            if (si == null) {
                continue;
            }
            Map<String, String> meta = new TreeMap<>();
            Map<String, String> types = new TreeMap<>();
            readMeta(si.metaData, meta, types);
            // Only a String names an authority: a compiled number or boolean
            // is not one, whatever its text.
            String authority = types.containsKey(META_AUTHORITY) ? null : meta.get(META_AUTHORITY);
            out.add(new Ops.ServiceInfo(si.packageName,
                    new ComponentName(si.packageName, si.name).flattenToShortString(),
                    si.exported, si.permission, meta,
                    authority == null ? null : providerPackage(pm, authority),
                    providerCerts(pm, si.packageName), types));
        }
        return out;
    }

    /**
     * A service's meta-data as Android compiled it: each value's text, and
     * the type of those that are not strings (core.MetaValues says why).
     */
    @SuppressWarnings("deprecation")
    static void readMeta(Bundle md, Map<String, String> meta, Map<String, String> types) {
        if (md == null) {
            return;
        }
        for (String key : md.keySet()) {
            // get(key): the type is what is asked.
            MetaValues.put(key, md.get(key), meta, types);
        }
    }

    @SuppressWarnings("deprecation")
    private static String providerPackage(PackageManager pm, String authority) {
        ProviderInfo p = Build.VERSION.SDK_INT >= 33
                ? pm.resolveContentProvider(authority, PackageManager.ComponentInfoFlags.of(0))
                : pm.resolveContentProvider(authority, 0);
        return p == null ? null : p.packageName;
    }

    @Override
    public CallResult call(Ops.CallParams p) throws DeviceError {
        Bundle extras = p.extras == null ? null : mapper.toAndroid(p.extras);
        Uri uri = Uri.parse("content://" + p.authority);
        // An unstable client: if the Provider dies, the call fails with
        // DeadObjectException instead of the probe being killed with it, and
        // RemoteExceptions reach us (ContentResolver.call turns them into null).
        ContentProviderClient client;
        try {
            client = context.getContentResolver().acquireUnstableContentProviderClient(uri);
        } catch (SecurityException e) {
            // A Provider that is not exported, or guarded by a permission the probe lacks.
            throw refusal(e);
        }
        if (client == null) {
            throw Failures.noClient(p.authority, providerPackage(context.getPackageManager(), p.authority) != null);
        }
        try {
            long start = SystemClock.elapsedRealtimeNanos();
            Bundle result;
            try {
                result = client.call(p.method, p.arg, extras);
            } catch (DeadObjectException e) {
                throw Failures.deadObject(e.toString(), liveness(client, uri));
            } catch (TransactionTooLargeException e) {
                throw Failures.transactionTooLarge(e.toString());
            } catch (RemoteException e) {
                throw Failures.otherRemote(e.toString());
            } catch (SecurityException e) {
                throw refusal(e);
            } catch (RuntimeException e) {
                // Exceptions a Provider throws cross Binder as these classes.
                throw Failures.providerThrew(e.getClass().getName(), String.valueOf(e.getMessage()));
            }
            long elapsedUs = (SystemClock.elapsedRealtimeNanos() - start) / 1000;
            if (result == null) {
                return new CallResult(null, elapsedUs);
            }
            BundleMapper.Read read = mapper.readResult(result);
            return new CallResult(read.bundle, elapsedUs, read.unreadKeys);
        } finally {
            closeClient(client);
        }
    }

    private DeviceError refusal(SecurityException e) {
        boolean lacks = context.checkSelfPermission(TOOL_PERMISSION) != PackageManager.PERMISSION_GRANTED
                && permissionDefined(context.getPackageManager(), TOOL_PERMISSION);
        return Failures.securityRefusal(e.getClass().getName(), String.valueOf(e.getMessage()), lacks, TOOL_PERMISSION);
    }

    private static boolean permissionDefined(PackageManager pm, String permission) {
        try {
            pm.getPermissionInfo(permission, 0);
            return true;
        } catch (PackageManager.NameNotFoundException e) {
            return false;
        }
    }

    /**
     * Asks the same client something small after a DeadObjectException: an
     * oversized reply fails that way too ("Transaction failed on small
     * parcel") while the Provider lives on.
     */
    private static Failures.Liveness liveness(ContentProviderClient client, Uri uri) {
        try {
            client.getType(uri);
            return Failures.Liveness.ALIVE;
        } catch (DeadObjectException e) {
            return Failures.Liveness.DEAD;
        } catch (RemoteException e) {
            return Failures.Liveness.UNKNOWN;
        } catch (RuntimeException e) {
            // The Provider's own getType threw, so its process ran it.
            return Failures.Liveness.ALIVE;
        }
    }

    @SuppressWarnings("deprecation")
    private static void closeClient(ContentProviderClient client) {
        if (Build.VERSION.SDK_INT >= 24) {
            client.close();
        } else {
            client.release();
        }
    }

    @Override
    public FdSource takeFd(String handle) throws DeviceError {
        ParcelFileDescriptor pfd = fds.take(handle);
        return new FdSource() {
            // Not AutoCloseInputStream: checkError must run before the descriptor closes.
            private final InputStream in = new FileInputStream(pfd.getFileDescriptor());

            @Override
            public InputStream stream() {
                return in;
            }

            @Override
            public String checkError() {
                try {
                    pfd.checkError();
                    return null;
                } catch (IOException e) {
                    return e.toString();
                }
            }

            @Override
            public Boolean writable() {
                try {
                    int mode = Os.fcntlInt(pfd.getFileDescriptor(), OsConstants.F_GETFL, 0) & OsConstants.O_ACCMODE;
                    return mode != OsConstants.O_RDONLY;
                } catch (ErrnoException e) {
                    return null;
                }
            }

            @Override
            public void close() throws IOException {
                pfd.close();
            }
        };
    }

    @Override
    public void closeFd(String handle) throws DeviceError {
        ParcelFileDescriptor pfd = fds.take(handle);
        try {
            pfd.close();
        } catch (IOException ignored) {
            // The handle is gone either way.
        }
    }

    @Override
    public ResolveResult resolve(Ops.ResolveParams p) throws DeviceError, InterruptedException {
        PendingIntent pi = intents.take(p.handle);
        if (Build.VERSION.SDK_INT >= 31 && !pi.isActivity()) {
            throw DeviceError.unsupported(p.handle + " does not start an activity");
        }
        long timeout = p.timeoutMs == 0 ? DEFAULT_RESOLVE_TIMEOUT_MS : Math.min(p.timeoutMs, 24L * 3600 * 1000);
        long deadline = SystemClock.elapsedRealtime() + timeout;
        ResolveBroker<PendingIntent>.Pending pending = ResolveActivity.BROKER.register(pi);
        try {
            // All of it with accessibility: the windows on screen are read
            // before the launch, to tell the launched activity from what was
            // already there (finding 1 of issue 27).
            return ui.withAccessibility(deadline, automation -> {
                // A screen that is off or locked hides the Provider's screen (finding 7).
                ScreenWaker.wake(context, command -> UiAccess.shell(automation, command), deadline);
                String own = context.getPackageName();
                Set<Integer> before = LaunchedWindow.ids(UiDecider.windows(automation));
                Intent launch = new Intent(context, ResolveActivity.class)
                        .setData(Uri.parse(ResolveUri.of(ResolveActivity.NONCE, pending.token)))
                        .addFlags(Intent.FLAG_ACTIVITY_NEW_TASK);
                try {
                    // Not Instrumentation.startActivitySync: it has no timeout.
                    context.startActivity(launch);
                } catch (RuntimeException e) {
                    throw new DeviceError(DeviceError.DEVICE_ERROR, "cannot start the probe's resolver activity: " + e);
                }
                Boolean launched = pending.awaitLaunch(deadline - SystemClock.elapsedRealtime());
                if (launched == null) {
                    throw new DeviceError(WireError.TIMEOUT, "the PendingIntent was not sent within " + timeout + " ms");
                }
                if (!launched) {
                    return new ResolveResult(false, false, 0);
                }
                // "Launched" comes from the resolver's onCreate, before the
                // activity it started has a window: wait for that window.
                long look = Math.min(deadline, SystemClock.elapsedRealtime() + LAUNCH_LOOK_MS);
                LaunchedWindow.Win front = UiDecider.awaitLaunched(automation, before, own, look);
                boolean applied = UiDecider.apply(automation, p.decision, p.ui, front, own, deadline);
                String frontPackage = front == null ? null : front.pkg;
                if (front == null) {
                    Log.w(ProbeInstrumentation.TAG, "no activity came up within " + LAUNCH_LOOK_MS + " ms; on screen: "
                            + LaunchedWindow.describe(before, UiDecider.windows(automation)));
                }
                if (!applied) {
                    // Leave no confirmation screen behind; the result is whatever backing out gives.
                    UiDecider.back(automation);
                    Integer code = pending.awaitResult(
                            Math.min(5_000, Math.max(1_000, deadline - SystemClock.elapsedRealtime())));
                    return new ResolveResult(true, false, code == null ? 0 : code, frontPackage);
                }
                Integer code = pending.awaitResult(deadline - SystemClock.elapsedRealtime());
                if (code == null) {
                    throw new DeviceError(WireError.TIMEOUT,
                            "the confirmation activity did not finish within " + timeout + " ms");
                }
                return new ResolveResult(true, true, code, frontPackage);
            });
        } finally {
            // On every path, timeouts included: finishes the resolver activity
            // and the Provider's screen it started, if still up.
            ResolveActivity.BROKER.release(pending);
        }
    }

    /** The PendingIntent of {@code handle}, used up: the JVM device's resolve (JvmResolver) plays it itself. */
    PendingIntent takeIntent(String handle) throws DeviceError {
        return intents.take(handle);
    }

    @Override
    public void restartProvider(String pkg) throws DeviceError, InterruptedException {
        if (!PACKAGE.matcher(pkg).matches()) {
            throw new DeviceError(WireError.BAD_REQUEST, "not a package name: " + pkg);
        }
        if (pkg.equals(context.getPackageName())) {
            throw DeviceError.unsupported("the probe cannot stop itself");
        }
        ui.withShell(SHELL_WAIT_MS, automation -> {
            UiAccess.shell(automation, "am force-stop " + pkg);
            return null;
        });
    }

    @Override
    public void close() {
        for (ParcelFileDescriptor pfd : fds.drain()) {
            try {
                pfd.close();
            } catch (IOException ignored) {
                // Closing anyway.
            }
        }
        intents.drain();
    }
}
