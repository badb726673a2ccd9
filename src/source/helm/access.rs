//! Which repositories a chart's dependencies may be fetched from, and with
//! whose credentials, for one fetch.
//!
//! A chart names its dependencies' repositories itself (`Chart.yaml`,
//! `Chart.lock`): every one is put to a [`RepositoryGate`] before anything
//! is sent to it. The controller's gate is the AppProject's `sourceRepos`;
//! a render server's is the list of repositories the controller granted in
//! the request (each with its own credentials), and a repository not on it
//! is reported back ([`NeededRepository`]) rather than fetched.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::artifact::RegistryCredentials;
use crate::source::git::CredentialProvider;

/// What a gate says of a dependency repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It may be fetched.
    Allowed,
    /// Not decided here: whoever sent the fetch must decide (and bring its
    /// credentials); nothing is sent to it.
    Unknown,
    /// It may not be fetched; why (e.g. the project's `sourceRepos`).
    Refused(String),
}

/// Decides whether a dependency repository may be fetched.
pub trait RepositoryGate: Send + Sync + fmt::Debug {
    /// `repository` as the chart writes it (an `http(s)://` Helm
    /// repository or an `oci://` registry path, no trailing `/`).
    fn admit(&self, repository: &str) -> Admission;

    /// Credentials of an admitted `oci://` dependency repository, added to
    /// the fetch's registry credentials for that dependency (and its own
    /// dependencies) only. Default: none beyond the fetch's.
    fn registry_credentials(&self, _repository: &str) -> Option<RegistryCredentials> {
        None
    }
}

/// Every repository may be fetched (the CLI, where the user names the
/// chart and holds the credentials).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl RepositoryGate for AllowAll {
    fn admit(&self, _repository: &str) -> Admission {
        Admission::Allowed
    }
}

/// The repositories and credentials one fetch may use.
#[derive(Debug, Clone)]
pub struct ChartAccess {
    /// Credentials of Helm repositories (looked up by their `index.yaml`
    /// URL, sent to that origin only); `None`: the fetcher's own provider.
    pub credentials: Option<Arc<dyn CredentialProvider>>,
    /// Put to each dependency repository before it is fetched.
    pub gate: Arc<dyn RepositoryGate>,
}

impl Default for ChartAccess {
    /// The fetcher's credentials, every repository allowed.
    fn default() -> Self {
        ChartAccess {
            credentials: None,
            gate: Arc::new(AllowAll),
        }
    }
}

/// A dependency repository a gate could not decide on: the chart that
/// declares it, the dependency, and the repository's URL as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NeededRepository {
    /// The chart declaring the dependency.
    pub chart: String,
    /// The dependency's name.
    pub dependency: String,
    /// The repository URL, as the chart writes it.
    pub url: String,
}

impl fmt::Display for NeededRepository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: dependency `{}` from {}",
            self.chart, self.dependency, self.url
        )
    }
}
