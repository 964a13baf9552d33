package com.example.cetp.agent;

/**
 * The legal latitudes this Consumer can take, from the system property
 * {@code com.example.cetp.agent.latitude} (a comma-separated list; names in
 * ../../../../../../latitudes.tsv): each is another choice the spec leaves a
 * Consumer, so that a certification run shows the harness charges none of
 * them. Unset in a real app: the defaults.
 */
final class Latitude {
    private Latitude() {}

    static final String PROPERTY = "com.example.cetp.agent.latitude";

    static boolean is(String name) {
        String set = System.getProperty(PROPERTY);
        if (set == null) {
            return false;
        }
        for (String n : set.split(",", -1)) {
            if (n.trim().equals(name)) {
                return true;
            }
        }
        return false;
    }
}
