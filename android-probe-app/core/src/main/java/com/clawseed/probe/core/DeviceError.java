package com.clawseed.probe.core;

import com.clawseed.probe.wire.WireError;

/** A device-level failure, answered as a probe-wire error of {@link #kind}. */
public final class DeviceError extends Exception {
    private static final long serialVersionUID = 1L;

    /**
     * A failure of the probe itself rather than of the Provider or the
     * request (a compatible extension of the error kinds; the host treats an
     * unknown kind as device trouble).
     */
    public static final String DEVICE_ERROR = "device_error";

    public final String kind;
    public final String className;

    public DeviceError(String kind, String message) {
        this(kind, message, null);
    }

    public DeviceError(String kind, String message, String className) {
        super(message);
        this.kind = kind;
        this.className = className;
    }

    public static DeviceError unknownHandle(String handle) {
        return new DeviceError(WireError.UNKNOWN_HANDLE, handle + " is not held by this connection");
    }

    public static DeviceError unsupported(String what) {
        return new DeviceError(WireError.UNSUPPORTED, what);
    }

    public WireError toWire() {
        return new WireError(kind, getMessage(), className, null);
    }
}
