//! The interface between a device and the Provider app it hosts.

use cetp_proto::provider::{
    CallerIdentity, Decision, IntentTarget, ProviderCall, Reply, ResolveOutcome, ServiceManifest,
};

/// A Provider app as a device hosts it: the reference Provider, one of its
/// mutants, or a scripted hostile Provider.
///
/// Implementations are internally synchronized: a device calls them from
/// several threads at once, as Binder does.
pub trait ProviderApp: Send + Sync {
    /// The services this app declares for `com.clawseed.action.TOOL_PROVIDER`.
    fn manifests(&self) -> Vec<ServiceManifest>;

    /// The authority its ContentProvider answers on.
    fn authority(&self) -> String;

    /// `ContentProvider.call()` from `caller`, at device time `now_ms`.
    fn call(&self, caller: &CallerIdentity, now_ms: i64, call: &ProviderCall) -> Reply;

    /// The user decides in the confirmation activity a PendingIntent of this
    /// app launched. `launcher` is the app that launched it.
    fn resolve(
        &self,
        launcher: &CallerIdentity,
        target: &IntentTarget,
        decision: Decision,
        now_ms: i64,
    ) -> ResolveOutcome;

    /// The process is killed (`am force-stop`): memory is lost, durable state
    /// stays.
    fn restart(&self);
}
