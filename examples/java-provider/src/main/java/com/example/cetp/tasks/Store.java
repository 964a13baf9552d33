package com.example.cetp.tasks;

import android.content.Context;
import android.content.SharedPreferences;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * The app's durable state, in SharedPreferences so that it survives the
 * process (§4.4, §6: de-duplication records and operations must outlive a
 * restart). Four JSON documents, each written with commit() (synchronously)
 * before an answer that depends on it leaves the Provider:
 *
 * <ul>
 *   <li>{@code tasks}: the business data, task_id to {title, done};
 *   <li>{@code records}: de-duplication records, "UID/request_id" to the
 *       tool, the args digest and the terminal answer or operation id;
 *   <li>{@code operations}: background operations by id;
 *   <li>{@code confirmations}: pending and decided confirmations by id.
 * </ul>
 *
 * <p>All access goes through {@link #edit}, under one lock: the documents are
 * small, and one lock makes each check-then-commit atomic.
 */
final class Store {
    private static final String FILE = "cetp_tasks";
    private final SharedPreferences prefs;
    private final JSONObject root;

    interface Edit<T> {
        T apply(JSONObject root) throws JSONException, Envelope.Refusal;
    }

    private static Store instance;

    /**
     * The process's one Store: the Provider and the confirmation screen
     * share it, so that a decision the user makes is seen by the next call.
     */
    static synchronized Store get(Context context) {
        if (instance == null) {
            instance = new Store(context.getApplicationContext());
        }
        return instance;
    }

    private Store(Context context) {
        prefs = context.getSharedPreferences(FILE, Context.MODE_PRIVATE);
        JSONObject loaded;
        try {
            loaded = new JSONObject(prefs.getString("state", "{}"));
        } catch (JSONException e) {
            // A corrupt file is not recoverable here; start empty rather than crash every call.
            loaded = new JSONObject();
        }
        root = loaded;
        try {
            for (String doc : new String[] {"tasks", "records", "operations", "confirmations"}) {
                if (!root.has(doc)) {
                    root.put(doc, new JSONObject());
                }
            }
            if (!root.has("effects")) {
                root.put("effects", 0L);
            }
            if (!root.has("next_id")) {
                root.put("next_id", 1L);
            }
        } catch (JSONException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Runs {@code edit} under the lock and commits what it changed before returning. */
    <T> T edit(Edit<T> edit) throws Envelope.Refusal {
        synchronized (root) {
            try {
                T out = edit.apply(root);
                if (!prefs.edit().putString("state", root.toString()).commit()) {
                    throw new Envelope.Refusal("UNAVAILABLE", "the app could not save its state", true);
                }
                return out;
            } catch (JSONException e) {
                throw new Envelope.Refusal("INTERNAL_ERROR", "the app's saved state is unreadable", false);
            }
        }
    }

    /** Reads under the lock without writing. */
    <T> T read(Edit<T> read) throws Envelope.Refusal {
        synchronized (root) {
            try {
                return read.apply(root);
            } catch (JSONException e) {
                throw new Envelope.Refusal("INTERNAL_ERROR", "the app's saved state is unreadable", false);
            }
        }
    }
}
