package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.ContentProvider;
import android.content.ContentValues;
import android.content.Context;
import android.content.Intent;
import android.database.Cursor;
import android.net.Uri;
import android.os.Binder;
import android.os.Bundle;
import android.os.Parcel;
import android.os.ParcelFileDescriptor;
import android.os.Parcelable;
import android.os.Process;
import android.util.Log;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HandleTable;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.wire.WireBundle;
import java.io.IOException;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * The probe's side of the hosted Provider: a ContentProvider in the probe's
 * own process, not exported, that {@link HostileProvider} (in its own
 * process, {@code :hosted}) hands each Consumer call to. It runs the call
 * through the process's {@link HostedProvider}, which forwards it to the
 * hosting connection, and answers with what the host's {@code reply} makes
 * of it: a result (with the PendingIntents of the probe's own
 * {@link ConfirmActivity} and a {@code result_fd} built here), an exception
 * (which Binder carries back as itself), or the order to die. The
 * {@code result_fd} of {@code fd_data} is opened here, in the probe's
 * process, so its close listener runs beside the hosting connection it
 * reports to ({@code fd_closed}; {@link Hosting.ResultFiles}).
 *
 * <p>Why two processes: {@code fail: "provider_died"} must make the
 * Consumer's Binder die mid-call, as a crashing Provider's does on a phone,
 * while the probe, which serves the host's connection, lives on.
 */
public final class HostedBridge extends ContentProvider {
    /** The bridge's authority: the hosted authority's package plus this. */
    static final String AUTHORITY_SUFFIX = ".hosted.bridge";
    /** Request keys: the Consumer's UID (read on entry in the hosted process) and its extras. */
    static final String KEY_UID = "cetp.caller_uid";
    static final String KEY_EXTRAS = "cetp.extras";
    /** Answer keys: the Consumer's result (absent for null), or the order to die. */
    static final String KEY_RESULT = "cetp.result";
    static final String KEY_DIE = "cetp.die";
    /**
     * The confirmation activity's data URI: {@code cetp-confirm://PACKAGE/NONCE/TOKEN}, the nonce
     * telling this probe process's confirmations from an earlier one's.
     */
    static final String CONFIRM_SCHEME = "cetp-confirm";

    static Uri uri(Context context) {
        return Uri.parse("content://" + context.getPackageName() + AUTHORITY_SUFFIX);
    }

    @Override
    public boolean onCreate() {
        return true;
    }

    @Override
    public Bundle call(String method, String arg, Bundle request) {
        // Not exported, so only this app's UID gets here; checked anyway,
        // since the caller's UID in the request is taken on trust.
        if (Binder.getCallingUid() != Process.myUid()) {
            throw new SecurityException("only the probe's hosted process may call its bridge");
        }
        if (request == null || !request.containsKey(KEY_UID)) {
            throw new IllegalArgumentException("a bridge request names the Consumer's UID");
        }
        int uid = request.getInt(KEY_UID);
        Context context = getContext();
        HostedProvider hosted;
        try {
            hosted = Hosting.get(context);
        } catch (DeviceError e) {
            throw new IllegalStateException(e.getMessage());
        }
        HostedProvider.Answer a = hosted.call(uid, packagesOf(context, uid), method, arg,
                HostileProvider.readExtras(request.getBundle(KEY_EXTRAS)));
        Bundle answer = new Bundle();
        if (a.dies()) {
            answer.putBoolean(KEY_DIE, true);
            return answer;
        }
        if (a.throwsException()) {
            if (a.failure != null) {
                Log.w(ProbeInstrumentation.TAG, "hostile provider: " + a.failure + ": " + a.message);
            }
            throw a.exception();
        }
        if (a.result == null) {
            return answer;
        }
        Bundle out;
        try {
            // The only PendingIntents a reply may hold (HostedProvider
            // refuses the others) are confirmations, made here.
            out = new BundleMapper(new HandleTable<>("pi-"), new HandleTable<>("fd-"),
                    pi -> confirmation(context, hosted, a, pi.handle)).toAndroid(a.result);
        } catch (DeviceError e) {
            throw new IllegalStateException("the scripted result cannot be built: " + e.getMessage());
        }
        if (a.fd != null) {
            try {
                out.putParcelable(HostileProvider.RESULT_FD, hosted.openFd(a, Hosting.PIPES, Hosting.results(context)));
            } catch (IOException | DeviceError e) {
                throw new IllegalStateException("the scripted result descriptor cannot be made: " + e.getMessage());
            }
        }
        answer.putBundle(KEY_RESULT, out);
        return answer;
    }

    /**
     * An immutable PendingIntent of the probe's own confirmation activity for
     * the script's {@code handle}. The token in its data URI makes each one a
     * distinct PendingIntent (Android tells them apart by their intent
     * without its extras) and names the connection to tell of its launch.
     */
    static PendingIntent confirmation(Context context, HostedProvider hosted, HostedProvider.Answer a, String handle)
            throws DeviceError {
        String token = hosted.issue(a, handle);
        if (token == null) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "the connection that scripted " + handle + " is gone");
        }
        Intent intent = new Intent(context, ConfirmActivity.class)
                .setData(new Uri.Builder().scheme(CONFIRM_SCHEME).authority(context.getPackageName())
                        .appendPath(ResolveActivity.NONCE).appendPath(token).build());
        return PendingIntent.getActivity(context, 0, intent, PendingIntent.FLAG_IMMUTABLE);
    }

    /** Every package of the caller's UID (§7.1: not only the first). */
    private static List<String> packagesOf(Context context, int uid) {
        String[] pkgs = context.getPackageManager().getPackagesForUid(uid);
        return pkgs == null ? Collections.emptyList() : Arrays.asList(pkgs);
    }

    /**
     * Lets go of this process's copy of a descriptor WITHOUT a close status,
     * so that a listener on its status channel (a result file's, an
     * endless pipe's writer) hears the Consumer, never the probe. This is
     * what the framework does with a descriptor written as a return value;
     * AOSP API 34, {@code android/os/ParcelFileDescriptor.java},
     * {@code writeToParcel}:
     * <pre>
     * if ((flags &amp; PARCELABLE_WRITE_RETURN_VALUE) != 0 &amp;&amp; !mClosed) {
     *     // Not a real close, so emit no status
     *     closeWithStatus(Status.SILENCE, null);
     * }
     * </pre>
     * and {@code writeCommStatusAndClose} returns before writing anything
     * for {@code Status.SILENCE}. The throwaway parcel's own duplicates of
     * the descriptors are closed by {@code recycle()}, which writes no
     * status either. (Robolectric's shadow closes it as a normal close:
     * there the listener hears it.)
     */
    static void releaseSilently(ParcelFileDescriptor pfd) {
        Parcel p = Parcel.obtain();
        try {
            pfd.writeToParcel(p, Parcelable.PARCELABLE_WRITE_RETURN_VALUE);
        } catch (RuntimeException e) {
            // Already closed (its descriptor cannot be written): nothing is held.
            Log.w(ProbeInstrumentation.TAG, "hostile provider: releasing a descriptor: " + e);
        } finally {
            p.recycle();
        }
    }

    // Not a table provider.

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
