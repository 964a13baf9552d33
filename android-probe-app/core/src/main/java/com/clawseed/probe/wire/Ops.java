package com.clawseed.probe.wire;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * Typed parameters of the requests a device receives, and the answers it
 * sends. Field order and errors follow the Rust codec (see the table in
 * {@code vectors/wire/README.md}).
 */
public final class Ops {
    private Ops() {}

    public static final List<String> KNOWN = Collections.unmodifiableList(Arrays.asList(
            "hello", "discover", "call", "read_fd", "close_fd", "resolve", "restart_provider",
            "host_provider", "reply", "advance_clock"));

    public static boolean isKnown(String op) {
        return KNOWN.contains(op);
    }

    /** Decodes the parameters of a known op; null for an unknown op or one without parameters. */
    public static Object decodeParams(Frame.Request r) throws WireDecodeException {
        Fields f = new Fields(r.params, "");
        switch (r.op) {
            case "call":
                return CallParams.decode(f);
            case "read_fd":
                return ReadFdParams.decode(f);
            case "close_fd":
                return new CloseFdParams(f.string("handle"));
            case "resolve":
                return ResolveParams.decode(f);
            case "restart_provider":
                return new RestartProviderParams(f.string("package"));
            case "advance_clock":
                return new AdvanceClockParams(f.uint64("ms"));
            case "host_provider":
                return HostProviderParams.decode(f);
            case "reply":
                return ReplyParams.decode(f);
            default:
                return null;
        }
    }

    public static final class CallParams {
        public final String authority;
        public final String method;
        public final String arg;
        public final WireBundle extras;
        /** Unsigned; 0 means the device does not time the call out. */
        public final long timeoutMs;

        public CallParams(String authority, String method, String arg, WireBundle extras, long timeoutMs) {
            this.authority = authority;
            this.method = method;
            this.arg = arg;
            this.extras = extras;
            this.timeoutMs = timeoutMs;
        }

        static CallParams decode(Fields f) throws WireDecodeException {
            String authority = f.string("authority");
            String method = f.string("method");
            String arg = f.optString("arg");
            WireBundle extras = BundleCodec.optBundle(f, "extras");
            long timeout = f.uint64("timeout_ms");
            return new CallParams(authority, method, arg, extras, timeout);
        }
    }

    public static final class ReadFdParams {
        public final String handle;
        /** Unsigned. */
        public final long maxBytes;

        public ReadFdParams(String handle, long maxBytes) {
            this.handle = handle;
            this.maxBytes = maxBytes;
        }

        static ReadFdParams decode(Fields f) throws WireDecodeException {
            String handle = f.string("handle");
            return new ReadFdParams(handle, f.uint64("max_bytes"));
        }
    }

    public static final class CloseFdParams {
        public final String handle;

        public CloseFdParams(String handle) {
            this.handle = handle;
        }
    }

    public enum Decision {
        APPROVE("approve"), DENY("deny"), DISMISS("dismiss");

        public final String wire;

        Decision(String wire) {
            this.wire = wire;
        }
    }

    public static final class ResolveParams {
        public final String handle;
        public final Decision decision;
        public final long timeoutMs;
        /** UI automation selectors from the vendor's profile; may be null. */
        public final JsonObject ui;

        public ResolveParams(String handle, Decision decision, long timeoutMs, JsonObject ui) {
            this.handle = handle;
            this.decision = decision;
            this.timeoutMs = timeoutMs;
            this.ui = ui;
        }

        static ResolveParams decode(Fields f) throws WireDecodeException {
            String handle = f.string("handle");
            String d = f.string("decision");
            Decision decision = null;
            for (Decision x : Decision.values()) {
                if (x.wire.equals(d)) {
                    decision = x;
                }
            }
            if (decision == null) {
                throw new WireDecodeException(WireDecodeException.BAD_VALUE,
                        "at `/decision`: expected `approve`, `deny` or `dismiss`, found \"" + d + "\"");
            }
            long timeout = f.uint64("timeout_ms");
            Object ui = f.opt("ui");
            return new ResolveParams(handle, decision, timeout, ui == null ? null : Fields.object(ui, "/ui"));
        }
    }

