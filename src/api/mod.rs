//! Kiln's Kubernetes API, group `kiln.dev`, version `v1alpha1`.
//!
//! Field names follow Argo CD wherever the concept is the same, so its users
//! feel at home: an [`Application`] names a source, a destination and a sync
//! policy; an [`AppProject`] says what its applications may use; a
//! [`Plugin`] is the operator-curated catalog entry of a renderer or policy.
//! `kiln crds` prints the CustomResourceDefinitions generated from these
//! types; `deploy/crds/` holds the same, checked by a test.

pub mod appset;
pub mod helm;

use std::collections::BTreeMap;

use kube::CustomResource;
use kube::core::CustomResourceExt as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "kiln.dev";
/// The API version.
pub const VERSION: &str = "v1alpha1";
/// The finalizer that makes deleting an Application delete its resources.
pub const RESOURCES_FINALIZER: &str = "resources-finalizer.kiln.dev";
/// The finalizer the controller adds to an Application whose rendered
/// objects hold PreDelete hooks (as Argo CD 3 adds its own): deleting the
/// Application runs them before anything else, and the finalizer goes once
/// they completed.
pub const PRE_DELETE_FINALIZER: &str = "pre-delete-finalizer.kiln.dev";
/// Added with [`PRE_DELETE_FINALIZER`]: the PreDelete hooks that completed
/// are deleted as their delete policies say before it goes.
pub const PRE_DELETE_CLEANUP_FINALIZER: &str = "pre-delete-finalizer.kiln.dev/cleanup";
/// The finalizer the controller adds to an Application whose rendered
/// objects hold PostDelete hooks (as Argo CD adds its own): deleting the
/// Application runs them once its resources are gone, and the finalizer
/// goes once they completed.
pub const POST_DELETE_FINALIZER: &str = "post-delete-finalizer.kiln.dev";
/// Added with [`POST_DELETE_FINALIZER`] and removed last: the PostDelete
/// hooks that completed are deleted as their delete policies say before it
/// goes, so that a controller restarted in between never runs them twice.
pub const POST_DELETE_CLEANUP_FINALIZER: &str = "post-delete-finalizer.kiln.dev/cleanup";
/// The annotation that asks for an immediate refresh.
pub const REFRESH_ANNOTATION: &str = "kiln.dev/refresh";
/// The annotation that asks the controller for an operation (`kiln app
/// sync`, `kiln app rollback`): an [`Operation`] as JSON. The controller
/// removes it once the operation has run and its result is in
/// `status.operationState` (with the same `id`).
pub const OPERATION_ANNOTATION: &str = "kiln.dev/operation";
/// The label of Secrets the controller reads: `cluster` (a destination
/// cluster), `repository` (credentials of one repository URL) or
/// `repo-creds` (credentials of every repository under a URL prefix).
pub const SECRET_TYPE_LABEL: &str = "kiln.dev/secret-type";
/// The destination server that means the controller's own cluster.
pub const IN_CLUSTER: &str = "https://kubernetes.default.svc";

/// An operation a person asked for, carried by [`OPERATION_ANNOTATION`].
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Operation {
    /// Identifies the request; the result in `status.operationState`
    /// carries it.
    pub id: String,
    /// A sync (the only operation so far).
    pub sync: SyncOperation,
    /// Who asked, e.g. `kiln app rollback` (shown in the status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiated_by: Option<String>,
}

/// A requested sync.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncOperation {
    /// The revision to sync to (default: `spec.source.targetRevision`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Delete tracked resources that Git no longer has.
    #[serde(default)]
    pub prune: bool,
    /// Ask the API server to validate everything and change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

fn default_project() -> String {
    "default".into()
}

fn default_revision() -> String {
    "HEAD".into()
}

fn default_path() -> String {
    ".".into()
}

