package com.clawseed.probe.wire;

import java.util.Collections;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/** A typed Bundle: keys in canonical (code point) order to typed values. */
public final class WireBundle {
    private final TreeMap<String, WireValue> entries = new TreeMap<>(JsonObject.CODE_POINT_ORDER);

    public WireBundle put(String key, WireValue value) {
        entries.put(key, value);
        return this;
    }

    public WireValue get(String key) {
        return entries.get(key);
    }

    public Set<Map.Entry<String, WireValue>> entrySet() {
        return Collections.unmodifiableSet(entries.entrySet());
    }

    public Set<String> keySet() {
        return Collections.unmodifiableSet(entries.keySet());
    }

    public int size() {
        return entries.size();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof WireBundle && entries.equals(((WireBundle) o).entries);
    }

    @Override
    public int hashCode() {
        return entries.hashCode();
    }

    @Override
    public String toString() {
        return entries.toString();
    }
}
