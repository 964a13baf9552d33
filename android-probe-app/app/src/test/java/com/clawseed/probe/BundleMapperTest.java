package com.clawseed.probe;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import android.app.PendingIntent;
import android.content.Context;
import android.content.Intent;
import android.os.Bundle;
import android.os.Parcel;
import android.os.ParcelFileDescriptor;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.HandleTable;
import com.clawseed.probe.wire.WireBundle;
import com.clawseed.probe.wire.WireValue;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;

/** BundleMapper against android.os.Bundle and Parcel of the framework (Robolectric, API 34). */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34)
public class BundleMapperTest {
    private final HandleTable<PendingIntent> intents = new HandleTable<>("pi-");
    private final HandleTable<ParcelFileDescriptor> fds = new HandleTable<>("fd-");
    private final BundleMapper mapper = new BundleMapper(intents, fds);

    /** What a Provider in another process receives: the Bundle through a Parcel. */
    private static Bundle overBinder(Bundle b) {
        Parcel p = Parcel.obtain();
        try {
            p.writeBundle(b);
            p.setDataPosition(0);
            Bundle out = p.readBundle(BundleMapperTest.class.getClassLoader());
            return out;
        } finally {
            p.recycle();
        }
    }

    private static WireBundle everyWireType() {
        WireBundle nested = new WireBundle();
        nested.put("n", WireValue.ofLong(-1L));
        WireBundle w = new WireBundle();
        w.put("null", WireValue.NULL);
        w.put("bool", WireValue.ofBool(true));
        w.put("int", WireValue.ofInt(1));
        w.put("long", WireValue.ofLong(1L));
        w.put("int_min", WireValue.ofInt(Integer.MIN_VALUE));
        w.put("long_max", WireValue.ofLong(Long.MAX_VALUE));
        w.put("float", WireValue.ofFloat(1.5f));
        w.put("double", WireValue.ofDouble(-2.5e-300));
        w.put("string", WireValue.ofString("h\u00e9 \ud800 lone"));
        w.put("ints", WireValue.ofIntArray(new int[] {2, 1}));
        w.put("longs", WireValue.ofLongArray(new long[] {Long.MIN_VALUE}));
        w.put("bools", WireValue.ofBoolArray(new boolean[] {true, false}));
        w.put("doubles", WireValue.ofDoubleArray(new double[] {0.1, 1e300}));
        w.put("strings", WireValue.ofStringArray(Arrays.asList("a", "")));
        w.put("list", WireValue.ofStringList(Arrays.asList("x", "y")));
        w.put("bytes", WireValue.ofBytes(new byte[] {0, -1, 127}));
        w.put("bundle", WireValue.ofBundle(nested));
        return w;
    }

    @Test
    @SuppressWarnings("deprecation") // get(key): the type is what is checked
    public void every_wire_type_round_trips_through_a_parcel_with_its_exact_type() throws DeviceError {
        WireBundle w = everyWireType();
        Bundle android = mapper.toAndroid(w);
        // The exact Java types a Provider reads with the typed getters.
        assertTrue(android.get("int") instanceof Integer);
        assertTrue(android.get("long") instanceof Long);
        assertTrue(android.get("list") instanceof java.util.ArrayList);
        assertTrue(android.get("strings") instanceof String[]);
        // -0.0 keeps its sign in the Bundle (Robolectric's Parcel, unlike
        // Android's, writes it as 0.0, so it is checked before the parcel).
        WireBundle zero = new WireBundle().put("z", WireValue.ofDouble(-0.0));
        Bundle zeroAndroid = mapper.toAndroid(zero);
        assertEquals(Double.doubleToRawLongBits(-0.0), Double.doubleToRawLongBits(zeroAndroid.getDouble("z")));
        assertEquals(zero, mapper.readResult(zeroAndroid).bundle);
        BundleMapper.Read back = mapper.readResult(overBinder(android));
        assertEquals(0, back.unreadKeys);
        assertEquals(w, back.bundle);
        assertEquals(WireValue.Type.INT, back.bundle.get("int").type);
        assertEquals(WireValue.Type.LONG, back.bundle.get("long").type);
    }