/// What Git says one application is, and where it goes.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kiln.dev",
    version = "v1alpha1",
    kind = "Application",
    namespaced,
    status = "ApplicationStatus",
    shortname = "app",
    shortname = "apps",
    category = "kiln",
    printcolumn = r#"{"name":"Sync","type":"string","jsonPath":".status.sync.status"}"#,
    printcolumn = r#"{"name":"Health","type":"string","jsonPath":".status.health.status"}"#,
    printcolumn = r#"{"name":"Revision","type":"string","jsonPath":".status.sync.revision","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    /// The project whose rules apply (default `default`).
    #[serde(default = "default_project")]
    pub project: String,
    /// Where the manifests come from and how they are rendered.
    pub source: ApplicationSource,
    /// Where they are applied.
    pub destination: Destination,
    /// When and how to sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_policy: Option<SyncPolicy>,
    /// Fields left out of the comparison (Argo CD's spelling).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_differences: Vec<IgnoreDifference>,
    /// Policies this application adds to its project's mandatory ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<PolicyUse>,
}

/// A Git source, or a Helm chart (`chart`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSource {
    /// The repository URL (https, ssh, git, file).
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// Branch, tag, commit or semver range (default `HEAD`).
    #[serde(default = "default_revision")]
    pub target_revision: String,
    /// The application's directory in the repository (default `.`).
    #[serde(default = "default_path")]
    pub path: String,
    /// The renderer chain, by Plugin name; empty: the plain-YAML directory renderer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<PluginUse>,
    /// A Helm chart of the Helm repository `repoURL` (`https://…` or
    /// `oci://REGISTRY/PATH`), at `targetRevision` (a version or Helm
    /// semver constraint), fetched by the host (see docs/helm.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    /// Argo CD's Helm options, mapped onto the `helm` plugin's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<helm::HelmSource>,
}

/// One renderer of the chain.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct PluginUse {
    /// The Plugin's name.
    pub name: String,
    /// Parameters passed to it (over the Plugin's defaults).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// A policy an application or project applies.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct PolicyUse {
    /// The Plugin's name.
    pub name: String,
    /// `enforce` (default: blocks the sync), `warn` or `audit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PolicyMode>,
    /// Settings passed to it. Paths in them (`template=…`, `policy=…`) are
    /// read through the policy's source: `source` when set, else the
    /// Application's own tree.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// Where the policy reads its files (templates, constraints,
    /// bindings) instead of the Application's tree, so that the team owning
    /// the Application cannot edit what judges it. The policy sees the
    /// repository at `path` as its whole tree: settings paths are relative
    /// to it, and a path climbing out of it is refused. Polled and cached
    /// like an Application's source; a new commit there re-reviews the
    /// applications using it. In an AppProject it is trusted as the
    /// AppProject is (it is not held to `sourceRepos`), but a repository on
    /// the controller's filesystem is refused unless the controller runs
    /// with `--allow-file-repositories`. In an Application it is held to the
    /// project's `sourceRepos` like `spec.source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<PolicySource>,
}

/// The repository a policy reads its files from.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicySource {
    /// The repository URL (https, ssh, git; file only when the controller
    /// allows file repositories). Credentials come from the repository
    /// Secrets matching it, as for an Application's source.
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// Branch, tag, commit or semver range (default `HEAD`).
    #[serde(default = "default_revision")]
    pub target_revision: String,
    /// The directory the policy sees as its root (default `.`: the whole
    /// repository).
    #[serde(default = "default_path")]
    pub path: String,
}

/// What a failing policy does.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PolicyMode {
    /// Errors block the sync.
    Enforce,
    /// Findings are reported; nothing is blocked.
    Warn,
    /// Findings are recorded only.
    Audit,
}

/// The target cluster and namespace.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct Destination {
    /// The API server URL (`https://kubernetes.default.svc` for the
    /// controller's own cluster). Exclusive with `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// A registered cluster's name. Exclusive with `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The namespace of namespaced objects that set none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// When and how an application syncs.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncPolicy {
    /// Sync automatically when out of sync; absent: manual syncs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automated: Option<Automated>,
    /// Argo CD-style options (`CreateNamespace=true`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sync_options: Vec<String>,
    /// Retries of a failed sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// Automated sync.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Automated {
    /// Delete tracked resources no longer in Git.
    #[serde(default)]
    pub prune: bool,
    /// Revert live changes that make the application out of sync.
    #[serde(default)]
    pub self_heal: bool,
    /// Allow a sync that would leave the application with no resources.
    #[serde(default)]
    pub allow_empty: bool,
}

