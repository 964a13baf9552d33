package com.clawseed.probe.core;

import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.Json;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireBundle;
import com.clawseed.probe.wire.WireError;
import com.clawseed.probe.wire.WireValue;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;

/**
 * The hostile Provider a host scripts over the probe wire ({@code host_provider},
 * the {@code incoming_call} event, {@code reply}; probe-wire.md, "Optional:
 * hosting a hostile Provider"), for testing Consumers. One per process: the
 * Android ContentProvider that a Consumer calls hands each {@code call()} to
 * {@link #call}, which forwards it to the connection that hosts the Provider
 * and blocks that Binder thread until the host's reply, within bounds.
 *
 * <p>The behaviour follows the simulated device ({@code harness/cetp-sim},
 * {@code hosted.rs}) where a phone can do the same: call ids {@code c-N},
 * one waiting slot per call, {@code unknown_handle} for a reply nobody
 * waits for, a Provider that goes away with the connection that hosts it.
 * What a phone cannot do differently:
 * <ul>
 * <li>The authority and the discovery meta-data are declared in the
 * manifest, so {@code host_provider} must name the declared authority, and
 * its {@code meta} must be one of the declared services' meta-data sets
 * ({@link Variant}); that service is then enabled, and disabled again when
 * the hosting connection closes (a Consumer never discovers a Provider that
 * no host answers for). With {@code discoverable: false} the Provider
 * answers but no service is enabled. The other probe app's authority is
 * declared too, by a service of this package ({@link Hostable#foreign}):
 * hosting it enables that service only, for a Consumer to find a
 * ContentProvider in another package than the service (CSES-002) or a
 * second Provider (CSES-014); the other probe's connection answers the
 * calls.</li>
 * <li>The Android ContentProvider runs in a process of its own
 * ({@code :hosted}) and reaches this object, which lives in the probe's
 * process beside the connections, through a bridge. So {@code fail:
 * "provider_died"} is played for real: the answer {@link Answer#dies()} and
 * the hosted process kills itself mid-call, while the probe lives on. Errors
 * the simulated device reports as device errors (no host, no reply in time,
 * host gone) reach the Consumer as an {@code IllegalStateException} from
 * {@code call()}.</li>
 * <li>A reply result can hold only values Android can build from the wire:
 * a {@code pending_intent} becomes a PendingIntent the probe creates for its
 * own confirmation activity (immutable, an activity: a script asking for
 * anything else is refused), and a launch of it comes back as an
 * {@code intent_launched} event once the user decided there
 * ({@link #issue}, {@link #launched}); no {@code fd} or {@code other} values
 * (the descriptor of a reply is {@code fd_data} or {@code fd_endless}).</li>
 * </ul>
 */
public final class HostedProvider {
    /**
     * The exception classes a reply may make the Provider throw: those that
     * cross Binder as themselves ({@code Parcel.writeException} has a code for
     * each). Not {@code RuntimeException}: it has none, so it never reaches
     * the Consumer (app/'s BinderExceptionsTest shows it with the framework's code).
     */
    public static final List<String> THROWABLE = Collections.unmodifiableList(Arrays.asList(
            "java.lang.SecurityException",
            "java.lang.IllegalArgumentException",
            "java.lang.IllegalStateException",
            "java.lang.NullPointerException",
            "java.lang.UnsupportedOperationException"));

    /**
     * The {@code fail} kinds of a reply this device plays: a call held past
     * the caller's timeout, and the hosted process killed mid-call.
     */
    public static final List<String> FAIL_KINDS = Collections.unmodifiableList(Arrays.asList(
            "timeout",
            "provider_died"));

    /** The {@code reply} extensions of the simulated device this one plays in full (hello's {@code reply_extensions}). */
    public static final List<String> REPLY_EXTENSIONS = Collections.unmodifiableList(Arrays.asList(
            "fd_closed", "fd_endless", "pending_intent"));

    /**
     * Whether the hosted Provider's answers are held to Binder's transaction
     * limit (hello's {@code binder_transaction_limit}): on a phone they cross
     * two Binder transactions (the probe's process to {@code :hosted}, and on
     * to the Consumer), and an answer over the buffer (about 1 MB) reaches
     * the Consumer as a failed call. A scenario whose premise is that limit
     * is judged only where a device says so.
     */
    public static final boolean BINDER_TRANSACTION_LIMIT = true;

    /** The decisions a user can make in the confirmation activity, as {@code intent_launched} names them. */
    public static final List<String> DECISIONS = Collections.unmodifiableList(Arrays.asList(
            "approve", "deny", "dismiss"));

    /** Confirmations remembered at once; the oldest is forgotten first. */
    static final int MAX_CONFIRMATIONS = 256;

    /** Longest authority, in UTF-8 bytes, as the simulated device. */
    static final int MAX_AUTHORITY_BYTES = 256;

    /** Why {@link #call} failed without a scripted answer (for logs and tests). */
    public enum Failure {
        /** No connection hosts the Provider now. */
        NOT_HOSTED,
        /** Too many Binder threads are waiting in this Provider already. */
        BUSY,
        /** The call is too large for an {@code incoming_call} frame. */
        TOO_LARGE,
        /** The host did not take the event, or did not reply, in time. */
        NO_REPLY,
        /** The hosting connection closed while the call waited. */
        HOST_GONE,
        /** The reply asked for a call that never answers ({@code fail: "timeout"}); the hold is over. */
        NEVER_ANSWERED,
        /** The reply asked for the Provider to die mid-call ({@code fail: "provider_died"}). */
        DIES
    }

