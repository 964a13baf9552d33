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

/// Android's part in launching a PendingIntent of `app`: the intent starts
/// the activity it names, and only when that activity is `app`'s own does the
/// user's decision reach `app`'s confirmation UI. An implicit intent goes to
/// the system resolver, another app's component to that app, and then the
/// decision is never applied (§7.2 asks for an explicit intent to the
/// Provider's own component).
pub fn launch_intent(
    app: &dyn ProviderApp,
    launcher: &CallerIdentity,
    target: &IntentTarget,
    decision: Decision,
    now_ms: i64,
) -> ResolveOutcome {
    let launched = target.launched_package();
    if !app.manifests().iter().any(|m| m.package == launched) {
        return ResolveOutcome {
            launched: true,
            decision_applied: false,
            // RESULT_CANCELED: the foreign activity sets no result.
            result_code: 0,
            launched_package: Some(launched.to_string()),
        };
    }
    let mut out = app.resolve(launcher, target, decision, now_ms);
    out.launched_package = Some(launched.to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ReferenceProvider;

    fn target(component: Option<&str>) -> IntentTarget {
        IntentTarget {
            creator_package: "com.clawseed.reference".into(),
            creator_uid: 10_001,
            immutable: true,
            activity: true,
            component: component.map(str::to_string),
            confirmation: "nothing-pending".into(),
        }
    }

    #[test]
    fn only_the_apps_own_component_reaches_its_ui() {
        let app = ReferenceProvider::default();
        let own = app.manifests()[0].package.clone();
        let launcher = CallerIdentity {
            uid: 10_123,
            packages: vec!["org.example.agent".into()],
            cert_sha256: vec![],
        };
        let at = |c: Option<&str>| launch_intent(&app, &launcher, &target(c), Decision::Approve, 0);
        // Implicit: the system resolver comes up, the Provider never sees it.
        let implicit = at(None);
        assert_eq!(implicit.launched_package.as_deref(), Some("android"));
        assert!(!implicit.decision_applied);
        let foreign = at(Some("com.android.chrome/.Main"));
        assert_eq!(
            foreign.launched_package.as_deref(),
            Some("com.android.chrome")
        );
        assert!(!foreign.decision_applied);
        // Its own activity: the app decides (nothing is pending here, so the
        // decision is not applied, but the package is the app's).
        let mine = at(Some(&format!("{own}/.ConfirmActivity")));
        assert_eq!(mine.launched_package.as_deref(), Some(own.as_str()));
    }
}
