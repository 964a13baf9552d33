package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.Context;
import android.content.Intent;
import android.os.Binder;
import android.os.Bundle;
import android.os.Process;
import org.robolectric.annotation.Implementation;
import org.robolectric.annotation.Implements;
import org.robolectric.shadow.api.Shadow;
import org.robolectric.shadows.ShadowBinder;
import org.robolectric.shadows.ShadowPendingIntent;

/**
 * Where the JVM device makes Robolectric's single process behave as the
 * several apps of a phone. Robolectric keeps one calling UID for the whole
 * process and records every PendingIntent as made by the test's own
 * application; a phone has a calling UID per Binder thread and records the
 * app that made the PendingIntent. Nothing else is changed.
 */
final class JvmShadows {
    private JvmShadows() {}

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
}