    /** A discovery service the device declares for the hosted authority, with its meta-data. */
    public static final class Variant {
        /** The component, as {@code discover} reports it ({@code package/.Class}). */
        public final String service;
        public final Map<String, String> meta;

        public Variant(String service, Map<String, String> meta) {
            this.service = service;
            this.meta = Collections.unmodifiableMap(new LinkedHashMap<>(meta));
        }
    }

    /** What this device can host, fixed by its manifest. */
    public static final class Hostable {
        public final String authority;
        /** The package of the Provider and of every variant's service (foreign ones too). */
        public final String pkg;
        public final List<Variant> variants;
        /**
         * Services of this package whose meta-data names another package's
         * authority (the other probe app's): hello's {@code foreign_metas}.
         * Empty when there is none.
         */
        public final List<Variant> foreign;
        /** The package whose ContentProvider serves the foreign services' authority; null without them. */
        public final String foreignPackage;

        public Hostable(String authority, String pkg, List<Variant> variants) {
            this(authority, pkg, variants, Collections.<Variant>emptyList(), null);
        }

        public Hostable(String authority, String pkg, List<Variant> variants, List<Variant> foreign,
                String foreignPackage) {
            if (!foreign.isEmpty() && foreignPackage == null) {
                throw new IllegalArgumentException("foreign services need the package of their ContentProvider");
            }
            this.authority = authority;
            this.pkg = pkg;
            this.variants = Collections.unmodifiableList(new ArrayList<>(variants));
            this.foreign = Collections.unmodifiableList(new ArrayList<>(foreign));
            this.foreignPackage = foreignPackage;
        }

        /** The authority a foreign service names, from its meta-data. */
        static String authorityOf(Variant v) {
            return v.meta.get(AUTHORITY_KEY);
        }
    }

    /** The meta-data key that names a discovery service's authority (CETP §2.1). */
    static final String AUTHORITY_KEY = "com.clawseed.tools.authority";

    /**
     * Sets which discovery services are visible: at most one of the own
     * variants, and at most one foreign service (null: none). Every call
     * states the whole state, so one that failed half-way is mended by the
     * next.
     */
    public interface Exposer {
        void expose(Variant own, Variant foreign) throws DeviceError;
    }

    /**
     * One pipe for a result descriptor. Closing must be idempotent and safe
     * from any thread: a watchdog closes the write end of a writer that is
     * blocked, and closing must wake it.
     */
    public interface Pipe<R> {
        /** The read end, handed to the caller in the result. */
        R reader();

        OutputStream writer();

        /**
         * Closes this process's copy of the read end once the answer has been
         * sent: while it stays open, a writer never sees the caller close its
         * copy.
         */
        void closeReader();

        /** Closes the write end; a non-null {@code error} is reported to a reader that checks (reliable pipes). */
        void closeWriter(String error);
    }

    public interface Pipes<R> {
        Pipe<R> open() throws IOException;
    }

    /** Told, at most once, how the Consumer let go of a {@link ResultFile}. */
    public interface CloseListener {
        void closed(FdClose how);
    }

    /**
     * The result descriptor of an {@code fd_data} reply: the bytes as a
     * read-only file whose close by the Consumer this device observes (on
     * Android: {@code ParcelFileDescriptor.open(File, MODE_READ_ONLY,
     * Handler, OnCloseListener)}). Every method may be called from any
     * thread, more than once.
     */
    public interface ResultFile<R> {
        /** The descriptor handed to the caller in the result. */
        R descriptor();

        /**
         * Lets go of this process's own copy once the answer has been sent,
         * WITHOUT a close status: the listener must hear the Consumer's
         * close, not the probe's.
         */
        void releaseOwn();

        /**
         * Frees what is left (its own copy, if still held, and the file):
         * the Consumer let go of it, or its lifetime bound passed.
         */
        void dispose();
    }

    public interface ResultFiles<R> {
        /** A descriptor holding {@code data}; {@code listener} hears how the Consumer lets go of it. */
        ResultFile<R> open(byte[] data, CloseListener listener) throws IOException;
    }

    /** Bounds; every wait and every buffer of a hosted Provider has one. Not to be changed once in use. */
    public static final class Limits {
        /**
         * Binder threads inside {@link #call} at once. Small on a phone: the
         * probe's own Binder pool (about 15 threads) also serves its other
         * incoming transactions.
         */
        int maxBusy = 8;
        /** How long a call waits for the host's reply (the simulated device's REPLY_WAIT). */
        long replyWaitMs = 120_000;
        /** Longest {@code delay_ms} played; longer ones are cut, as on the simulated device. */
        long maxDelayMs = 120_000;
        /** How long {@code fail: "timeout"} holds the caller before giving up. */
        long holdMs = 120_000;
        /** Largest {@code fd_data} accepted. */
        int maxFdDataBytes = 8 << 20;
        /** Descriptors being written at once. */
        int maxFdWriters = 4;
        /**
         * A descriptor not written to its end by then is closed with an
         * error; a result file not closed by then is let go of, unreported.
         */
        long fdDeadlineMs = 120_000;
        /** Result files ({@code fd_data}) held at once, each until its Consumer lets go or the deadline. */
        int maxFdFiles = 16;
        /** An endless descriptor stops, with an error, after this many bytes. */
        long endlessCapBytes = 1L << 32;
        /** Events waiting for the host's connection. */
        int eventQueue = 32;
        /** How long after the answer this process's copy of a result's read end is closed. */
        long readerCloseDelayMs = 5_000;

        public static Limits defaults() {
            return new Limits();
        }

        public Limits maxBusy(int n) {
            maxBusy = n;
            return this;
        }

