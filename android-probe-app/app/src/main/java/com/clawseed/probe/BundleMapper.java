package com.clawseed.probe;

import android.app.PendingIntent;
import android.os.Build;
import android.os.Bundle;
import android.os.ParcelFileDescriptor;
import com.clawseed.probe.core.DeviceError;
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

    BundleMapper(HandleTable<PendingIntent> intents, HandleTable<ParcelFileDescriptor> fds) {
        this.intents = intents;
        this.fds = fds;
    }

    /** A Provider's result. */
    WireBundle fromAndroid(Bundle b) throws DeviceError {
        return fromAndroid(b, 1);
    }

    private WireBundle fromAndroid(Bundle b, int depth) throws DeviceError {
        List<String> keys;
        try {
            // Reading the key set unparcels the Bundle (all of it before API 33).
            keys = new ArrayList<>(b.keySet());
        } catch (RuntimeException e) {
            throw new DeviceError(WireError.UNSUPPORTED, "the result Bundle cannot be unparcelled in the probe: " + e);
        }
        WireBundle out = new WireBundle();
        for (String key : keys) {
            Object v;
            try {
                v = getValue(b, key);
            } catch (RuntimeException e) {
                // A Parcelable of a class the probe does not have (API 33+ unparcels lazily, per key).
                out.put(Json.sanitize(key), WireValue.ofOther("unreadable: " + e.getClass().getName()));
                continue;
            }
            // Keys are Java strings too; the host reads them as Unicode.
            out.put(Json.sanitize(key), value(v, depth));
        }
        return out;
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

    private WireValue value(Object v, int depth) throws DeviceError {
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
            return WireValue.ofBundle(fromAndroid((Bundle) v, depth + 1));
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
                    // A handle this connection holds, passed back to a Provider.
                    out.putParcelable(key, intents.peek(v.asPendingIntent().handle));
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
