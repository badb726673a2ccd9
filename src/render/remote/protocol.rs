//! The messages between the controller and `kiln render-server`.
//!
//! JSON bodies over HTTP/2 (`POST /v1/render`), see docs/controller.md for
//! why not gRPC. A request carries everything one render needs, including
//! the credentials of its repository and of its policies' own sources; the answer carries the objects,
//! what the render read, the commit and the policy report. A refusal is a
//! [`RenderFailure`]: the condition the Application should show.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::PolicyStatus;
use crate::plugin::World;
use crate::plugin::cluster::{ClusterKey, ClusterView};
use crate::policy::Mode;
use crate::source::ReadSet;
pub use crate::source::helm::NeededRepository;
use crate::trust::VerificationSpec;

/// The path of the render endpoint.
pub const RENDER_PATH: &str = "/v1/render";

/// The Application a render is for (the commit is resolved by the server).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppRef {
    /// Application name.
    pub name: String,
    /// Destination namespace.
    pub namespace: String,
    /// Project name.
    pub project: String,
    /// Repository URL, as in the Application's spec.
    pub repo_url: String,
    /// The application's path inside the repository (normalized).
    pub path: String,
}

/// One plugin as its catalog entry describes it: where it comes from, who
/// must have signed it, and what one call may use. The controller reads the
/// Plugin resource; whoever renders fetches, verifies and compiles it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginDescription {
    /// The catalog name.
    pub name: String,
    /// `spec.ref`: `oci://…`, `https://…#sha256=…` or a file.
    pub reference: String,
    /// Renderer or policy.
    pub world: World,
    /// Every verification it must pass: the Plugin's own, then the
    /// project's `pluginVerification`.
    pub verify: Vec<VerificationSpec>,
    /// Limits of one call.
    pub limits: WireLimits,
}

/// [`crate::plugin::Limits`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireLimits {
    /// Bytes of linear memory.
    pub memory: u64,
    /// CPU deadline of one call, in milliseconds.
    pub timeout_ms: u64,
    /// Bytes of manifests one call may return.
    pub output: u64,
    /// Bytes of log one call may emit.
    pub log: u64,
}

impl From<crate::plugin::Limits> for WireLimits {
    fn from(l: crate::plugin::Limits) -> Self {
        Self {
            memory: l.memory,
            timeout_ms: u64::try_from(l.timeout.as_millis()).unwrap_or(u64::MAX),
            output: l.output,
            log: l.log as u64,
        }
    }
}

impl From<WireLimits> for crate::plugin::Limits {
    fn from(l: WireLimits) -> Self {
        Self {
            memory: l.memory,
            timeout: std::time::Duration::from_millis(l.timeout_ms),
            output: l.output,
            log: usize::try_from(l.log).unwrap_or(usize::MAX),
        }
    }
}

/// A renderer of the chain with its parameters (defaults merged).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RenderStep {
    /// The plugin.
    pub plugin: PluginDescription,
    /// Its parameters, in order.
    pub params: Vec<(String, String)>,
}

/// A policy with its settings (defaults merged) and mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyStepRef {
    /// The plugin.
    pub plugin: PluginDescription,
    /// Its settings, in order.
    pub settings: Vec<(String, String)>,
    /// Enforce, warn or audit.
    pub mode: Mode,
    /// Where the policy reads its files; `None`: the Application's tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<PolicySourceRef>,
}

/// A policy's own source: a repository the policy sees, at `path`, instead
/// of the Application's tree (an AppProject's policy kept in the security
/// team's repository).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySourceRef {
    /// Repository URL.
    pub repo_url: String,
    /// The revision to resolve.
    pub revision: String,
    /// The directory the policy sees as its root (normalized; empty: the
    /// whole repository).
    #[serde(default)]
    pub path: String,
    /// Resolve the repository's refs afresh.
    #[serde(default)]
    pub refresh: bool,
    /// The credentials of `repo_url`, if it needs some (from the repository
    /// Secrets matching it, as for the Application's repository).
    #[serde(default)]
    pub credentials: Option<WireCredentials>,
}

/// A secret string on the wire: `Debug` prints `***`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WireSecret(pub String);

impl fmt::Debug for WireSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The credentials of the request's repository (and nothing else).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum WireCredentials {
    /// HTTP(S) basic authentication.
    Basic {
        /// User name.
        username: String,
        /// Password or token.
        password: WireSecret,
    },
    /// An SSH private key.
    SshKey {
        /// The key, OpenSSH text.
        private_key: WireSecret,
    },
}