        public Limits replyWaitMs(long ms) {
            replyWaitMs = ms;
            return this;
        }

        public Limits maxDelayMs(long ms) {
            maxDelayMs = ms;
            return this;
        }

        public Limits holdMs(long ms) {
            holdMs = ms;
            return this;
        }

        public Limits maxFdDataBytes(int n) {
            maxFdDataBytes = n;
            return this;
        }

        public Limits maxFdWriters(int n) {
            maxFdWriters = n;
            return this;
        }

        public Limits fdDeadlineMs(long ms) {
            fdDeadlineMs = ms;
            return this;
        }

        public Limits maxFdFiles(int n) {
            maxFdFiles = n;
            return this;
        }

        public Limits endlessCapBytes(long n) {
            endlessCapBytes = n;
            return this;
        }

        public Limits eventQueue(int n) {
            eventQueue = n;
            return this;
        }

        public Limits readerCloseDelayMs(long ms) {
            readerCloseDelayMs = ms;
            return this;
        }
    }

    /** What a result descriptor holds: these bytes, or {@code fill} without end. */
    public static final class FdPayload {
        private final byte[] data;
        /** 0 to 255 for an endless descriptor, else -1. */
        public final int fill;

        private FdPayload(byte[] data, int fill) {
            this.data = data;
            this.fill = fill;
        }

        public boolean endless() {
            return fill >= 0;
        }

        public int length() {
            return data == null ? -1 : data.length;
        }
    }

    /** What {@code call()} does: return {@link #result} (with {@link #fd} as its result_fd), or throw. */
    public static final class Answer {
        public final WireBundle result;
        public final FdPayload fd;
        /** Non-null when {@code call()} must throw instead. */
        public final String throwClass;
        public final String message;
        /** Why the call failed, when no scripted answer came; null for a scripted answer. */
        public final Failure failure;
        /**
         * The connection whose reply this is (its confirmations and the
         * close of its result file are reported there); null for failures.
         */
        final Connection host;
        /** The call's id ({@code c-N}) when a reply made this answer; null for failures. */
        public final String call;

        private Answer(WireBundle result, FdPayload fd, String throwClass, String message, Failure failure) {
            this(result, fd, throwClass, message, failure, null, null);
        }

        private Answer(WireBundle result, FdPayload fd, String throwClass, String message, Failure failure,
                Connection host, String call) {
            this.result = result;
            this.fd = fd;
            this.throwClass = throwClass;
            this.message = message;
            this.failure = failure;
            this.host = host;
            this.call = call;
        }

        /** The answer of a {@code fail: "provider_died"} reply: the hosted process must die now. */
        static Answer dying(String message) {
            return new Answer(null, null, null, message, Failure.DIES);
        }

        /**
         * True when the hosted Provider's process must kill itself instead of
         * answering, so that the Consumer sees its Binder die mid-call.
         */
        public boolean dies() {
            return failure == Failure.DIES;
        }

        /** The answer of a {@code throw} reply; {@code throwClass} must be one of {@link #THROWABLE}. */
        public static Answer throwing(String throwClass, String message) {
            if (!THROWABLE.contains(throwClass)) {
                throw new IllegalArgumentException("not a class this device throws: " + throwClass);
            }
            return new Answer(null, null, throwClass, message, null);
        }

        static Answer failed(Failure why, String message) {
            return new Answer(null, null, "java.lang.IllegalStateException", message, why);
        }

        public boolean throwsException() {
            return throwClass != null;
        }

        /**
         * The exception to throw: one of {@link #THROWABLE}, which are all in
         * {@code java.lang}, so it is built here and tested on the JVM.
         */
        public RuntimeException exception() {
            String m = message;
            switch (throwClass) {
                case "java.lang.SecurityException":
                    return new SecurityException(m);
                case "java.lang.IllegalArgumentException":
                    return new IllegalArgumentException(m);
                case "java.lang.NullPointerException":
                    return new NullPointerException(m);
                case "java.lang.UnsupportedOperationException":
                    return new UnsupportedOperationException(m);
                case "java.lang.IllegalStateException":
                default:
                    return new IllegalStateException(m);
            }
        }
    }

    /** One call waiting for its reply. */
    private static final class Waiter {
        final Connection owner;
        final CountDownLatch answered = new CountDownLatch(1);
        /** Null after the latch opened: the hosting connection closed. */
        volatile Ops.ReplyParams reply;

        Waiter(Connection owner) {
            this.owner = owner;
        }
    }

    private final Hostable hostable;
    private final Exposer exposer;
    private final Limits limits;
    private final LongSupplier clock;
    private final Semaphore writers;
    private final Semaphore files;
    private final ScheduledThreadPoolExecutor timers;

    // Guarded by this.
    /** The connection the own ContentProvider's calls go to (discoverable or not). */
    private Connection owner;
    private Variant exposed;
    /** The connection that holds the foreign service enabled, and that service. */
    private Connection foreignOwner;
    private Variant foreignExposed;
    private int busy;
    private long calls;
    private final Map<String, Waiter> pending = new LinkedHashMap<>();
    private long confirmationSerial;
    /** Confirmation tokens issued, oldest first, bounded by {@link #MAX_CONFIRMATIONS}. */
    private final Map<String, Confirmation> confirmations = new LinkedHashMap<>();

    /** A PendingIntent a reply scripted: the connection to tell, and the script's handle. */
    private static final class Confirmation {
        final Connection host;
        final String handle;

        Confirmation(Connection host, String handle) {
            this.host = host;
            this.handle = handle;
        }
    }

