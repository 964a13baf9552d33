package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import android.database.DatabaseUtils;
import android.os.Parcel;
import com.clawseed.probe.core.HostedProvider;
import java.util.ArrayList;
import java.util.List;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.annotation.Config;

/**
 * Finding 4: which exceptions a ContentProvider's {@code call()} throws reach
 * a Consumer in another process as themselves. A Provider's transport
 * ({@code ContentProviderNative}) writes what it catches with
 * {@code DatabaseUtils.writeExceptionToParcel}, which hands every class it
 * does not know to {@code Parcel.writeException}; the caller reads it back
 * with {@code DatabaseUtils.readExceptionFromParcel}. Both run here as the
 * framework's own code; Robolectric has no second process, so the parcel
 * between them is the Binder.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34)
public class BinderExceptionsTest {
    /**
     * The exception the caller sees, or null when the reply carries none.
     * Throws what the Provider's side cannot write.
     */
    private static RuntimeException cross(RuntimeException thrown) {
        Parcel reply = Parcel.obtain();
        try {
            DatabaseUtils.writeExceptionToParcel(reply, thrown);
            reply.setDataPosition(0);
            try {
                DatabaseUtils.readExceptionFromParcel(reply);
                return null;
            } catch (RuntimeException seen) {
                return seen;
            }
        } finally {
            reply.recycle();
        }
    }

    @Test
    public void every_class_the_hosted_provider_may_throw_crosses_binder_as_itself() {
        List<String> wrong = new ArrayList<>();
        for (String cls : HostedProvider.THROWABLE) {
            RuntimeException thrown = HostedProvider.Answer.throwing(cls, "scripted").exception();
            assertEquals(cls, thrown.getClass().getName());
            RuntimeException seen;
            try {
                seen = cross(thrown);
            } catch (RuntimeException rethrown) {
                // Parcel.writeException rethrows what it cannot carry: on a
                // phone that escapes the Binder thread, never reaching the caller.
                wrong.add(cls + " is not carried (" + rethrown.getClass().getName() + ")");
                continue;
            }
            if (seen == null || !seen.getClass().getName().equals(cls) || !"scripted".equals(seen.getMessage())) {
                wrong.add(cls + " arrives as " + seen);
            }
        }
        assertTrue(String.join("; ", wrong), wrong.isEmpty());
    }

    @Test
    public void a_plain_runtime_exception_does_not_cross_as_itself() {
        // Parcel.writeException has no code for it and rethrows it in the
        // Provider's process; the caller's reply holds no exception at all.
        try {
            RuntimeException seen = cross(new RuntimeException("plain"));
            fail("crossed as " + seen);
        } catch (RuntimeException rethrown) {
            assertEquals("plain", rethrown.getMessage());
        }
        assertFalse(HostedProvider.THROWABLE.contains("java.lang.RuntimeException"));
    }

    @Test
    public void a_subclass_crosses_as_the_carried_class_it_extends() {
        RuntimeException seen = cross(new IllegalStateException("sub") {
            private static final long serialVersionUID = 1L;
        });
        assertEquals(IllegalStateException.class, seen.getClass());
        assertEquals("sub", seen.getMessage());
    }
}
