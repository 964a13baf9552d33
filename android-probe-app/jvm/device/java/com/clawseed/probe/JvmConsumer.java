package com.clawseed.probe;

import android.app.PendingIntent;
import android.content.Context;
import android.content.pm.ApplicationInfo;
import android.content.pm.PackageInfo;
import com.clawseed.probe.consumer.ConsumerAdapter;
import com.clawseed.probe.consumer.Outcome;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.wire.Json;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonParser;
import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireDecodeException;
import com.clawseed.probe.wire.WireError;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.robolectric.shadows.ShadowPackageManager;

/**
 * A vendor's Consumer under test on the JVM device: their
 * {@link ConsumerAdapter} (scripts/jvm-device.sh {@code --consumer-jar …
 * --consumer-class CLASS}), installed as an app of its own package, made to
 * act by {@code consumer_act}. Acts run one at a time on one thread of its
 * own, each within the act's deadline; what the adapter returns becomes the
 * outcome object of probe-wire "driving a Consumer under test", bounded and
 * escaped, since it is the vendor's code talking to the host.
 */
final class JvmConsumer {
    /** The name {@code hello} lists under {@code consumers}; {@code cetp consumer}'s default. */
    static final String NAME = "default";
    static final int UID = 10_400;
    /** Longest text member of an outcome (message, detail, class), in UTF-16 units. */
    static final int MAX_TEXT = 64 * 1024;
    /**
     * Longest success value, in UTF-16 units of its JSON text: below the
     * wire's 16 MiB frame, which a value up to a Binder transaction and far
     * beyond fits.
     */
    static final int MAX_VALUE = 12 * 1024 * 1024;
    /** How long the user takes at most to decide in a resolution's screen. */
    static final long DECIDE_TIMEOUT_MS = 30_000;

