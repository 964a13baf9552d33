package com.clawseed.probe.wire;

import java.util.ArrayList;
import java.util.List;

/**
 * A strict, bounded JSON parser that keeps lone surrogates (a Java String
 * holds them natively). Mirrors the Rust codec's parser: same grammar, same
 * limits, same error classes.
 */
public final class JsonParser {
    /** Deepest nesting accepted; the frame object is level 1. */
    public static final int MAX_DEPTH = 128;
    /** Longest number literal accepted, in bytes (a literal is ASCII). */
    public static final int MAX_NUMBER_LEN = 1024;

    private final String s;
    private int pos;

    private JsonParser(String s) {
        this.s = s;
    }

    /** Parses a whole text; positions in messages are UTF-16 indexes. */
    public static Object parse(String text) throws WireDecodeException {
        JsonParser p = new JsonParser(text);
        p.skipWs();
        Object v = p.value(1);
        p.skipWs();
        if (p.pos < text.length()) {
            throw p.unexpected("the end of the frame");
        }
        return v;
    }

    /** Parses UTF-8 bytes, refusing malformed UTF-8 first. */
    public static Object parse(byte[] bytes, int off, int len) throws WireDecodeException {
        return parse(Utf8.decode(bytes, off, len));
    }

    private int peek() {
        return pos < s.length() ? s.charAt(pos) : -1;
    }

    private void skipWs() {
        while (pos < s.length()) {
            char c = s.charAt(pos);
            if (c == ' ' || c == '\t' || c == '\r') {
                pos++;
            } else {
                break;
            }
        }
    }

    private WireDecodeException syntax(int at, String reason) {
        return new WireDecodeException(WireDecodeException.BAD_JSON, "bad JSON at index " + at + ": " + reason);
    }

    private WireDecodeException unexpected(String expected) {
        int c = peek();
        String found;
        if (c < 0) {
            found = "the end of the input";
        } else if (c == '\n') {
            found = "a raw line feed (a frame holds no raw newline)";
        } else if (c > 0x20 && c < 0x7F) {
            found = "`" + (char) c + "`";
        } else {
            found = String.format("character U+%04X", c);
        }
        return syntax(pos, "expected " + expected + ", found " + found);
    }

    private void expect(char c, String expected) throws WireDecodeException {
        if (peek() != c) {
            throw unexpected(expected);
        }
        pos++;
    }