    @Test
    public void values_without_a_wire_type_are_other_with_their_class() throws DeviceError {
        Bundle b = new Bundle();
        b.putShort("short", (short) 1);
        b.putFloatArray("floats", new float[] {1f});
        b.putStringArray("null_element", new String[] {"a", null});
        b.putParcelable("intent", new Intent("x"));
        WireBundle w = mapper.readResult(overBinder(b)).bundle;
        assertEquals(WireValue.ofOther("java.lang.Short"), w.get("short"));
        assertEquals(WireValue.ofOther("[F"), w.get("floats"));
        assertEquals(WireValue.ofOther("java.lang.String[]"), w.get("null_element"));
        assertEquals(WireValue.ofOther("android.content.Intent"), w.get("intent"));
    }

    @Test
    public void bundles_nested_deeper_than_the_wire_allows_become_other() throws DeviceError {
        Bundle inner = new Bundle();
        inner.putInt("leaf", 1);
        for (int i = 0; i < 40; i++) {
            Bundle outer = new Bundle();
            outer.putBundle("b", inner);
            inner = outer;
        }
        WireBundle w = mapper.readResult(overBinder(inner)).bundle;
        int depth = 1;
        while (w.get("b").type == WireValue.Type.BUNDLE) {
            w = w.get("b").asBundle();
            depth++;
        }
        assertEquals(WireValue.ofOther("android.os.Bundle"), w.get("b"));
        assertEquals(com.clawseed.probe.wire.BundleCodec.MAX_DEPTH, depth);
    }

    @Test
    public void pending_intents_carry_creator_and_mutability() throws DeviceError {
        Context ctx = RuntimeEnvironment.getApplication();
        Bundle b = new Bundle();
        b.putParcelable("immutable", PendingIntent.getActivity(ctx, 1, new Intent(ctx, ResolveActivity.class),
                PendingIntent.FLAG_IMMUTABLE));
        b.putParcelable("mutable", PendingIntent.getBroadcast(ctx, 2, new Intent("cetp.test"),
                PendingIntent.FLAG_MUTABLE));
        WireBundle w = mapper.readResult(b).bundle;
        WireValue.PendingIntentInfo imm = w.get("immutable").asPendingIntent();
        WireValue.PendingIntentInfo mut = w.get("mutable").asPendingIntent();
        assertEquals(ctx.getPackageName(), imm.creatorPackage);
        // Robolectric's PendingIntent has no creator UID of its own (0); the
        // mapping must carry the framework's answer, whatever it is.
        assertEquals(Long.valueOf(b.getParcelable("immutable", PendingIntent.class).getCreatorUid()), imm.creatorUid);
        assertEquals(Boolean.TRUE, imm.immutable);
        assertEquals(Boolean.TRUE, imm.activity);
        assertEquals(Boolean.FALSE, mut.immutable);
        assertEquals(Boolean.FALSE, mut.activity);
        // The handle gives back the very PendingIntent, for resolve or for extras.
        assertTrue(intents.peek(imm.handle) == b.getParcelable("immutable", PendingIntent.class));
        Bundle extras = mapper.toAndroid(w);
        assertTrue(extras.getParcelable("mutable", PendingIntent.class) == b.getParcelable("mutable", PendingIntent.class));
    }

    @Test
    public void descriptors_become_handles_whose_pipe_reads_back() throws Exception {
        ParcelFileDescriptor[] pipe = ParcelFileDescriptor.createPipe();
        Bundle b = new Bundle();
        b.putParcelable("result_fd", pipe[0]);
        WireBundle w = mapper.readResult(b).bundle;
        assertEquals(WireValue.Type.FD, w.get("result_fd").type);
        ParcelFileDescriptor held = fds.take(w.get("result_fd").asString());
        try (OutputStream out = new FileOutputStream(pipe[1].getFileDescriptor())) {
            out.write("bytes".getBytes(StandardCharsets.UTF_8));
        }
        pipe[1].close();
        try (InputStream in = new FileInputStream(held.getFileDescriptor())) {
            assertArrayEquals("bytes".getBytes(StandardCharsets.UTF_8), in.readAllBytes());
        }
        held.close();
        assertFalse(fds.drain().iterator().hasNext());
    }

    @Test
    public void other_values_are_refused_towards_a_provider() {
        WireBundle w = new WireBundle();
        w.put("x", WireValue.ofOther("java.lang.Short"));
        try {
            mapper.toAndroid(w);
            throw new AssertionError("an `other` value was sent");
        } catch (DeviceError e) {
            assertEquals("unsupported", e.kind);
        }
    }
}