impl From<crate::source::git::Credentials> for WireCredentials {
    fn from(c: crate::source::git::Credentials) -> Self {
        use crate::source::git::Credentials;
        match c {
            Credentials::Basic { username, password } => Self::Basic {
                username,
                password: WireSecret(password.expose().to_owned()),
            },
            Credentials::SshKey { private_key } => Self::SshKey {
                private_key: WireSecret(private_key.expose().to_owned()),
            },
            // Credentials is non_exhaustive; a kind the wire does not know
            // is not sent (the render fails as unauthenticated).
            #[allow(unreachable_patterns)]
            _ => Self::Basic {
                username: String::new(),
                password: WireSecret(String::new()),
            },
        }
    }
}

impl From<WireCredentials> for crate::source::git::Credentials {
    fn from(c: WireCredentials) -> Self {
        use crate::source::git::{Credentials, Secret};
        match c {
            WireCredentials::Basic { username, password } => Credentials::Basic {
                username,
                password: Secret::new(password.0),
            },
            WireCredentials::SshKey { private_key } => Credentials::SshKey {
                private_key: Secret::new(private_key.0),
            },
        }
    }
}

/// One render: everything the render server needs, nothing more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderRequest {
    /// The Application.
    pub app: AppRef,
    /// The revision to resolve (branch, tag, commit, `HEAD`).
    pub revision: String,
    /// The render chain; empty: the built-in directory renderer.
    pub chain: Vec<RenderStep>,
    /// The policies (the project's, then the application's).
    pub policies: Vec<PolicyStepRef>,
    /// Resolve the repository's refs afresh (a hard refresh or a webhook
    /// delivery reached the controller).
    #[serde(default)]
    pub refresh: bool,
    /// The credentials of `app.repo_url`, if it needs some.
    pub repository_credentials: Option<WireCredentials>,
    /// Docker config JSON texts of the registry Secrets (for plugins).
    pub registry_credentials: Vec<WireSecret>,
    /// The SSH known hosts the controller is configured with (OpenSSH
    /// `known_hosts` lines); `None`: trust on first use, recorded by the
    /// render server.
    #[serde(default)]
    pub ssh_known_hosts: Option<String>,
    /// A Helm chart to fetch instead of polling `app.repo_url` as Git
    /// (`spec.source.chart`); `revision` is its version or constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<ChartSourceRef>,
    /// What the host does on the view for Argo CD's `spec.source.helm`
    /// block besides the parameters (already in the chain's helm step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<HelmHostWork>,
    /// The destination cluster's kinds and their scopes (its discovery), so
    /// that policies review each object in the namespace it will land in
    /// ([`crate::policy::placement`]); `None`: no cluster (Kubernetes' own
    /// kinds are known, every other kind is taken as namespaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<crate::policy::placement::KindScopes>,
    /// What policies may read of the destination cluster, as the
    /// controller read it for this review; `None`: no cluster (their
    /// lookups are answered `no-cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterView>,
}

/// `spec.source.chart`: a chart of the Helm repository (or OCI registry)
/// `app.repo_url`, at the version or semver constraint `revision`, fetched
/// by whoever renders (index polled with its ETag, archive pinned by
/// digest, dependencies fetched the same way). The answer's `commit` is the
/// version resolved.
///
/// Added fields are optional, so that either side may be older: a server
/// that predates them reads a plain chart name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartSourceRef {
    /// The chart's name (or a full `oci://` reference).
    pub chart: String,
    /// `app.repo_url` is an OCI registry path written without `oci://`
    /// (Argo CD's form: its repository Secret says `type: helm` and
    /// `enableOCI: "true"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oci: bool,
    /// The credentials of the chart's repository (a Helm repository's
    /// basic credentials, sent to its origin only; or an OCI registry's),
    /// from the repository Secrets matching it, and nothing else's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<WireCredentials>,
    /// The repositories the chart's dependencies (at any depth) may be
    /// fetched from, each checked by the controller against the project's
    /// `sourceRepos` and with its own credentials. A dependency repository
    /// not listed is not fetched: the render server answers
    /// [`RenderFailure::repositories_needed`], and the controller asks
    /// again with it (or refuses). `None` (a controller that predates the
    /// field): every dependency repository is fetched, without
    /// credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency_repositories: Option<Vec<GrantedRepository>>,
}

/// A dependency repository granted to a chart's render.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantedRepository {
    /// The URL as the chart writes it (`https://…` Helm repository or
    /// `oci://` registry path), as the render server reported it.
    pub url: String,
    /// Its credentials, from the repository Secrets matching it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<WireCredentials>,
}

