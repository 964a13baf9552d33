package com.clawseed.probe;

import android.app.Service;
import android.content.Intent;
import android.os.IBinder;

/**
 * The discovery service of the hosted Provider (§2.1): Consumers find the
 * Provider by this service's intent filter and meta-data, and never bind to
 * it. Meta-data is fixed in the manifest, so each set the host may ask for
 * is its own service, disabled until a connection hosts that set
 * ({@link Hosting}).
 */
public class HostileToolService extends Service {
    @Override
    public IBinder onBind(Intent intent) {
        return null;
    }

    /** Declares version 1 only (a v1-only Provider). */
    public static final class V1Only extends HostileToolService {}

    /** Declares versions 2 only (a v2-only Provider). */
    public static final class V2Only extends HostileToolService {}

    /**
     * Declares the OTHER probe app's authority (version 1, versions 1,2):
     * a service whose ContentProvider is in another package (CSES-002), a
     * second Provider beside this probe's own (CSES-014).
     */
    public static final class Foreign extends HostileToolService {}
}
