package com.clawseed.probe.core;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;

/** A result descriptor taken from a connection's handles, read once. */
public interface FdSource extends Closeable {
    InputStream stream() throws IOException;

    /**
     * The error the writer reported through a reliable pipe
     * ({@code ParcelFileDescriptor.checkError}), or null. Called after EOF and
     * before {@link #close()}.
     */
    String checkError();

    /**
     * Whether the descriptor is open for writing too (its access mode), or
     * null when the device cannot tell. §4.5 asks for a read-only result_fd.
     */
    default Boolean writable() {
        return null;
    }
}
