package com.clawseed.probe.core;

import com.clawseed.probe.wire.WireError;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The probe-wire error kind for each way a {@code call} can fail on Android.
 * The app observes the failure (an exception class, a null client, whether
 * the Provider still answers); the choice of kind lives here, where the JVM
 * tests can show it, because the host charges {@code provider_died} and
 * {@code transaction_too_large} to the Provider and everything else to the
 * device.
 */
public final class Failures {
    private Failures() {}

    /** What a second, small request to the same Provider client showed. */
    public enum Liveness {
        /** It answered: the Provider's process is alive. */
        ALIVE,
        /** It failed with DeadObjectException too. */
        DEAD,
        /** It could not be asked, or failed otherwise. */
        UNKNOWN
    }

    /**
     * No client for the authority. When the package manager knows a provider
     * for it, the provider exists and its process died while starting.
     */
    public static DeviceError noClient(String authority, boolean authorityKnown) {
        if (authorityKnown) {
            return new DeviceError(WireError.PROVIDER_DIED,
                    "a provider is installed for " + authority + " but its process died while starting");
        }
        return new DeviceError(WireError.UNKNOWN_AUTHORITY, "no provider is installed for " + authority);
    }

    /**
     * The Provider refused the probe with a {@code SecurityException}, when
     * opening it or from {@code call}. When the probe lacks the
     * tool permission although the device defines it, the probe was installed
     * before the app that defines it: that is setup trouble, not the
     * Provider's doing.
     */
    public static DeviceError securityRefusal(String className, String message, boolean probeLacksDefinedToolPermission,
            String toolPermission) {
        if (probeLacksDefinedToolPermission) {
            return new DeviceError(DeviceError.DEVICE_ERROR, "the probe does not hold " + toolPermission
                    + " although this device defines it: Android grants a permission defined by another app"
                    + " only to apps installed after it; reinstall the probe APKs after the Provider ("
                    + className + ": " + message + ")");
        }
        return new DeviceError(WireError.PROVIDER_EXCEPTION, message, className);
    }

    /**
     * {@code call} failed with DeadObjectException. Android raises it also when
     * a reply too large for the Binder buffer fails to arrive ("Transaction
     * failed on small parcel; remote process probably died"): if the same
     * client still reaches the Provider afterwards, the reply was the problem.
     */
    public static DeviceError deadObject(String detail, Liveness after) {
        if (after == Liveness.ALIVE) {
            return new DeviceError(WireError.TRANSACTION_TOO_LARGE,
                    "the call failed with DeadObjectException but the provider still answers, so its reply"
                            + " overflowed the Binder buffer: " + detail);
        }
        return new DeviceError(WireError.PROVIDER_DIED, "the provider's process died during the call: " + detail);
    }

    public static DeviceError transactionTooLarge(String detail) {
        return new DeviceError(WireError.TRANSACTION_TOO_LARGE, "the Binder buffer overflowed: " + detail);
    }

    /** Any other RemoteException: probe-wire groups it with the buffer overflow. */
    public static DeviceError otherRemote(String detail) {
        return new DeviceError(WireError.TRANSACTION_TOO_LARGE, "Binder failure: " + detail);
    }

    /** An exception the Provider threw, as it crossed Binder. */
    public static DeviceError providerThrew(String className, String message) {
        return new DeviceError(WireError.PROVIDER_EXCEPTION, message, className);
    }

    private static final Pattern CLASS_NAME =
            Pattern.compile("[A-Za-z_$][A-Za-z0-9_$]*(\\.[A-Za-z_$][A-Za-z0-9_$]*)*");

    /** Where Android's unmarshalling errors name the class they could not read. */
    private static final Pattern NAMED_CLASS = Pattern.compile(
            "(?:when unmarshalling: |on class |\\(name = )([A-Za-z_$][A-Za-z0-9_$.]*)");

    public static boolean isClassName(String s) {
        return s != null && CLASS_NAME.matcher(s).matches();
    }

    /**
     * The class an {@code other} value carries for a value the probe could
     * not unparcel: the class Android's message names, else the exception's
     * own class. Always a class name, never a sentence, since the host reads
     * {@code other} as a type.
     */
    public static String unreadableClass(String message, String exceptionClass) {
        if (message != null) {
            Matcher m = NAMED_CLASS.matcher(message);
            while (m.find()) {
                String name = m.group(1);
                while (name.endsWith(".")) {
                    name = name.substring(0, name.length() - 1);
                }
                if (isClassName(name)) {
                    return name;
                }
            }
        }
        return isClassName(exceptionClass) ? exceptionClass : "java.lang.RuntimeException";
    }
}
