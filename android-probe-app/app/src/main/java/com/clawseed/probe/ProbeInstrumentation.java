package com.clawseed.probe;

import android.app.Activity;
import android.app.Instrumentation;
import android.app.UiAutomation;
import android.net.Credentials;
import android.net.LocalServerSocket;
import android.net.LocalSocket;
import android.os.Bundle;
import android.os.Process;
import android.util.Log;
import com.clawseed.probe.core.DeviceError;
import com.clawseed.probe.core.Dispatcher;
import com.clawseed.probe.core.HostedProvider;
import com.clawseed.probe.core.ProbeSession;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * The probe's entry point, started by the host with
 * {@code adb shell am instrument -w -r <package>/com.clawseed.probe.ProbeInstrumentation},
 * a shell stream the host keeps open for the whole run and closes at its end.
 * It listens on the abstract socket {@code BuildConfig.SOCKET_NAME}, reached
 * with {@code adb forward tcp:N localabstract:<name>}, and serves each
 * connection with a {@link ProbeSession} as this app's identity.
 *
 * <p>Instrumentation rather than a service: it can have a {@link UiAutomation},
 * which {@code resolve} needs to play a decision in another app's UI and
 * {@code restart_provider} needs to run {@code am force-stop}. Android gives
 * one only to an instrumentation started with {@code -w}; without it the
 * probe still serves, and {@code hello} leaves those two ops out.
 */
public final class ProbeInstrumentation extends Instrumentation {
    static final String TAG = "cetp-probe";

    /** adbd runs as shell, or as root after {@code adb root}. */
    private static final int SHELL_UID = 2000;
    private static final int ROOT_UID = 0;

    @Override
    public void onCreate(Bundle arguments) {
        super.onCreate(arguments);
        start();
    }

    @Override
    public void onStart() {
        super.onStart();
        final UiAccess ui = UiAccess.connect(this);
        final HostedProvider hosting = startHosting();
        LocalServerSocket server = null;
        try {
            // Not try-with-resources: LocalServerSocket is Closeable only from API 29.
            server = new LocalServerSocket(BuildConfig.SOCKET_NAME);
            Log.i(TAG, "listening on localabstract:" + BuildConfig.SOCKET_NAME + " as uid " + Process.myUid());
            // With `am instrument -r` this prints as INSTRUMENTATION_STATUS
            // lines in the host's stream, where a first run can be diagnosed.
            Bundle status = new Bundle();
            status.putString("cetp-probe", "listening");
            status.putString("socket", "localabstract:" + BuildConfig.SOCKET_NAME);
            List<String> ops = new ArrayList<>(ui.abilities().ops());
            if (hosting != null) {
                ops.addAll(Dispatcher.HOSTING_OPS);
                status.putString("hosted_authority", hosting.hostable().authority);
            }
            status.putString("ops", String.join(",", ops));
            sendStatus(0, status);
            while (true) {
                LocalSocket socket = server.accept();
                int peer = peerUid(socket);
                if (peer != SHELL_UID && peer != ROOT_UID && peer != Process.myUid()) {
                    // Any app can reach an abstract socket; only the host (over adb) may
                    // make calls in this app's name.
                    Log.w(TAG, "refusing a connection from uid " + peer);
                    closeQuietly(socket);
                    continue;
                }
                Thread t = new Thread(() -> serve(socket, ui, hosting), "cetp-probe-connection");
                t.setDaemon(true);
                t.start();
            }
        } catch (IOException e) {
            Log.e(TAG, "probe server stopped", e);
            Bundle results = new Bundle();
            results.putString("error", e.toString());
            finish(Activity.RESULT_CANCELED, results);
        } finally {
            if (server != null) {
                try {
                    server.close();
                } catch (IOException ignored) {
                    // Stopping anyway.
                }
            }
        }
    }

    private static int peerUid(LocalSocket socket) {
        try {
            Credentials c = socket.getPeerCredentials();
            return c.getUid();
        } catch (IOException e) {
            return -1;
        }
    }

    /**
     * The hostile Provider this app declares, or null when it cannot be set
     * up (the probe then serves without host_provider, and hello says so by
     * leaving it out). Its discovery services are hidden first: a probe that
     * died while hosting leaves one enabled, and Consumers would discover a
     * Provider no host answers for.
     */
    private HostedProvider startHosting() {
        try {
            HostedProvider hosting = Hosting.get(getTargetContext());
            hosting.reset();
            return hosting;
        } catch (DeviceError e) {
            Log.e(TAG, "no hostile provider: " + e.getMessage());
            return null;
        }
    }

    private void serve(LocalSocket socket, UiAccess ui, HostedProvider hosting) {
        try {
            AndroidBackend backend = new AndroidBackend(getTargetContext(), ui);
            new ProbeSession(socket.getInputStream(), socket.getOutputStream(), backend, hosting,
                    message -> Log.i(TAG, message)).run();
        } catch (IOException e) {
            Log.w(TAG, "connection failed", e);
        } finally {
            closeQuietly(socket);
        }
    }

    private static void closeQuietly(LocalSocket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // The peer is gone either way.
        }
    }
}
