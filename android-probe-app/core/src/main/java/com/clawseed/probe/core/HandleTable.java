package com.clawseed.probe.core;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Per-connection handles ({@code pi-N}, {@code fd-N}) for objects a Provider
 * returned. A handle lives until it is used up or the connection closes.
 */
public final class HandleTable<T> {
    private final String prefix;
    private final Map<String, T> items = new LinkedHashMap<>();
    private long next = 1;

    public HandleTable(String prefix) {
        this.prefix = prefix;
    }

    public synchronized String add(T item) {
        String handle = prefix + (next++);
        items.put(handle, item);
        return handle;
    }

    /** Removes and returns the object, or fails with {@code unknown_handle}. */
    public synchronized T take(String handle) throws DeviceError {
        T item = items.remove(handle);
        if (item == null) {
            throw DeviceError.unknownHandle(handle);
        }
        return item;
    }

    public synchronized T peek(String handle) throws DeviceError {
        T item = items.get(handle);
        if (item == null) {
            throw DeviceError.unknownHandle(handle);
        }
        return item;
    }

    /** Everything still held, removed from the table (connection closing). */
    public synchronized List<T> drain() {
        List<T> all = new ArrayList<>(items.values());
        items.clear();
        return all;
    }

    public synchronized int size() {
        return items.size();
    }
}
