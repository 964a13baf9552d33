package com.clawseed.probe.core;

/**
 * The data URI of each launch of the probe's resolver activity. Android
 * compares launch intents without their extras, so two launches that differ
 * only in an extra are the same intent: with {@code FLAG_ACTIVITY_NEW_TASK} a
 * leftover task of an earlier launch is brought to the front and no new
 * activity starts. A URI unique to the launch makes every launch a new
 * activity. The nonce, drawn once per probe process, keeps a launch apart
 * from those of an earlier process, whose tokens started from 1 as well.
 */
public final class ResolveUri {
    private ResolveUri() {}

    public static final String SCHEME = "cetp-probe-resolve";

    public static String of(String nonce, long token) {
        if (nonce.isEmpty() || !nonce.chars().allMatch(c -> Character.isLetterOrDigit(c) && c < 128)) {
            throw new IllegalArgumentException("nonce must be ASCII letters and digits: " + nonce);
        }
        return SCHEME + "://" + nonce + "/" + Long.toUnsignedString(token);
    }

    /**
     * The token of a URI made by {@link #of} with this {@code nonce}; null for
     * anything else, including a launch of an earlier probe process.
     */
    public static Long token(String uri, String nonce) {
        if (uri == null) {
            return null;
        }
        String prefix = SCHEME + "://" + nonce + "/";
        if (!uri.startsWith(prefix)) {
            return null;
        }
        String digits = uri.substring(prefix.length());
        if (digits.isEmpty() || digits.length() > 20 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return null;
        }
        try {
            return Long.parseUnsignedLong(digits);
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
