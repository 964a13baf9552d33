package com.clawseed.probe.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What this probe can do on this device, which decides the {@code ops} that
 * {@code hello} lists. {@code resolve} and {@code restart_provider} need the
 * instrumentation's UiAutomation, which a probe may lack; the host must learn
 * that from {@code hello} rather than from a failed case, so that it reports
 * its own setup as the cause and not the Provider.
 */
public final class Abilities {
    public static final String RESOLVE = "resolve";
    public static final String RESTART_PROVIDER = "restart_provider";
    /**
     * Optional, never in {@link #ALL_OPS}: a probe on a phone cannot move the
     * clock (the host moves it over adb where it can). A device that can
     * lists it with {@link #plus}; one that could but does not this time
     * (the JVM device before a Provider that reads a clock it cannot move)
     * names why with {@link #without}.
     */
    public static final String ADVANCE_CLOCK = "advance_clock";

    /** How the probe's UiAutomation connection came out when the probe started. */
    public enum UiConnection {
        /** Connected: shell commands and, when needed, accessibility. */
        CONNECTED,
        /**
         * None was given: {@code am instrument} ran without {@code -w} (Android
         * gives none then), or the connection timed out.
         */
        NOT_GIVEN,
        /** Android refused the connection, usually because another instrumentation holds it. */
        REFUSED
    }

    /** Every op the probe performs when nothing is missing, in the order {@code hello} lists them. */
    public static final List<String> ALL_OPS = Collections.unmodifiableList(List.of(
            "hello", "discover", "call", "read_fd", "close_fd", RESOLVE, RESTART_PROVIDER));

    public static final Abilities FULL = new Abilities(Collections.emptyMap(), List.of());

    /** Op name to the reason it is missing; empty when the probe can do everything. */
    private final Map<String, String> unavailable;
    /** Optional ops this device performs, listed after {@link #ALL_OPS}. */
    private final List<String> optional;

    private Abilities(Map<String, String> unavailable, List<String> optional) {
        this.unavailable = Collections.unmodifiableMap(new LinkedHashMap<>(unavailable));
        this.optional = List.copyOf(optional);
    }

    /**
     * The abilities of a probe whose UiAutomation connection came out as
     * {@code ui}. Both ops need the connection: {@code resolve} plays the
     * decision through it, and {@code restart_provider} runs
     * {@code am force-stop} through its shell.
     */
    public static Abilities of(UiConnection ui, String detail) {
        String why;
        switch (ui) {
            case CONNECTED:
                return FULL;
            case NOT_GIVEN:
                why = "the probe has no UiAutomation: it was started without `am instrument -w`"
                        + " (or Android did not connect one in time)";
                break;
            case REFUSED:
            default:
                why = "the probe has no UiAutomation: another instrumentation holds the device's only one"
                        + " (below Android 12 one probe at a time can have it; start this identity's probe"
                        + " first to let it resolve)";
                break;
        }
        if (detail != null && !detail.isEmpty()) {
            why = why + " (" + detail + ")";
        }
        Map<String, String> missing = new LinkedHashMap<>();
        missing.put(RESOLVE, why);
        missing.put(RESTART_PROVIDER, why);
        return new Abilities(missing, List.of());
    }

    /**
     * The abilities of a device that cannot perform some ops for reasons of
     * its own (a rig without windows, as the JVM device was before it
     * played decisions), each op with why.
     */
    public static Abilities without(Map<String, String> unavailable) {
        for (String op : unavailable.keySet()) {
            if (!(ALL_OPS.contains(op) || op.equals(ADVANCE_CLOCK)) || op.equals("hello")) {
                throw new IllegalArgumentException("not an op a probe may leave out: " + op);
            }
        }
        return new Abilities(unavailable, List.of());
    }

    /** These abilities and the optional op {@code op} ({@link #ADVANCE_CLOCK}). */
    public Abilities plus(String op) {
        if (!op.equals(ADVANCE_CLOCK)) {
            throw new IllegalArgumentException("not an optional op: " + op);
        }
        Map<String, String> missing = new LinkedHashMap<>(unavailable);
        missing.remove(op);
        List<String> more = new ArrayList<>(optional);
        if (!more.contains(op)) {
            more.add(op);
        }
        return new Abilities(missing, more);
    }

    /** The ops {@code hello} lists. */
    public List<String> ops() {
        List<String> out = new ArrayList<>();
        for (String op : ALL_OPS) {
            if (!unavailable.containsKey(op)) {
                out.add(op);
            }
        }
        out.addAll(optional);
        return out;
    }

    /** Ops left out of {@link #ops()}, each with why (the {@code ops_unavailable} member of {@code hello}). */
    public Map<String, String> unavailable() {
        return unavailable;
    }

    public boolean can(String op) {
        return ALL_OPS.contains(op) ? !unavailable.containsKey(op) : optional.contains(op);
    }

    /** The {@code unsupported} answer for an op this probe cannot perform. */
    public DeviceError refusal(String op) {
        String why = unavailable.get(op);
        return DeviceError.unsupported("this probe cannot `" + op + "`"
                + (why != null ? ": " + why : ": this device does not perform it"));
    }
}
