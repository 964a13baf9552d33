package com.clawseed.probe;

import android.app.PendingIntent;
import android.os.Build;
import android.os.Bundle;
import android.os.Parcel;
import android.os.ParcelFileDescriptor;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.Failures;
import com.clawseed.probe.core.HandleTable;
import com.clawseed.probe.wire.BundleCodec;
import com.clawseed.probe.wire.Json;
import com.clawseed.probe.wire.WireBundle;
import com.clawseed.probe.wire.WireError;
import com.clawseed.probe.wire.WireValue;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * android.os.Bundle to and from the wire's typed Bundles (probe-wire type
 * table). PendingIntents and descriptors in a result become connection
 * handles; anything without a wire type travels as {@code other} with its
 * class name.
 */
final class BundleMapper {
    private final HandleTable<PendingIntent> intents;
    private final HandleTable<ParcelFileDescriptor> fds;
    private final IntentMaker maker;

    /** Makes the PendingIntent a wire {@code pending_intent} value stands for. */
    interface IntentMaker {
        PendingIntent make(WireValue.PendingIntentInfo value) throws DeviceError;
    }

    /** {@code pending_intent} values are handles this connection holds, passed back to a Provider. */
    BundleMapper(HandleTable<PendingIntent> intents, HandleTable<ParcelFileDescriptor> fds) {
        this(intents, fds, null);
    }

    /** {@code pending_intent} values are made by {@code maker} (the hosted Provider's confirmations). */
    BundleMapper(HandleTable<PendingIntent> intents, HandleTable<ParcelFileDescriptor> fds, IntentMaker maker) {
        this.intents = intents;
        this.fds = fds;
        this.maker = maker;
    }

    /** A Provider's result, and how many of its keys could not be read at all. */
    static final class Read {
        final WireBundle bundle;
        final int unreadKeys;

        Read(WireBundle bundle, int unreadKeys) {
            this.bundle = bundle;
            this.unreadKeys = unreadKeys;
        }
    }

    /** Counts what one result loses, across its nested Bundles. */
    private static final class Losses {
        int unreadKeys;
    }

    Read readResult(Bundle b) throws DeviceError {
        Losses losses = new Losses();
        WireBundle out = fromAndroid(b, 1, losses);
        return new Read(out, losses.unreadKeys);
    }

    /** {@code Parcel.VAL_PARCELABLE}: the tag before a Parcelable's class name. */
    private static final int VAL_PARCELABLE = 4;
    /** {@code BaseBundle.BUNDLE_MAGIC}, 'BNDL': a Bundle parcelled by Java code. */
    private static final int BUNDLE_MAGIC = 0x4C444E42;

    private WireBundle fromAndroid(Bundle b, int depth, Losses losses) throws DeviceError {
        // Below API 33, reading the key set unparcels the whole Bundle at once,
        // and one value of a class the probe does not have fails all of it;
        // keep a copy of the parcelled bytes to read key by key after such a
        // failure. From API 33 values unparcel lazily, one key at a time.
        Parcel raw = null;
        if (Build.VERSION.SDK_INT < 33) {
            raw = Parcel.obtain();
            try {
                b.writeToParcel(raw, 0);
            } catch (RuntimeException e) {
                raw.recycle();
                raw = null;
            }
        }
        try {
            List<String> keys;
            try {
                keys = new ArrayList<>(b.keySet());
            } catch (RuntimeException e) {
                if (raw != null) {
                    return salvage(raw, depth, losses, e);
                }
                throw DeviceError.unsupported("the result Bundle cannot be unparcelled in the probe: "
                        + Failures.unreadableClass(e.getMessage(), e.getClass().getName()));
            }
            WireBundle out = new WireBundle();
            for (String key : keys) {
                Object v;
                try {
                    v = getValue(b, key);
                } catch (RuntimeException e) {
                    // A Parcelable of a class the probe does not have.
                    out.put(Json.sanitize(key), WireValue.ofOther(
                            Failures.unreadableClass(e.getMessage(), e.getClass().getName())));
                    continue;
                }
                // Keys are Java strings too; the host reads them as Unicode.
                out.put(Json.sanitize(key), value(v, depth, losses));
            }
            return out;
        } finally {
            if (raw != null) {
                raw.recycle();
            }
        }
    }

    /**
     * Reads a parcelled Bundle key by key (the layout of
     * {@code BaseBundle.writeToParcelInner}: length, magic, count, then key and
     * value pairs) up to the first value that cannot be read, which becomes
     * {@code other} with its class. Below API 33 a Parcelable carries no length,
     * so the keys after it cannot be found: they are counted, not guessed.
     */
    private WireBundle salvage(Parcel raw, int depth, Losses losses, RuntimeException first) throws DeviceError {
        raw.setDataPosition(0);
        int length = raw.readInt();
        int magic = length > 0 ? raw.readInt() : 0;
        if (magic != BUNDLE_MAGIC) {
            throw DeviceError.unsupported("the result Bundle cannot be unparcelled in the probe: "
                    + Failures.unreadableClass(first.getMessage(), first.getClass().getName()));
        }
        int count = raw.readInt();
        ClassLoader loader = Bundle.class.getClassLoader();
        WireBundle out = new WireBundle();
        for (int i = 0; i < count; i++) {
            String key = raw.readString();
            int at = raw.dataPosition();
            Object v;
            try {
                v = readValue(raw, loader);
            } catch (RuntimeException e) {
                raw.setDataPosition(at);
                String cls = raw.readInt() == VAL_PARCELABLE ? raw.readString() : null;
                if (!Failures.isClassName(cls)) {
                    cls = Failures.unreadableClass(e.getMessage(), e.getClass().getName());
                }
                out.put(Json.sanitize(String.valueOf(key)), WireValue.ofOther(cls));
                losses.unreadKeys += count - i - 1;
                break;
            }
            out.put(Json.sanitize(String.valueOf(key)), value(v, depth, losses));
        }
        return out;
    }

