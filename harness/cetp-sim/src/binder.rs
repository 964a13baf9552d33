//! What a ContentProvider's exception becomes on its way to a caller in
//! another process, as Android's Binder carries it.
//!
//! A Provider's transport (`ContentProviderNative.onTransact`) catches what
//! `call()` throws and writes it with `DatabaseUtils.writeExceptionToParcel`,
//! which has codes for a few classes and hands the rest to
//! `Parcel.writeException`. That one has a code for a fixed set of classes
//! (`Parcel.getExceptionCode`), matched with `instanceof`, so a subclass
//! crosses as the class it extends; for anything else it rethrows in the
//! Provider's process, where the Binder thread reports it ("Uncaught remote
//! exception") and the transaction fails with `UNKNOWN_TRANSACTION`: the
//! caller's reply holds no exception and `ContentProviderProxy.call` reads it
//! as an empty Bundle. That last step is read from the AOSP sources; it has
//! not been seen on a phone (android-probe-app/README.md, "First phone run").
//!
//! The probe app's own test of the first part, against the framework's code
//! under Robolectric, is `BinderExceptionsTest`; this module keeps the
//! simulated device in agreement with it.

use cetp_proto::provider::Reply;
use cetp_proto::Bundle;

/// The classes the caller's side rebuilds as themselves: `DatabaseUtils`'
/// codes, then `Parcel.writeException`'s.
pub const CARRIED: [&str; 17] = [
    "java.io.FileNotFoundException",
    "java.lang.IllegalArgumentException",
    "java.lang.UnsupportedOperationException",
    "android.database.sqlite.SQLiteAbortException",
    "android.database.sqlite.SQLiteConstraintException",
    "android.database.sqlite.SQLiteDatabaseCorruptException",
    "android.database.sqlite.SQLiteFullException",
    "android.database.sqlite.SQLiteDiskIOException",
    "android.database.sqlite.SQLiteException",
    "android.content.OperationApplicationException",
    "android.os.OperationCanceledException",
    "java.lang.SecurityException",
    "android.os.BadParcelableException",
    "java.lang.NullPointerException",
    "java.lang.IllegalStateException",
    "android.os.NetworkOnMainThreadException",
    "android.os.ServiceSpecificException",
];

/// Well-known subclasses of a carried class, and the class they cross as.
/// (The simulated device knows classes by name only; a Provider throwing a
/// subclass it defines itself should name the carried class.)
const SUBCLASSES: [(&str, &str); 4] = [
    (
        "java.lang.NumberFormatException",
        "java.lang.IllegalArgumentException",
    ),
    (
        "java.util.IllegalFormatException",
        "java.lang.IllegalArgumentException",
    ),
    (
        "java.security.AccessControlException",
        "java.lang.SecurityException",
    ),
    (
        "java.util.concurrent.CancellationException",
        "java.lang.IllegalStateException",
    ),
];

/// The class a caller sees for `class`, or `None` when nothing reaches it.
pub fn crossed_class(class: &str) -> Option<&'static str> {
    if let Some(c) = CARRIED.iter().find(|c| **c == class) {
        return Some(c);
    }
    SUBCLASSES
        .iter()
        .find(|(sub, _)| *sub == class)
        .map(|(_, base)| *base)
}

/// `reply` as the caller in another process receives it.
pub fn cross(reply: Reply) -> Reply {
    match reply {
        Reply::Threw { class, message } => match crossed_class(&class) {
            Some(seen) => Reply::Threw {
                class: seen.to_string(),
                message,
            },
            None => Reply::Result {
                bundle: Some(Bundle::new()),
                attachments: Vec::new(),
            },
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn threw(class: &str) -> Reply {
        Reply::Threw {
            class: class.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn carried_classes_cross_as_themselves_with_their_message() {
        for c in CARRIED {
            match cross(threw(c)) {
                Reply::Threw { class, message } => {
                    assert_eq!(class, c);
                    assert_eq!(message, "m");
                }
                r => panic!("{c}: {r:?}"),
            }
        }
    }

    #[test]
    fn a_subclass_crosses_as_the_class_it_extends() {
        match cross(threw("java.lang.NumberFormatException")) {
            Reply::Threw { class, .. } => assert_eq!(class, "java.lang.IllegalArgumentException"),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn other_classes_never_reach_the_caller_who_reads_an_empty_bundle() {
        for c in [
            "java.lang.RuntimeException",
            "java.io.IOException",
            "java.lang.ClassCastException",
            "com.example.app.ToolException",
        ] {
            match cross(threw(c)) {
                Reply::Result {
                    bundle: Some(b),
                    attachments,
                } => {
                    assert!(b.0.is_empty(), "{c}");
                    assert!(attachments.is_empty());
                }
                r => panic!("{c}: {r:?}"),
            }
        }
    }

    #[test]
    fn results_pass_unchanged() {
        let r = cross(Reply::bundle(Bundle::new()));
        assert!(matches!(
            r,
            Reply::Result {
                bundle: Some(_),
                ..
            }
        ));
    }
}
