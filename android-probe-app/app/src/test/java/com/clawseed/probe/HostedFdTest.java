package com.clawseed.probe;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.robolectric.Shadows.shadowOf;

import android.content.Context;
import android.content.pm.ApplicationInfo;
import android.content.pm.PackageInfo;
import android.net.Uri;
import android.os.Bundle;
import android.os.ParcelFileDescriptor;
import com.clawseed.probe.core.FdClose;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.JsonWriter;
import com.clawseed.probe.wire.Ops;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;

/**
 * The result descriptor of an {@code fd_data} reply under Robolectric: a
 * read-only file in the probe's cache, opened with a close listener, and
 * the {@code fd_closed} event its close makes; and how the listener's
 * {@code IOException}s read, checked against the framework's own
 * {@code ParcelFileDescriptor.Status} code.
 *
 * <p>What Robolectric does NOT show, and only a phone can: its
 * {@code ShadowParcelFileDescriptor} plays the close listener only for the
 * very object that was opened, calls it with {@code null} on that object's
 * {@code close()}, and never with a status (detach, leak, error, death:
 * there is no status channel); it also treats the silent release of the
 * probe's own copy ({@code writeToParcel} with
 * {@code PARCELABLE_WRITE_RETURN_VALUE}) as a normal close. Without Binder,
 * the Consumer here holds the probe's own object, so its {@code close()} is
 * what the listener hears, as a Consumer's would be on a phone; that the
 * probe's and the hosted process's copies stay silent is the framework
 * source's word (HostedBridge.releaseSilently), not seen here.
 *
 * <p>{@code fd_endless} is not played here: Robolectric's pipes are temporary
 * files, which a reader's close does not end, so its writer would fill the
 * disk up to its cap; core's ResultFileTest shows it stays a pipe without
 * {@code fd_closed}.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = ShadowPackageManagerFlags.class)
public class HostedFdTest {
    private static final String CONSUMER = "com.example.consumer";
    private static final int CONSUMER_UID = 10235;
    private static final byte[] DATA = "{\"tasks\":[1,2,3]}".getBytes(StandardCharsets.UTF_8);

    private Context ctx;
    private HostedProvider hosted;
    private HostedProvider.Connection conn;
    private final BlockingQueue<Frame> frames = new LinkedBlockingQueue<>();

    @Before
    public void setUp() throws Exception {
        ctx = RuntimeEnvironment.getApplication();
        ManifestInstaller.install(ctx);
        PackageInfo consumer = new PackageInfo();
        consumer.packageName = CONSUMER;
        consumer.applicationInfo = new ApplicationInfo();
        consumer.applicationInfo.packageName = CONSUMER;
        consumer.applicationInfo.uid = CONSUMER_UID;
        shadowOf(ctx.getPackageManager()).installPackage(consumer);
        hosted = Hosting.get(ctx);
        conn = hosted.attach(frames::add);
        conn.host(new Ops.HostProviderParams(hosted.hostable().authority, hosted.hostable().variants.get(0).meta));
    }

    @After
    public void tearDown() {
        conn.close();
    }

    private Frame.Event event(String name) throws InterruptedException {
        Frame f = frames.poll(10, TimeUnit.SECONDS);
        assertNotNull("no " + name + " event", f);
        Frame.Event e = (Frame.Event) f;
        assertEquals(JsonWriter.toText(e.fields), name, e.event);
        return e;
    }

    private void reply(String json) throws Exception {
        Frame.Request r = (Frame.Request) FrameCodec.decode(json.getBytes(StandardCharsets.UTF_8));
        conn.reply((Ops.ReplyParams) Ops.decodeParams(r));
    }

    @SuppressWarnings("deprecation")
    private static ParcelFileDescriptor resultFd(Bundle result) {
        return (ParcelFileDescriptor) result.getParcelable(HostileProvider.RESULT_FD);
    }

    /** A Consumer's call answered with {@link #DATA} as {@code fd_data}; returns the call's id and descriptor. */
    private Object[] consumerGetsAFile() throws Exception {
        CompletableFuture<Bundle> call = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                call.complete(ctx.getContentResolver().call(
                        Uri.parse("content://" + hosted.hostable().authority), "export", null, new Bundle()));
            } catch (RuntimeException e) {
                call.completeExceptionally(e);
            }
        });
        t.setDaemon(true);
        t.start();
        String id = (String) event("incoming_call").fields.get("call");
        reply("{\"id\":1,\"op\":\"reply\",\"call\":\"" + id + "\",\"result\":null,\"fd_data\":\""
                + java.util.Base64.getEncoder().encodeToString(DATA) + "\"}");
        ParcelFileDescriptor pfd = resultFd(call.get(10, TimeUnit.SECONDS));
        assertNotNull("a result_fd", pfd);
        return new Object[] {id, pfd};
    }

    private File[] resultFiles() throws Exception {
        File[] files = Hosting.results(ctx).dir().listFiles();
        return files == null ? new File[0] : files;
    }

    private static void awaitGone(File f) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (f.exists() && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertFalse(f + " is deleted", f.exists());
    }

    /** The held files' count reaches 0 (the slot is given back just after the file is deleted). */
    private void awaitNoneHeld() throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (hosted.heldFiles() != 0 && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertEquals(0, hosted.heldFiles());
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        byte[] buf = new byte[4096];
        int n;
        while ((n = in.read(buf)) >= 0) {
            b.write(buf, 0, n);
        }
        return b.toByteArray();
    }

    @Test
    public void fdDataIsAReadOnlyFileWhoseCloseReachesTheHostOnceAndFreesIt() throws Exception {
        Object[] got = consumerGetsAFile();
        String id = (String) got[0];
        ParcelFileDescriptor pfd = (ParcelFileDescriptor) got[1];
        File[] files = resultFiles();
        assertEquals(1, files.length);
        assertArrayEquals(DATA, Files.readAllBytes(files[0].toPath()));
        assertEquals(1, hosted.heldFiles());
        // Read through the descriptor, without closing it; it cannot be written.
        assertArrayEquals(DATA, readAll(new FileInputStream(pfd.getFileDescriptor())));
        try {
            new FileOutputStream(pfd.getFileDescriptor()).write('x');
            fail("a result file is writable");
        } catch (IOException expected) {
            // MODE_READ_ONLY.
        }
        assertTrue("nothing is reported before the Consumer closes", frames.isEmpty());

        pfd.close();
        Frame.Event closed = event("fd_closed");
        assertEquals("{\"call\":\"" + id + "\",\"how\":\"closed\",\"now_ms\":" + closed.fields.get("now_ms") + "}",
                JsonWriter.toText(closed.fields));
        awaitGone(files[0]);
        awaitNoneHeld();
        // Once per call: the probe's later release of its own copy says nothing more.
        assertNull(frames.poll(500, TimeUnit.MILLISECONDS));
    }

    @Test
    public void aCloseAfterTheHostLeftIsNotSentButTheFileIsFreed() throws Exception {
        ParcelFileDescriptor pfd = (ParcelFileDescriptor) consumerGetsAFile()[1];
        File file = resultFiles()[0];
        conn.close();
        pfd.close();
        awaitGone(file);
        awaitNoneHeld();
        assertNull(frames.poll(500, TimeUnit.MILLISECONDS));
    }

    @Test
    public void filesLeftByAnEarlierProcessAreCleared() throws Exception {
        File dir = new File(ctx.getCacheDir(), "stale-test");
        assertTrue(dir.mkdirs() || dir.isDirectory());
        File old = new File(dir, "result-1.bin");
        Files.write(old.toPath(), DATA);
        new Hosting.ResultFiles(dir).clearStale();
        assertFalse(old.exists());
    }

    /**
     * The listener's IOException for each status the framework's own
     * {@code ParcelFileDescriptor.Status} (package-private, reached by
     * reflection) makes, read as {@code fd_closed}'s {@code how}: the texts
     * {@link FdClose} matches are the framework's.
     */
    @Test
    public void theFrameworksStatusesReadAsTheirHows() throws Exception {
        Class<?> status = Class.forName("android.os.ParcelFileDescriptor$Status");
        Constructor<?> make = status.getDeclaredConstructor(int.class, String.class);
        make.setAccessible(true);
        Method asIOException = status.getDeclaredMethod("asIOException");
        asIOException.setAccessible(true);
        String[][] expected = {
            {"OK", FdClose.CLOSED}, {"DETACHED", FdClose.DETACHED}, {"LEAKED", FdClose.LEAKED},
            {"DEAD", FdClose.DEAD}, {"ERROR", FdClose.ERROR},
        };
        for (String[] e : expected) {
            int code = status.getField(e[0]).getInt(null);
            IOException heard = (IOException) asIOException.invoke(make.newInstance(code, "sha256 mismatch"));
            FdClose how = FdClose.of(heard);
            assertEquals(e[0] + ": " + heard, e[1], how.how);
            if (e[1].equals(FdClose.ERROR)) {
                assertEquals("the Consumer's own text", "sha256 mismatch", how.message);
            } else {
                assertNull(how.message);
            }
        }
        assertTrue(asIOException.invoke(make.newInstance(status.getField("DETACHED").getInt(null), null))
                instanceof ParcelFileDescriptor.FileDescriptorDetachedException);
        // SILENCE is never heard by a listener (writeCommStatusAndClose writes nothing); an
        // unknown code reads as an error.
        FdClose unknown = FdClose.of((IOException) asIOException.invoke(make.newInstance(42, null)));
        assertEquals(FdClose.ERROR, unknown.how);
        assertEquals("Unknown status: 42", unknown.message);
    }
}
