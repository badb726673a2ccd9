//! Helm's hook annotations read as Argo CD reads them, so a chart's hooks
//! run in a Kiln sync where they run in an Argo CD sync.
//!
//! | Helm                                  | Kiln (as Argo CD)                          |
//! |---------------------------------------|--------------------------------------------|
//! | `pre-install`, `pre-upgrade`          | PreSync hook                               |
//! | `post-install`, `post-upgrade`        | PostSync hook                              |
//! | `crd-install`                         | not a hook: an ordinary object (Sync)      |
//! | `post-delete`                         | PostDelete hook: run when the Application is deleted, never by a sync |
//! | `pre-delete`                          | PreDelete hook: run when the Application is deleted, before its objects (Argo CD 3) |
//! | `pre-rollback`, `post-rollback`       | never run (Argo CD has no rollback phase)  |
//! | `test`, `test-success`, `test-failure`| never run (no equivalent in Argo CD)       |
//! | `helm.sh/hook-weight`                 | the wave, unless a sync-wave annotation is set |
//! | `helm.sh/hook-delete-policy`          | `before-hook-creation` → BeforeHookCreation, `hook-succeeded` → HookSucceeded, `hook-failed` → HookFailed |
//!
//! A Kiln or Argo CD hook annotation on the same object wins over
//! `helm.sh/hook`, a sync-wave annotation over `helm.sh/hook-weight`;
//! delete policies of both are combined (Argo CD does the same), and a hook
//! with none is deleted before it is created again (BeforeHookCreation,
//! which is also Helm's default).
//!
//! Where Argo CD silently ignores a value it does not know (an unknown hook
//! type, a weight that is not an integer), Kiln refuses the object with an
//! error naming it: a typo must not quietly turn a hook into an ordinary
//! object or move it to wave 0. Hook types are compared as Helm compares
//! them (trimmed, case-insensitive).

use super::plan::{DeletePolicy, Phase};

/// Helm's hook annotation.
pub const HOOK: &str = "helm.sh/hook";
/// Helm's hook weight annotation: the wave of a Helm hook.
pub const WEIGHT: &str = "helm.sh/hook-weight";
/// Helm's hook delete policy annotation.
pub const DELETE_POLICY: &str = "helm.sh/hook-delete-policy";
/// Helm's resource policy annotation: `keep` leaves the object in the
/// cluster when the release is uninstalled or the object leaves the chart.
pub const RESOURCE_POLICY: &str = "helm.sh/resource-policy";

/// Whether a `helm.sh/resource-policy` value says `keep` (compared as Helm
/// compares it: trimmed, case-insensitive).
pub fn keeps(value: &str) -> bool {
    value.trim().eq_ignore_ascii_case("keep")
}

/// Whether `helm.sh/hook`'s value lists `event` (a value naming an
/// unknown event lists none: the sync refuses it, naming the object).
pub fn lists(value: &str, event: Event) -> bool {
    let events: Option<Vec<Event>> = value
        .split(',')
        .filter(|n| !n.trim().is_empty())
        .map(Event::parse)
        .collect();
    events.is_some_and(|events| events.contains(&event))
}

/// One of Helm's hook events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `pre-install`.
    PreInstall,
    /// `post-install`.
    PostInstall,
    /// `pre-upgrade`.
    PreUpgrade,
    /// `post-upgrade`.
    PostUpgrade,
    /// `pre-delete`.
    PreDelete,
    /// `post-delete`.
    PostDelete,
    /// `pre-rollback`.
    PreRollback,
    /// `post-rollback`.
    PostRollback,
    /// `test`, and its old name `test-success`.
    Test,
    /// `test-failure` (Helm 2).
    TestFailure,
    /// `crd-install` (Helm 2): a CRD, not a hook.
    CrdInstall,
}

impl Event {
    /// Reads one event name as Helm does (trimmed, case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "pre-install" => Event::PreInstall,
            "post-install" => Event::PostInstall,
            "pre-upgrade" => Event::PreUpgrade,
            "post-upgrade" => Event::PostUpgrade,
            "pre-delete" => Event::PreDelete,
            "post-delete" => Event::PostDelete,
            "pre-rollback" => Event::PreRollback,
            "post-rollback" => Event::PostRollback,
            "test" | "test-success" => Event::Test,
            "test-failure" => Event::TestFailure,
            "crd-install" => Event::CrdInstall,
            _ => return None,
        })
    }

    /// The sync phase the event runs in, `None` for events a sync never
    /// runs.
    pub fn phase(self) -> Option<Phase> {
        match self {
            Event::PreInstall | Event::PreUpgrade => Some(Phase::PreSync),
            Event::PostInstall | Event::PostUpgrade => Some(Phase::PostSync),
            Event::CrdInstall => Some(Phase::Sync),
            Event::PreDelete
            | Event::PostDelete
            | Event::PreRollback
            | Event::PostRollback
            | Event::Test
            | Event::TestFailure => None,
        }
    }
}