/// Retry policy.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct Retry {
    /// How many retries (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Backoff between retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
}

/// Exponential backoff.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Backoff {
    /// First wait, e.g. `5s` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Multiplier per retry (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<u32>,
    /// Cap on the wait, e.g. `3m` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<String>,
}

/// One `ignoreDifferences` rule (see `docs/diff-and-sync.md`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreDifference {
    /// API group (omitted: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kind (`*`: any).
    pub kind: String,
    /// Object name (omitted: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace (omitted: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// RFC 6901 pointers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_pointers: Vec<String>,
    /// jq path expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jq_path_expressions: Vec<String>,
    /// Field managers whose fields are ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_fields_managers: Vec<String>,
}

impl From<&IgnoreDifference> for crate::diff::IgnoreDifferences {
    fn from(rule: &IgnoreDifference) -> Self {
        Self {
            group: rule.group.clone(),
            kind: rule.kind.clone(),
            name: rule.name.clone(),
            namespace: rule.namespace.clone(),
            json_pointers: rule.json_pointers.clone(),
            jq_path_expressions: rule.jq_path_expressions.clone(),
            managed_fields_managers: rule.managed_fields_managers.clone(),
        }
    }
}

/// What the controller last saw and did.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    /// Sync status of the last comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncInfo>,
    /// Health of the application's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthInfo>,
    /// Problems a person can act on (`ComparisonError`, `PolicyBlocked`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last or current sync operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_state: Option<OperationState>,
    /// Per resource: sync and health.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// Findings of the last policy evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyStatus>,
    /// The last synced revisions, newest last (for rollback).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    /// When the application was last reconciled (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled_at: Option<String>,
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Sync status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncInfo {
    /// `Synced`, `OutOfSync` or `Unknown`.
    pub status: String,
    /// The commit compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The source and destination the comparison used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared_to: Option<ComparedTo>,
}

/// The inputs of a comparison.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ComparedTo {
    /// The source.
    pub source: ApplicationSource,
    /// The destination.
    pub destination: Destination,
}

/// Health status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct HealthInfo {
    /// `Healthy`, `Progressing`, `Degraded`, `Suspended`, `Missing`, `Unknown`.
    pub status: String,
    /// Why, when not healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A condition.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition type (`ComparisonError`, `SyncError`, `PolicyBlocked`,
    /// `ProjectViolation`, `InvalidSpec`, …).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What happened and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// A sync operation.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OperationState {
    /// `Succeeded`, `Failed` or `Terminated` (abandoned between waves
    /// because the controller was shutting down).
    pub phase: String,
    /// The id of the requested [`Operation`]; none for automated syncs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `automated`, or who requested it (e.g. `kiln app sync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiated_by: Option<String>,
    /// Whether it was a dry run (nothing changed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// One line for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The revision synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Per-resource results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceResult>,
    /// When it started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it finished (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// What a sync did to one resource.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ResourceResult {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// `Created`, `Configured`, `Unchanged`, `Pruned`, `Failed`, …
    pub action: String,
    /// Details (the API error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Sync and health of one resource.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ResourceStatus {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// `Synced`, `OutOfSync`, `Missing`, `Extraneous`.
    pub status: String,
    /// Its health, when assessed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<String>,
}

/// Findings of the policies.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct PolicyStatus {
    /// True when an enforced policy blocked the sync.
    #[serde(default)]
    pub blocked: bool,
    /// The findings, each once, at most 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<PolicyFinding>,
    /// How many findings were left out of `findings` (beyond its bound).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One policy finding.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct PolicyFinding {
    /// The policy.
    pub policy: String,
    /// Its mode.
    pub mode: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
    /// The object, as `Kind/namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The field, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The rule that found it, when the policy reports its rules (Kyverno's
    /// policies do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<PolicyRule>,
}

/// The rule behind a finding: a policy plugin may hold several policies,
/// each made of named rules.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
pub struct PolicyRule {
    /// The policy the rule belongs to, as its author named it (a Kyverno
    /// `ClusterPolicy`'s name).
    pub policy: String,
    /// The rule's name.
    pub name: String,
}

