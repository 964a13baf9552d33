package com.example.cetp.notes

/**
 * Defects planted on purpose, one MUST rule broken each, so that anyone can
 * watch `cetp run` and `cetp fuzz` catch them (defects.tsv lists them with
 * the requirement a run must FAIL citing). None is active unless the JVM
 * property [PROPERTY] names it, which only `scripts/jvm-device.sh
 * --jvm-prop com.example.cetp.notes.defect=NAME` sets; on a phone it is
 * never set. A vendor copying this sample deletes this file and the lines
 * that ask it.
 */
object Defect {
    const val PROPERTY = "com.example.cetp.notes.defect"

    /** §6: a replayed request_id executes the tool again. */
    const val NO_DEDUPE = "no-dedupe"

    /** §6: the record is found by request_id alone, so other args under the same id get the first answer. */
    const val DIGEST_IGNORED = "digest-ignored"

    /** §4.1: add_note and delete_note commit whatever deadline_at_ms says. */
    const val DEADLINE_IGNORED = "deadline-ignored"

    /** §2.2: a session token serves any caller who presents it. */
    const val SESSION_ANY_CALLER = "session-any-caller"

    /** §5: error answers lack the retryable Boolean. */
    const val RETRYABLE_MISSING = "retryable-missing"

    /** §4.3: the confirmation screen's "Cancel" approves as "Continue" does. */
    const val ACTS_ON_DENY = "acts-on-deny"

    /** §3.4: a pinned note is added without asking, though pinning makes add_note riskier than its annotation. */
    const val PIN_UNCONFIRMED = "pin-unconfirmed"

    /** §3.4, §7.1: list_trash serves every caller, not only the assistants whose certificates the manifest lists. */
    const val TRASH_FOR_ALL = "trash-for-all"

    fun on(name: String): Boolean = System.getProperty(PROPERTY) == name
}
