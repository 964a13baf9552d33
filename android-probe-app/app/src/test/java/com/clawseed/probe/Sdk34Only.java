package com.clawseed.probe;

import java.util.TreeMap;
import javax.annotation.Priority;
import javax.inject.Inject;
import org.robolectric.internal.dependency.DependencyResolver;
import org.robolectric.pluginapi.Sdk;
import org.robolectric.plugins.DefaultSdkProvider;

/**
 * Robolectric's SDKs, up to the app's compileSdk (34) only. Robolectric
 * reads framework resources from the newest SDK it knows; left at 35 it
 * would want a second framework jar, which scripts/probe-app-check.sh does
 * not fetch (Robolectric runs offline there).
 */
@Priority(1)
public final class Sdk34Only extends DefaultSdkProvider {
    static final int COMPILE_SDK = 34;

    @Inject
    public Sdk34Only(DependencyResolver resolver) {
        super(resolver);
    }

    @Override
    protected void populateSdks(TreeMap<Integer, Sdk> knownSdks) {
        super.populateSdks(knownSdks);
        knownSdks.tailMap(COMPILE_SDK + 1).clear();
    }
}
