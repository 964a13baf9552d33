package com.clawseed.probe.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** The golden frames shared with the Rust codec. */
class GoldenFramesTest {
    private static final List<String> ERROR_KINDS = Arrays.asList(
            "bad_request", "unknown_op", "unknown_authority", "provider_exception", "provider_died",
            "transaction_too_large", "timeout", "unknown_handle", "unsupported");
    private static final List<String> CLASSES = Arrays.asList(
            "frame_too_large", "bad_utf8", "bad_json", "too_deep", "duplicate_key", "not_a_frame",
            "missing_field", "wrong_type", "bad_type_tag", "not_integer", "out_of_range", "bad_base64",
            "lone_surrogate", "bad_value");

    @TestFactory
    List<DynamicTest> everyGoldenLineRoundTripsByteForByte() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (Path file : Vectors.goldenFiles()) {
            tests.add(DynamicTest.dynamicTest(file.getFileName().toString(), () -> {
                List<byte[]> lines = Vectors.lines(file);
                assertTrue(lines.size() > 0, "empty file");
                for (int n = 0; n < lines.size(); n++) {
                    byte[] line = lines.get(n);
                    String ctx = file.getFileName() + ":" + (n + 1);
                    Frame frame;
                    try {
                        frame = FrameCodec.decode(line);
                    } catch (WireDecodeException e) {
                        throw new AssertionError(ctx + ": " + e, e);
                    }
                    assertEquals(Vectors.text(Vectors.withNewline(line)), Vectors.text(FrameCodec.encode(frame)), ctx);
                    if (frame instanceof Frame.Request && Ops.isKnown(((Frame.Request) frame).op)) {
                        try {
                            Ops.decodeParams((Frame.Request) frame);
                        } catch (WireDecodeException e) {
                            throw new AssertionError(ctx + ": " + e, e);
                        }
                    }
                }
            }));
        }
        assertTrue(tests.size() >= 7, "golden files missing");
        return tests;
    }

    private static void collectTags(Object json, Set<String> tags) {
        if (json instanceof JsonObject) {
            JsonObject m = (JsonObject) json;
            if (m.get("t") instanceof String && m.containsKey("v")) {
                tags.add((String) m.get("t"));
            }
            m.values().forEach(v -> collectTags(v, tags));
        } else if (json instanceof List) {
            ((List<?>) json).forEach(v -> collectTags(v, tags));
        }
    }

    @Test
    void goldensCoverEveryOpKindAndTag() throws Exception {
        Set<String> ops = new TreeSet<>();
        Set<String> kinds = new TreeSet<>();
        Set<String> tags = new TreeSet<>();
        for (Path file : Vectors.goldenFiles()) {
            for (byte[] line : Vectors.lines(file)) {
                Frame f = FrameCodec.decode(line);
                collectTags(FrameCodec.toJson(f), tags);
                if (f instanceof Frame.Request && Ops.isKnown(((Frame.Request) f).op)) {
                    ops.add(((Frame.Request) f).op);
                } else if (f instanceof Frame.Err) {
                    kinds.add(((Frame.Err) f).error.kind);
                }
            }
        }
        assertEquals(new TreeSet<>(Ops.KNOWN), ops);
        assertTrue(kinds.containsAll(ERROR_KINDS), kinds.toString());
        for (WireValue.Type t : WireValue.Type.values()) {
            assertTrue(tags.contains(t.tag), "no golden value of type " + t.tag);
        }
    }

    /** The frame bytes of one invalid case. */
    static byte[] invalidFrameBytes(JsonObject c) {
        if (c.get("frame") instanceof String) {
            String frame = (String) c.get("frame");
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
            Utf8.encode(frame, out);
            return out.toByteArray();
        }
        if (c.get("frame_base64") instanceof String) {
            return Base64Strict.decode((String) c.get("frame_base64"));
        }
        JsonObject g = (JsonObject) c.get("generate");
        byte[] prefix = ((String) g.get("prefix")).getBytes(StandardCharsets.UTF_8);
        byte[] fill = ((String) g.get("fill")).getBytes(StandardCharsets.UTF_8);
        byte[] suffix = ((String) g.get("suffix")).getBytes(StandardCharsets.UTF_8);
        int total = ((JsonNumber) g.get("total_bytes")).integerValue().intValueExact();
        byte[] out = new byte[total];
        System.arraycopy(prefix, 0, out, 0, prefix.length);
        int fillEnd = total - 1 - suffix.length;
        for (int i = prefix.length; i < fillEnd; i++) {
            out[i] = fill[(i - prefix.length) % fill.length];
        }
        System.arraycopy(suffix, 0, out, fillEnd, suffix.length);
        out[total - 1] = '\n';
        return out;
    }

    @Test
    void everyInvalidFrameIsRejectedWithItsClass() throws Exception {
        Path file = Vectors.dir().resolve("invalid.jsonl");
        Set<String> seen = new TreeSet<>();
        int n = 0;
        for (byte[] wrapper : Vectors.lines(file)) {
            n++;
            JsonObject c = (JsonObject) JsonParser.parse(wrapper, 0, wrapper.length);
            String expected = (String) c.get("error");
            byte[] bytes = invalidFrameBytes(c);
            String got;
            String message;
            try {
                Frame f = FrameCodec.decode(bytes);
                if (f instanceof Frame.Request) {
                    Ops.decodeParams((Frame.Request) f);
                }
                got = "decoded";
                message = "";
            } catch (WireDecodeException e) {
                got = e.errorClass();
                message = e.getMessage();
            }
            assertEquals(expected, got, "invalid.jsonl:" + n + " (" + c.get("note") + ") " + message);
            seen.add(expected);
        }
        assertTrue(seen.containsAll(CLASSES), "classes without an invalid frame: " + seen);
    }

    private static Map<String, String> goldenAnswers(String file) throws Exception {
        Map<String, String> byKey = new LinkedHashMap<>();
        for (byte[] line : Vectors.lines(Vectors.dir().resolve(file))) {
            Frame f = FrameCodec.decode(line);
            if (f instanceof Frame.Ok) {
                byKey.put(Long.toUnsignedString(((Frame.Ok) f).id), Vectors.text(line));
            }
        }
        return byKey;
    }

    private static String encodeOk(long id, JsonObject ok) {
        byte[] line = FrameCodec.encode(new Frame.Ok(id, ok));
        return new String(line, 0, line.length - 1, StandardCharsets.UTF_8);
    }

    @Test
    void typedAnswersEncodeToTheGoldenBytes() throws Exception {
        Map<String, String> hello = goldenAnswers("hello.jsonl");
        JsonObject helloOk = Ops.helloOk("cetp-probe-android/0.1.0",
                new Ops.Identity("a", 10123, Arrays.asList("com.clawseed.probe"),
                        Arrays.asList("5f2c0e8c3c0b6a3f4e9d1a7b2c8e0f6a9d4b3c2e1f0a9b8c7d6e5f4a3b2c1d0e")),
                new Ops.DeviceInfo(34, "Pixel 8", "google/shiba/shiba:14/AP1A.240305.019.A1/11445699:user/release-keys"),
                1717171717171L,
                Arrays.asList("hello", "discover", "call", "read_fd", "close_fd", "resolve", "restart_provider"));
        assertEquals(hello.get("1"), encodeOk(1, helloOk));
        com.clawseed.probe.core.Abilities refused = com.clawseed.probe.core.Abilities.of(
                com.clawseed.probe.core.Abilities.UiConnection.REFUSED, null);
        JsonObject helloB = Ops.helloOk("cetp-probe-android/0.1.0",
                new Ops.Identity("b", 10124, Arrays.asList("com.clawseed.probe.b"),
                        Arrays.asList("0b9d2c6f61c4bd7d1b1c7ac9c2a7e8f3d1e0b2c4a6f8e0d2c4b6a8f0e2d4c6b8")),
                new Ops.DeviceInfo(30, "Pixel 3a", "google/sargo/sargo:11/RQ3A.211001.001/7641976:user/release-keys"),
                1717171717999L, refused.ops(), refused.unavailable());
        assertEquals(hello.get("2"), encodeOk(2, helloB));

        Map<String, String> discover = goldenAnswers("discover.jsonl");
        Map<String, String> meta = new HashMap<>();
        meta.put("com.clawseed.tools.authority", "com.example.app.clawseed.tools");
        meta.put("com.clawseed.tools.version", "1");
        meta.put("com.clawseed.tools.versions", "1,2");
        JsonObject discoverOk = Ops.discoverOk(Arrays.asList(
                new Ops.ServiceInfo("com.example.app", "com.example.app/.cetp.ToolProviderService", true, null, meta, "com.example.app"),
                new Ops.ServiceInfo("org.other", "org.other/org.other.Tools", false, "org.other.permission.TOOLS", new HashMap<>(), null)));
        assertEquals(discover.get("2"), encodeOk(2, discoverOk));
        // The signing certificate extension, written when known.
        JsonObject signed = Ops.discoverOk(Arrays.asList(
                new Ops.ServiceInfo("com.example.app", "com.example.app/.cetp.ToolProviderService", true, null,
                        new HashMap<>(), "com.example.app", Arrays.asList("89ba2f39c6af8a4343d57ee257af0e9c9b435909b500e219276a3649b1688a4b"))));
        assertEquals(discover.get("4"), encodeOk(4, signed));
        // Meta-data types, written whenever known: empty when every value is a String.
        Map<String, String> v2only = new HashMap<>();
        v2only.put("com.clawseed.tools.authority", "com.example.app.clawseed.tools");
        v2only.put("com.clawseed.tools.version", "2");
        v2only.put("com.clawseed.tools.versions", "2");
        Map<String, String> ints = new HashMap<>();
        ints.put("com.clawseed.tools.version", "int");
        ints.put("com.clawseed.tools.versions", "int");
        JsonObject typed = Ops.discoverOk(Arrays.asList(
                new Ops.ServiceInfo("com.example.app", "com.example.app/.cetp.ToolProviderService", true, null,
                        v2only, "com.example.app", new java.util.ArrayList<>(), ints),
                new Ops.ServiceInfo("com.example.app", "com.example.app/.Tools", true, null,
                        Map.of("com.clawseed.tools.versions", "1,2"), "com.example.app", new java.util.ArrayList<>(),
                        new HashMap<>())));
        assertEquals(discover.get("5"), encodeOk(5, typed));

        Map<String, String> calls = goldenAnswers("call-typed-bundles.jsonl");
        WireBundle result = new WireBundle()
                .put("status", WireValue.ofString("pending_confirmation"))
                .put("confirmation_intent", WireValue.ofPendingIntent(
                        new WireValue.PendingIntentInfo("pi-1", "com.example.app", 10234L, true, true)))
                .put("unknown_pi", WireValue.ofPendingIntent(new WireValue.PendingIntentInfo("pi-2", null, null, null, null)))
                .put("result_fd", WireValue.ofFd("fd-1"))
                .put("weird", WireValue.ofOther("android.graphics.Point"))
                .put("nested", WireValue.ofBundle(new WireBundle()
                        .put("inner", WireValue.ofBundle(new WireBundle().put("x", WireValue.ofLong(-1))))
                        .put("empty", WireValue.ofBundle(new WireBundle()))));
        assertEquals(calls.get("8"), encodeOk(8, Ops.callOk(result, 1500)));
        assertEquals(calls.get("9"), encodeOk(9, Ops.callOk(null, 0)));
        assertEquals(calls.get("10"), encodeOk(10, Ops.callOk(new WireBundle(), -1L)));
        WireBundle partial = new WireBundle()
                .put("status", WireValue.ofString("success"))
                .put("widget", WireValue.ofOther("com.example.app.Widget"));
        assertEquals(calls.get("12"), encodeOk(12, Ops.callOk(partial, 2048, 2)));

        Map<String, String> reads = goldenAnswers("read_fd-chunks.jsonl");
        assertEquals(reads.get("5"), encodeOk(5, Ops.readFdOk(3, "007d9acdba22c5bd379a3ca0e4432f39456c9a0a3bd702a4308afe7f85f89906", false, null)));
        assertEquals(reads.get("6"), encodeOk(6, Ops.readFdOk(0,
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", true, "java.io.IOException: writer crashed")));

        Map<String, String> resolves = goldenAnswers("resolve-restart.jsonl");
        assertEquals(resolves.get("5"), encodeOk(5, Ops.resolveOk(true, true, -1)));
        assertEquals(resolves.get("9"), encodeOk(9, Ops.resolveOk(true, false, 0, "android")));
        assertEquals(resolves.get("8"), encodeOk(8, new JsonObject()));
    }

    @Test
    void typedErrorsEncodeToTheGoldenBytes() throws Exception {
        List<String> lines = Vectors.lines(Vectors.dir().resolve("errors.jsonl")).stream()
                .map(Vectors::text).collect(Collectors.toList());
        byte[] e = FrameCodec.encode(new Frame.Err(4, new WireError(WireError.PROVIDER_EXCEPTION,
                "Permission Denial: caller not allowed", "java.lang.SecurityException", null)));
        assertTrue(lines.contains(new String(e, 0, e.length - 1, StandardCharsets.UTF_8)));
        byte[] ev = FrameCodec.encode(new Frame.Event("bad_frame", new JsonObject().with("error",
                new WireError(WireError.BAD_REQUEST, "bad JSON at byte 0: expected a value, found `x`").toJson())));
        assertTrue(lines.contains(new String(ev, 0, ev.length - 1, StandardCharsets.UTF_8)));
    }

    @Test
    void goldenValuesHaveTheirExactTypes() throws Exception {
        Map<String, Ops.CallParams> calls = new HashMap<>();
        for (byte[] line : Vectors.lines(Vectors.dir().resolve("call-typed-bundles.jsonl"))) {
            Frame f = FrameCodec.decode(line);
            if (f instanceof Frame.Request && ((Frame.Request) f).op.equals("call")) {
                Ops.CallParams p = (Ops.CallParams) Ops.decodeParams((Frame.Request) f);
                calls.put(p.method, p);
            }
        }
        WireBundle echo = calls.get("echo").extras;
        assertEquals(WireValue.ofInt(Integer.MIN_VALUE), echo.get("int_min"));
        assertEquals(WireValue.ofLong(Long.MAX_VALUE), echo.get("long_max"));
        assertEquals(WireValue.ofLong(2), echo.get("long_small"));
        WireBundle floats = calls.get("floats").extras;
        assertEquals(298857.125f, floats.get("f_tie").asFloat());
        assertEquals(Double.MIN_VALUE, floats.get("d_min").asDouble());
        assertEquals(Double.doubleToRawLongBits(-0.0), Double.doubleToRawLongBits(floats.get("d_negzero").asDouble()));
        assertTrue(Float.isNaN(floats.get("f_nan").asFloat()));
        assertEquals(1.0f / 3.0f, floats.get("f_third").asFloat());
        WireBundle lone = calls.get("lone_surrogates").extras;
        assertEquals("r-\ud800", lone.get("request_id").asString());
        assertEquals("\udc00\ud800", lone.get("reversed_pair").asString());
        WireBundle arrays = calls.get("arrays").extras;
        assertArrayEquals(new byte[] {0, 1, 2, 3, (byte) 0xFE, (byte) 0xFF}, arrays.get("bytes").asBytes());
        List<String> keys = new ArrayList<>(arrays.keySet());
        assertEquals(Arrays.asList("z", "\uFFFD", "\uD83D\uDE00"), keys.subList(keys.size() - 3, keys.size()));
        assertNotNull(calls.get("deep").extras);
    }

    @Test
    void goldenFilesEndInNewlinesAndHoldNoBlankLines() throws Exception {
        for (Path file : Vectors.goldenFiles()) {
            byte[] all = Files.readAllBytes(file);
            assertEquals('\n', all[all.length - 1], file.toString());
            for (byte[] line : Vectors.lines(file)) {
                if (line.length == 0) {
                    fail(file + " has a blank line");
                }
            }
        }
    }
}