    public static final class RestartProviderParams {
        public final String pkg;

        public RestartProviderParams(String pkg) {
            this.pkg = pkg;
        }
    }

    /** {@code advance_clock}: let {@code ms} of device time pass at once (answered with {@code now_ms}). */
    public static final class AdvanceClockParams {
        /** Unsigned, as the host sends it. */
        public final long ms;

        public AdvanceClockParams(long ms) {
            this.ms = ms;
        }
    }

    public static final class HostProviderParams {
        public final String authority;
        public final Map<String, String> meta;
        /**
         * Every other member, undecoded: the simulated device reads optional
         * ones from here ({@code package}, {@code service}, {@code exported},
         * {@code permission}, {@code authority_package}).
         */
        public final JsonObject extra;

        public HostProviderParams(String authority, Map<String, String> meta) {
            this(authority, meta, new JsonObject());
        }

        public HostProviderParams(String authority, Map<String, String> meta, JsonObject extra) {
            this.authority = authority;
            this.meta = meta;
            this.extra = extra;
        }

        static HostProviderParams decode(Fields f) throws WireDecodeException {
            String authority = f.string("authority");
            Map<String, String> meta = f.stringMap("meta");
            JsonObject extra = new JsonObject(f.map);
            extra.remove("authority");
            extra.remove("meta");
            return new HostProviderParams(authority, meta, extra);
        }
    }

    public static final class ReplyParams {
        /** What the scripted Provider does with the call. */
        public enum Kind {
            /** Returns {@link #result} (possibly null), with {@link #fdData} as its result_fd if given. */
            RESULT,
            /** Throws {@link #throwClass}. */
            THROW,
            /**
             * Extension {@code fail} (as the simulated device): the call fails
             * as the device error {@link #failKind} instead of returning.
             */
            FAIL,
            /**
             * Extension {@code fd_endless}: returns {@link #result} with a
             * result_fd that never reaches EOF ({@link #endlessFill} forever).
             */
            ENDLESS
        }

        public final String call;
        public final Kind kind;
        /** True for a result (possibly null), false for a throw or a failure. */
        public final boolean returns;
        public final WireBundle result;
        public final byte[] fdData;
        public final String throwClass;
        public final String throwMessage;
        public final String failKind;
        /** The byte an endless descriptor repeats, 0 to 255; -1 unless {@link Kind#ENDLESS}. */
        public final int endlessFill;
        public final long delayMs;

        ReplyParams(String call, Kind kind, WireBundle result, byte[] fdData, String throwClass,
                String throwMessage, String failKind, int endlessFill, long delayMs) {
            this.call = call;
            this.kind = kind;
            this.returns = kind == Kind.RESULT || kind == Kind.ENDLESS;
            this.result = result;
            this.fdData = fdData;
            this.throwClass = throwClass;
            this.throwMessage = throwMessage;
            this.failKind = failKind;
            this.endlessFill = endlessFill;
            this.delayMs = delayMs;
        }

        private static long delay(Fields f) throws WireDecodeException {
            Object delay = f.opt("delay_ms");
            return delay == null ? 0 : Fields.uint64(delay, "/delay_ms");
        }

