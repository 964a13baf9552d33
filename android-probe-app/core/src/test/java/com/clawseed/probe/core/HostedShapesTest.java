package com.clawseed.probe.core;

import static com.clawseed.probe.core.HostedProviderTest.AUTHORITY;
import static com.clawseed.probe.core.HostedProviderTest.FOREIGN_AUTHORITY;
import static com.clawseed.probe.core.HostedProviderTest.FOREIGN_PKG;
import static com.clawseed.probe.core.HostedProviderTest.PKG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.clawseed.probe.wire.JsonObject;
import com.clawseed.probe.wire.JsonWriter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The shapes of {@code host_provider} beyond the own Provider with a
 * declared service: the own Provider without a service
 * ({@code discoverable: false}), and the foreign service alone (this
 * package's service naming the other probe's authority, CSES-002 and
 * CSES-014); each refusal, and the hello members that announce them.
 */
class HostedShapesTest {
    private static final String OWN_SERVICE = PKG + "/.HostileToolService";
    private static final String FOREIGN_SERVICE = PKG + "/.HostileToolService$Foreign";

    private final List<String> exposed = Collections.synchronizedList(new ArrayList<>());
    private HostedProvider hosting;
    private HostedTesting t;
    private final List<HostedTesting> others = new ArrayList<>();

    @BeforeEach
    void setUp() {
        hosting = new HostedProvider(HostedProviderTest.hostable(),
                (own, foreign) -> exposed.add(HostedProviderTest.shown(own, foreign)), HostedProviderTest.fast(),
                () -> HostedProviderTest.NOW);
        t = new HostedTesting(hosting);
    }

    @AfterEach
    void tearDown() {
        t.conn.close();
        for (HostedTesting o : others) {
            o.conn.close();
        }
    }

    private HostedTesting another() {
        HostedTesting o = new HostedTesting(hosting);
        others.add(o);
        return o;
    }

    private static JsonObject own() {
        return new JsonObject().with("authority", AUTHORITY).with("meta", HostedTesting.meta(
                HostedProviderTest.meta("com.clawseed.tools.version", "1", "com.clawseed.tools.versions", "1,2")));
    }

    private static JsonObject hidden() {
        return new JsonObject().with("authority", AUTHORITY).with("meta", new JsonObject()).with("discoverable", false);
    }

    private static JsonObject foreign() {
        return new JsonObject().with("authority", FOREIGN_AUTHORITY)
                .with("meta", HostedTesting.meta(HostedProviderTest.foreignMeta()))
                .with("package", PKG)
                .with("authority_package", FOREIGN_PKG);
    }

    private static JsonObject with(JsonObject base, String key, Object value) {
        JsonObject o = new JsonObject();
        o.putAll(base);
        if (value == null) {
            o.remove(key);
        } else {
            o.with(key, value);
        }
        return o;
    }

    private static DeviceError refused(HostedTesting c, JsonObject members, String kind) throws Exception {
        DeviceError e = assertThrows(DeviceError.class, () -> c.conn.host(HostedTesting.hostParams(members)),
                JsonWriter.toText(members));
        assertEquals(kind, e.kind, e.getMessage());
        return e;
    }

    private void accepted(HostedTesting c, JsonObject members) throws Exception {
        assertEquals("{}", JsonWriter.toText(c.conn.host(HostedTesting.hostParams(members))));
    }

    @Test
    void helloNamesTheForeignMetaDataAndTheirPackage() {
        JsonObject hp = (JsonObject) hosting.helloMembers().get("hosted_provider");
        assertEquals("[{\"com.clawseed.tools.authority\":\"" + FOREIGN_AUTHORITY + "\",\"com.clawseed.tools.version\":\"1\","
                + "\"com.clawseed.tools.versions\":\"1,2\"}]", JsonWriter.toText(hp.get("foreign_metas")));
        assertEquals(FOREIGN_PKG, hp.get("foreign_package"));
        assertEquals(AUTHORITY, hp.get("authority"));
        assertEquals(PKG, hp.get("package"));
        // A device that declares no foreign service says nothing of it.
        HostedProvider plain = new HostedProvider(new HostedProvider.Hostable(AUTHORITY, PKG,
                HostedProviderTest.hostable().variants), (own, foreign) -> { }, HostedProviderTest.fast(), () -> 0);
        JsonObject plainHp = (JsonObject) plain.helloMembers().get("hosted_provider");
        assertFalse(plainHp.containsKey("foreign_metas"));
        assertFalse(plainHp.containsKey("foreign_package"));
    }

    @Test
    void aProviderThatIsNotDiscoverableAnswersWithNoServiceShown() throws Exception {
        accepted(t, hidden());
        assertEquals(List.of("none"), exposed);
        assertNull(hosting.exposed());
        CompletableFuture<HostedProvider.Answer> call = t.consumerCalls("negotiate");
        String id = (String) t.event("incoming_call").fields.get("call");
        t.conn.reply(HostedTesting.replyParams("{\"call\":\"" + id + "\",\"result\":{\"k\":{\"t\":\"int\",\"v\":1}}}"));
        assertEquals(1, call.get(10, TimeUnit.SECONDS).result.get("k").asInt());
        // Still the one Provider: a second host_provider of it, in either shape, is taken.
        assertTrue(refused(another(), own(), "bad_request").getMessage().contains("already"));
        refused(t, hidden(), "bad_request");
        t.conn.close();
        assertEquals(List.of("none", "none"), exposed);
        assertEquals(HostedProvider.Failure.NOT_HOSTED, hosting.call(1, List.of(), "m", null, null).failure);
    }

