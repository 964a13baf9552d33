package com.clawseed.probe;

import android.content.ContentProvider;
import android.content.ContentValues;
import android.database.Cursor;
import android.net.Uri;
import android.os.Bundle;

/** A Provider for AndroidBackendTest: answers by method name. */
public final class TestToolProvider extends ContentProvider {
    static final String AUTHORITY = "com.example.vendor.clawseed.tools";
    static final String PACKAGE = "com.example.vendor";

    @Override
    public boolean onCreate() {
        return true;
    }

    @Override
    public Bundle call(String method, String arg, Bundle extras) {
        switch (method) {
            case "echo": {
                Bundle out = new Bundle();
                out.putInt("protocol_version", 2);
                out.putLong("deadline_at_ms", 2L);
                out.putString("arg", arg);
                if (extras != null) {
                    out.putBundle("extras", extras);
                }
                return out;
            }
            case "null":
                return null;
            case "state":
                throw new IllegalStateException("not now");
            case "refuse":
                throw new SecurityException("not you");
            default:
                throw new IllegalArgumentException("unknown method " + method);
        }
    }

    @Override
    public Cursor query(Uri uri, String[] projection, String selection, String[] selectionArgs, String sortOrder) {
        return null;
    }

    @Override
    public String getType(Uri uri) {
        return null;
    }

    @Override
    public Uri insert(Uri uri, ContentValues values) {
        return null;
    }

    @Override
    public int delete(Uri uri, String selection, String[] selectionArgs) {
        return 0;
    }

    @Override
    public int update(Uri uri, ContentValues values, String selection, String[] selectionArgs) {
        return 0;
    }
}
