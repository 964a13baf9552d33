package com.example.cetp.agent;

/**
 * The seeded defect this Consumer runs with, from the system property
 * {@code com.example.cetp.agent.defect} (names in ../../../../../../defects.tsv):
 * each breaks one consumer-side MUST, so that a certification run shows it
 * is caught. Unset in a real app: none.
 */
final class Defect {
    private Defect() {}

    static final String PROPERTY = "com.example.cetp.agent.defect";

    static boolean is(String name) {
        return name.equals(System.getProperty(PROPERTY));
    }
}