    @Test
    void aProviderThatIsNotDiscoverableNeedsNoMetaButItsOwnPackages() throws Exception {
        // `meta` is not checked: any set, or the declared ones.
        accepted(t, with(own(), "discoverable", false));
        t.conn.close();
        t = new HostedTesting(hosting);
        accepted(t, with(with(with(hidden(), "meta", new JsonObject().with("x", "y")), "package", PKG),
                "authority_package", PKG));
        t.conn.close();
        t = new HostedTesting(hosting);
        assertTrue(refused(t, with(hidden(), "package", FOREIGN_PKG), "unsupported").getMessage().contains(PKG));
        String m = refused(t, with(hidden(), "authority_package", FOREIGN_PKG), "unsupported").getMessage();
        assertTrue(m.contains(PKG) && m.contains(FOREIGN_AUTHORITY), m);
        refused(t, with(hidden(), "discoverable", "no"), "bad_request");
        refused(t, with(hidden(), "exported", false), "unsupported");
        refused(t, with(hidden(), "permission", "p"), "unsupported");
        // The declared sets stay the rule when it is discoverable.
        String declared = refused(t, with(hidden(), "discoverable", true), "unsupported").getMessage();
        assertTrue(declared.contains("1,2") && declared.contains("discoverable"), declared);
        assertEquals(List.of("none", "none", "none", "none"), exposed);
    }

    @Test
    void theForeignServiceAloneIsShownAndItsCallsReachNobodyHere() throws Exception {
        accepted(t, foreign());
        assertEquals(List.of("none + " + FOREIGN_SERVICE), exposed);
        assertEquals(FOREIGN_SERVICE, hosting.foreignExposed().service);
        assertNull(hosting.exposed());
        // The ContentProvider behind it is the other probe's: this one's own is not hosted.
        assertEquals(HostedProvider.Failure.NOT_HOSTED, hosting.call(1, List.of(), "m", null, null).failure);
        assertTrue(t.frames.isEmpty());
        // One connection at a time declares it.
        assertTrue(refused(another(), foreign(), "bad_request").getMessage().contains("already"));
        refused(t, foreign(), "bad_request");
        t.conn.close();
        assertEquals(List.of("none + " + FOREIGN_SERVICE, "none"), exposed);
        assertNull(hosting.foreignExposed());
        // Free again.
        accepted(another(), foreign());
    }

    @Test
    void theForeignShapeIsRefusedForEachFault() throws Exception {
        // The package whose ContentProvider answers there is required.
        String m = refused(t, with(foreign(), "authority_package", null), "unsupported").getMessage();
        assertTrue(m.contains(FOREIGN_PKG), m);
        m = refused(t, with(foreign(), "authority_package", PKG), "unsupported").getMessage();
        assertTrue(m.contains(FOREIGN_PKG), m);
        refused(t, with(foreign(), "authority_package", com.clawseed.probe.wire.JsonNumber.of(7)), "bad_request");
        // The service is this package's.
        assertTrue(refused(t, with(foreign(), "package", FOREIGN_PKG), "unsupported").getMessage().contains(PKG));
        // Its meta-data is the declared set, listed.
        m = refused(t, with(foreign(), "meta", HostedTesting.meta(java.util.Map.of(
                "com.clawseed.tools.authority", FOREIGN_AUTHORITY, "com.clawseed.tools.versions", "2"))), "unsupported")
                .getMessage();
        assertTrue(m.contains("1,2") && m.contains(FOREIGN_AUTHORITY), m);
        refused(t, with(foreign(), "service", PKG + "/.HostileToolService"), "unsupported");
        // A service alone is discoverable by nature.
        refused(t, with(foreign(), "discoverable", false), "unsupported");
        refused(t, with(foreign(), "exported", false), "unsupported");
        refused(t, with(foreign(), "permission", "com.example.P"), "unsupported");
        // Any other authority names both that are allowed.
        m = refused(t, with(own(), "authority", "org.example.other.clawseed.tools"), "unsupported").getMessage();
        assertTrue(m.contains(AUTHORITY) && m.contains(FOREIGN_AUTHORITY), m);
        assertEquals(List.of(), exposed, "a refused host_provider shows nothing");
        // Named explicitly, the declaring service is accepted.
        accepted(t, with(foreign(), "service", FOREIGN_SERVICE));
    }

    @Test
    void oneConnectionMayHoldTheOwnProviderAndTheForeignService() throws Exception {
        accepted(t, own());
        accepted(t, foreign());
        assertEquals(List.of(OWN_SERVICE, OWN_SERVICE + " + " + FOREIGN_SERVICE), exposed);
        t.conn.close();
        assertEquals(List.of(OWN_SERVICE, OWN_SERVICE + " + " + FOREIGN_SERVICE, "none"), exposed);
    }

    @Test
    void whatOneConnectionHoldsStaysShownWhenTheOtherCloses() throws Exception {
        HostedTesting b = another();
        accepted(t, hidden());
        accepted(b, foreign());
        assertEquals(List.of("none", "none + " + FOREIGN_SERVICE), exposed);
        t.conn.close();
        assertEquals("none + " + FOREIGN_SERVICE, exposed.get(exposed.size() - 1), "the foreign service stays");
        accepted(another(), own());
        assertEquals(OWN_SERVICE + " + " + FOREIGN_SERVICE, exposed.get(exposed.size() - 1));
        b.conn.close();
        assertEquals(OWN_SERVICE, exposed.get(exposed.size() - 1), "the own service stays");
        hosting.reset();
        assertEquals("none", exposed.get(exposed.size() - 1));
    }
}
