//! The objects a connection holds: PendingIntents (`pi-N`) and result
//! descriptors (`fd-N`) that Providers returned to it, and the chunked reader
//! of a descriptor.
//!
//! This is the simulator's own table rather than
//! `cetp_reference::device::DeviceConnection`'s because a descriptor must be
//! read in chunks without ever holding more than one (`read_fd`), and that
//! table only hands out whole reads.

use crate::hosted::HostedProvider;
use cetp_proto::provider::{Attachment, FdSource, IntentTarget};
use cetp_proto::{Bundle, FdValue, PendingIntentValue, Value};
use cetp_reference::app::ProviderApp;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The app behind an authority or a PendingIntent.
#[derive(Clone)]
pub(crate) enum AppRef {
    /// An app installed on the device (the reference Provider or mutant).
    Installed(Arc<dyn ProviderApp>),
    /// A Provider a host scripts over the probe wire (`host_provider`).
    Hosted(Arc<HostedProvider>),
}

pub(crate) struct HeldIntent {
    pub target: IntentTarget,
    /// The app whose reply carried the intent: launching it runs that app's
    /// confirmation activity, whatever creator the intent claims.
    pub app: AppRef,
}

/// The connection would hold more handles than it may.
#[derive(Debug)]
pub(crate) struct TooManyHandles;

#[derive(Default)]
pub(crate) struct Handles {
    next_pi: u64,
    next_fd: u64,
    intents: HashMap<String, HeldIntent>,
    fds: HashMap<String, FdSource>,
    /// Descriptors the Provider opened for writing too.
    writable: HashSet<String>,
}

impl Handles {
    pub fn len(&self) -> usize {
        self.intents.len() + self.fds.len()
    }

    pub fn take_fd(&mut self, handle: &str) -> Option<FdSource> {
        self.writable.remove(handle);
        self.fds.remove(handle)
    }

    /// Whether a descriptor was open for writing (asked before `take_fd`).
    pub fn fd_writable(&self, handle: &str) -> bool {
        self.writable.contains(handle)
    }

    pub fn take_intent(&mut self, handle: &str) -> Option<HeldIntent> {
        self.intents.remove(handle)
    }

