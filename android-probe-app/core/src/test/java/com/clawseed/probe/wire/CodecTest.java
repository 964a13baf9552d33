package com.clawseed.probe.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** JSON, numbers, base64 and Bundles, one rule at a time. */
class CodecTest {
    private static Object parse(String s) throws WireDecodeException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        return JsonParser.parse(b, 0, b.length);
    }

    private static String classOf(String s) {
        try {
            parse(s);
            return "ok";
        } catch (WireDecodeException e) {
            return e.errorClass();
        }
    }

    @Test
    void loneSurrogatesSurvive() throws Exception {
        assertEquals("a\ud800b", parse("\"a\\ud800b\""));
        assertEquals("\"\\udc00\\ud800\"", JsonWriter.toText("\udc00\ud800"));
        assertEquals("\ud800\u0041", parse("\"\\ud800\\u0041\""));
        assertEquals("\"\\ud800\uD83D\uDE00\"", JsonWriter.toText(parse("\"\\ud800\\ud83d\\ude00\"")));
        assertEquals("\uD83D\uDE00\u00e9/", parse("\"\\ud83d\\ude00\\u00e9\\/\""));
    }

    @Test
    void escapesFollowTheCanonicalForm() {
        StringBuilder sb = new StringBuilder();
        for (char c = 0; c < 0x80; c++) {
            sb.append(c);
        }
        String text = JsonWriter.toText(sb.toString());
        assertTrue(text.startsWith("\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e"), text);
        assertTrue(text.contains("!\\\"#"), text);
        assertTrue(text.contains("[\\\\]"), text);
        assertTrue(text.endsWith("~\u007f\""), text);
        assertEquals("\"\u2028\u00e9\"", JsonWriter.toText("\u2028\u00e9"));
    }

    @Test
    void syntaxErrorsAreBadJson() {
        for (String bad : Arrays.asList("", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{1:2}", "01", "1.",
                ".5", "-", "1e", "+1", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "[1 2]",
                "{\"a\":1}x", "\"a\tb\"", "\"a\nb\"", "1\n", "NaN", "Infinity", "\"\\u\uff10\uff10\uff10\uff10\"")) {
            assertEquals("bad_json", classOf(bad), bad);
        }
    }

    @Test
    void structuralLimits() {
        String deep = "[".repeat(JsonParser.MAX_DEPTH) + "]".repeat(JsonParser.MAX_DEPTH);
        assertEquals("ok", classOf(deep));
        assertEquals("too_deep", classOf("[" + deep + "]"));
        assertEquals("too_deep", classOf("[".repeat(100_000)));
        assertEquals("duplicate_key", classOf("{\"a\":1,\"a\":2}"));
        assertEquals("lone_surrogate", classOf("{\"\\ud800\":1}"));
        assertEquals("out_of_range", classOf("1e400"));
        assertEquals("out_of_range", classOf("1".repeat(JsonParser.MAX_NUMBER_LEN + 1)));
    }

    @Test
    void utf8IsStrict() {
        byte[][] bad = {
            {(byte) 0xED, (byte) 0xA0, (byte) 0x80}, {(byte) 0xC0, (byte) 0xAF}, {(byte) 0xE2, (byte) 0x82},
            {(byte) 0xFF}, {(byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80}, {(byte) 0xE0, (byte) 0x80, (byte) 0x80},
        };
        for (byte[] b : bad) {
            WireDecodeException e = assertThrows(WireDecodeException.class, () -> Utf8.decode(b, 0, b.length));
            assertEquals("bad_utf8", e.errorClass());
        }
    }

    @Test
    void numbers() throws Exception {
        assertEquals("0", JsonWriter.toText(parse("-0")));
        assertEquals("18446744073709551615", JsonWriter.toText(parse("18446744073709551615")));
        assertEquals("-9223372036854775808", JsonWriter.toText(parse("-9223372036854775808")));
        assertEquals("1.8446744073709552e+19", JsonWriter.toText(parse("18446744073709551616")));
        assertEquals("100.0", JsonWriter.toText(parse("1E2")));
        assertEquals("0.0", JsonWriter.toText(parse("1e-400")));
        assertEquals("-0.0", JsonWriter.toText(parse("-0.0")));
        assertEquals(JsonNumber.Mismatch.NOT_INTEGER, ((JsonNumber) parse("2.0")).integerMismatch());
        assertEquals(JsonNumber.Mismatch.OUT_OF_RANGE, ((JsonNumber) parse("18446744073709551616")).integerMismatch());
    }

    @Test
    void floatLiteralRoundsOnce() throws Exception {
        // Just above the midpoint between 1.0f and the next float, but a
        // double rounds it onto the midpoint, and then to 1.0f.
        String text = "1.00000005960464477539062500001";
        assertEquals(Math.nextUp(1.0f), ((JsonNumber) parse(text)).floatValue());
        assertEquals(1.0f, (float) Double.parseDouble(text));
    }

    @Test
    void floatTextExamples() {
        double[] ds = {0.0, -0.0, 1.0, 0.1, 100.0, 1e15, 1e16, 1.5e16, 1e-5, 1.2e-6, Double.MAX_VALUE, Double.MIN_NORMAL,
            Double.MIN_VALUE, -127111427579672.62};
        String[] dt = {"0.0", "-0.0", "1.0", "0.1", "100.0", "1000000000000000.0", "1e+16", "1.5e+16", "0.00001", "1.2e-6",
            "1.7976931348623157e+308", "2.2250738585072014e-308", "5e-324", "-127111427579672.62"};
        for (int i = 0; i < ds.length; i++) {
            assertEquals(dt[i], FloatFormat.doubleText(ds[i]), String.valueOf(ds[i]));
        }
        float[] fs = {0.1f, 1e12f, 1e15f, 1e16f, 1e-5f, 1e-6f, Float.MAX_VALUE, Float.MIN_VALUE, 298857.125f, 1.0f / 3.0f};
        String[] ft = {"0.1", "1000000000000.0", "1000000000000000.0", "1e+16", "0.00001", "1e-6", "3.4028235e+38", "1e-45",
            "298857.12", "0.33333334"};
        for (int i = 0; i < fs.length; i++) {
            assertEquals(ft[i], FloatFormat.floatText(fs[i]), String.valueOf(fs[i]));
        }
    }

    @Test
    void randomFloatsRoundTripAndStayShortest() {
        Random r = new Random(20240601L);
        for (int i = 0; i < 3000; i++) {
            double d = Double.longBitsToDouble(r.nextLong());
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                continue;
            }
            String t = FloatFormat.doubleText(d);
            assertEquals(Double.doubleToRawLongBits(d), Double.doubleToRawLongBits(FloatFormat.parseDouble(t)), t);
            float f = Float.intBitsToFloat(r.nextInt());
            if (Float.isNaN(f) || Float.isInfinite(f)) {
                continue;
            }
            String ft = FloatFormat.floatText(f);
            assertEquals(Float.floatToRawIntBits(f), Float.floatToRawIntBits(FloatFormat.parseFloat(ft)), ft);
            // A float's text read as an untyped double is written the same.
            assertEquals(ft, FloatFormat.doubleText(FloatFormat.parseDouble(ft)));
        }
    }

    @Test
    void base64IsStrict() {
        assertEquals("", Base64Strict.encode(new byte[0]));
        assertEquals("AA==", Base64Strict.encode(new byte[] {0}));
        assertEquals("AAE=", Base64Strict.encode(new byte[] {0, 1}));
        assertEquals("AAEC", Base64Strict.encode(new byte[] {0, 1, 2}));
        assertArrayEquals(new byte[] {(byte) 0xFF, (byte) 0xEF, (byte) 0xFE}, Base64Strict.decode("/+/+"));
        for (String bad : Arrays.asList("AAE", "AB==", "AAE?", "AA==AA==", "AA AA", "AA-_", "A", "====", "A===", "AA=A")) {
            assertThrows(IllegalArgumentException.class, () -> Base64Strict.decode(bad), bad);
        }
        Random r = new Random(7);
        for (int n = 0; n < 40; n++) {
            byte[] b = new byte[n];
            r.nextBytes(b);
            assertArrayEquals(b, Base64Strict.decode(Base64Strict.encode(b)));
            assertEquals(java.util.Base64.getEncoder().encodeToString(b), Base64Strict.encode(b));
        }
    }

    @Test
    void bundleErrorsNameTheField() throws Exception {
        WireDecodeException e = assertThrows(WireDecodeException.class, () -> BundleCodec.fromJson(
                parse("{\"consumer_versions\":{\"t\":\"int[]\",\"v\":[2,4294967296]}}"), ""));
        assertEquals("out_of_range", e.errorClass());
        assertEquals("at `/consumer_versions/v/1`: expected an int (32-bit integer), found 4294967296 (out of range)", e.getMessage());
    }

    @Test
    void everyBundleTypeRoundTrips() throws Exception {
        WireBundle b = new WireBundle()
                .put("n", WireValue.NULL)
                .put("b", WireValue.ofBool(true))
                .put("i", WireValue.ofInt(-7))
                .put("l", WireValue.ofLong(Long.MIN_VALUE))
                .put("f", WireValue.ofFloat(Float.NEGATIVE_INFINITY))
                .put("d", WireValue.ofDouble(-0.0))
                .put("s", WireValue.ofString("x\ud800"))
                .put("ia", WireValue.ofIntArray(new int[] {1, 2}))
                .put("la", WireValue.ofLongArray(new long[] {3}))
                .put("ba", WireValue.ofBoolArray(new boolean[] {false}))
                .put("da", WireValue.ofDoubleArray(new double[] {Double.NaN, 1e300}))
                .put("sa", WireValue.ofStringArray(Arrays.asList("a", "")))
                .put("sl", WireValue.ofStringList(List.of()))
                .put("by", WireValue.ofBytes(new byte[] {9}))
                .put("bu", WireValue.ofBundle(new WireBundle().put("x", WireValue.ofInt(1))))
                .put("pi", WireValue.ofPendingIntent(new WireValue.PendingIntentInfo("pi-1", null, 5L, false, null)))
                .put("fd", WireValue.ofFd("fd-1"))
                .put("o", WireValue.ofOther("a.B"));
        String text = JsonWriter.toText(BundleCodec.toJson(b));
        WireBundle back = BundleCodec.fromJson(parse(text), "");
        assertEquals(b, back);
        assertEquals(text, JsonWriter.toText(BundleCodec.toJson(back)));
    }

    @Test
    void frameKinds() throws Exception {
        assertEquals("not_a_frame", frameClass("{\"id\":1,\"event\":\"x\"}"));
        assertEquals("missing_field", frameClass("{\"ok\":{}}"));
        assertEquals("not_a_frame", frameClass("{\"id\":1,\"ok\":{},\"chunk\":\"\"}"));
        Frame f = FrameCodec.decode("{\"event\":\"bad_frame\",\"error\":{}}".getBytes(StandardCharsets.UTF_8));
        assertTrue(f instanceof Frame.Event);
        JsonObject fields = new JsonObject().with("id", JsonNumber.of(3)).with("x", "y");
        assertEquals("{\"event\":\"e\",\"x\":\"y\"}\n",
                new String(FrameCodec.encode(new Frame.Event("e", fields)), StandardCharsets.UTF_8));
        WireError lone = new WireError(WireError.PROVIDER_EXCEPTION, "bad \ud800 id", "java.lang.X", null);
        assertEquals("{\"error\":{\"class\":\"java.lang.X\",\"kind\":\"provider_exception\",\"message\":\"bad \uFFFD id\"},\"id\":1}\n",
                new String(FrameCodec.encode(new Frame.Err(1, lone)), StandardCharsets.UTF_8));
        assertEquals(Long.valueOf(7), FrameCodec.requestIdHint("{\"id\":7,\"op\":5}".getBytes(StandardCharsets.UTF_8), 0, 15));
    }

    private static String frameClass(String s) {
        try {
            FrameCodec.decode(s.getBytes(StandardCharsets.UTF_8));
            return "ok";
        } catch (WireDecodeException e) {
            return e.errorClass();
        }
    }
}
