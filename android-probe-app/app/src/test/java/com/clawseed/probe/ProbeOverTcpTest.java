package com.clawseed.probe;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import android.app.Instrumentation;
import android.content.Context;
import com.clawseed.probe.core.ProbeSession;
import com.clawseed.probe.wire.Frame;
import com.clawseed.probe.wire.FrameCodec;
import com.clawseed.probe.wire.FrameReader;
import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.annotation.Config;

/**
 * The probe's own stack end to end on the JVM: ProbeSession and its
 * Dispatcher over a real TCP socket (where a phone has the abstract socket
 * adb forwards to), AndroidBackend under Robolectric, a vendor's
 * ContentProvider behind it. The host side is plain probe-wire lines.
 * Robolectric, not a phone: no Binder between the probe and the Provider.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 34, shadows = ShadowPackageManagerFlags.class)
public class ProbeOverTcpTest {
    private ServerSocket server;
    private Socket host;
    private FrameReader reader;
    private OutputStream out;

    @Before
    public void setUp() throws Exception {
        Context ctx = RuntimeEnvironment.getApplication();
        AndroidBackendTest.installVendor(ctx);
        server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        Thread serving = new Thread(() -> {
            try (Socket probe = server.accept()) {
                new ProbeSession(probe.getInputStream(), probe.getOutputStream(),
                        new AndroidBackend(ctx, UiAccess.connect(new Instrumentation())), message -> { }).run();
            } catch (Exception e) {
                // The test ended the connection.
            }
        }, "probe-session");
        serving.setDaemon(true);
        serving.start();
        host = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
        host.setSoTimeout(20_000);
        reader = new FrameReader(host.getInputStream());
        out = host.getOutputStream();
    }

    @After
    public void tearDown() throws Exception {
        host.close();
        server.close();
    }

    private Frame ask(String request) throws Exception {
        out.write((request + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        return FrameCodec.decode(reader.readLine());
    }

    private JsonObject ok(String request) throws Exception {
        Frame f = ask(request);
        assertTrue(request + " -> " + FrameCodec.toJson(f), f instanceof Frame.Ok);
        return ((Frame.Ok) f).ok;
    }

    /** Canonical JSON text, as on the wire. */
    private static String json(Object o) {
        return JsonWriter.toText(o);
    }

    @Test
    public void hello_discover_and_calls_over_the_wire() throws Exception {
        JsonObject hello = ok("{\"id\":1,\"op\":\"hello\"}");
        assertEquals("1", String.valueOf(hello.get("wire")));
        assertEquals("a", String.valueOf(((JsonObject) hello.get("identity")).get("name")));
        // Robolectric hands the instrumentation a UiAutomation (a shadow, with
        // no windows behind it), as `am instrument -w` does on a phone.
        assertEquals(List.of("hello", "discover", "call", "read_fd", "close_fd", "resolve", "restart_provider"),
                hello.get("ops"));

        JsonObject discovered = ok("{\"id\":2,\"op\":\"discover\"}");
        JsonObject vendor = null;
        for (Object p : (List<?>) discovered.get("providers")) {
            if (TestToolProvider.PACKAGE.equals(String.valueOf(((JsonObject) p).get("package")))) {
                vendor = (JsonObject) p;
            }
        }
        assertTrue(json(discovered), vendor != null);
        assertEquals("int", String.valueOf(((JsonObject) vendor.get("meta_types")).get("com.clawseed.tools.version")));
        assertEquals(TestToolProvider.PACKAGE, String.valueOf(vendor.get("authority_package")));

        JsonObject call = ok("{\"id\":3,\"op\":\"call\",\"authority\":\"" + TestToolProvider.AUTHORITY
                + "\",\"method\":\"echo\",\"arg\":\"x\",\"extras\":{\"consumer_versions\":{\"t\":\"int[]\",\"v\":[2,1]}},"
                + "\"timeout_ms\":5000}");
        JsonObject result = (JsonObject) call.get("result");
        assertEquals("{\"t\":\"int\",\"v\":2}", json(result.get("protocol_version")));
        assertEquals("{\"t\":\"long\",\"v\":2}", json(result.get("deadline_at_ms")));
        assertEquals("{\"t\":\"bundle\",\"v\":{\"consumer_versions\":{\"t\":\"int[]\",\"v\":[2,1]}}}",
                json(result.get("extras")));

        Frame thrown = ask("{\"id\":4,\"op\":\"call\",\"authority\":\"" + TestToolProvider.AUTHORITY
                + "\",\"method\":\"state\",\"arg\":null,\"extras\":null,\"timeout_ms\":5000}");
        assertTrue(thrown instanceof Frame.Err);
        assertEquals("provider_exception", ((Frame.Err) thrown).error.kind);
        assertEquals("java.lang.IllegalStateException", ((Frame.Err) thrown).error.className);

        Frame unknown = ask("{\"id\":5,\"op\":\"frobnicate\"}");
        assertEquals("unknown_op", ((Frame.Err) unknown).error.kind);
    }
}