    /// Gives every PendingIntent and descriptor value of a reply a fresh
    /// connection handle, nested Bundles included. Type and creator facts
    /// come from the attached object, as a real device reads them from the
    /// object and not from what the Provider wrote; a value whose handle has
    /// no attachment stands for no object and is handed over as `other`, so
    /// it can never name another call's object. All or nothing: when the
    /// table would exceed `max`, no handle of this reply is kept.
    pub fn adopt(
        &mut self,
        bundle: &mut Bundle,
        attachments: Vec<(String, Attachment)>,
        app: &AppRef,
        max: usize,
    ) -> Result<(), TooManyHandles> {
        let attached: HashMap<String, Attachment> = attachments.into_iter().collect();
        let mut memo = HashMap::new();
        let mut added = Vec::new();
        let ok = self.rewrite(bundle, &attached, &mut memo, &mut added, app, max, 0);
        if !ok {
            for h in added {
                self.intents.remove(&h);
                self.fds.remove(&h);
            }
            return Err(TooManyHandles);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn rewrite(
        &mut self,
        bundle: &mut Bundle,
        attached: &HashMap<String, Attachment>,
        memo: &mut HashMap<String, Value>,
        added: &mut Vec<String>,
        app: &AppRef,
        max: usize,
        depth: usize,
    ) -> bool {
        // Bundles from the Provider side are finite trees; the bound only
        // keeps a pathological one from exhausting the stack.
        if depth > cetp_wire::MAX_BUNDLE_DEPTH * 2 {
            return true;
        }
        for value in bundle.0.values_mut() {
            let (provider_handle, class) = match value {
                Value::Bundle(inner) => {
                    if !self.rewrite(inner, attached, memo, added, app, max, depth + 1) {
                        return false;
                    }
                    continue;
                }
                Value::PendingIntent(pi) => (pi.handle.clone(), "android.app.PendingIntent"),
                Value::Fd(fd) => (fd.handle.clone(), "android.os.ParcelFileDescriptor"),
                _ => continue,
            };
            if let Some(done) = memo.get(&provider_handle) {
                *value = done.clone();
                continue;
            }
            let attachment = attached.get(&provider_handle);
            if attachment.is_some() && self.len() >= max {
                return false;
            }
            let new_value = match attachment {
                Some(Attachment::Intent(target)) => {
                    self.next_pi += 1;
                    let handle = format!("pi-{}", self.next_pi);
                    self.intents.insert(
                        handle.clone(),
                        HeldIntent {
                            target: target.clone(),
                            app: app.clone(),
                        },
                    );
                    added.push(handle.clone());
                    Value::PendingIntent(PendingIntentValue {
                        handle,
                        creator_package: Some(target.creator_package.clone()),
                        creator_uid: Some(i64::from(target.creator_uid)),
                        immutable: Some(target.immutable),
                        activity: Some(target.activity),
                    })
                }
                Some(a @ (Attachment::File(src) | Attachment::WritableFile(src))) => {
                    self.next_fd += 1;
                    let handle = format!("fd-{}", self.next_fd);
                    self.fds.insert(handle.clone(), src.clone());
                    if matches!(a, Attachment::WritableFile(_)) {
                        self.writable.insert(handle.clone());
                    }
                    added.push(handle.clone());
                    Value::Fd(FdValue { handle })
                }
                None => Value::Other {
                    class: class.to_string(),
                },
            };
            memo.insert(provider_handle, new_value.clone());
            *value = new_value;
        }
        true
    }
}

/// Reads a descriptor from its start, one bounded chunk at a time.
pub(crate) struct FdCursor {
    src: FdSource,
    pos: u64,
    limit: u64,
}

impl FdCursor {
    /// A reader that stops after `limit` bytes.
    pub fn new(src: FdSource, limit: u64) -> Self {
        FdCursor { src, pos: 0, limit }
    }

    fn available(&self) -> Option<u64> {
        match &self.src {
            FdSource::Bytes(data) => Some(data.len() as u64),
            FdSource::Pattern { len, .. } => *len,
        }
    }

    /// The next at most `max` bytes; `None` once the limit or the end of the
    /// data is reached. Allocates only the chunk it returns.
    pub fn next_chunk(&mut self, max: usize) -> Option<Vec<u8>> {
        let end = self.available().map_or(self.limit, |a| a.min(self.limit));
        let n = end.saturating_sub(self.pos).min(max as u64);
        if n == 0 {
            return None;
        }
        // n <= max, a usize.
        let n_usize = usize::try_from(n).unwrap_or(max);
        let chunk = match &self.src {
            FdSource::Bytes(data) => {
                // pos < end <= data.len(), so these fit in usize.
                let start = usize::try_from(self.pos).unwrap_or(data.len());
                let stop = start.saturating_add(n_usize).min(data.len());
                data[start.min(stop)..stop].to_vec()
            }
            FdSource::Pattern { byte, .. } => vec![*byte; n_usize],
        };
        self.pos += chunk.len() as u64;
        Some(chunk)
    }

    /// Bytes handed out so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether everything the descriptor holds was read: false when reading
    /// stopped at the limit with data still pending (or the source is
    /// endless).
    pub fn at_eof(&self) -> bool {
        self.available().is_some_and(|a| a <= self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(c: &mut FdCursor, max: usize) -> (Vec<usize>, Vec<u8>) {
        let mut sizes = Vec::new();
        let mut all = Vec::new();
        while let Some(chunk) = c.next_chunk(max) {
            assert!(chunk.len() <= max);
            sizes.push(chunk.len());
            all.extend_from_slice(&chunk);
        }
        (sizes, all)
    }

    #[test]
    fn bytes_in_chunks() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut c = FdCursor::new(FdSource::bytes(data.clone()), u64::MAX);
        let (sizes, all) = drain(&mut c, 4096);
        assert_eq!(sizes, [4096, 4096, 1808]);
        assert_eq!(all, data);
        assert!(c.at_eof());
        let mut c = FdCursor::new(FdSource::bytes(data.clone()), 5000);
        let (_, all) = drain(&mut c, 4096);
        assert_eq!(all, data[..5000]);
        assert!(!c.at_eof());
        let mut c = FdCursor::new(FdSource::bytes(data), 10_000);
        drain(&mut c, 4096);
        assert!(c.at_eof(), "reading exactly to the end is EOF");
    }

    #[test]
    fn endless_pattern_stops_at_the_limit() {
        let mut c = FdCursor::new(
            FdSource::Pattern { len: None, byte: 9 },
            3 * 1024 * 1024 + 1,
        );
        let (sizes, all) = drain(&mut c, 1024 * 1024);
        assert_eq!(sizes, [1 << 20, 1 << 20, 1 << 20, 1]);
        assert!(all.iter().all(|&b| b == 9));
        assert!(!c.at_eof());
        assert_eq!(c.position(), 3 * 1024 * 1024 + 1);
        // A claimed length far beyond memory is never allocated at once.
        let mut c = FdCursor::new(
            FdSource::Pattern {
                len: Some(u64::MAX),
                byte: 1,
            },
            u64::MAX,
        );
        assert_eq!(c.next_chunk(16).map(|v| v.len()), Some(16));
        assert!(!c.at_eof());
    }

    #[test]
    fn empty_sources_and_zero_limits() {
        let mut c = FdCursor::new(FdSource::bytes(Vec::new()), 10);
        assert!(c.next_chunk(10).is_none());
        assert!(c.at_eof());
        let mut c = FdCursor::new(FdSource::bytes(vec![1]), 0);
        assert!(c.next_chunk(10).is_none());
        assert!(!c.at_eof());
    }

    #[test]
    fn adopt_rewrites_and_bounds() {
        let app = AppRef::Installed(Arc::new(
            cetp_reference::provider::ReferenceProvider::reference(),
        ));
        let target = IntentTarget {
            creator_package: "p".into(),
            creator_uid: 7,
            immutable: true,
            activity: true,
            component: None,
            confirmation: "c".into(),
        };
        let fd = |h: &str| Value::Fd(FdValue { handle: h.into() });
        let mut b = Bundle::new()
            .with("f", fd("x1"))
            .with("g", fd("x1"))
            .with("forged", fd("nobody"))
            .with(
                "nested",
                Value::Bundle(Bundle::new().with(
                    "pi",
                    Value::PendingIntent(PendingIntentValue {
                        handle: "x2".into(),
                        creator_package: Some("liar".into()),
                        creator_uid: None,
                        immutable: Some(false),
                        activity: None,
                    }),
                )),
            );
        let atts = vec![
            (
                "x1".to_string(),
                Attachment::File(FdSource::bytes(b"hi".to_vec())),
            ),
            ("x2".to_string(), Attachment::Intent(target.clone())),
        ];
        let mut h = Handles::default();
        h.adopt(&mut b, atts.clone(), &app, 10).unwrap();
        assert_eq!(b.get("f"), Some(&fd("fd-1")));
        assert_eq!(b.get("g"), Some(&fd("fd-1")), "one object, one handle");
        assert!(
            matches!(b.get("forged"), Some(Value::Other { class }) if class == "android.os.ParcelFileDescriptor")
        );
        let Some(Value::Bundle(n)) = b.get("nested") else {
            panic!("{b:?}")
        };
        let Some(Value::PendingIntent(pi)) = n.get("pi") else {
            panic!("{n:?}")
        };
        assert_eq!(pi.handle, "pi-1");
        assert_eq!(pi.creator_package.as_deref(), Some("p"));
        assert_eq!(pi.immutable, Some(true));
        assert_eq!(h.len(), 2);
        // A second reply that does not fit keeps nothing.
        let mut b2 = Bundle::new().with("f", fd("x1")).with(
            "p",
            Value::PendingIntent(PendingIntentValue {
                handle: "x2".into(),
                creator_package: None,
                creator_uid: None,
                immutable: None,
                activity: None,
            }),
        );
        assert!(h.adopt(&mut b2, atts, &app, 3).is_err());
        assert_eq!(h.len(), 2);
        assert!(h.take_fd("fd-1").is_some());
        assert!(h.take_fd("fd-1").is_none());
        assert_eq!(h.take_intent("pi-1").map(|i| i.target), Some(target));
    }
}
