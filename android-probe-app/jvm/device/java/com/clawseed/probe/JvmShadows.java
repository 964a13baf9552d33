package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.ContentProvider;
import android.content.ContentProviderClient;
import android.content.Context;
import android.content.Intent;
import android.database.DatabaseUtils;
import android.os.Binder;
import android.net.Uri;
import android.os.Bundle;
import android.os.DeadObjectException;
import android.os.Parcel;
import android.os.Process;
import android.os.RemoteException;
import java.util.Collections;
import java.util.Set;
import java.util.WeakHashMap;
import org.robolectric.annotation.Implementation;
import org.robolectric.annotation.Implements;
import org.robolectric.shadow.api.Shadow;
import org.robolectric.shadows.ShadowBinder;
import org.robolectric.shadows.ShadowContentProviderClient;
import org.robolectric.shadows.ShadowPendingIntent;

/**
 * Where the JVM device makes Robolectric's single process behave as the
 * several apps of a phone. Robolectric keeps one calling UID for the whole
 * process and records every PendingIntent as made by the test's own
 * application; a phone has a calling UID per Binder thread and records the
 * app that made the PendingIntent. Robolectric hands a Provider's exception
 * to the caller as the very object thrown; a phone carries it across Binder,
 * which keeps only some classes, and an Error kills the Provider's process.
 * Nothing else is changed.
 */
final class JvmShadows {
    private JvmShadows() {}

    /**
     * Provider objects whose process has died: an Error escaped their
     * {@code call()} (on a phone, an uncaught Error on a Binder thread kills
     * the process). Their clients fail with DeadObjectException until the
     * JVM device starts a new instance, as Android starts the process again.
     */
    static final Set<ContentProvider> DEAD = Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));

    /** The UID a Binder call carries, per thread, as on a phone (the thread that calls is the caller). */
    static final ThreadLocal<Integer> CALLING_UID = new ThreadLocal<>();

    /** Binder.getCallingUid: the caller's UID on a thread inside a call, the process's own elsewhere. */
    @Implements(Binder.class)
    public static class CallingUid extends ShadowBinder {
        @Implementation
        protected static int getCallingUid() {
            Integer uid = CALLING_UID.get();
            return uid == null ? Process.myUid() : uid;
        }
    }

    /** A PendingIntent's creator is the app whose Context made it, as Android records it. */
    @Implements(PendingIntent.class)
    public static class Creator extends ShadowPendingIntent {
        @Implementation
        protected static PendingIntent getActivity(Context context, int requestCode, Intent intent, int flags) {
            return getActivity(context, requestCode, intent, flags, null);
        }

        @Implementation
        protected static PendingIntent getActivity(Context context, int requestCode, Intent intent, int flags,
                Bundle options) {
            PendingIntent pi = ShadowPendingIntent.getActivity(context, requestCode, intent, flags, options);
            ShadowPendingIntent shadow = Shadow.extract(pi);
            shadow.setCreatorPackage(context.getPackageName());
            shadow.setCreatorUid(context.getApplicationInfo().uid);
            return pi;
        }
    }

    /**
     * What a Provider's {@code call()} throws reaches the caller as Binder
     * carries it between two processes: written by the framework's own
     * {@code DatabaseUtils.writeExceptionToParcel} (as the Provider's
     * transport does) and read back by {@code readExceptionFromParcel} (as
     * the caller's proxy does), so a subclass arrives as the class it
     * extends and a class Binder cannot carry arrives as no exception at
     * all: an empty reply, which the harness then judges as the Provider's
     * answer (the simulated device does the same: cetp-sim's binder.rs).
     * The exception is logged with its stack trace, as a phone's logcat
     * shows it in the Provider's process.
     */
    @Implements(ContentProviderClient.class)
    public static class CrossBinder extends ShadowContentProviderClient {
        @Implementation
        @Override
        protected Bundle call(String method, String arg, Bundle extras) throws RemoteException {
            ContentProvider p = getLocalContentProvider();
            if (p != null && DEAD.contains(p)) {
                throw new DeadObjectException();
            }
            try {
                return super.call(method, arg, extras);
            } catch (RuntimeException thrown) {
                return cross(method, thrown);
            } catch (Error fatal) {
                System.err.println("jvm-device: the Provider's call(\"" + method + "\") threw " + fatal
                        + ": on a phone its process dies (FATAL EXCEPTION on a Binder thread):");
                fatal.printStackTrace(System.err);
                if (p != null) {
                    DEAD.add(p);
                }
                throw new DeadObjectException("the Provider's process died: " + fatal);
            }
        }

        /** A dead Provider answers nothing (the probe asks getType to tell death from an oversized reply). */
        @Implementation
        @Override
        protected String getType(Uri uri) throws RemoteException {
            ContentProvider p = getLocalContentProvider();
            if (p != null && DEAD.contains(p)) {
                throw new DeadObjectException();
            }
            return super.getType(uri);
        }

        private static Bundle cross(String method, RuntimeException thrown) {
            System.err.println("jvm-device: the Provider's call(\"" + method
                    + "\") threw (in its process, as logcat shows it):");
            thrown.printStackTrace(System.err);
            Parcel reply = Parcel.obtain();
            try {
                try {
                    DatabaseUtils.writeExceptionToParcel(reply, thrown);
                } catch (RuntimeException notCarried) {
                    System.err.println("jvm-device: Binder cannot carry " + thrown.getClass().getName()
                            + " (\"Uncaught remote exception\"): the caller receives an empty reply");
                    return new Bundle();
                }
                reply.setDataPosition(0);
                // Throws the exception as the caller's side rebuilds it.
                DatabaseUtils.readExceptionFromParcel(reply);
                return new Bundle();
            } finally {
                reply.recycle();
            }
        }
    }
}
