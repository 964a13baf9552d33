package com.example.cetp.tasks;

import java.util.List;

/**
 * Defects planted on purpose, so that anyone can see the certification
 * suite catch a Provider that breaks a MUST rule. Each breaks one rule; none
 * is active unless the JVM property {@value #PROPERTY} names it, which only
 * {@code scripts/jvm-device.sh --defect NAME} sets. An app on a phone never
 * has it set. A vendor copying this sample deletes this class and the few
 * lines that ask it.
 */
final class SeededDefect {
    private SeededDefect() {}

    static final String PROPERTY = "com.example.cetp.tasks.defect";

    /** §2.2: a session token honoured for any caller, not only the UID it was issued to. */
    static final String TOKEN_ANY_CALLER = "token-any-caller";
    /** §6: a side-effecting tool executed again for a replayed request_id. */
    static final String NO_DEDUPE = "no-dedupe";
    /** §7.2: the confirmation's PendingIntent is mutable. */
    static final String MUTABLE_PENDING_INTENT = "mutable-pending-intent";
    /** §5: error answers without the retryable Boolean. */
    static final String NO_RETRYABLE = "no-retryable";

    /** §4.5: a large result's result_fd is open for writing too (a read-write file, not a pipe's read end). */
    static final String WRITABLE_RESULT_FD = "writable-result-fd";

    /** §2.2: a session is served past its expires_at (judged in seconds on a device whose clock moves). */
    static final String SESSION_NEVER_EXPIRES = "session-never-expires";

    /** §4.3: the confirmation screen's Cancel carries the action out as Confirm does. */
    static final String ACTS_ON_DENY = "acts-on-deny";

    static final List<String> ALL = List.of(TOKEN_ANY_CALLER, NO_DEDUPE, MUTABLE_PENDING_INTENT, NO_RETRYABLE,
            WRITABLE_RESULT_FD, SESSION_NEVER_EXPIRES, ACTS_ON_DENY);

    static boolean on(String name) {
        return name.equals(System.getProperty(PROPERTY));
    }
}
