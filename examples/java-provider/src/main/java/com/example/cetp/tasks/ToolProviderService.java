package com.example.cetp.tasks;

import android.app.Service;
import android.content.Intent;
import android.os.IBinder;

/**
 * The discovery entry (§2.1): Consumers find the Provider by this service's
 * intent filter ({@code com.clawseed.action.TOOL_PROVIDER}) and read its
 * meta-data (authority, version, versions). Nobody binds to it.
 */
public final class ToolProviderService extends Service {
    @Override
    public IBinder onBind(Intent intent) {
        return null;
    }
}