    /** A mistake in the command (class not found, wrong type): scripts/jvm-device.sh's usage exit. */
    static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    private final ConsumerAdapter adapter;
    private final Context app;
    private final Context own;
    private final ExecutorService thread = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "jvm-consumer");
        t.setDaemon(true);
        return t;
    });
    /** Whether {@link ConsumerAdapter#start} ran; touched only on {@link #thread}. */
    private boolean started;

    JvmConsumer(ConsumerAdapter adapter, Context app, Context own) {
        this.adapter = adapter;
        this.app = app;
        this.own = own;
    }

    /**
     * The Consumer named by {@code -Dcetp.jvm.consumer.class}, its package
     * ({@code -Dcetp.jvm.consumer.package}, else the class's) installed with
     * a UID and certificate of its own; null when none is named.
     */
    static JvmConsumer fromProperties(Context app, ShadowPackageManager spm, ClassLoader loader) throws UsageError {
        String cls = System.getProperty("cetp.jvm.consumer.class");
        if (cls == null || cls.isEmpty()) {
            return null;
        }
        ConsumerAdapter adapter = load(cls, loader);
        String pkg = System.getProperty("cetp.jvm.consumer.package");
        if (pkg == null || pkg.isEmpty()) {
            int dot = cls.lastIndexOf('.');
            pkg = dot < 0 ? "consumer" : cls.substring(0, dot);
        }
        PackageInfo info = new PackageInfo();
        info.packageName = pkg;
        info.applicationInfo = new ApplicationInfo();
        info.applicationInfo.packageName = pkg;
        info.applicationInfo.uid = UID;
        spm.installPackage(info);
        spm.setPackagesForUid(UID, pkg);
        ApplicationInfo appInfo = spm.getInternalMutablePackageInfo(pkg).applicationInfo;
        return new JvmConsumer(adapter, app, new JvmDevice.VendorContext(app, appInfo));
    }

    static ConsumerAdapter load(String cls, ClassLoader loader) throws UsageError {
        Class<?> c;
        try {
            c = Class.forName(cls, true, loader);
        } catch (ClassNotFoundException | LinkageError e) {
            throw new UsageError("the Consumer adapter " + cls + " cannot be loaded from --consumer-jar and --classpath: " + e);
        }
        if (!ConsumerAdapter.class.isAssignableFrom(c)) {
            throw new UsageError("the Consumer adapter " + cls + " does not implement " + ConsumerAdapter.class.getName());
        }
        try {
            return (ConsumerAdapter) c.getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
            throw new UsageError("the Consumer adapter " + cls + " cannot be made with its public no-argument constructor: " + e);
        }
    }

    /**
     * One act: {@code action}'s {@code do} and its members, as
     * {@code cetp consumer} sends them; the outcome object. A device
     * timeout when the adapter is still running after {@code timeoutMs}
     * (it is interrupted), {@code unsupported} for an act it declines.
     */
    JsonObject act(JsonObject action, long timeoutMs) throws DeviceError, InterruptedException {
        Act act = Act.of(action);
        Future<Outcome> f = thread.submit(() -> {
            if (!started) {
                adapter.start(own);
                started = true;
            }
            return act.on(adapter, this::launch);
        });
        try {
            return toJson(f.get(timeoutMs, TimeUnit.MILLISECONDS));
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new DeviceError(WireError.TIMEOUT, "the Consumer did not finish `" + act.what + "` within " + timeoutMs + " ms");
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof ConsumerAdapter.NotSupported) {
                throw DeviceError.unsupported(String.valueOf(bounded(String.valueOf(cause.getMessage()))));
            }
            System.err.println("jvm-device: the Consumer threw during `" + act.what + "`:");
            cause.printStackTrace(System.err);
            return new JsonObject().with("outcome", "crashed").with("class", bounded(cause.getClass().getName()))
                    .with("message", bounded(String.valueOf(cause.getMessage())));
        }
    }

    /** The user: the resolution's activity started as the Consumer would, the act's decision clicked in it. */
    private int launch(PendingIntent resolution, Ops.Decision decision) throws DeviceError, InterruptedException {
        if (resolution == null) {
            throw new IllegalArgumentException("no resolution to launch");
        }
        // The probe's confirmation screen (ConfirmActivity), found as a
        // phone's test driver finds it: by the buttons' content descriptions.
        JsonObject ui = new JsonObject()
                .with("approve", new JsonObject().with("content_desc", ConfirmActivity.APPROVE))
                .with("deny", new JsonObject().with("content_desc", ConfirmActivity.DENY));
        return JvmResolver.resolve(app, resolution, new Ops.ResolveParams("consumer-resolution", decision,
                DECIDE_TIMEOUT_MS, ui)).resultCode;
    }

    /** The outcome object: strings bounded and made readable, the value parsed (the adapter's JSON text). */
    static JsonObject toJson(Outcome o) throws DeviceError {
        if (o == null) {
            throw new DeviceError(DeviceError.DEVICE_ERROR, "the Consumer's adapter returned no outcome (null)");
        }
        JsonObject out = new JsonObject().with("outcome", o.kind);
        switch (o.kind) {
            case "success":
                if (o.valueJson.length() > MAX_VALUE) {
                    throw new DeviceError(DeviceError.DEVICE_ERROR, "the Consumer's success value is "
                            + o.valueJson.length() + " characters of JSON, more than the device carries (" + MAX_VALUE + ")");
                }
                try {
                    out.put("value", JsonParser.parse(o.valueJson));
                } catch (WireDecodeException e) {
                    throw new DeviceError(DeviceError.DEVICE_ERROR, "the adapter's success value is not JSON text: " + e);
                }
                return out;
            case "error":
                return out.with("error_code", bounded(o.errorCode)).with("message", bounded(o.text));
            default:
                return out.with("detail", bounded(o.text));
        }
    }

    /** At most {@link #MAX_TEXT} UTF-16 units, lone surrogates replaced; null stays JSON null. */
    static Object bounded(String s) {
        if (s == null) {
            return Json.NULL;
        }
        String cut = s.length() > MAX_TEXT ? s.substring(0, MAX_TEXT) + "…" : s;
        return Json.sanitize(cut);
    }

    /** The device's user, as the adapter sees it. */
    interface Launcher {
        int launch(PendingIntent resolution, Ops.Decision decision) throws Exception;
    }

    /** One decoded act. */
    static final class Act {
        final String what;
        private final JsonObject action;

        private Act(String what, JsonObject action) {
            this.what = what;
            this.action = action;
        }

        static Act of(JsonObject action) throws DeviceError {
            Object d = action.get("do");
            if (!(d instanceof String)) {
                throw new DeviceError(WireError.BAD_REQUEST, "the action needs a string `do`");
            }
            Act a = new Act((String) d, action);
            switch (a.what) {
                case "connect":
                case "list_tools":
                    a.string("authority");
                    break;
                case "call_tool":
                case "cancel_tool":
                    a.string("authority");
                    a.string("tool");
                    break;
                case "user_decision":
                    a.decision();
                    break;
                case "reset":
                    break;
                default:
                    throw new DeviceError(WireError.BAD_REQUEST, "unknown action \"" + Json.sanitize(a.what) + "\"");
            }
            return a;
        }

        Outcome on(ConsumerAdapter c, Launcher user) throws Exception {
            switch (what) {
                case "connect":
                    return c.connect(string("authority"));
                case "list_tools":
                    return c.listTools(string("authority"));
                case "call_tool":
                    return c.callTool(string("authority"), string("tool"), args());
                case "cancel_tool":
                    return c.cancelTool(string("authority"), string("tool"), args());
                case "user_decision": {
                    Ops.Decision decision = decision();
                    return c.userDecision(decision.wire, resolution -> user.launch(resolution, decision));
                }
                default:
                    return c.reset();
            }
        }

        private String string(String key) throws DeviceError {
            Object v = action.get(key);
            if (!(v instanceof String)) {
                throw new DeviceError(WireError.BAD_REQUEST, "the action `" + what + "` needs a string `" + key + "`");
            }
            return (String) v;
        }

        /** The arguments as JSON text: an object ({@code {}} when the action has none). */
        private String args() {
            Object v = action.get("args");
            return com.clawseed.probe.wire.JsonWriter.toText(v == null || Json.isNull(v) ? new JsonObject() : v);
        }

        private Ops.Decision decision() throws DeviceError {
            Object v = action.get("decision");
            for (Ops.Decision d : Ops.Decision.values()) {
                if (d.wire.equals(v)) {
                    return d;
                }
            }
            throw new DeviceError(WireError.BAD_REQUEST, "user_decision needs `decision`: approve, deny or dismiss");
        }
    }
}
