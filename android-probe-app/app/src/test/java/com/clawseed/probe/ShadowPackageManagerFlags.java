package com.clawseed.probe;

import android.app.ApplicationPackageManager;
import android.content.ComponentName;
import android.content.pm.PackageManager;
import android.content.pm.ProviderInfo;
import org.robolectric.annotation.Implementation;
import org.robolectric.annotation.Implements;
import org.robolectric.shadows.ShadowApplicationPackageManager;

/**
 * Robolectric 4.14.1 answers the API 33 overloads that take
 * {@code ComponentInfoFlags} for services but not for providers ("not
 * supporting ... yet"); the app calls them from API 33 on, as Android asks.
 * They mean the same as the int overloads, which Robolectric has.
 */
@Implements(value = ApplicationPackageManager.class, isInAndroidSdk = false)
public class ShadowPackageManagerFlags extends ShadowApplicationPackageManager {
    @Implementation(minSdk = 33)
    protected ProviderInfo resolveContentProvider(String name, PackageManager.ComponentInfoFlags flags) {
        return resolveContentProvider(name, (int) flags.getValue());
    }

    @Implementation(minSdk = 33)
    protected ProviderInfo getProviderInfo(ComponentName component, PackageManager.ComponentInfoFlags flags)
            throws PackageManager.NameNotFoundException {
        return getProviderInfo(component, (int) flags.getValue());
    }
}