        /**
         * The order of checks is the Rust codec's ({@code cetp-wire}
         * {@code ReplyParams::decode}): {@code fail}, then {@code fd_endless},
         * then {@code result} / {@code throw}, so both sides report the same
         * first fault.
         */
        static ReplyParams decode(Fields f) throws WireDecodeException {
            String call = f.string("call");
            String fail = f.optString("fail");
            if (fail != null) {
                if (f.map.containsKey("result") || f.map.containsKey("throw")) {
                    throw new WireDecodeException(WireDecodeException.BAD_VALUE,
                            "at `/fail`: expected `fail` alone, without `result` or `throw`, found both");
                }
                return new ReplyParams(call, Kind.FAIL, null, null, null, null, fail, -1, delay(f));
            }
            Object endless = f.opt("fd_endless");
            if (endless != null) {
                long fill = Fields.uint64(endless, "/fd_endless");
                if (fill < 0 || fill > 255) {
                    throw new WireDecodeException(WireDecodeException.BAD_VALUE,
                            "at `/fd_endless`: expected a byte value 0..=255, found " + Long.toUnsignedString(fill));
                }
                WireBundle result = BundleCodec.optBundle(f, "result");
                return new ReplyParams(call, Kind.ENDLESS, result, null, null, null, null, (int) fill, delay(f));
            }
            boolean hasResult = f.map.containsKey("result");
            boolean hasThrow = f.map.containsKey("throw");
            if (hasResult && hasThrow) {
                throw new WireDecodeException(WireDecodeException.BAD_VALUE,
                        "at `/throw`: expected either `result` or `throw`, found both");
            }
            if (!hasResult && !hasThrow) {
                throw new WireDecodeException(WireDecodeException.MISSING_FIELD,
                        "missing field `/result`: expected a Bundle, null, or a `throw` object instead");
            }
            if (hasResult) {
                WireBundle result = BundleCodec.optBundle(f, "result");
                Object fd = f.opt("fd_data");
                byte[] fdData = fd == null ? null : Fields.base64(fd, "/fd_data");
                return new ReplyParams(call, Kind.RESULT, result, fdData, null, null, null, -1, delay(f));
            }
            Fields t = new Fields(f.object("throw"), "/throw");
            String throwClass = t.string("class");
            String throwMessage = t.optString("message");
            return new ReplyParams(call, Kind.THROW, null, null, throwClass, throwMessage, null, -1, delay(f));
        }
    }

    // Events

    /**
     * {@code incoming_call}: a Consumer called the hosted Provider. Text from
     * the Consumer other than Bundle {@code string} values is sanitized: the
     * host reads {@code method}, {@code arg} and package names as Unicode
     * strings, and a lone surrogate there would make it drop the event.
     */
    public static Frame.Event incomingCall(String call, long callerUid, List<String> callerPackages, String method,
            String arg, WireBundle extras, long nowMs) {
        List<Object> pkgs = new ArrayList<>();
        for (String p : callerPackages) {
            pkgs.add(Json.sanitize(p));
        }
        return new Frame.Event("incoming_call", new JsonObject()
                .with("call", call)
                .with("caller", new JsonObject()
                        .with("uid", JsonNumber.of(callerUid))
                        .with("packages", pkgs))
                .with("method", Json.sanitize(method))
                .with("arg", Json.sanitize(arg))
                .with("extras", BundleCodec.toJsonOrNull(extras))
                .with("now_ms", JsonNumber.of(nowMs)));
    }

    /**
     * The event a hosted Provider sends when a Consumer launched one of the
     * PendingIntents its reply scripted and the user decided there
     * (the simulated device's {@code intent_launched}): {@code handle} is
     * the script's. {@code launcherUid} is -1 when the device cannot tell
     * who launched it; {@code launcher} is then left out.
     */
    public static Frame.Event intentLaunched(String handle, String decision, String authority, long launcherUid,
            List<String> launcherPackages, long nowMs) {
        JsonObject f = new JsonObject()
                .with("handle", Json.sanitize(handle))
                .with("decision", decision)
                .with("authority", Json.sanitize(authority));
        if (launcherUid >= 0) {
            List<Object> pkgs = new ArrayList<>();
            for (String p : launcherPackages) {
                pkgs.add(Json.sanitize(p));
            }
            f.with("launcher", new JsonObject().with("uid", JsonNumber.of(launcherUid)).with("packages", pkgs));
        }
        return new Frame.Event("intent_launched", f.with("now_ms", JsonNumber.of(nowMs)));
    }

    /**
     * {@code fd_closed}: the Consumer let go of the result descriptor of
     * the {@code fd_data} reply to {@code call} ({@code how}: closed,
     * detached, leaked, dead, error). {@code message} is written only when
     * given (an error's); it is the Consumer's text, so it is sanitized.
     */
    public static Frame.Event fdClosed(String call, String how, String message, long nowMs) {
        JsonObject f = new JsonObject()
                .with("call", call)
                .with("how", how);
        if (message != null) {
            f.with("message", Json.sanitize(message));
        }
        return new Frame.Event("fd_closed", f.with("now_ms", JsonNumber.of(nowMs)));
    }

