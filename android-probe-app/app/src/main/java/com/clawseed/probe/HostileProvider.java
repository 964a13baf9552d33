package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.ContentProvider;
import android.content.ContentValues;
import android.database.Cursor;
import android.net.Uri;
import android.os.Binder;
import android.os.Bundle;
import android.os.ParcelFileDescriptor;
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
 * The hostile Provider a host scripts over the probe wire, for testing a
 * Consumer app: each {@code call()} goes to the connection hosting it as an
 * {@code incoming_call} event and returns (or throws) what its {@code reply}
 * says ({@link HostedProvider}). Its authority is fixed by the manifest.
 */
public final class HostileProvider extends ContentProvider {
    /** The key of a file result's descriptor (§4.5). */
    static final String RESULT_FD = "result_fd";

    @Override
    public boolean onCreate() {
        return true;
    }

    @Override
    public Bundle call(String method, String arg, Bundle extras) {
        // On entry, before anything else could switch threads (§7.1).
        int uid = Binder.getCallingUid();
        HostedProvider hosted;
        try {
            hosted = Hosting.get(getContext());
        } catch (DeviceError e) {
            throw new IllegalStateException(e.getMessage());
        }
        HostedProvider.Answer a = hosted.call(uid, packagesOf(uid), method, arg, readExtras(extras));
        if (a.throwsException()) {
            if (a.failure != null) {
                Log.w(ProbeInstrumentation.TAG, "hostile provider: " + a.failure + ": " + a.message);
            }
            throw a.exception();
        }
        if (a.result == null) {
            return null;
        }
        Bundle out;
        try {
            // No handles: a reply holding pending_intent or fd values was refused already.
            out = new BundleMapper(new HandleTable<>("pi-"), new HandleTable<>("fd-")).toAndroid(a.result);
        } catch (DeviceError e) {
            throw new IllegalStateException("the scripted result cannot be built: " + e.getMessage());
        }
        if (a.fd != null) {
            try {
                out.putParcelable(RESULT_FD, hosted.openFd(a.fd, Hosting.PIPES));
            } catch (IOException e) {
                throw new IllegalStateException("the scripted result descriptor cannot be made: " + e.getMessage());
            }
        }
        return out;
    }

    /** Every package of the caller's UID (§7.1: not only the first). */
    private List<String> packagesOf(int uid) {
        String[] pkgs = getContext().getPackageManager().getPackagesForUid(uid);
        return pkgs == null ? Collections.emptyList() : Arrays.asList(pkgs);
    }

    /**
     * The Consumer's extras for the event. PendingIntents and descriptors in
     * them become handles of a table no connection holds, so the host sees
     * their facts but cannot use them; the descriptors are closed at once.
     */
    private static WireBundle readExtras(Bundle extras) {
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
