//! The `ContentResolver.call()` boundary as plain data.
//!
//! A Provider (reference, mutant, or hostile) sees one [`ProviderCall`] from
//! one [`CallerIdentity`] at a time and answers a [`Reply`]. Descriptors and
//! PendingIntents that a real Binder would carry as kernel objects travel here
//! as attachments keyed by the handle found in the Bundle, so a device
//! (simulated or in-process) can hand them out per connection.

use crate::bundle::Bundle;
use std::sync::Arc;

/// The app calling a Provider, as Android tells the Provider (UID) and as the
/// package manager describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallerIdentity {
    /// The calling UID, captured synchronously at the `call()` entry (§7.1).
    pub uid: u32,
    /// Every package sharing that UID (§7.1: all of them, not only the first).
    pub packages: Vec<String>,
    /// SHA-256 (hex) of the caller's current signing certificates (§7.1).
    pub cert_sha256: Vec<String>,
}

/// One `ContentResolver.call(authority, method, arg, extras)` as the Provider receives it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderCall {
    /// The `method` argument (`negotiate`, `execute_tool`, ... §4).
    pub method: String,
    /// The `arg` string of `call()`; CETP puts its request fields in the extras.
    pub arg: Option<String>,
    /// The extras Bundle carrying the request fields (§4.1), or `null`.
    pub extras: Option<Bundle>,
}

/// Where the bytes of a result descriptor come from.
#[derive(Clone, Debug)]
pub enum FdSource {
    /// A fixed content, shared without copying between connections that read it.
    Bytes(Arc<[u8]>),
    /// A generated stream: `len` bytes of a repeating pattern, or endless when
    /// `None` (a descriptor that never reaches EOF). Lets hostile Providers be
    /// simulated without allocating what they claim.
    Pattern {
        /// Total length in bytes; `None` for an endless stream.
        len: Option<u64>,
        /// The byte repeated throughout the stream.
        byte: u8,
    },
}

impl FdSource {
    /// A descriptor whose content is exactly `data`.
    pub fn bytes(data: impl Into<Vec<u8>>) -> Self {
        FdSource::Bytes(Arc::from(data.into().into_boxed_slice()))
    }
}

/// What a PendingIntent would launch, as known to the device that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntentTarget {
    /// Package that created the PendingIntent (§7.2: must be the Provider's).
    pub creator_package: String,
    /// UID of the creating package.
    pub creator_uid: u32,
    /// Whether the PendingIntent was made with `FLAG_IMMUTABLE` (§7.2).
    pub immutable: bool,
    /// Whether it launches an activity (a confirmation UI) rather than a service or broadcast.
    pub activity: bool,
    /// Explicit component (`package/.Activity`), `None` for an implicit intent.
    pub component: Option<String>,
    /// Opaque key the Provider uses to find the pending confirmation.
    pub confirmation: String,
}

/// The package of Android's intent resolver (`ResolverActivity` lives in the
/// framework package `android`): what an implicit activity intent with more
/// than one possible handler launches, and where a simulated device sends
/// every implicit intent.
pub const SYSTEM_RESOLVER_PACKAGE: &str = "android";

impl IntentTarget {
    /// The package whose activity launching this intent starts: the explicit
    /// component's, or the system resolver's for an implicit intent.
    pub fn launched_package(&self) -> &str {
        match &self.component {
            Some(c) => c.split('/').next().unwrap_or(c),
            None => SYSTEM_RESOLVER_PACKAGE,
        }
    }
}

/// A kernel object a reply carries beside its Bundle, under the handle the Bundle names it by.
#[derive(Clone, Debug)]
pub enum Attachment {
    /// A read-only result descriptor (`result_fd`, §4.5).
    File(FdSource),
    /// A result descriptor opened for writing too (§4.5 asks for a
    /// read-only one); a device reports it through `read_fd`'s `writable`.
    WritableFile(FdSource),
    /// A PendingIntent (`resolution`, §4.3).
    Intent(IntentTarget),
}

/// The answer of `call()`: a Bundle (or null), or a thrown exception.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `call()` returned.
    Result {
        /// The returned Bundle, `None` for a Java `null`.
        bundle: Option<Bundle>,
        /// Handle (as written in the Bundle) to the object it stands for.
        attachments: Vec<(String, Attachment)>,
    },
    /// `call()` threw instead of returning.
    Threw {
        /// The Java exception class.
        class: String,
        /// The exception message.
        message: String,
    },
}

impl Reply {
    /// A plain returned Bundle with no attachments.
    pub fn bundle(bundle: Bundle) -> Self {
        Reply::Result {
            bundle: Some(bundle),
            attachments: Vec::new(),
        }
    }
}

/// A user's decision in the Provider's confirmation UI (probe-wire `resolve`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The user approved the confirmation.
    Approve,
    /// The user denied it (§4.3: the call then ends in USER_CANCELLED).
    Deny,
    /// The user left the UI without deciding (back button, dismissal).
    Dismiss,
}

impl Decision {
    /// The decision named by its probe-wire text (`approve`, `deny`, `dismiss`); `None` for any other text.
    pub fn parse(s: &str) -> Option<Decision> {
        match s {
            "approve" => Some(Decision::Approve),
            "deny" => Some(Decision::Deny),
            "dismiss" => Some(Decision::Dismiss),
            _ => None,
        }
    }
    /// The probe-wire text of the decision.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
            Decision::Dismiss => "dismiss",
        }
    }
}

/// What launching a PendingIntent led to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveOutcome {
    /// Whether an activity was actually started.
    pub launched: bool,
    /// Whether the Provider's UI received the requested decision.
    pub decision_applied: bool,
    /// Android's activity result code: -1 RESULT_OK, 0 RESULT_CANCELED.
    pub result_code: i32,
    /// The package of the activity the intent brought to the foreground,
    /// when the device can tell (§7.2: it must be the Provider's own).
    /// `None` from a device that does not report it.
    pub launched_package: Option<String>,
}

/// Manifest meta-data of one discovered service, as raw strings (probe-wire
/// `discover`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServiceManifest {
    /// Package of the discovered service.
    pub package: String,
    /// Class name of the discovered service.
    pub service: String,
    /// Whether the service is `android:exported`.
    pub exported: bool,
    /// The permission guarding the service (e.g. `com.clawseed.permission.ACCESS_TOOLS`, §7.1), if any.
    pub permission: Option<String>,
    /// The service's meta-data, name to value as text (the keys of §2.1 among them).
    pub meta: std::collections::BTreeMap<String, String>,
    /// Package owning the ContentProvider of the declared authority.
    pub authority_package: Option<String>,
    /// SHA-256 (hex) of the certificates the service's package is signed
    /// with now (probe-wire extension `signing_cert_sha256`); empty when the
    /// device does not say.
    pub signing_cert_sha256: Vec<String>,
    /// The type Android compiled each meta-data value to, for those that are
    /// not strings (`int`, `bool`, `float`, or a class name: probe-wire
    /// extension `meta_types`). `None` when the device does not say, and then
    /// every value is judged by its text alone; `Some` (even empty) when it
    /// does, and then a key missing from it is a String.
    pub meta_types: Option<std::collections::BTreeMap<String, String>>,
}

impl ServiceManifest {
    /// The compiled type of one meta-data value: `Some("string")` for a
    /// String, `None` when the device does not report types.
    pub fn meta_type(&self, key: &str) -> Option<&str> {
        self.meta_types
            .as_ref()
            .map(|t| t.get(key).map(String::as_str).unwrap_or("string"))
    }
}