    // Answers

    public static final class Identity {
        public final String name;
        public final long uid;
        public final List<String> packages;
        public final List<String> certSha256;

        public Identity(String name, long uid, List<String> packages, List<String> certSha256) {
            this.name = name;
            this.uid = uid;
            this.packages = packages;
            this.certSha256 = certSha256;
        }

        JsonObject toJson() {
            return new JsonObject()
                    .with("name", name)
                    .with("uid", JsonNumber.of(uid))
                    .with("packages", new ArrayList<Object>(packages))
                    .with("cert_sha256", new ArrayList<Object>(certSha256));
        }
    }

    public static final class DeviceInfo {
        public final int sdkInt;
        public final String model;
        public final String fingerprint;

        public DeviceInfo(int sdkInt, String model, String fingerprint) {
            this.sdkInt = sdkInt;
            this.model = model;
            this.fingerprint = fingerprint;
        }
    }

    public static JsonObject helloOk(String probe, Identity identity, DeviceInfo device, long nowMs, List<String> ops) {
        return helloOk(probe, identity, device, nowMs, ops, Collections.emptyMap());
    }

    /**
     * {@code unavailable} maps each op this probe leaves out of {@code ops}
     * to why; it is written as {@code ops_unavailable} when not empty (a
     * compatible extension: the host reads it to name the cause).
     */
    public static JsonObject helloOk(String probe, Identity identity, DeviceInfo device, long nowMs, List<String> ops,
            Map<String, String> unavailable) {
        return helloOk(probe, identity, device, nowMs, ops, unavailable, new JsonObject());
    }

    /**
     * {@code extra} holds further optional members (compatible extensions,
     * such as {@code reply_extensions}); the documented members win over
     * any of the same name.
     */
    public static JsonObject helloOk(String probe, Identity identity, DeviceInfo device, long nowMs, List<String> ops,
            Map<String, String> unavailable, JsonObject extra) {
        JsonObject ok = new JsonObject(extra);
        ok.with("wire", JsonNumber.of(FrameCodec.WIRE_VERSION))
                .with("probe", probe)
                .with("identity", identity.toJson())
                .with("device", new JsonObject()
                        .with("sdk_int", JsonNumber.of(device.sdkInt))
                        .with("model", Json.sanitize(device.model))
                        .with("fingerprint", Json.sanitize(device.fingerprint)))
                .with("now_ms", JsonNumber.of(nowMs))
                .with("ops", new ArrayList<Object>(ops));
        if (!unavailable.isEmpty()) {
            JsonObject why = new JsonObject();
            for (Map.Entry<String, String> e : unavailable.entrySet()) {
                why.put(e.getKey(), Json.sanitize(e.getValue()));
            }
            ok.put("ops_unavailable", why);
        }
        return ok;
    }

    /** One service answering the TOOL_PROVIDER action. */
    public static final class ServiceInfo {
        public final String pkg;
        public final String service;
        public final boolean exported;
        public final String permission;
        public final Map<String, String> meta;
        public final String authorityPackage;
        /**
         * SHA-256 (hex) of the certificates the package is signed with now;
         * written as {@code signing_cert_sha256} when known (a compatible
         * extension), so the host can pin the build under test.
         */
        public final List<String> signingCertSha256;
        /**
         * The type each meta-data value was compiled to, for those that are
         * not strings ({@code core.MetaValues}); written as {@code meta_types}
         * whenever the device knows them, empty when every value is a String
         * (a compatible extension). Null when not known: then nothing is
         * written and the host judges the texts alone.
         */
        public final Map<String, String> metaTypes;

        public ServiceInfo(String pkg, String service, boolean exported, String permission,
                Map<String, String> meta, String authorityPackage) {
            this(pkg, service, exported, permission, meta, authorityPackage, new ArrayList<>());
        }

        public ServiceInfo(String pkg, String service, boolean exported, String permission,
                Map<String, String> meta, String authorityPackage, List<String> signingCertSha256) {
            this(pkg, service, exported, permission, meta, authorityPackage, signingCertSha256, null);
        }

