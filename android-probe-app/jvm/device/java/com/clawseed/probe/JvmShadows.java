package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.ContentProvider;
import android.content.ContentProviderClient;
import android.content.ContentResolver;
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
import android.os.TransactionTooLargeException;
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
import org.robolectric.shadows.ShadowContentResolver;
import org.robolectric.shadows.ShadowParcelFileDescriptor;
import org.robolectric.shadows.ShadowPendingIntent;
import org.robolectric.shadows.ShadowProcess;

/**
 * Where the JVM device makes Robolectric's single process behave as the
 * several apps of a phone. Robolectric keeps one calling UID for the whole
 * process and records every PendingIntent as made by the test's own
 * application; a phone has a calling UID per Binder thread and records the
 * app that made the PendingIntent. Robolectric hands a Provider's exception
 * to the caller as the very object thrown; a phone carries it across Binder,
 * which keeps only some classes, and an Error kills the Provider's process.
 * Robolectric hands any caller the provider and passes the Bundles and
 * descriptors themselves; a phone's system server refuses a caller the
 * provider does not admit, and Binder holds a transaction to its buffer and
 * gives the caller its own copy of each descriptor ({@link BinderRules}).
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
     * A call crosses as over Binder: a request or reply larger than
     * {@link BinderRules#LIMIT_BYTES} fails as it fails on a phone, and the
     * receiving side gets its own duplicate of each descriptor
     * ({@link BinderRules#withDuplicates}). What a Provider's {@code call()}
     * throws reaches the caller as Binder carries it between two processes: written by the framework's own
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
            long request = BinderRules.requestBytes(RuntimeEnvironment.getApplication().getPackageName(), authority(),
                    method, arg, extras);
            if (request > BinderRules.LIMIT_BYTES) {
                // The request never reaches the Provider.
                System.err.println("jvm-device: !!! FAILED BINDER TRANSACTION !!! (parcel size = " + request + ")");
                throw new TransactionTooLargeException("data parcel size " + request + " bytes");
            }
            Bundle reply;
            try {
                reply = super.call(method, arg, BinderRules.withDuplicates(extras));
            } catch (RuntimeException thrown) {
                if (p instanceof HostileProvider && diedMidCall()) {
                    // The hosted Provider's `fail: "provider_died"`: on a phone
                    // its process (`:hosted`) dies and the Consumer's unstable
                    // client sees its Binder die; here it only asked to be
                    // killed (ShadowProcess records it) and threw.
                    throw new DeadObjectException("the hosted Provider's process died mid-call");
                }
                return cross(method, thrown);
            } catch (Error fatal) {
                System.err.println("jvm-device: the Provider's call(\"" + method + "\") threw " + fatal
                        + ": on a phone its process dies (FATAL EXCEPTION on a Binder thread):");
                fatal.printStackTrace(System.err);
                if (p != null) {
                    DEAD.add(p);
                }
                throw new DeadObjectException("the Provider's process died: " + fatal);
            } catch (IOException e) {
                throw new IllegalStateException("jvm-device: cannot duplicate a descriptor of the request: " + e, e);
            }
            long size = BinderRules.replyBytes(reply);
            if (size > BinderRules.LIMIT_BYTES) {
                // The Provider's reply does not fit the caller's buffer: the
                // call ran, its answer is lost; the caller's exception is
                // chosen by the size of its own request (libbinder).
                System.err.println("jvm-device: the Provider's reply to call(\"" + method + "\") is " + size
                        + " bytes, more than Binder's " + BinderRules.LIMIT_BYTES
                        + ": !!! FAILED BINDER TRANSACTION !!! (as on a phone)");
                if (request > BinderRules.TOO_LARGE_THRESHOLD_BYTES) {
                    throw new TransactionTooLargeException("data parcel size " + request + " bytes");
                }
                throw new DeadObjectException("Transaction failed on small parcel; remote process probably died,"
                        + " but this could also be caused by running out of binder buffer space");
            }
            try {
                // What the caller receives: its own copy of each descriptor.
                return BinderRules.withDuplicates(reply);
            } catch (IOException e) {
                // On a phone, a descriptor that cannot be written fails the reply (BR_FAILED_REPLY).
                System.err.println("jvm-device: a descriptor of the Provider's reply cannot be duplicated: " + e);
                throw new DeadObjectException("Transaction failed on small parcel; remote process probably died,"
                        + " but this could also be caused by running out of binder buffer space");
            }
        }

        /** Whether the hosted Provider killed its own process (HostileProvider.die); forgets it. */
        private static boolean diedMidCall() {
            synchronized (ShadowProcess.class) {
                if (!ShadowProcess.wasKilled(Process.myPid())) {
                    return false;
                }
                ShadowProcess.clearKilledProcesses();
                return true;
            }
        }

        /** The vendor's authority (the only provider the JVM device's probes call across apps). */
        private static String authority() {
            BinderRules.Access a = BinderRules.access;
            return a == null ? null : a.provider.authority;
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
     * Acquiring a provider of another app, as the system server allows it
     * ({@link BinderRules.Access}): a caller whose UID may not have it gets
     * the SecurityException ActivityManagerService throws, from the
     * {@code acquire…ContentProviderClient} (and {@code call}) it made,
     * which the probe reports as on a phone (AndroidBackend.refusal).
     */
    @Implements(ContentResolver.class)
    public static class ProviderAccess extends ShadowContentResolver {
        private static void check(String authority) {
            String refusal = BinderRules.refusal(authority);
            if (refusal != null) {
                System.err.println("jvm-device: " + refusal);
                throw new SecurityException(refusal);
            }
        }

        @Implementation
        @Override
        protected ContentProviderClient acquireContentProviderClient(String name) {
            check(name);
            return super.acquireContentProviderClient(name);
        }

        @Implementation
        @Override
        protected ContentProviderClient acquireContentProviderClient(Uri uri) {
            check(uri.getAuthority());
            return super.acquireContentProviderClient(uri);
        }

        @Implementation
        @Override
        protected ContentProviderClient acquireUnstableContentProviderClient(String name) {
            check(name);
            return super.acquireUnstableContentProviderClient(name);
        }

        @Implementation
        @Override
        protected ContentProviderClient acquireUnstableContentProviderClient(Uri uri) {
            check(uri.getAuthority());
            return super.acquireUnstableContentProviderClient(uri);
        }

        @Implementation
        @Override
        protected Bundle call(Uri uri, String method, String arg, Bundle extras) {
            check(uri.getAuthority());
            Bundle reply = super.call(uri, method, arg, extras);
            if (getProvider(uri) instanceof HostileProvider) {
                // A Consumer calling the hosted Provider without a client
                // gets its own copy of each descriptor too, so that a result
                // file's close listener hears the Consumer's close
                // (RealPipe.open), as through CrossBinder.
                try {
                    return BinderRules.withDuplicates(reply);
                } catch (IOException e) {
                    throw new IllegalStateException("jvm-device: cannot duplicate a descriptor of the reply: " + e, e);
                }
            }
            return reply;
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
        /** False for a duplicate of a file's descriptor (BinderRules.dup): it has a size. */
        private boolean pipe;
        /**
         * The status channel of a descriptor opened with a close listener,
         * shared by every copy Binder makes of it ({@link BinderRules#dup});
         * null for any other descriptor.
         */
        private CloseChannel channel;
        /** This is the opener's own copy, whose close the listener does not hear. */
        private boolean opener;
        @org.robolectric.annotation.RealObject
        private ParcelFileDescriptor self;
        /** Its raw descriptor was taken (detachFd): closing it closes nothing. */
        private boolean detached;
        /** The owners of detached descriptors, never collected (see detachFd). */
        private static final java.util.List<Object> DETACHED = new java.util.ArrayList<>();

        /**
         * {@code ParcelFileDescriptor.open(File, int, Handler, OnCloseListener)}
         * as a phone plays it for the probe's result files (§4.5): the
         * listener hears the first status that a copy handed across Binder
         * writes (closed, detached), never the opener's own copy, which the
         * probe lets go of silently. Robolectric's own version heard only
         * the opener's object, so the probe's release of its copy sounded
         * like the Consumer's close and a leaking Consumer passed.
         */
        @Implementation
        protected static ParcelFileDescriptor open(File file, int mode, android.os.Handler handler,
                ParcelFileDescriptor.OnCloseListener listener) throws IOException {
            if (handler == null || listener == null) {
                throw new IllegalArgumentException("Handler and listener must not be null");
            }
            ParcelFileDescriptor pfd = ParcelFileDescriptor.open(file, mode);
            RealPipe shadow = Shadow.extract(pfd);
            shadow.channel = new CloseChannel(handler, listener);
            shadow.opener = true;
            return pfd;
        }

        /** {@code copy}, Binder's copy of {@code from} for the other side, shares its status channel. */
        static void shareChannel(ParcelFileDescriptor from, ParcelFileDescriptor copy) {
            RealPipe source = Shadow.extract(from);
            if (source.channel != null) {
                RealPipe target = Shadow.extract(copy);
                target.channel = source.channel;
                target.opener = false;
            }
        }

        /** The copy's status, for the opener's listener: nothing for the opener's own copy. */
        private void tell(IOException status) {
            if (channel != null && !opener) {
                channel.tell(status);
            }
        }

        @Implementation
        protected static ParcelFileDescriptor[] createPipe() throws IOException {
            return fifo();
        }

        @Implementation
        protected static ParcelFileDescriptor[] createReliablePipe() throws IOException {
            return fifo();
        }

        /**
         * Taking the raw descriptor: a copy with a status channel tells
         * its listener "detached", as the framework's detachFd writes
         * DETACHED. The framework's own detachFd cannot run on a JVM (it
         * needs Android's FileDescriptor), so the descriptor is handed over
         * here: the number, which this object no longer closes, and the
         * Java object that owns it is kept from the garbage collector, whose
         * cleanup would otherwise close a descriptor the caller now owns.
         */
        @Implementation
        protected int detachFd() {
            if (detached) {
                throw new IllegalStateException("Already closed");
            }
            tell(new ParcelFileDescriptor.FileDescriptorDetachedException());
            int fd = getFd();
            detached = true;
            synchronized (DETACHED) {
                DETACHED.add(end != null ? end : self);
            }
            return fd;
        }

        @Implementation
        @Override
        protected java.io.FileDescriptor getFileDescriptor() {
            return endFd != null ? endFd : super.getFileDescriptor();
        }

        @Implementation
        @Override
        protected long getStatSize() {
            if (endFd == null) {
                return super.getStatSize();
            }
            if (pipe) {
                // A pipe has no size (ParcelFileDescriptor's own answer for one).
                return -1;
            }
            try {
                return java.nio.file.Files.size(new File("/proc/self/fd/" + getFd()).toPath());
            } catch (IOException e) {
                return -1;
            }
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
            if (detached) {
                return;
            }
            tell(null);
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
                return new ParcelFileDescriptor[] {wrap(in, in.getFD(), true), wrap(out, out.getFD(), true)};
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while making a pipe", e);
            } finally {
                if (!f.delete()) {
                    f.deleteOnExit();
                }
            }
        }

        /** Whether {@code pfd} is an end of a pipe made here. */
        static boolean isPipe(ParcelFileDescriptor pfd) {
            RealPipe shadow = Shadow.extract(pfd);
            return shadow.endFd != null && shadow.pipe;
        }

        /** A ParcelFileDescriptor over {@code fd}, which closing it closes (through {@code end}). */
        static ParcelFileDescriptor wrap(java.io.Closeable end, java.io.FileDescriptor fd, boolean pipe)
                throws IOException {
            try {
                // The framework's own constructor over a descriptor (hidden API).
                java.lang.reflect.Constructor<ParcelFileDescriptor> c =
                        ParcelFileDescriptor.class.getDeclaredConstructor(java.io.FileDescriptor.class);
                c.setAccessible(true);
                ParcelFileDescriptor pfd = c.newInstance(fd);
                RealPipe shadow = Shadow.extract(pfd);
                shadow.end = end;
                shadow.endFd = fd;
                shadow.pipe = pipe;
                return pfd;
            } catch (ReflectiveOperationException e) {
                end.close();
                throw new IOException("cannot make a ParcelFileDescriptor of a pipe", e);
            }
        }
    }

    /**
     * A result file's status channel: its listener is told, on its handler,
     * the first status a copy writes (null: closed), and only that one, as
     * a phone's {@code ParcelFileDescriptor} comm channel reports it.
     */
    static final class CloseChannel {
        private final android.os.Handler handler;
        private final ParcelFileDescriptor.OnCloseListener listener;
        private boolean told;

        CloseChannel(android.os.Handler handler, ParcelFileDescriptor.OnCloseListener listener) {
            this.handler = handler;
            this.listener = listener;
        }

        synchronized void tell(IOException status) {
            if (told) {
                return;
            }
            told = true;
            handler.post(() -> listener.onClose(status));
        }
    }
}
