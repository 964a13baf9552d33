package com.clawseed.probe.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.WireError;
import org.junit.jupiter.api.Test;

/** The error kind chosen for each way a call fails on Android. */
class FailuresTest {
    @Test
    void aNullClientIsUnknownOnlyWhenNoProviderIsKnown() {
        assertEquals(WireError.UNKNOWN_AUTHORITY, Failures.noClient("x.tools", false).kind);
        DeviceError died = Failures.noClient("x.tools", true);
        assertEquals(WireError.PROVIDER_DIED, died.kind);
        assertTrue(died.getMessage().contains("died while starting"), died.getMessage());
    }

    @Test
    void deadObjectIsTooLargeWhenTheProviderStillAnswers() {
        String detail = "android.os.DeadObjectException: Transaction failed on small parcel; remote process probably died";
        assertEquals(WireError.TRANSACTION_TOO_LARGE, Failures.deadObject(detail, Failures.Liveness.ALIVE).kind);
        assertEquals(WireError.PROVIDER_DIED, Failures.deadObject(detail, Failures.Liveness.DEAD).kind);
        assertEquals(WireError.PROVIDER_DIED, Failures.deadObject(detail, Failures.Liveness.UNKNOWN).kind);
    }

    @Test
    void binderAndProviderFailures() {
        assertEquals(WireError.TRANSACTION_TOO_LARGE, Failures.transactionTooLarge("data parcel size 2000000").kind);
        assertEquals(WireError.TRANSACTION_TOO_LARGE, Failures.otherRemote("android.os.RemoteException").kind);
        DeviceError threw = Failures.providerThrew("java.lang.IllegalArgumentException", "bad arg");
        assertEquals(WireError.PROVIDER_EXCEPTION, threw.kind);
        assertEquals("java.lang.IllegalArgumentException", threw.className);
    }

    @Test
    void aRefusedOpenIsTheProbesSetupWhenItLacksTheDefinedToolPermission() {
        String perm = "com.clawseed.permission.ACCESS_TOOLS";
        DeviceError provider = Failures.securityRefusal("java.lang.SecurityException", "Permission Denial", false, perm);
        assertEquals(WireError.PROVIDER_EXCEPTION, provider.kind);
        assertEquals("java.lang.SecurityException", provider.className);
        DeviceError setup = Failures.securityRefusal("java.lang.SecurityException", "Permission Denial", true, perm);
        assertEquals(DeviceError.DEVICE_ERROR, setup.kind);
        assertNull(setup.className);
        assertTrue(setup.getMessage().contains(perm) && setup.getMessage().contains("reinstall"), setup.getMessage());
    }

    @Test
    void anUnreadableValueCarriesAClassNameNotASentence() {
        String bpe = "android.os.BadParcelableException";
        assertEquals("com.example.app.Widget", Failures.unreadableClass(
                "ClassNotFoundException when unmarshalling: com.example.app.Widget", bpe));
        assertEquals("com.example.app.Outer$Inner", Failures.unreadableClass(
                "Parcelable protocol requires a Parcelable.Creator object called CREATOR on class com.example.app.Outer$Inner", bpe));
        assertEquals("com.example.Ser", Failures.unreadableClass(
                "Parcelable encountered ClassNotFoundException reading a Serializable object (name = com.example.Ser)",
                "java.lang.RuntimeException"));
        // Nothing named: the exception's own class, never the message.
        assertEquals(bpe, Failures.unreadableClass("Parcel android.os.Parcel@5a3: Unmarshalling unknown type code 7", bpe));
        assertEquals(bpe, Failures.unreadableClass(null, bpe));
        assertEquals("java.lang.RuntimeException", Failures.unreadableClass("x", "not a class"));
        assertTrue(Failures.isClassName("a.B$C"));
        assertFalse(Failures.isClassName("unreadable: a.B"));
        assertFalse(Failures.isClassName(""));
    }
}