/// What `helm.sh/hook` makes of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// No Helm hook (or only `crd-install`): an ordinary object.
    Object,
    /// A hook run in these phases (in order, without repeats).
    Hook(Vec<Phase>),
    /// A hook no sync runs (tests, deletion and rollback hooks); the text
    /// says which events it has.
    NeverRun(String),
}

/// Reads `helm.sh/hook`'s value. `Err` names the unknown event.
pub fn role(value: &str) -> Result<Role, String> {
    let mut phases = Vec::new();
    let mut events = Vec::new();
    for name in value.split(',').filter(|n| !n.trim().is_empty()) {
        let event = Event::parse(name).ok_or_else(|| {
            format!(
                "{HOOK} {:?} is not one of pre-install, post-install, pre-upgrade, post-upgrade, \
                 pre-delete, post-delete, pre-rollback, post-rollback, test, test-success, \
                 test-failure or crd-install",
                name.trim()
            )
        })?;
        events.push(event);
        if let Some(phase) = event.phase()
            && event != Event::CrdInstall
            && !phases.contains(&phase)
        {
            phases.push(phase);
        }
    }
    if events.iter().all(|e| *e == Event::CrdInstall) {
        // Argo CD treats `crd-install` as an ordinary object, and so does
        // an empty annotation.
        return Ok(Role::Object);
    }
    if phases.is_empty() {
        return Ok(Role::NeverRun(value.trim().to_owned()));
    }
    phases.sort();
    Ok(Role::Hook(phases))
}

/// Reads `helm.sh/hook-weight`.
pub fn weight(value: &str) -> Result<i64, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("{WEIGHT} {value:?} is not an integer"))
}

/// Reads `helm.sh/hook-delete-policy`.
pub fn delete_policies(value: &str) -> Result<Vec<DeletePolicy>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|policy| match policy {
            "before-hook-creation" => Ok(DeletePolicy::BeforeHookCreation),
            "hook-succeeded" => Ok(DeletePolicy::HookSucceeded),
            "hook-failed" => Ok(DeletePolicy::HookFailed),
            other => Err(format!(
                "{DELETE_POLICY} {other:?} is not before-hook-creation, hook-succeeded or hook-failed"
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_map_as_argo_cd_maps_them() {
        assert_eq!(
            role("pre-install,pre-upgrade"),
            Ok(Role::Hook(vec![Phase::PreSync]))
        );
        assert_eq!(
            role(" Post-Install , post-upgrade"),
            Ok(Role::Hook(vec![Phase::PostSync]))
        );
        assert_eq!(
            role("post-install,pre-install"),
            Ok(Role::Hook(vec![Phase::PreSync, Phase::PostSync]))
        );
        assert_eq!(role("crd-install"), Ok(Role::Object));
        assert_eq!(role("test"), Ok(Role::NeverRun("test".into())));
        assert_eq!(
            role("test-success"),
            Ok(Role::NeverRun("test-success".into()))
        );
        assert_eq!(
            role("pre-delete,post-rollback"),
            Ok(Role::NeverRun("pre-delete,post-rollback".into()))
        );
        assert_eq!(
            role("pre-delete,post-install"),
            Ok(Role::Hook(vec![Phase::PostSync])),
            "the events a sync runs run; the others are ignored"
        );
        assert!(role("pre-instal").unwrap_err().contains("\"pre-instal\""));
    }

    #[test]
    fn post_delete_and_keep_read_as_helm_reads_them() {
        assert!(lists("post-delete", Event::PostDelete));
        assert!(lists(" Post-Delete ,pre-delete", Event::PostDelete));
        assert!(lists(" Post-Delete ,pre-delete", Event::PreDelete));
        assert!(!lists("pre-delete", Event::PostDelete));
        assert!(!lists("post-delete,bogus", Event::PostDelete));
        assert!(keeps("keep") && keeps(" Keep "));
        assert!(!keeps("delete") && !keeps("kept"));
    }

    #[test]
    fn weights_and_policies() {
        assert_eq!(weight("-5"), Ok(-5));
        assert!(weight("5.5").unwrap_err().contains("not an integer"));
        assert_eq!(
            delete_policies("hook-succeeded,before-hook-creation"),
            Ok(vec![
                DeletePolicy::HookSucceeded,
                DeletePolicy::BeforeHookCreation
            ])
        );
        assert!(
            delete_policies("HookSucceeded")
                .unwrap_err()
                .contains("\"HookSucceeded\"")
        );
    }
}