/// One synced revision.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// A sequence number.
    pub id: i64,
    /// The commit.
    pub revision: String,
    /// When it was synced (RFC 3339).
    pub deployed_at: String,
}

/// What the applications of a project may use.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kiln.dev",
    version = "v1alpha1",
    kind = "AppProject",
    namespaced,
    shortname = "appproj",
    shortname = "appprojs",
    category = "kiln"
)]
#[serde(rename_all = "camelCase")]
pub struct AppProjectSpec {
    /// Allowed repository URLs (globs; `*` allows all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_repos: Vec<String>,
    /// Allowed destinations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<ProjectDestination>,
    /// Cluster-scoped kinds allowed (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_resource_whitelist: Vec<GroupKind>,
    /// Cluster-scoped kinds refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_resource_blacklist: Vec<GroupKind>,
    /// Namespaced kinds allowed (empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace_resource_whitelist: Vec<GroupKind>,
    /// Namespaced kinds refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace_resource_blacklist: Vec<GroupKind>,
    /// Plugins (by name) applications may use; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<String>,
    /// Signers every plugin used by the project's applications must also
    /// have (on top of each Plugin's own `verify`); a plugin marked
    /// `insecure` is refused in such a project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_verification: Option<crate::trust::VerificationSpec>,
    /// Policies every application of the project gets and cannot switch off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<PolicyUse>,
    /// Whether the project's applications may write into the controller's
    /// own namespace (Applications, AppProjects, Plugins, repository and
    /// cluster Secrets): what App-of-Apps needs. Such a project can create
    /// applications of any project, so grant it only to the platform team.
    /// Default: `false` (the implicit `default` project allows it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_controller_namespace: bool,
}

/// A destination pattern.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ProjectDestination {
    /// Server URL glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Cluster name glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A group and kind (`*` matches any).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct GroupKind {
    /// API group ("" for core).
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
}

/// An operator-curated plugin: the only plugins applications can name.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kiln.dev",
    version = "v1alpha1",
    kind = "Plugin",
    namespaced,
    shortname = "kplugin",
    category = "kiln",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.kind"}"#,
    printcolumn = r#"{"name":"Ref","type":"string","jsonPath":".spec.ref"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PluginSpec {
    /// `renderer` or `policy`.
    pub kind: PluginKind,
    /// The component: `oci://REGISTRY/REPO:TAG` or `…@sha256:…` (one
    /// `application/vnd.wasm.content.layer.v1+wasm` layer),
    /// `https://…/NAME.wasm@sha256:…` (the pin is required), or a file path
    /// inside the controller's image or volume (optionally `PATH@sha256:…`).
    /// Tags are resolved again every `pluginResolveInterval` of the
    /// controller; a tag moved to another component is verified anew.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Who must have signed the component. Required: a plugin without it
    /// does not run (set `insecure: true` to run it unverified, for
    /// development only; it is reported on every Application using it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::trust::VerificationSpec>,
    /// Per-call limits (defaults: the controller's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PluginLimits>,
    /// Default parameters (renderers) or settings (policies).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub defaults: BTreeMap<String, String>,
}

/// The two plugin worlds.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// Produces manifests.
    #[default]
    Renderer,
    /// Reviews them.
    Policy,
}

/// Limits of one plugin call.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PluginLimits {
    /// Memory cap, e.g. `256Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// CPU deadline, e.g. `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Output cap, e.g. `32Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_size: Option<String>,
}

/// The CustomResourceDefinitions, as YAML documents in a stable order
/// (`kiln crds`, `deploy/crds/`).
pub fn crds() -> Vec<(String, String)> {
    [
        Application::crd(),
        AppProject::crd(),
        Plugin::crd(),
        appset::ApplicationSet::crd(),
    ]
    .into_iter()
    .map(|crd| {
        let name = crd.metadata.name.clone().unwrap_or_default();
        // A CRD always serializes.
        (name, serde_yaml::to_string(&crd).unwrap_or_default())
    })
    .collect()
}
