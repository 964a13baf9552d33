package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.ContentProvider;
import android.content.ContentValues;
import android.database.Cursor;
import android.net.Uri;
import android.os.Binder;
import android.os.Build;
import android.os.Bundle;
import android.os.ParcelFileDescriptor;
import android.os.Parcelable;
import android.os.Process;
import android.util.Log;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HandleTable;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.wire.WireBundle;
import java.io.IOException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The hostile Provider a host scripts over the probe wire, for testing a
 * Consumer app: each {@code call()} goes to the connection hosting it as an
 * {@code incoming_call} event and returns (or throws) what its {@code reply}
 * says ({@link HostedProvider}). Its authority is fixed by the manifest.
 *
 * <p>It runs in a process of its own ({@code android:process=":hosted"}) and
 * hands each call to {@link HostedBridge} in the probe's process, where the
 * hosting connection is. So a reply {@code fail: "provider_died"} kills this
 * process mid-call: the Consumer sees its Binder die (a
 * {@code DeadObjectException} through an unstable client) as with a crashing
 * Provider, and Android starts this process again on the next call, while
 * the probe and its connection live on.
 */
public final class HostileProvider extends ContentProvider {
    /** The key of a file result's descriptor (§4.5). */
    static final String RESULT_FD = "result_fd";
    /** How long after the answer this process's copy of a result's read end is closed (as the probe's own). */
    static final long READER_CLOSE_DELAY_MS = 5_000;

    private static final ScheduledThreadPoolExecutor CLOSER = new ScheduledThreadPoolExecutor(1, r -> {
        Thread t = new Thread(r, "cetp-hosted-closer");
        t.setDaemon(true);
        return t;
    });

    @Override
    public boolean onCreate() {
        return true;
    }

    @Override
    public Bundle call(String method, String arg, Bundle extras) {
        // On entry, before anything else could switch threads (§7.1).
        int uid = Binder.getCallingUid();
        Bundle request = new Bundle();
        request.putInt(HostedBridge.KEY_UID, uid);
        // Passed on unread: what the probe cannot unparcel is read (and
        // reported) on the bridge's side, as before.
        request.putBundle(HostedBridge.KEY_EXTRAS, extras);
        Bundle answer;
        // Calls from this process to the bridge carry this app's UID, which
        // the bridge requires; a Consumer's identity never reaches it.
        long ident = Binder.clearCallingIdentity();
        try {
            answer = getContext().getContentResolver().call(HostedBridge.uri(getContext()),
                    method == null ? "" : method, arg, request);
        } finally {
            Binder.restoreCallingIdentity(ident);
        }
        if (answer == null) {
            // ContentResolver swallows a RemoteException: the probe's process died.
            throw new IllegalStateException("the probe that hosts this provider is gone");
        }
        if (answer.getBoolean(HostedBridge.KEY_DIE)) {
            die();
            // Only where killing does not end the process (a JVM under test).
            throw new IllegalStateException("the scripted provider was to die mid-call");
        }
        Bundle result = answer.getBundle(HostedBridge.KEY_RESULT);
        if (result != null) {
            ParcelFileDescriptor fd = descriptorOf(result);
            if (fd != null) {
                // This process's copy, let go of once the Consumer has its
                // own: while it stays open, the probe's pipe writer never sees
                // the Consumer close its copy. Silently, so that a result
                // file's close listener (in the probe's process) hears the
                // Consumer's close, not this one.
                CLOSER.schedule(() -> HostedBridge.releaseSilently(fd), READER_CLOSE_DELAY_MS, TimeUnit.MILLISECONDS);
            }
        }
        return result;
    }

    @SuppressWarnings("deprecation")
    private static ParcelFileDescriptor descriptorOf(Bundle result) {
        if (Build.VERSION.SDK_INT >= 33) {
            return result.getParcelable(RESULT_FD, ParcelFileDescriptor.class);
        }
        Parcelable p = result.getParcelable(RESULT_FD);
        return p instanceof ParcelFileDescriptor ? (ParcelFileDescriptor) p : null;
    }

    /**
     * Kills this process, the hosted one (never the probe's: this provider
     * runs only in {@code :hosted}), in the middle of the Consumer's call.
     */
    static void die() {
        Log.w(ProbeInstrumentation.TAG, "hostile provider: dying mid-call, as scripted");
        Process.killProcess(Process.myPid());
    }

    /**
     * The Consumer's extras for the event. PendingIntents and descriptors in
     * them become handles of a table no connection holds, so the host sees
     * their facts but cannot use them; the descriptors are closed at once.
     */
    static WireBundle readExtras(Bundle extras) {
        if (extras == null) {
            return null;
        }
        HandleTable<PendingIntent> intents = new HandleTable<>("pi-");
        HandleTable<ParcelFileDescriptor> fds = new HandleTable<>("fd-");
        try {
            return new BundleMapper(intents, fds).readResult(extras).bundle;
        } catch (DeviceError | RuntimeException e) {
            // What a Consumer sent that the probe cannot read is the Consumer's fault, told to it.
            throw new IllegalArgumentException("the hostile provider cannot read these extras: " + e);
        } finally {
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

    // Not a table provider: a Consumer only calls call().

    @Override
    public Cursor query(Uri uri, String[] projection, String selection, String[] selectionArgs, String sortOrder) {
        return null;
    }

    @Override
    public String getType(Uri uri) {
        return null;
    }

    @Override
    public Uri insert(Uri uri, ContentValues values) {
        return null;
    }

    @Override
    public int delete(Uri uri, String selection, String[] selectionArgs) {
        return 0;
    }

    @Override
    public int update(Uri uri, ContentValues values, String selection, String[] selectionArgs) {
        return 0;
    }
}