        public ServiceInfo(String pkg, String service, boolean exported, String permission,
                Map<String, String> meta, String authorityPackage, List<String> signingCertSha256,
                Map<String, String> metaTypes) {
            this.metaTypes = metaTypes;
            this.signingCertSha256 = signingCertSha256;
            this.pkg = pkg;
            this.service = service;
            this.exported = exported;
            this.permission = permission;
            this.meta = meta;
            this.authorityPackage = authorityPackage;
        }

        JsonObject toJson() {
            JsonObject m = new JsonObject();
            for (Map.Entry<String, String> e : meta.entrySet()) {
                m.put(Json.sanitize(e.getKey()), Json.sanitize(e.getValue()));
            }
            JsonObject out = new JsonObject()
                    .with("package", pkg)
                    .with("service", service)
                    .with("exported", exported)
                    .with("permission", permission)
                    .with("meta", m)
                    .with("authority_package", authorityPackage);
            if (!signingCertSha256.isEmpty()) {
                List<Object> certs = new ArrayList<>();
                for (String c : signingCertSha256) {
                    certs.add(Json.sanitize(c));
                }
                out.put("signing_cert_sha256", certs);
            }
            if (metaTypes != null) {
                JsonObject t = new JsonObject();
                for (Map.Entry<String, String> e : metaTypes.entrySet()) {
                    t.put(Json.sanitize(e.getKey()), Json.sanitize(e.getValue()));
                }
                out.put("meta_types", t);
            }
            return out;
        }
    }

    public static JsonObject discoverOk(List<ServiceInfo> providers) {
        List<Object> items = new ArrayList<>();
        for (ServiceInfo s : providers) {
            items.add(s.toJson());
        }
        return new JsonObject().with("providers", items);
    }

    public static JsonObject callOk(WireBundle result, long elapsedUs) {
        return callOk(result, elapsedUs, 0);
    }

    /**
     * {@code unreadKeys} counts result keys the device could not read at all;
     * written as {@code unread_keys} when not 0 (a compatible extension).
     */
    public static JsonObject callOk(WireBundle result, long elapsedUs, int unreadKeys) {
        JsonObject ok = new JsonObject()
                .with("result", BundleCodec.toJsonOrNull(result))
                .with("elapsed_us", JsonNumber.ofUnsigned(elapsedUs));
        if (unreadKeys > 0) {
            ok.put("unread_keys", JsonNumber.of(unreadKeys));
        }
        return ok;
    }

    public static JsonObject readFdOk(long bytes, String sha256, boolean eof, String error) {
        return readFdOk(bytes, sha256, eof, error, null);
    }

    /** {@code writable}, when known, is written as such (a compatible extension). */
    public static JsonObject readFdOk(long bytes, String sha256, boolean eof, String error, Boolean writable) {
        JsonObject ok = new JsonObject()
                .with("bytes", JsonNumber.ofUnsigned(bytes))
                .with("sha256", sha256)
                .with("eof", eof)
                .with("error", Json.sanitize(error));
        if (writable != null) {
            ok.put("writable", writable.booleanValue());
        }
        return ok;
    }

    /** {@code advance_clock}'s answer: the device time after the move. */
    public static JsonObject advanceClockOk(long nowMs) {
        return new JsonObject().with("now_ms", JsonNumber.of(nowMs));
    }

    public static JsonObject resolveOk(boolean launched, boolean decisionApplied, int resultCode) {
        return resolveOk(launched, decisionApplied, resultCode, null);
    }

    /**
     * {@code launchedPackage}, the package of the activity that came up, is
     * written as {@code launched_package} when known (a compatible extension).
     */
    public static JsonObject resolveOk(boolean launched, boolean decisionApplied, int resultCode,
            String launchedPackage) {
        JsonObject ok = new JsonObject()
                .with("launched", launched)
                .with("decision_applied", decisionApplied)
                .with("result_code", JsonNumber.of(resultCode));
        if (launchedPackage != null) {
            ok.put("launched_package", Json.sanitize(launchedPackage));
        }
        return ok;
    }
}