    /** {@code clock} gives the device time written as {@code now_ms} (Unix epoch ms). */
    public HostedProvider(Hostable hostable, Exposer exposer, Limits limits, LongSupplier clock) {
        this.hostable = hostable;
        this.exposer = exposer;
        this.limits = limits;
        this.clock = clock;
        this.writers = new Semaphore(limits.maxFdWriters);
        this.files = new Semaphore(limits.maxFdFiles);
        this.timers = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "cetp-hosted-timer");
            t.setDaemon(true);
            return t;
        });
        timers.setRemoveOnCancelPolicy(true);
    }

    public Hostable hostable() {
        return hostable;
    }

    /**
     * Hides every variant: at start-up, a service left enabled by a probe
     * that died while hosting would let Consumers discover a Provider no one
     * answers for.
     */
    public void reset() throws DeviceError {
        exposer.expose(null, null);
    }

    /** The hello members that describe hosting here (compatible extensions; see the app's README). */
    public JsonObject helloMembers() {
        List<Object> metas = new ArrayList<>();
        for (Variant v : hostable.variants) {
            JsonObject m = new JsonObject();
            m.putAll(v.meta);
            metas.add(m);
        }
        JsonObject provider = new JsonObject()
                .with("authority", hostable.authority)
                .with("package", hostable.pkg)
                .with("metas", metas)
                .with("throw_classes", new ArrayList<Object>(THROWABLE));
        if (!hostable.foreign.isEmpty()) {
            List<Object> foreign = new ArrayList<>();
            for (Variant v : hostable.foreign) {
                JsonObject m = new JsonObject();
                m.putAll(v.meta);
                foreign.add(m);
            }
            provider.with("foreign_metas", foreign).with("foreign_package", hostable.foreignPackage);
        }
        return new JsonObject()
                .with("reply_extensions", new ArrayList<Object>(REPLY_EXTENSIONS))
                .with("reply_fail", new ArrayList<Object>(FAIL_KINDS))
                .with("binder_transaction_limit", BINDER_TRANSACTION_LIMIT)
                .with("hosted_provider", provider);
    }

    /** One connection's side of the broker; {@code events} carries its {@code incoming_call} events. */
    public Connection attach(Dispatcher.Sink events) {
        return new Connection(events);
    }

    /** Calls waiting for a reply now (for tests and logs). */
    public synchronized int waiting() {
        return pending.size();
    }

    /** Binder threads inside {@link #call} now. */
    public synchronized int busy() {
        return busy;
    }

    /** The variant exposed now, or null (also while a non-discoverable Provider is hosted). */
    public synchronized Variant exposed() {
        return exposed;
    }

    /** The foreign service exposed now, or null. */
    public synchronized Variant foreignExposed() {
        return foreignExposed;
    }

    /** Result files held now (for tests and logs). */
    public int heldFiles() {
        return limits.maxFdFiles - files.availablePermits();
    }

    /**
     * Remembers a PendingIntent that {@code answer}'s result scripts under
     * {@code handle} and returns the token its intent carries, by which the
     * confirmation activity reports its launch ({@link #launched}). Null when
     * the answer came from no connection (nothing to report to).
     */
    public synchronized String issue(Answer answer, String handle) {
        if (answer.host == null || answer.host.isClosed()) {
            return null;
        }
        String token = "k" + (++confirmationSerial);
        confirmations.put(token, new Confirmation(answer.host, handle));
        Iterator<String> oldest = confirmations.keySet().iterator();
        while (confirmations.size() > MAX_CONFIRMATIONS) {
            oldest.next();
            oldest.remove();
        }
        return token;
    }

    /** Confirmation tokens remembered now (for tests). */
    public synchronized int confirmations() {
        return confirmations.size();
    }

    /**
     * The confirmation activity of {@code token} was launched and the user
     * made {@code decision} there: tells the connection whose reply scripted
     * it ({@code intent_launched}, with the script's handle), waiting a
     * bounded time for room in its queue. Returns false when the token is
     * unknown (forgotten, or forged: the activity is not exported, but its
     * data is only a string), its connection has closed, or the event could
     * not be queued. {@code launcherUid} is -1 when unknown. Called from the
     * activity's thread before it finishes, so that the event reaches the
     * host before any call the Consumer makes once it has the result.
     */
    public boolean launched(String token, String decision, long launcherUid, List<String> launcherPackages) {
        if (!DECISIONS.contains(decision)) {
            throw new IllegalArgumentException("not a decision: " + decision);
        }
        Confirmation c;
        synchronized (this) {
            c = confirmations.get(token);
        }
        if (c == null || c.host.isClosed()) {
            return false;
        }
        Frame event = Ops.intentLaunched(c.handle, decision, hostable.authority, launcherUid,
                launcherPackages == null ? Collections.<String>emptyList() : launcherPackages, clock.getAsLong());
        try {
            return c.host.events.offer(event, 1, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * {@code ContentProvider.call()} of the hosted Provider, from a Binder
     * thread: tells the host and waits for its reply. Never blocks longer
     * than the limits allow, and never throws: failures are answers that
     * throw {@code IllegalStateException}. {@code callerUid} must be read
     * with {@code Binder.getCallingUid()} on entry (§7.1).
     */
    public Answer call(long callerUid, List<String> callerPackages, String method, String arg, WireBundle extras) {
        Connection host;
        Waiter w;
        String id;
        synchronized (this) {
            host = owner;
            if (host == null) {
                return Answer.failed(Failure.NOT_HOSTED,
                        "no host scripts the provider of " + hostable.authority + " now");
            }
            if (busy >= limits.maxBusy) {
                return Answer.failed(Failure.BUSY,
                        "at most " + limits.maxBusy + " calls may wait for a scripted reply at once");
            }
            busy++;
            id = "c-" + (++calls);
            w = new Waiter(host);
            pending.put(id, w);
        }
        try {
            return await(host, w, id, callerUid, callerPackages, method, arg, extras);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Answer.failed(Failure.HOST_GONE, "the probe is shutting down");
        } finally {
            synchronized (this) {
                busy--;
                pending.remove(id, w);
            }
        }
    }

    private Answer await(Connection host, Waiter w, String id, long callerUid, List<String> callerPackages,
            String method, String arg, WireBundle extras) throws InterruptedException {
        // A raw Binder caller can send a null method, which ContentResolver
        // never does; the event needs a string for the host to read it.
        Frame event = Ops.incomingCall(id, callerUid,
                callerPackages == null ? Collections.<String>emptyList() : callerPackages,
                method == null ? "" : method, arg, extras, clock.getAsLong());
        if (FrameCodec.encode(event).length > FrameCodec.MAX_FRAME_BYTES) {
            return Answer.failed(Failure.TOO_LARGE, "the call is too large to forward to the host");
        }
        long start = System.nanoTime();
        // In slices: a queue left full by a connection that closed meanwhile
        // must not keep this thread for the whole wait.
        while (!host.events.offer(event, 50, TimeUnit.MILLISECONDS)) {
            if (host.isClosed()) {
                return gone();
            }
            if (System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(limits.replyWaitMs)) {
                return Answer.failed(Failure.NO_REPLY, "the host does not read its connection");
            }
        }
        long left = limits.replyWaitMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        if (!w.answered.await(Math.max(0, left), TimeUnit.MILLISECONDS)) {
            return Answer.failed(Failure.NO_REPLY,
                    "the host did not reply to " + id + " within " + limits.replyWaitMs + " ms");
        }
        Ops.ReplyParams r = w.reply;
        if (r == null) {
            return gone();
        }
        if (r.delayMs != 0) {
            long delay = Long.compareUnsigned(r.delayMs, limits.maxDelayMs) > 0 ? limits.maxDelayMs : r.delayMs;
            if (host.closed.await(delay, TimeUnit.MILLISECONDS)) {
                return gone();
            }
        }
        if (host.isClosed()) {
            return gone();
        }
        switch (r.kind) {
            case FAIL:
                if ("provider_died".equals(r.failKind)) {
                    return Answer.dying("the scripted provider of " + hostable.authority + " dies mid-call");
                }
                // A Provider that never answers: the caller's own timeout must
                // fire first; the Binder thread is given back after the hold.
                if (host.closed.await(limits.holdMs, TimeUnit.MILLISECONDS)) {
                    return gone();
                }
                return Answer.failed(Failure.NEVER_ANSWERED, "the scripted provider of " + hostable.authority
                        + " never answered (held " + limits.holdMs + " ms)");
            case THROW:
                return new Answer(null, null, r.throwClass, r.throwMessage, null);
            case ENDLESS:
                return new Answer(withFd(r.result), new FdPayload(null, r.endlessFill), null, null, null, host, id);
            case RESULT:
            default:
                if (r.fdData != null) {
                    return new Answer(withFd(r.result), new FdPayload(r.fdData, -1), null, null, null, host, id);
                }
                return new Answer(r.result, null, null, null, null, host, id);
        }
    }

    /**
     * A result with a descriptor is a Bundle even when the script says null
     * (the simulated device does the same); the key is put there by the
     * Android side, as a ParcelFileDescriptor.
     */
    private static WireBundle withFd(WireBundle result) {
        return result == null ? new WireBundle() : result;
    }

    private Answer gone() {
        return Answer.failed(Failure.HOST_GONE,
                "the scripted provider of " + hostable.authority + " is gone: its hosting connection closed");
    }

    /**
     * The result descriptor of {@code answer} (its {@link Answer#fd}): an
     * endless one is a pipe a thread fills ({@link #openFd(FdPayload, Pipes)});
     * the bytes of {@code fd_data} are a read-only file whose close by the
     * Consumer is reported to the connection that replied, as the event
     * {@code fd_closed}, once ({@link #openFile}).
     */
    public <R> R openFd(Answer answer, Pipes<R> pipes, ResultFiles<R> results) throws IOException {
        if (answer.fd == null) {
            throw new IllegalArgumentException("the answer holds no descriptor");
        }
        return answer.fd.endless() ? openFd(answer.fd, pipes) : openFile(answer, results);
    }

    /**
     * The bytes of {@code answer}'s {@code fd_data} as a result file. The
     * probe lets go of its own copy, silently, {@link Limits#readerCloseDelayMs}
     * after the answer (the Binder reply has been written by then); the
     * first close the listener hears is the Consumer's, sent as
     * {@code fd_closed} to the connection that replied unless it has closed
     * meanwhile. Whatever happens, the file is freed then, or at
     * {@link Limits#fdDeadlineMs} if nothing is heard, and then nothing is
     * sent. At most {@link Limits#maxFdFiles} are held at once.
     */
    public <R> R openFile(Answer answer, ResultFiles<R> results) throws IOException {
        if (answer.fd == null || answer.fd.endless()) {
            throw new IllegalArgumentException("a result file holds the bytes of `fd_data`");
        }
        if (!files.tryAcquire()) {
            throw new IOException("at most " + limits.maxFdFiles + " result files are held at once");
        }
        HeldFile<R> held = new HeldFile<>(answer.host, answer.call);
        ResultFile<R> file;
        try {
            file = results.open(answer.fd.data, held);
        } catch (IOException | RuntimeException e) {
            files.release();
            throw e;
        }
        held.attach(file);
        timers.schedule(file::releaseOwn, limits.readerCloseDelayMs, TimeUnit.MILLISECONDS);
        held.deadline = timers.schedule(() -> held.end(null), limits.fdDeadlineMs, TimeUnit.MILLISECONDS);
        return file.descriptor();
    }

    /** A result file from its opening to its end: heard closed, or the deadline. */
    private final class HeldFile<R> implements CloseListener {
        private final Connection host;
        private final String call;
        private final AtomicBoolean over = new AtomicBoolean();
        private volatile ResultFile<R> file;
        volatile ScheduledFuture<?> deadline;

        HeldFile(Connection host, String call) {
            this.host = host;
            this.call = call;
        }

        void attach(ResultFile<R> f) {
            file = f;
            // Heard closed before it was attached: free it now (dispose may run twice).
            if (over.get()) {
                f.dispose();
            }
        }

        @Override
        public void closed(FdClose how) {
            end(how);
        }

        /** Once: frees the file and its slot, and reports {@code how} (null: the deadline, unreported). */
        void end(FdClose how) {
            if (!over.compareAndSet(false, true)) {
                return;
            }
            ScheduledFuture<?> d = deadline;
            if (d != null) {
                d.cancel(false);
            }
            ResultFile<R> f = file;
            try {
                if (f != null) {
                    f.dispose();
                }
            } finally {
                files.release();
            }
            if (how != null) {
                report(host, call, how);
            }
        }
    }

    /**
     * Sends {@code fd_closed} to {@code host}, unless it is gone (or the
     * answer came from none). Waits a bounded time for room in its queue:
     * it runs on the thread that heard the close, never a Binder thread.
     */
    private void report(Connection host, String call, FdClose how) {
        if (host == null || call == null || host.isClosed()) {
            return;
        }
        Frame event = Ops.fdClosed(call, how.how, how.message, clock.getAsLong());
        try {
            host.events.offer(event, 1, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Starts writing {@code payload} into a new pipe and returns its read
     * end for the result. The writer stops at the end of the bytes, when the
     * reader goes away, after {@link Limits#endlessCapBytes} of an endless
     * descriptor, or at {@link Limits#fdDeadlineMs}, whichever comes first;
     * this process's copy of the read end is closed shortly after the answer.
     * (An endless descriptor's close is not reported: the writer learns it
     * from the pipe.)
     */
    public <R> R openFd(FdPayload payload, Pipes<R> pipes) throws IOException {
        if (!writers.tryAcquire()) {
            throw new IOException("at most " + limits.maxFdWriters + " result descriptors are written at once");
        }
        Pipe<R> pipe;
        try {
            pipe = pipes.open();
        } catch (IOException | RuntimeException e) {
            writers.release();
            throw e;
        }
        AtomicBoolean done = new AtomicBoolean();
        Thread t = new Thread(() -> {
            try {
                write(payload, pipe);
            } finally {
                done.set(true);
                writers.release();
            }
        }, "cetp-hosted-fd");
        t.setDaemon(true);
        t.start();
        timers.schedule(pipe::closeReader, limits.readerCloseDelayMs, TimeUnit.MILLISECONDS);
        timers.schedule(() -> {
            if (!done.get()) {
                pipe.closeWriter("the result descriptor was not read to its end within " + limits.fdDeadlineMs + " ms");
            }
        }, limits.fdDeadlineMs, TimeUnit.MILLISECONDS);
        return pipe.reader();
    }

    private void write(FdPayload payload, Pipe<?> pipe) {
        String error = null;
        try {
            OutputStream out = pipe.writer();
            if (!payload.endless()) {
                int step = 64 * 1024;
                for (int off = 0; off < payload.data.length; off += step) {
                    out.write(payload.data, off, Math.min(step, payload.data.length - off));
                }
            } else {
                byte[] block = new byte[64 * 1024];
                Arrays.fill(block, (byte) payload.fill);
                long written = 0;
                while (written < limits.endlessCapBytes) {
                    int n = (int) Math.min(block.length, limits.endlessCapBytes - written);
                    out.write(block, 0, n);
                    written += n;
                }
                // Not a clean EOF: a reader that checks learns the data was cut.
                error = "the endless result descriptor stopped after " + written + " bytes";
            }
            out.flush();
        } catch (IOException e) {
            // The reader closed its end (what a Consumer does with an endless
            // descriptor) or the watchdog closed ours: no one is left to tell.
            error = null;
        } finally {
            pipe.closeWriter(error);
        }
    }

    /**
     * The first value of a result that Android cannot build from the wire
     * alone (it would stand for an object the host does not have), or null.
     */
    private static String unbuildable(WireBundle b) {
        for (Map.Entry<String, WireValue> e : b.entrySet()) {
            WireValue v = e.getValue();
            switch (v.type) {
                case PENDING_INTENT: {
                    // The probe creates one PendingIntent only: immutable, for
                    // its own confirmation activity. A script asking for a
                    // mutable one, or one of a service or broadcast, asks for
                    // what it would not get.
                    WireValue.PendingIntentInfo pi = v.asPendingIntent();
                    if (Boolean.FALSE.equals(pi.immutable) || Boolean.FALSE.equals(pi.activity)) {
                        return "`pending_intent` (key " + e.getKey() + ") that is not an immutable activity intent";
                    }
                    break;
                }
                case FD:
                case OTHER:
                    return "`" + v.type.tag + "` (key " + e.getKey() + ")";
                case BUNDLE: {
                    String inner = unbuildable(v.asBundle());
                    if (inner != null) {
                        return inner;
                    }
                    break;
                }
                default:
                    break;
            }
        }
        return null;
    }

    private void check(Ops.ReplyParams p) throws DeviceError {
        switch (p.kind) {
            case THROW:
                if (!THROWABLE.contains(p.throwClass)) {
                    throw DeviceError.unsupported("this device's scripted provider throws only " + THROWABLE
                            + ", not " + p.throwClass);
                }
                break;
            case FAIL:
                if (!FAIL_KINDS.contains(p.failKind)) {
                    throw DeviceError.unsupported("this device plays `fail` only as " + FAIL_KINDS + ", not \""
                            + p.failKind + "\"");
                }
                break;
            case RESULT:
            case ENDLESS:
            default:
                if (p.fdData != null && p.fdData.length > limits.maxFdDataBytes) {
                    throw DeviceError.unsupported("`fd_data` of " + p.fdData.length + " bytes: this device hands out"
                            + " at most " + limits.maxFdDataBytes + " bytes through a scripted descriptor");
                }
                String bad = p.result == null ? null : unbuildable(p.result);
                if (bad != null) {
                    throw DeviceError.unsupported("a scripted result cannot hold a " + bad + " value on this device");
                }
                break;
        }
    }

    /** The declared service whose meta-data is {@code meta} (and which is {@code service}, if named), or null. */
    private static Variant declared(List<Variant> declared, Map<String, String> meta, String service) {
        for (Variant v : declared) {
            if (v.meta.equals(meta) && (service == null || service.equals(v.service))) {
                return v;
            }
        }
        return null;
    }

    private static List<Map<String, String>> metasOf(List<Variant> declared) {
        List<Map<String, String>> metas = new ArrayList<>();
        for (Variant v : declared) {
            metas.add(v.meta);
        }
        return metas;
    }

    /** The authorities the foreign services name. */
    private List<String> foreignAuthorities() {
        List<String> out = new ArrayList<>();
        for (Variant v : hostable.foreign) {
            String a = Hostable.authorityOf(v);
            if (a != null && !out.contains(a)) {
                out.add(a);
            }
        }
        return out;
    }

    private static DeviceError badRequest(String message) {
        return new DeviceError(WireError.BAD_REQUEST, message);
    }

    /** A string member of {@code host_provider} beyond the contract, or null when absent or null. */
    private static String extraString(JsonObject extra, String key) throws DeviceError {
        Object v = extra.get(key);
        if (Json.isNull(v)) {
            return null;
        }
        if (!(v instanceof String)) {
            throw badRequest("`" + key + "` must be a string, found " + Json.kind(v));
        }
        return (String) v;
    }

    /** One connection's side: it hosts the Provider, receives its events and replies to its calls. */
    public final class Connection {
        private final Dispatcher.Sink sink;
        final BlockingQueue<Frame> events = new ArrayBlockingQueue<>(limits.eventQueue);
        final CountDownLatch closed = new CountDownLatch(1);
        // Guarded by HostedProvider.this.
        private Thread writer;

        Connection(Dispatcher.Sink sink) {
            this.sink = sink;
        }

        boolean isClosed() {
            return closed.getCount() == 0;
        }

        /**
         * {@code host_provider}. Three shapes are played: the own Provider
         * with one of its declared services ({@code meta} one of the
         * declared sets); the own Provider without a service
         * ({@code discoverable: false}, {@code meta} unchecked); and the
         * foreign service alone ({@code authority} the other probe's,
         * {@code meta} its declared set, {@code authority_package} the
         * other probe's package), whose calls this connection never sees.
         * The rules are the simulated device's ({@code cetp-sim}
         * {@code hosted.rs}, {@code check_host}), which plays this probe.
         */
        public JsonObject host(Ops.HostProviderParams p) throws DeviceError {
            int bytes = p.authority.getBytes(StandardCharsets.UTF_8).length;
            if (bytes == 0 || bytes > MAX_AUTHORITY_BYTES) {
                throw badRequest("`authority` must hold 1 to " + MAX_AUTHORITY_BYTES + " bytes");
            }
            // The simulated device's shaping members: read (and type-checked)
            // as there, honoured only where they say what this device is.
            String pkg = extraString(p.extra, "package");
            String service = extraString(p.extra, "service");
            String permission = extraString(p.extra, "permission");
            String authorityPackage = extraString(p.extra, "authority_package");
            Object exported = p.extra.get("exported");
            if (!Json.isNull(exported) && !(exported instanceof Boolean)) {
                throw badRequest("`exported` must be a boolean, found " + Json.kind(exported));
            }
            Object discoverableValue = p.extra.get("discoverable");
            if (!Json.isNull(discoverableValue) && !(discoverableValue instanceof Boolean)) {
                throw badRequest("`discoverable` must be a boolean, found " + Json.kind(discoverableValue));
            }
            boolean discoverable = !Boolean.FALSE.equals(discoverableValue);
            if (pkg != null && !pkg.equals(hostable.pkg)) {
                throw DeviceError.unsupported("the scripted provider's package is " + hostable.pkg
                        + " here (the probe's own), not " + pkg);
            }
            Variant chosen = null;
            Variant foreign = null;
            if (p.authority.equals(hostable.authority)) {
                if (p.extra.containsKey("authority_package") && !hostable.pkg.equals(authorityPackage)) {
                    throw DeviceError.unsupported("the ContentProvider of " + hostable.authority + " belongs to "
                            + hostable.pkg + " here, not " + authorityPackage
                            + (hostable.foreign.isEmpty() ? "" : "; a service naming " + foreignAuthorities()
                                    + " (whose ContentProvider is " + hostable.foreignPackage
                                    + "'s) is hosted with that `authority`"));
                }
                if (discoverable) {
                    chosen = declared(hostable.variants, p.meta, service);
                    if (chosen == null) {
                        throw DeviceError.unsupported("this device declares its scripted provider's meta-data in its"
                                + " manifest; `meta` must be one of " + metasOf(hostable.variants)
                                + (service == null ? "" : " (and `service` the one declaring it)")
                                + ", or `discoverable` false for no service");
                    }
                }
            } else if (discoverable && foreignAuthorities().contains(p.authority)) {
                if (!hostable.foreignPackage.equals(authorityPackage)) {
                    throw DeviceError.unsupported("a service of this device naming " + p.authority
                            + " declares `authority_package` " + hostable.foreignPackage
                            + ", the package whose ContentProvider answers there; name it"
                            + (authorityPackage == null ? "" : " (not " + authorityPackage + ")"));
                }
                foreign = declared(hostable.foreign, p.meta, service);
                if (foreign == null) {
                    throw DeviceError.unsupported("this device's service naming another package's authority has"
                            + " the meta-data " + metasOf(hostable.foreign)
                            + (service == null ? "" : " (and `service` the one declaring it)"));
                }
            } else {
                throw DeviceError.unsupported("this device hosts a scripted provider only on authority "
                        + hostable.authority + ", fixed by the probe's manifest"
                        + (hostable.foreign.isEmpty() ? "" : " (or, as a discoverable service alone naming the"
                                + " other probe's provider, " + foreignAuthorities() + ")")
                        + "; name it in host_provider");
            }
            if (Boolean.FALSE.equals(exported)) {
                throw DeviceError.unsupported("the scripted provider's services are exported on this device");
            }
            if (permission != null) {
                throw DeviceError.unsupported("the scripted provider's services need no permission on this device");
            }
            synchronized (HostedProvider.this) {
                if (isClosed()) {
                    throw new DeviceError(DeviceError.DEVICE_ERROR, "the connection is closing");
                }
                if (foreign != null) {
                    if (foreignOwner != null) {
                        throw badRequest("a service naming " + p.authority + " is already declared"
                                + (foreignOwner == this ? " (by this connection)" : " (by another connection)"));
                    }
                    // Exposed under the lock: a connection closing meanwhile
                    // must not leave a service enabled with no owner.
                    exposer.expose(exposed, foreign);
                    foreignOwner = this;
                    foreignExposed = foreign;
                } else {
                    if (owner != null) {
                        throw badRequest("a provider already answers on authority " + hostable.authority
                                + (owner == this ? " (hosted by this connection)" : " (hosted by another connection)"));
                    }
                    exposer.expose(chosen, foreignExposed);
                    owner = this;
                    exposed = chosen;
                }
                if (writer == null) {
                    writer = new Thread(this::writeEvents, "cetp-hosted-events");
                    writer.setDaemon(true);
                    writer.start();
                }
            }
            return new JsonObject();
        }

        private void writeEvents() {
            try {
                while (true) {
                    Frame f = events.take();
                    sink.send(f);
                }
            } catch (InterruptedException e) {
                // The connection closed.
            } catch (IOException e) {
                // The connection is failing; its session ends it.
            }
        }

        /** {@code reply}. */
        public JsonObject reply(Ops.ReplyParams p) throws DeviceError {
            synchronized (HostedProvider.this) {
                Waiter w = pending.get(p.call);
                if (w == null || w.owner != this || w.answered.getCount() == 0) {
                    throw notWaiting(p.call);
                }
            }
            // A reply this device cannot play leaves the call waiting, so the
            // host can still answer it another way.
            check(p);
            synchronized (HostedProvider.this) {
                Waiter w = pending.get(p.call);
                // The call may have timed out since the first look.
                if (w == null || w.owner != this || w.answered.getCount() == 0) {
                    throw notWaiting(p.call);
                }
                pending.remove(p.call);
                w.reply = p;
                w.answered.countDown();
            }
            return new JsonObject();
        }

        private DeviceError notWaiting(String call) {
            return new DeviceError(WireError.UNKNOWN_HANDLE,
                    "no call \"" + call + "\" is waiting for a reply from this connection");
        }

        /**
         * The connection closed: its Provider goes away, every call waiting
         * on it is woken (and fails), and its discovery service is hidden.
         */
        public void close() {
            boolean hide = false;
            Thread t;
            synchronized (HostedProvider.this) {
                if (isClosed()) {
                    return;
                }
                closed.countDown();
                for (Iterator<Waiter> it = pending.values().iterator(); it.hasNext();) {
                    Waiter w = it.next();
                    if (w.owner == this) {
                        it.remove();
                        w.answered.countDown();
                    }
                }
                if (owner == this) {
                    owner = null;
                    exposed = null;
                    hide = true;
                }
                if (foreignOwner == this) {
                    foreignOwner = null;
                    foreignExposed = null;
                    hide = true;
                }
                confirmations.values().removeIf(c -> c.host == this);
                if (hide) {
                    try {
                        // What other connections hold stays visible.
                        exposer.expose(exposed, foreignExposed);
                    } catch (DeviceError e) {
                        // Nothing to answer: the connection is gone. The next
                        // host_provider or start-up sets the state again.
                    }
                }
                t = writer;
            }
            if (t != null) {
                t.interrupt();
            }
        }
    }
}
