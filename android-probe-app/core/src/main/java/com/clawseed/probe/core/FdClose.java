package com.clawseed.probe.core;

import java.io.IOException;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * How a Consumer let go of the result descriptor of an {@code fd_data}
 * reply (CETP §4.5: the Consumer MUST close it), as the {@code fd_closed}
 * event names it ({@code how}, and {@code message} for {@code error}).
 *
 * <p>On Android the descriptor is opened with a close listener
 * ({@code ParcelFileDescriptor.open(File, int, Handler, OnCloseListener)}),
 * which gets {@code null} for a normal close and otherwise the
 * {@code IOException} of the status the last holder wrote
 * ({@code ParcelFileDescriptor.Status.asIOException()}). {@link #of} reads
 * that exception; the messages are the framework's, checked in the AOSP
 * source of API 34 ({@code android/os/ParcelFileDescriptor.java}) and, under
 * Robolectric, against the framework's own {@code Status} class
 * (app/'s {@code HostedFdTest}). The mapping is pure Java, so it is here.
 */
public final class FdClose {
    /** The Consumer closed its descriptor normally. */
    public static final String CLOSED = "closed";
    /** It took the raw descriptor ({@code detachFd}); what it does next is not visible. */
    public static final String DETACHED = "detached";
    /** Its ParcelFileDescriptor was garbage-collected unclosed. */
    public static final String LEAKED = "leaked";
    /** Every copy vanished without a status (its process died, say). */
    public static final String DEAD = "dead";
    /** It closed with an error ({@code closeWithError}); {@link #message} says which. */
    public static final String ERROR = "error";

    /** Every {@code how}, in the order the README lists them. */
    public static final List<String> HOWS = Collections.unmodifiableList(Arrays.asList(
            CLOSED, DETACHED, LEAKED, DEAD, ERROR));

    /** Longest {@code message} sent, in UTF-16 units: the Consumer chooses it. */
    public static final int MAX_MESSAGE_CHARS = 512;

    /*
     * The framework's texts (AOSP API 34, android/os/ParcelFileDescriptor.java,
     * Status.asIOException and FileDescriptorDetachedException), unchanged
     * since the listener came in API 19.
     */
    static final String DETACHED_CLASS = "android.os.ParcelFileDescriptor$FileDescriptorDetachedException";
    static final String DETACHED_TEXT = "Remote side is detached";
    static final String LEAKED_TEXT = "Remote side was leaked";
    static final String DEAD_TEXT = "Remote side is dead";
    /** Status.ERROR: {@code "Remote error: " + msg}, msg being what the Consumer passed to closeWithError. */
    static final String ERROR_PREFIX = "Remote error: ";

    public final String how;
    /** Only for {@link #ERROR}: why, at most {@link #MAX_MESSAGE_CHARS}; else null. */
    public final String message;

    private FdClose(String how, String message) {
        this.how = how;
        this.message = message;
    }

    public static FdClose closed() {
        return new FdClose(CLOSED, null);
    }

    /** One of {@link #HOWS}; {@code message} is kept for {@link #ERROR} only, bounded. */
    public static FdClose of(String how, String message) {
        if (!HOWS.contains(how)) {
            throw new IllegalArgumentException("not a way to close a descriptor: " + how);
        }
        return new FdClose(how, ERROR.equals(how) ? bound(message == null ? "" : message) : null);
    }

    /**
     * What an {@code OnCloseListener} was told: null is a normal close. The
     * exact texts first; then, for a framework whose texts differ, the words
     * (case-insensitive); anything else is an error carrying its text. The
     * {@code "Remote error: "} prefix is the framework's, so the message is
     * what the Consumer gave ({@code closeWithError}), as a simulated device
     * reports it.
     */
    public static FdClose of(IOException e) {
        if (e == null) {
            return closed();
        }
        String text = e.getMessage() == null ? "" : e.getMessage();
        if (text.startsWith(ERROR_PREFIX)) {
            return of(ERROR, text.substring(ERROR_PREFIX.length()));
        }
        if (DETACHED_CLASS.equals(e.getClass().getName()) || DETACHED_TEXT.equals(text)) {
            return of(DETACHED, null);
        }
        if (LEAKED_TEXT.equals(text)) {
            return of(LEAKED, null);
        }
        if (DEAD_TEXT.equals(text)) {
            return of(DEAD, null);
        }
        String lower = text.toLowerCase(java.util.Locale.ROOT);
        if (lower.contains("detach")) {
            return of(DETACHED, null);
        }
        if (lower.contains("leak")) {
            return of(LEAKED, null);
        }
        if (lower.contains("dead")) {
            return of(DEAD, null);
        }
        // Status.asIOException's "Unknown status: N", or another framework's text.
        return of(ERROR, text.isEmpty() ? e.getClass().getName() : text);
    }

    /** At most {@link #MAX_MESSAGE_CHARS}, never ending inside a surrogate pair. */
    static String bound(String s) {
        if (s.length() <= MAX_MESSAGE_CHARS) {
            return s;
        }
        int end = MAX_MESSAGE_CHARS;
        if (Character.isHighSurrogate(s.charAt(end - 1)) && Character.isLowSurrogate(s.charAt(end))) {
            end--;
        }
        return s.substring(0, end);
    }

    @Override
    public String toString() {
        return message == null ? how : how + ": " + message;
    }
}
