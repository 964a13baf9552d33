package com.example.cetp.notes

import android.app.Service
import android.content.Intent
import android.os.IBinder

/** The discovery entry (spec §2.1): Consumers read its meta-data; nobody binds to it. */
class ToolProviderService : Service() {
    override fun onBind(intent: Intent?): IBinder? = null
}
