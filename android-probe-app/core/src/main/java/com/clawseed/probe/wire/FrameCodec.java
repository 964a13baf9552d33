package com.clawseed.probe.wire;

import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

/** Frame decoding and canonical encoding, as in the Rust codec. */
public final class FrameCodec {
    private FrameCodec() {}

    /** Largest frame, including its newline. */
    public static final int MAX_FRAME_BYTES = 16 * 1024 * 1024;
    /** Largest raw payload of one chunk frame. */
    public static final int MAX_CHUNK_BYTES = 1024 * 1024;
    public static final int WIRE_VERSION = 1;

    private static final String[] KINDS = {"op", "ok", "error", "chunk"};
    private static final String ID = "a request id (unsigned 64-bit integer)";

    public static Frame decode(byte[] line) throws WireDecodeException {
        return decode(line, 0, line.length);
    }

    /** Decodes one line, with or without its newline. */
    public static Frame decode(byte[] buf, int off, int len) throws WireDecodeException {
        if (len > 0 && buf[off + len - 1] == '\n') {
            len--;
        }
        if (len >= MAX_FRAME_BYTES) {
            throw new WireDecodeException(WireDecodeException.FRAME_TOO_LARGE,
                    "frame is larger than " + MAX_FRAME_BYTES + " bytes including its newline");
        }
        return fromJson(JsonParser.parse(buf, off, len));
    }

    /** The id of a line that is a JSON object with a valid id, or null. */
    public static Long requestIdHint(byte[] buf, int off, int len) {
        if (len > 0 && buf[off + len - 1] == '\n') {
            len--;
        }
        if (len >= MAX_FRAME_BYTES) {
            return null;
        }
        try {
            Object v = JsonParser.parse(buf, off, len);
            if (v instanceof JsonObject && ((JsonObject) v).get("id") instanceof JsonNumber) {
                BigInteger i = ((JsonNumber) ((JsonObject) v).get("id")).integerValue();
                if (i != null && i.signum() >= 0 && i.compareTo(JsonNumber.MAX_U64) <= 0) {
                    return i.longValue();
                }
            }
        } catch (WireDecodeException e) {
            return null;
        }
        return null;
    }

    static Frame fromJson(Object value) throws WireDecodeException {
        if (!(value instanceof JsonObject)) {
            throw new WireDecodeException(WireDecodeException.NOT_A_FRAME,
                    "not a frame: a frame is a JSON object, found " + Json.kind(value));
        }
        JsonObject map = (JsonObject) value;
        if (!map.containsKey("id")) {
            if (map.containsKey("event")) {
                String event = Fields.string(map.get("event"), "/event");
                JsonObject fields = new JsonObject(map);
                fields.remove("event");
                return new Frame.Event(event, fields);
            }
            for (String k : KINDS) {
                if (map.containsKey(k)) {
                    throw new WireDecodeException(WireDecodeException.MISSING_FIELD,
                            "missing field `/id`: expected " + ID);
                }
            }
            throw new WireDecodeException(WireDecodeException.NOT_A_FRAME,
                    "not a frame: neither an `id` nor an `event` member");
        }
        List<String> present = new ArrayList<>();
        for (String k : KINDS) {
            if (map.containsKey(k)) {
                present.add(k);
            }
        }
        if (present.size() != 1) {
            throw new WireDecodeException(WireDecodeException.NOT_A_FRAME, present.isEmpty()
                    ? "not a frame: it has an `id` but none of `op`, `ok`, `error`, `chunk`"
                    : "not a frame: it has several of " + String.join(", ", present));
        }
        Fields f = new Fields(map, "");
        long id = Fields.integer(map.get("id"), "/id", ID, BigInteger.ZERO, JsonNumber.MAX_U64).longValue();
        switch (present.get(0)) {
            case "op": {
                String op = f.string("op");
                JsonObject params = new JsonObject(map);
                params.remove("id");
                params.remove("op");
                return new Frame.Request(id, op, params);
            }
            case "ok":
                return new Frame.Ok(id, f.object("ok"));
            case "error":
                return new Frame.Err(id, WireError.fromJson(f.object("error"), "/error"));
            default:
                return new Frame.Chunk(id, Fields.base64(f.req("chunk", "base64 text"), "/chunk"));
        }
    }

    public static JsonObject toJson(Frame frame) {
        JsonObject m = new JsonObject();
        if (frame instanceof Frame.Request) {
            Frame.Request r = (Frame.Request) frame;
            m.putAll(r.params);
            m.put("id", JsonNumber.ofUnsigned(r.id));
            m.put("op", r.op);
        } else if (frame instanceof Frame.Ok) {
            m.put("id", JsonNumber.ofUnsigned(((Frame.Ok) frame).id));
            m.put("ok", ((Frame.Ok) frame).ok);
        } else if (frame instanceof Frame.Err) {
            m.put("id", JsonNumber.ofUnsigned(((Frame.Err) frame).id));
            m.put("error", ((Frame.Err) frame).error.toJson());
        } else if (frame instanceof Frame.Chunk) {
            m.put("id", JsonNumber.ofUnsigned(((Frame.Chunk) frame).id));
            m.put("chunk", Base64Strict.encode(((Frame.Chunk) frame).data()));
        } else {
            Frame.Event e = (Frame.Event) frame;
            m.putAll(e.fields);
            m.remove("id");
            m.put("event", e.event);
        }
        return m;
    }

    /** One canonical line, ending in a newline. */
    public static byte[] encode(Frame frame) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        JsonWriter.write(toJson(frame), out);
        out.write('\n');
        return out.toByteArray();
    }
}