    private Object value(int depth) throws WireDecodeException {
        int c = peek();
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", Json.NULL);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw unexpected("a value");
        }
    }

    private Object literal(String word, Object v) throws WireDecodeException {
        if (s.startsWith(word, pos)) {
            pos += word.length();
            return v;
        }
        throw syntax(pos, "expected `" + word + "`");
    }

    private void enter(int depth) throws WireDecodeException {
        if (depth > MAX_DEPTH) {
            throw new WireDecodeException(WireDecodeException.TOO_DEEP,
                    "nesting deeper than " + MAX_DEPTH + " levels at index " + pos);
        }
    }

    private JsonObject object(int depth) throws WireDecodeException {
        enter(depth);
        pos++;
        JsonObject map = new JsonObject();
        skipWs();
        if (peek() == '}') {
            pos++;
            return map;
        }
        while (true) {
            if (peek() != '"') {
                throw unexpected("a string key");
            }
            int keyAt = pos;
            String key = string();
            if (Json.hasLoneSurrogate(key)) {
                throw new WireDecodeException(WireDecodeException.LONE_SURROGATE,
                        "lone UTF-16 surrogate at index " + keyAt + " (object key: " + Json.describeLoneSurrogate(key) + ")");
            }
            skipWs();
            expect(':', "`:` after an object key");
            skipWs();
            Object v = value(depth + 1);
            if (map.containsKey(key)) {
                throw new WireDecodeException(WireDecodeException.DUPLICATE_KEY,
                        "duplicate key `" + key + "` at index " + keyAt);
            }
            map.put(key, v);
            skipWs();
            int c = peek();
            if (c == ',') {
                pos++;
                skipWs();
            } else if (c == '}') {
                pos++;
                return map;
            } else {
                throw unexpected("`,` or `}` in an object");
            }
        }
    }

    private List<Object> array(int depth) throws WireDecodeException {
        enter(depth);
        pos++;
        List<Object> items = new ArrayList<>();
        skipWs();
        if (peek() == ']') {
            pos++;
            return items;
        }
        while (true) {
            items.add(value(depth + 1));
            skipWs();
            int c = peek();
            if (c == ',') {
                pos++;
                skipWs();
            } else if (c == ']') {
                pos++;
                return items;
            } else {
                throw unexpected("`,` or `]` in an array");
            }
        }
    }

    private int hex4() throws WireDecodeException {
        int start = pos;
        if (start + 4 > s.length()) {
            throw syntax(start, "expected four hex digits after `\\u`");
        }
        int v = 0;
        for (int i = 0; i < 4; i++) {
            int d = Character.digit(s.charAt(start + i), 16);
            char ch = s.charAt(start + i);
            boolean asciiHex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
            if (d < 0 || !asciiHex) {
                throw syntax(start + i, "expected four hex digits after `\\u`");
            }
            v = (v << 4) | d;
        }
        pos += 4;
        return v;
    }

    /**
     * Escapes of UTF-16 code units map one-to-one onto a Java String, so a
     * pair of escapes is a pair of chars and a lone one stays lone.
     */
    private String string() throws WireDecodeException {
        pos++;
        StringBuilder sb = new StringBuilder();
        while (true) {
            int runStart = pos;
            while (pos < s.length()) {
                char c = s.charAt(pos);
                if (c == '"' || c == '\\' || c < 0x20) {
                    break;
                }
                pos++;
            }
            sb.append(s, runStart, pos);
            if (pos >= s.length()) {
                throw syntax(pos, "unterminated string");
            }
            char c = s.charAt(pos);
            if (c == '"') {
                pos++;
                return sb.toString();
            }
            if (c == '\\') {
                int escAt = pos;
                pos++;
                int e = peek();
                pos++;
                switch (e) {
                    case '"':
                        sb.append('"');
                        break;
                    case '\\':
                        sb.append('\\');
                        break;
                    case '/':
                        sb.append('/');
                        break;
                    case 'b':
                        sb.append('\b');
                        break;
                    case 'f':
                        sb.append('\f');
                        break;
                    case 'n':
                        sb.append('\n');
                        break;
                    case 'r':
                        sb.append('\r');
                        break;
                    case 't':
                        sb.append('\t');
                        break;
                    case 'u':
                        sb.append((char) hex4());
                        break;
                    default:
                        throw syntax(escAt, "invalid escape sequence");
                }
                continue;
            }
            if (c == '\n') {
                throw syntax(pos, "raw line feed in a string (a frame holds no raw newline)");
            }
            throw syntax(pos, String.format("unescaped control character 0x%02x in a string", (int) c));
        }
    }

    private int digits() {
        int start = pos;
        while (pos < s.length() && s.charAt(pos) >= '0' && s.charAt(pos) <= '9') {
            pos++;
        }
        return pos - start;
    }

    private JsonNumber number() throws WireDecodeException {
        int start = pos;
        if (peek() == '-') {
            pos++;
        }
        int c = peek();
        if (c == '0') {
            pos++;
        } else if (c >= '1' && c <= '9') {
            digits();
        } else {
            throw unexpected("a digit");
        }
        boolean integral = true;
        if (peek() == '.') {
            pos++;
            integral = false;
            if (digits() == 0) {
                throw unexpected("a digit after the decimal point");
            }
        }
        if (peek() == 'e' || peek() == 'E') {
            pos++;
            integral = false;
            if (peek() == '+' || peek() == '-') {
                pos++;
            }
            if (digits() == 0) {
                throw unexpected("a digit in the exponent");
            }
        }
        if (pos - start > MAX_NUMBER_LEN) {
            throw new WireDecodeException(WireDecodeException.OUT_OF_RANGE, "at index " + start
                    + ": expected a number literal, found a literal of " + (pos - start)
                    + " bytes (at most " + MAX_NUMBER_LEN + " accepted) (out of range)");
        }
        return JsonNumber.parse(s.substring(start, pos), integral, start);
    }
}