    @SuppressWarnings("deprecation")
    private static Object readValue(Parcel p, ClassLoader loader) {
        return p.readValue(loader);
    }

    @SuppressWarnings("deprecation")
    private static Object getValue(Bundle b, String key) {
        // The typed getters of API 33 need the class in advance; the type is
        // what we are here to find out.
        return b.get(key);
    }

    private static boolean plainStrings(List<?> items) {
        for (Object o : items) {
            if (!(o instanceof String) || Json.hasLoneSurrogate((String) o)) {
                return false;
            }
        }
        return true;
    }

    private WireValue value(Object v, int depth, Losses losses) throws DeviceError {
        if (v == null) {
            return WireValue.NULL;
        } else if (v instanceof Boolean) {
            return WireValue.ofBool((Boolean) v);
        } else if (v instanceof Integer) {
            return WireValue.ofInt((Integer) v);
        } else if (v instanceof Long) {
            return WireValue.ofLong((Long) v);
        } else if (v instanceof Float) {
            return WireValue.ofFloat((Float) v);
        } else if (v instanceof Double) {
            return WireValue.ofDouble((Double) v);
        } else if (v instanceof String) {
            // Lone surrogates are kept: the wire carries them in `string` values.
            return WireValue.ofString((String) v);
        } else if (v instanceof int[]) {
            return WireValue.ofIntArray((int[]) v);
        } else if (v instanceof long[]) {
            return WireValue.ofLongArray((long[]) v);
        } else if (v instanceof boolean[]) {
            return WireValue.ofBoolArray((boolean[]) v);
        } else if (v instanceof double[]) {
            return WireValue.ofDoubleArray((double[]) v);
        } else if (v instanceof String[]) {
            List<String> items = Arrays.asList((String[]) v);
            // The wire's string[] holds Unicode strings only; a null element
            // or a lone surrogate has no wire form.
            return plainStrings(items) ? WireValue.ofStringArray(items) : WireValue.ofOther("java.lang.String[]");
        } else if (v instanceof ArrayList) {
            ArrayList<?> list = (ArrayList<?>) v;
            if (plainStrings(list)) {
                List<String> items = new ArrayList<>();
                for (Object o : list) {
                    items.add((String) o);
                }
                return WireValue.ofStringList(items);
            }
            return WireValue.ofOther(v.getClass().getName());
        } else if (v instanceof byte[]) {
            return WireValue.ofBytes((byte[]) v);
        } else if (v instanceof Bundle) {
            if (depth + 1 > BundleCodec.MAX_DEPTH) {
                return WireValue.ofOther(v.getClass().getName());
            }
            return WireValue.ofBundle(fromAndroid((Bundle) v, depth + 1, losses));
        } else if (v instanceof PendingIntent) {
            PendingIntent pi = (PendingIntent) v;
            Boolean immutable = null;
            Boolean activity = null;
            if (Build.VERSION.SDK_INT >= 31) {
                immutable = pi.isImmutable();
                activity = pi.isActivity();
            }
            String handle = intents.add(pi);
            return WireValue.ofPendingIntent(new WireValue.PendingIntentInfo(
                    handle, pi.getCreatorPackage(), (long) pi.getCreatorUid(), immutable, activity));
        } else if (v instanceof ParcelFileDescriptor) {
            return WireValue.ofFd(fds.add((ParcelFileDescriptor) v));
        }
        return WireValue.ofOther(v.getClass().getName());
    }

    /** The host's extras, for a call. */
    Bundle toAndroid(WireBundle w) throws DeviceError {
        Bundle out = new Bundle();
        for (Map.Entry<String, WireValue> e : w.entrySet()) {
            String key = e.getKey();
            WireValue v = e.getValue();
            switch (v.type) {
                case NULL:
                    out.putString(key, null);
                    break;
                case BOOL:
                    out.putBoolean(key, v.asBool());
                    break;
                case INT:
                    out.putInt(key, v.asInt());
                    break;
                case LONG:
                    out.putLong(key, v.asLong());
                    break;
                case FLOAT:
                    out.putFloat(key, v.asFloat());
                    break;
                case DOUBLE:
                    out.putDouble(key, v.asDouble());
                    break;
                case STRING:
                    out.putString(key, v.asString());
                    break;
                case INT_ARRAY:
                    out.putIntArray(key, v.asIntArray());
                    break;
                case LONG_ARRAY:
                    out.putLongArray(key, v.asLongArray());
                    break;
                case BOOL_ARRAY:
                    out.putBooleanArray(key, v.asBoolArray());
                    break;
                case DOUBLE_ARRAY:
                    out.putDoubleArray(key, v.asDoubleArray());
                    break;
                case STRING_ARRAY:
                    out.putStringArray(key, v.asStrings().toArray(new String[0]));
                    break;
                case STRING_LIST:
                    out.putStringArrayList(key, new ArrayList<>(v.asStrings()));
                    break;
                case BYTES:
                    out.putByteArray(key, v.asBytes());
                    break;
                case BUNDLE:
                    out.putBundle(key, toAndroid(v.asBundle()));
                    break;
                case PENDING_INTENT:
                    out.putParcelable(key, maker != null ? maker.make(v.asPendingIntent())
                            : intents.peek(v.asPendingIntent().handle));
                    break;
                case FD:
                    out.putParcelable(key, fds.peek(v.asString()));
                    break;
                case OTHER:
                default:
                    throw DeviceError.unsupported("an `other` value (" + v.asString() + ") cannot be sent to a Provider");
            }
        }
        return out;
    }
}
