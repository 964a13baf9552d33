package com.clawseed.probe.core;

import com.clawseed.probe.wire.Ops;
import com.clawseed.probe.wire.WireBundle;
import com.clawseed.probe.wire.WireError;
import com.clawseed.probe.wire.WireValue;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** A scripted device: methods of the "provider" decide what a call does. */
final class FakeBackend implements DeviceBackend {
    final HandleTable<byte[]> fds = new HandleTable<>("fd-");
    final HandleTable<String> intents = new HandleTable<>("pi-");
    /** Descriptors reported open for writing; the others' mode is not known. */
    final java.util.Set<String> writableFds = new java.util.HashSet<>();
    /** What {@code resolve} reports as the activity that came up; null: not known. */
    String launchedPackage;
    final Map<String, String> fdErrors = Collections.synchronizedMap(new HashMap<>());
    final CountDownLatch closed = new CountDownLatch(1);
    final AtomicInteger inCall = new AtomicInteger();
    /** Both "together" calls must be in progress at once to return. */
    final CountDownLatch together = new CountDownLatch(2);
    final List<String> restarted = Collections.synchronizedList(new ArrayList<>());

    @Override
    public Hello hello() {
        return new Hello("cetp-probe-test/1", new Ops.Identity("a", 10123, Arrays.asList("com.clawseed.probe"), Arrays.asList("ab")),
                new Ops.DeviceInfo(34, "fake", "fake/fp"), 1234L);
    }

    @Override
    public List<Ops.ServiceInfo> discover() {
        Map<String, String> meta = new HashMap<>();
        meta.put("com.clawseed.tools.authority", "x.tools");
        return Arrays.asList(new Ops.ServiceInfo("x", "x/.S", true, null, meta, "x"));
    }

    @Override
    public CallResult call(Ops.CallParams p) throws DeviceError, InterruptedException {
        inCall.incrementAndGet();
        try {
            switch (p.method) {
                case "echo":
                    return new CallResult(p.extras, 5);
                case "null":
                    return new CallResult(null, 1);
                case "slow":
                    Thread.sleep(2_000);
                    return new CallResult(new WireBundle(), 2_000_000);
                case "together":
                    together.countDown();
                    if (!together.await(5, TimeUnit.SECONDS)) {
                        throw new DeviceError(WireError.TIMEOUT, "the other call never came");
                    }
                    return new CallResult(new WireBundle().put("arg", WireValue.ofString(p.arg)), 10);
                case "file": {
                    byte[] data = new byte[Integer.parseInt(p.arg)];
                    for (int i = 0; i < data.length; i++) {
                        data[i] = (byte) (i * 31);
                    }
                    String fd = fds.add(data);
                    String pi = intents.add("confirm");
                    return new CallResult(new WireBundle()
                            .put("result_fd", WireValue.ofFd(fd))
                            .put("confirmation_intent", WireValue.ofPendingIntent(
                                    new WireValue.PendingIntentInfo(pi, "x", 10200L, true, true))), 7);
                }
                case "throw":
                    throw new DeviceError(WireError.PROVIDER_EXCEPTION, "Permission Denial", "java.lang.SecurityException");
                case "bug":
                    throw new IllegalStateException("backend bug");
                default:
                    throw new DeviceError(WireError.UNKNOWN_AUTHORITY, "no provider for " + p.authority);
            }
        } finally {
            inCall.decrementAndGet();
        }
    }

    @Override
    public FdSource takeFd(String handle) throws DeviceError {
        byte[] data = fds.take(handle);
        String error = fdErrors.get(handle);
        return new FdSource() {
            final InputStream in = new ByteArrayInputStream(data);

            @Override
            public InputStream stream() {
                return in;
            }

            @Override
            public String checkError() {
                return error;
            }

            @Override
            public Boolean writable() {
                return writableFds.contains(handle) ? Boolean.TRUE : null;
            }

            @Override
            public void close() {
                // Nothing to release for bytes in memory.
            }
        };
    }

    @Override
    public void closeFd(String handle) throws DeviceError {
        fds.take(handle);
    }

    @Override
    public ResolveResult resolve(Ops.ResolveParams p) throws DeviceError {
        intents.take(p.handle);
        return new ResolveResult(true, p.decision != Ops.Decision.DISMISS,
                p.decision == Ops.Decision.APPROVE ? -1 : 0, launchedPackage);
    }

    @Override
    public void restartProvider(String pkg) throws DeviceError {
        if (pkg.equals("com.protected")) {
            throw DeviceError.unsupported("cannot stop " + pkg);
        }
        restarted.add(pkg);
    }

    @Override
    public void close() {
        fds.drain();
        intents.drain();
        closed.countDown();
    }
}