/// The host's part of `spec.source.helm` (see
/// [`crate::api::helm::HelmPlan`]), carried out on the view before the
/// render, for the chain step at `step`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelmHostWork {
    /// Index of the helm step in the chain.
    pub step: usize,
    /// The inline values, served at
    /// [`crate::api::helm::INLINE_VALUES_FILE`] in the chart directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_values: Option<String>,
    /// `fileParameters`: value path and file (relative to the chart),
    /// read from the source and passed as `setString`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_parameters: Vec<(String, String)>,
    /// Drop `valueFiles` that do not exist in the source.
    #[serde(default)]
    pub ignore_missing_value_files: bool,
}

/// The result of a render.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderResponse {
    /// The commit rendered.
    pub commit: String,
    /// The objects, in order, with the file each came from.
    pub objects: Vec<WireObject>,
    /// Everything the render read.
    pub read_set: ReadSet,
    /// The policy findings.
    pub policy: PolicyStatus,
    /// Whether an enforced policy blocks the sync.
    pub blocked: bool,
    /// Whether this answer came from the render cache.
    pub cached: bool,
    /// The destination's objects policies read whole (to read again for
    /// the next review of this Application).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_reads: Vec<ClusterKey>,
    /// The objects policies asked for that the request's cluster view did
    /// not hold: the policy findings are incomplete, and the request is to
    /// be sent again with them read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_pending: Vec<ClusterKey>,
}

/// A rendered object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireObject {
    /// The object.
    pub value: Map<String, Value>,
    /// The file it came from, relative to the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Why the render server did not render: the condition the Application
/// shows (the same kinds and reasons as an in-process render).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderFailure {
    /// The condition type, e.g. `ComparisonError`.
    pub kind: String,
    /// The reason, e.g. `SourceUnavailable`.
    pub reason: String,
    /// What happened.
    pub message: String,
    /// With reason
    /// [`DependencyRepositoriesNeeded`](crate::condition::Reason::DependencyRepositoriesNeeded): the chart's dependency
    /// repositories the request did not grant (nothing was sent to them).
    /// Absent otherwise, and to a controller that predates it the message
    /// says the same.
    #[serde(
        default,
        rename = "repositoriesNeeded",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub repositories_needed: Vec<NeededRepository>,
}

impl From<crate::condition::Stop> for RenderFailure {
    fn from(stop: crate::condition::Stop) -> Self {
        Self {
            kind: stop.condition().to_string(),
            reason: stop.reason.to_string(),
            message: stop.message,
            repositories_needed: stop.repositories_needed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_source_without_the_added_fields_reads_and_writes_as_before() {
        let old: ChartSourceRef = serde_json::from_str(r#"{"chart":"web"}"#).unwrap();
        assert_eq!(
            old,
            ChartSourceRef {
                chart: "web".into(),
                oci: false,
                credentials: None,
                dependency_repositories: None,
            }
        );
        assert_eq!(serde_json::to_string(&old).unwrap(), r#"{"chart":"web"}"#);
        let new = ChartSourceRef {
            chart: "web".into(),
            oci: true,
            credentials: Some(WireCredentials::Basic {
                username: "puller".into(),
                password: WireSecret("s3cret".into()),
            }),
            dependency_repositories: Some(vec![GrantedRepository {
                url: "https://b.example.com/charts".into(),
                credentials: Some(WireCredentials::Basic {
                    username: "bob".into(),
                    password: WireSecret("b-s3cret".into()),
                }),
            }]),
        };
        let text = serde_json::to_string(&new).unwrap();
        assert_eq!(serde_json::from_str::<ChartSourceRef>(&text).unwrap(), new);
        assert!(!format!("{new:?}").contains("s3cret"), "{new:?}");
    }

    #[test]
    fn a_failure_without_repositories_needed_reads_and_writes_as_before() {
        let text = r#"{"kind":"ComparisonError","reason":"ChartUnavailable","message":"m"}"#;
        let old: RenderFailure = serde_json::from_str(text).unwrap();
        assert!(old.repositories_needed.is_empty());
        assert_eq!(serde_json::to_string(&old).unwrap(), text);
        let new = RenderFailure {
            kind: "ComparisonError".into(),
            reason: crate::condition::Reason::DependencyRepositoriesNeeded.to_string(),
            message: "m".into(),
            repositories_needed: vec![NeededRepository {
                chart: "app".into(),
                dependency: "lib".into(),
                url: "https://b.example.com/charts".into(),
            }],
        };
        let text = serde_json::to_string(&new).unwrap();
        assert!(
            text.contains(r#""repositoriesNeeded":[{"chart":"app""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<RenderFailure>(&text).unwrap(), new);
    }
}
