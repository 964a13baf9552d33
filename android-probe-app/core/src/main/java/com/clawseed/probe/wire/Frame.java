package com.clawseed.probe.wire;

import java.util.Arrays;

/** One line of the probe wire. Ids are unsigned 64-bit values held in a {@code long}. */
public abstract class Frame {
    private Frame() {}

    /** Host to device: {@code {"id": n, "op": "...", ...params}}. */
    public static final class Request extends Frame {
        public final long id;
        public final String op;
        /** Members other than {@code id} and {@code op}. */
        public final JsonObject params;

        public Request(long id, String op, JsonObject params) {
            this.id = id;
            this.op = op;
            this.params = params;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Request && ((Request) o).id == id && ((Request) o).op.equals(op)
                    && ((Request) o).params.equals(params);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(id);
        }
    }

    /** A successful final answer. */
    public static final class Ok extends Frame {
        public final long id;
        public final JsonObject ok;

        public Ok(long id, JsonObject ok) {
            this.id = id;
            this.ok = ok;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Ok && ((Ok) o).id == id && ((Ok) o).ok.equals(ok);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(id);
        }
    }

    /** An error final answer. */
    public static final class Err extends Frame {
        public final long id;
        public final WireError error;

        public Err(long id, WireError error) {
            this.id = id;
            this.error = error;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Err && ((Err) o).id == id && ((Err) o).error.toJson().equals(error.toJson());
        }

        @Override
        public int hashCode() {
            return Long.hashCode(id);
        }
    }

    /** Raw bytes ahead of a final answer. */
    public static final class Chunk extends Frame {
        public final long id;
        private final byte[] data;

        public Chunk(long id, byte[] data) {
            this.id = id;
            this.data = data.clone();
        }

        public byte[] data() {
            return data.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Chunk && ((Chunk) o).id == id && Arrays.equals(((Chunk) o).data, data);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(id);
        }
    }

    /** Device to host, unsolicited; carries no id. */
    public static final class Event extends Frame {
        public final String event;
        /** Members other than {@code event}; an {@code id} is not written. */
        public final JsonObject fields;

        public Event(String event, JsonObject fields) {
            this.event = event;
            this.fields = fields;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Event && ((Event) o).event.equals(event) && ((Event) o).fields.equals(fields);
        }

        @Override
        public int hashCode() {
            return event.hashCode();
        }
    }
}
