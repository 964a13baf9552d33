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
import android.os.ParcelFileDescriptor;
import android.os.Process;
import android.os.RemoteException;
import java.io.File;
import java.io.IOException;
import java.util.Collections;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.WeakHashMap;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Implementation;
import org.robolectric.annotation.Implements;
import org.robolectric.shadow.api.Shadow;
import org.robolectric.shadows.ShadowBinder;
import org.robolectric.shadows.ShadowContentProviderClient;
import org.robolectric.shadows.ShadowParcelFileDescriptor;
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

    /**
     * A pipe that behaves as a pipe. Robolectric's {@code createPipe} is a
     * temporary file opened twice, so a reader that starts before the
     * Provider's writer thread has finished meets the end of what was
     * written so far: a result file read short or empty, which the harness
     * would charge to the Provider (CETP2-4.5-03, seen on the Java sample
     * under load). Here the two ends are the two sides of a named pipe
     * (mkfifo), opened read-only and write-only as a phone's pipe is: a
     * read waits for bytes until the writer closes, a write waits for
     * room, and closing the read end fails a blocked write (EPIPE).
     * Descriptors Robolectric opens itself (files) are left to it.
     */
    @Implements(ParcelFileDescriptor.class)
    public static class RealPipe extends ShadowParcelFileDescriptor {
        /** This end of a pipe, when the descriptor is one (null: Robolectric's own). */
        private java.io.Closeable end;
        private java.io.FileDescriptor endFd;

        @Implementation
        protected static ParcelFileDescriptor[] createPipe() throws IOException {
            return fifo();
        }

        @Implementation
        protected static ParcelFileDescriptor[] createReliablePipe() throws IOException {
            return fifo();
        }

        @Implementation
        @Override
        protected java.io.FileDescriptor getFileDescriptor() {
            return endFd != null ? endFd : super.getFileDescriptor();
        }

        @Implementation
        @Override
        protected long getStatSize() {
            // A pipe has no size (ParcelFileDescriptor's own answer for one).
            return endFd != null ? -1 : super.getStatSize();
        }

        @Implementation
        @Override
        protected int getFd() {
            if (endFd == null) {
                return super.getFd();
            }
            try {
                java.lang.reflect.Field f = java.io.FileDescriptor.class.getDeclaredField("fd");
                f.setAccessible(true);
                return f.getInt(endFd);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }

        @Implementation
        @Override
        protected void close() throws IOException {
            if (end != null) {
                end.close();
            } else {
                super.close();
            }
        }

        private static ParcelFileDescriptor[] fifo() throws IOException {
            File dir = RuntimeEnvironment.getTempDirectory().createIfNotExists("JvmPipes").toFile();
            File f = new File(dir, "pipe-" + UUID.randomUUID());
            java.lang.Process mk = new ProcessBuilder("mkfifo", "-m", "600", f.getAbsolutePath())
                    .redirectErrorStream(true).start();
            try {
                if (!mk.waitFor(10, TimeUnit.SECONDS) || mk.exitValue() != 0) {
                    mk.destroyForcibly();
                    throw new IOException("mkfifo " + f + " failed");
                }
                // Each side's open waits for the other's: the read side on
                // its own thread, bounded so that nothing here can hang.
                java.util.concurrent.FutureTask<java.io.FileInputStream> reader =
                        new java.util.concurrent.FutureTask<>(() -> new java.io.FileInputStream(f));
                Thread t = new Thread(reader, "jvm-device-pipe-open");
                t.setDaemon(true);
                t.start();
                java.io.FileOutputStream out = new java.io.FileOutputStream(f);
                java.io.FileInputStream in;
                try {
                    in = reader.get(10, TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                    out.close();
                    throw new IOException("could not open both ends of " + f, e);
                }
                return new ParcelFileDescriptor[] {wrap(in, in.getFD()), wrap(out, out.getFD())};
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while making a pipe", e);
            } finally {
                if (!f.delete()) {
                    f.deleteOnExit();
                }
            }
        }

        private static ParcelFileDescriptor wrap(java.io.Closeable end, java.io.FileDescriptor fd) throws IOException {
            try {
                // The framework's own constructor over a descriptor (hidden API).
                java.lang.reflect.Constructor<ParcelFileDescriptor> c =
                        ParcelFileDescriptor.class.getDeclaredConstructor(java.io.FileDescriptor.class);
                c.setAccessible(true);
                ParcelFileDescriptor pfd = c.newInstance(fd);
                RealPipe shadow = Shadow.extract(pfd);
                shadow.end = end;
                shadow.endFd = fd;
                return pfd;
            } catch (ReflectiveOperationException e) {
                end.close();
                throw new IOException("cannot make a ParcelFileDescriptor of a pipe", e);
            }
        }
    }
}
