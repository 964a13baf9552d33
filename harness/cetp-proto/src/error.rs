//! Error codes of CETP v2 and their retryable rule (spec §5).

use std::fmt;

/// Whether an error code may, must not, or depends on context to be retryable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryRule {
    /// The §5 table says "是": `retryable` must be true.
    Always,
    /// The §5 table says "否": `retryable` must be false.
    Never,
    /// The §5 table says "条件性": either value is allowed.
    Conditional,
}

impl RetryRule {
    /// Does a `retryable` flag obey this rule?
    pub fn allows(self, retryable: bool) -> bool {
        match self {
            RetryRule::Always => retryable,
            RetryRule::Never => !retryable,
            RetryRule::Conditional => true,
        }
    }
}

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident => $text:literal, $rule:ident; )*) => {
        /// Every error code defined by §5. A Provider that sends anything else
        /// breaks the spec; the raw text is kept in the envelope.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode { $( $(#[$doc])* $variant, )* }

        impl ErrorCode {
            /// Every code, in the order of the §5 table.
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$variant, )* ];

            /// The code as it travels in `error_code` (`INVALID_ARGS`, ...).
            pub fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $text, )* }
            }

            /// Exact, case-sensitive: `auth_required` is not a CETP code.
            pub fn parse(text: &str) -> Option<ErrorCode> {
                match text { $( $text => Some(ErrorCode::$variant), )* _ => None }
            }

            /// What §5 says `retryable` must be for this code.
            pub fn retry_rule(self) -> RetryRule {
                match self { $( ErrorCode::$variant => RetryRule::$rule, )* }
            }
        }
    };
}

error_codes! {
    /// No protocol version in common (§2.2).
    UnsupportedVersion => "UNSUPPORTED_VERSION", Never;
    /// The request used a capability that was not negotiated (§2.3).
    UnsupportedCapability => "UNSUPPORTED_CAPABILITY", Never;
    /// The session token is missing, expired or lost with a Provider restart (§2.2).
    NegotiationRequired => "NEGOTIATION_REQUIRED", Always;
    /// The user must sign in or grant a scope first (§4.3).
    AuthRequired => "AUTH_REQUIRED", Conditional;
    /// This call needs a confirmation in the Provider's own UI (§4.3).
    UserActionRequired => "USER_ACTION_REQUIRED", Conditional;
    /// The user denied or dismissed the confirmation (§4.3).
    UserCancelled => "USER_CANCELLED", Never;
    /// The caller is not allowed this access.
    PermissionDenied => "PERMISSION_DENIED", Never;
    /// No such tool, or it is hidden from this caller (§7.2).
    ToolNotFound => "TOOL_NOT_FOUND", Never;
    /// The `call()` method is not a CETP method (§4).
    MethodNotFound => "METHOD_NOT_FOUND", Never;
    /// The arguments do not match the tool's input schema.
    InvalidArgs => "INVALID_ARGS", Never;
    /// The envelope, token or request ID is misused (§4.1, §6).
    InvalidRequest => "INVALID_REQUEST", Never;
    /// The current state forbids the operation, or it can no longer be cancelled (§4.4).
    Conflict => "CONFLICT", Conditional;
    /// The Provider's rate limit is exceeded; honour `retry_after_ms`.
    RateLimited => "RATE_LIMITED", Always;
    /// The deadline passed; query the same request ID before retrying (§4.1).
    DeadlineExceeded => "DEADLINE_EXCEEDED", Conditional;
    /// The operation was confirmed cancelled (§4.4).
    Cancelled => "CANCELLED", Never;
    /// The result cannot be inlined and large results were not negotiated (§4.5).
    ResultTooLarge => "RESULT_TOO_LARGE", Never;
    /// The operation's result is past its retention period (§4.4).
    ResultExpired => "RESULT_EXPIRED", Never;
    /// The Provider is temporarily unavailable.
    Unavailable => "UNAVAILABLE", Always;
    /// An internal Provider failure; its message must not leak internals (§5).
    InternalError => "INTERNAL_ERROR", Conditional;
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error codes v1 defined (v1 `external-tool-protocol`); a v1 answer may
/// only use these.
pub const V1_ERROR_CODES: &[&str] = &[
    "AUTH_REQUIRED",
    "PERMISSION_DENIED",
    "TOOL_NOT_FOUND",
    "INVALID_ARGS",
    "RATE_LIMITED",
    "INTERNAL_ERROR",
];

/// Signs that an `error_message` leaks internals (§5 INTERNAL_ERROR: no stack
/// traces or sensitive information). Each pattern is something a user-facing
/// message has no reason to contain.
pub fn leaks_internal_detail(message: &str) -> Option<&'static str> {
    const SIGNS: &[(&str, &str)] = &[
        ("\tat ", "a Java stack frame"),
        ("\n    at ", "a stack frame"),
        ("Exception:", "an exception class name"),
        ("Exception\n", "an exception class name"),
        ("Caused by:", "a chained exception"),
        ("Traceback (most recent call last)", "a Python traceback"),
        ("panicked at", "a Rust panic message"),
        (".java:", "a Java source location"),
        (".kt:", "a Kotlin source location"),
        ("SQLiteException", "a database exception"),
        ("/data/data/", "an app-private path"),
        ("/data/user/", "an app-private path"),
    ];
    SIGNS
        .iter()
        .find(|(needle, _)| message.contains(needle))
        .map(|(_, what)| *what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_section_5() {
        assert_eq!(ErrorCode::ALL.len(), 19);
        assert_eq!(
            ErrorCode::NegotiationRequired.retry_rule(),
            RetryRule::Always
        );
        assert!(!ErrorCode::InvalidArgs.retry_rule().allows(true));
        assert!(ErrorCode::Conflict.retry_rule().allows(true));
        assert!(ErrorCode::Conflict.retry_rule().allows(false));
        assert!(!ErrorCode::Unavailable.retry_rule().allows(false));
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
        }
        assert_eq!(ErrorCode::parse("auth_required"), None);
    }

    #[test]
    fn stack_traces_are_detected() {
        let trace = "boom\njava.lang.IllegalStateException: x\n\tat com.a.B.c(B.java:10)";
        assert!(leaks_internal_detail(trace).is_some());
        assert!(leaks_internal_detail("The alert could not be created.").is_none());
    }
}
