package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ResolveUriTest {
    @Test
    void everyLaunchHasItsOwnUri() {
        ResolveBroker<String> broker = new ResolveBroker<>();
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < 100; i++) {
            ResolveBroker<String>.Pending p = broker.register("pi");
            String uri = ResolveUri.of("n1", p.token);
            assertEquals(true, seen.add(uri), uri);
            assertEquals(p.token, ResolveUri.token(uri, "n1"));
        }
        // A later probe process counts from 1 again; its nonce keeps it apart.
        assertNotEquals(ResolveUri.of("n1", 1), ResolveUri.of("n2", 1));
    }

    @Test
    void anythingElseHasNoToken() {
        assertEquals(Long.valueOf(-1L), ResolveUri.token(ResolveUri.of("n1", -1L), "n1"));
        assertNull(ResolveUri.token(ResolveUri.of("n1", 7), "n2"), "an earlier process's launch");
        assertNull(ResolveUri.token(null, "n1"));
        assertNull(ResolveUri.token("cetp-probe-resolve://n1/", "n1"));
        assertNull(ResolveUri.token("cetp-probe-resolve://n1/7x", "n1"));
        assertNull(ResolveUri.token("cetp-probe-resolve://n1/-7", "n1"));
        assertNull(ResolveUri.token("cetp-probe-resolve://n1/99999999999999999999", "n1"));
        assertNull(ResolveUri.token("https://n1/7", "n1"));
        assertThrows(IllegalArgumentException.class, () -> ResolveUri.of("a/b", 1));
        assertThrows(IllegalArgumentException.class, () -> ResolveUri.of("", 1));
    }
}
