package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import org.junit.jupiter.api.Test;

/**
 * What an {@code OnCloseListener} hears, read as {@code fd_closed}'s
 * {@code how}: the texts of the framework's {@code Status.asIOException}
 * (AOSP API 34; app/'s HostedFdTest checks them against the framework's own
 * class under Robolectric).
 */
class FdCloseTest {
    private static FdClose of(String message) {
        return FdClose.of(new IOException(message));
    }

    @Test
    void theFrameworksTextsAreTheirHows() {
        assertEquals("closed", FdClose.of((IOException) null).how);
        assertNull(FdClose.of((IOException) null).message);
        assertEquals("detached", of("Remote side is detached").how);
        assertEquals("leaked", of("Remote side was leaked").how);
        assertEquals("dead", of("Remote side is dead").how);
        FdClose error = of("Remote error: checksum mismatch");
        assertEquals("error", error.how);
        assertEquals("checksum mismatch", error.message, "the Consumer's own text, without the framework's prefix");
        assertNull(of("Remote side is dead").message);
    }

    @Test
    void anErrorWhoseTextNamesAnotherHowIsStillAnError() {
        FdClose e = of("Remote error: the remote side is dead and leaked");
        assertEquals("error", e.how);
        assertEquals("the remote side is dead and leaked", e.message);
    }

    @Test
    void otherTextsFallBackOnTheWordsThenOnError() {
        assertEquals("detached", of("descriptor DETACHED by peer").how);
        assertEquals("leaked", of("Leaked").how);
        assertEquals("dead", of("peer is Dead").how);
        FdClose unknown = of("Unknown status: 7");
        assertEquals("error", unknown.how);
        assertEquals("Unknown status: 7", unknown.message);
        FdClose bare = FdClose.of(new IOException());
        assertEquals("error", bare.how);
        assertEquals("java.io.IOException", bare.message);
    }

    @Test
    void messagesAreBoundedWithoutSplittingASurrogatePair() {
        String pairAtTheEdge = "a".repeat(FdClose.MAX_MESSAGE_CHARS - 1) + "\uD83D\uDE00" + "tail";
        FdClose e = of("Remote error: " + pairAtTheEdge);
        assertEquals(FdClose.MAX_MESSAGE_CHARS - 1, e.message.length());
        assertEquals(FdClose.MAX_MESSAGE_CHARS, of("Remote error: " + "b".repeat(2000)).message.length());
        assertEquals("", FdClose.of("error", null).message);
        assertNull(FdClose.of("closed", "ignored").message);
        assertThrows(IllegalArgumentException.class, () -> FdClose.of("gone", null));
    }
}
