//! What one render request may use to fetch a chart's dependencies: the
//! repositories the controller granted it, each with its own credentials,
//! for this request only ([`requested`]). Any other repository is left to
//! the controller, which checks it against the Application's project
//! (the render server answers
//! [`DependencyRepositoriesNeeded`](crate::condition::Reason::DependencyRepositoriesNeeded)).
//! Nothing here is kept in shared state.

use std::collections::HashMap;
use std::sync::Arc;

use crate::artifact::RegistryCredentials;
use crate::condition::{Reason, Stop};
use crate::render::remote::{ChartSourceRef, WireCredentials};
use crate::source::git::{CredentialProvider, Credentials, RepoUrl};
use crate::source::helm::fetch::index_key;
use crate::source::helm::{Admission, AllowAll, ChartAccess, ChartRef, RepositoryGate};

/// Which repository a spec names, and whether this process may read it.
#[derive(Clone, Copy, Debug)]
pub enum RepositoryField<'a> {
    /// The Application's `spec.source.repoURL`.
    Application,
    /// The `source.repoURL` of the policy named so.
    PolicySource(&'a str),
    /// An ApplicationSet's git generator's `repoURL`.
    Generator,
}

/// The repository `raw` that `field` names, parsed; a repository on this
/// process's filesystem (`file://`, a plain path) is refused unless
/// `allow_file_repositories` (it would let a spec read whatever the
/// process can read). The one check of the controller and the render
/// engine, for an Application's repository and a policy's source alike.
pub fn repository(
    raw: &str,
    field: RepositoryField<'_>,
    allow_file_repositories: bool,
) -> Result<RepoUrl, Stop> {
    let (named, invalid) = match field {
        RepositoryField::Application => ("spec.source.repoURL".to_owned(), Reason::InvalidRepoUrl),
        RepositoryField::PolicySource(policy) => (
            format!("policy {policy}: source.repoURL"),
            Reason::InvalidPolicySource,
        ),
        RepositoryField::Generator => ("git generator repoURL".to_owned(), Reason::InvalidRepoUrl),
    };
    let url = RepoUrl::parse(raw).map_err(|e| Stop::new(invalid, format!("{named}: {e}")))?;
    if url.is_local() && !allow_file_repositories {
        return Err(Stop::new(
            Reason::FileRepositoryNotAllowed,
            format!(
                "{named} {url}: repositories on the filesystem of the controller or render server are refused; \
                 start it with --allow-file-repositories to allow them (development only)"
            ),
        ));
    }
    Ok(url)
}

/// The repositories a request granted (URL → its OCI registry
/// credentials, if it is one with some); any other is left to the
/// controller.
#[derive(Debug)]
struct Granted(HashMap<String, Option<RegistryCredentials>>);

impl RepositoryGate for Granted {
    fn admit(&self, repository: &str) -> Admission {
        if self.0.contains_key(repository.trim_end_matches('/')) {
            Admission::Allowed
        } else {
            Admission::Unknown
        }
    }

    fn registry_credentials(&self, repository: &str) -> Option<RegistryCredentials> {
        self.0.get(repository.trim_end_matches('/'))?.clone()
    }
}

/// An `oci://` repository's basic credentials as registry credentials for
/// its host.
pub fn registry_credentials(
    repository: &str,
    credentials: &WireCredentials,
) -> Option<RegistryCredentials> {
    let path = repository.strip_prefix("oci://")?;
    let host = path.split('/').next().unwrap_or(path);
    match credentials {
        WireCredentials::Basic { username, password } => {
            Some(RegistryCredentials::basic(host, username, &password.0))
        }
        _ => None,
    }
}

/// Helm repository credentials of one request, by `index.yaml` URL.
#[derive(Debug, Default)]
struct Scoped(HashMap<String, Credentials>);

impl CredentialProvider for Scoped {
    fn credentials(&self, url: &RepoUrl) -> Option<Credentials> {
        self.0.get(&url.to_string()).cloned()
    }
}

/// A render server's chart access for one request: the chart's own
/// repository's credentials and those of the granted dependency
/// repositories (a Helm repository's by its `index.yaml` URL; an OCI
/// registry path's for that dependency's pull), for this request only. A
/// request without `dependencyRepositories` (an older controller) lets
/// dependencies be fetched without credentials, as before.
pub fn requested(reference: &ChartRef, chart: &ChartSourceRef) -> ChartAccess {
    let mut helm = HashMap::new();
    let mut keep = |url: &str, credentials: &Option<WireCredentials>| {
        if let Some(credentials) = credentials
            && !url.starts_with("oci://")
            && let Some(key) = index_key(url)
        {
            helm.insert(key.to_string(), credentials.clone().into());
        }
    };
    if let ChartRef::Repo { repo, .. } = reference {
        keep(repo, &chart.credentials);
    }
    let gate: Arc<dyn RepositoryGate> = match &chart.dependency_repositories {
        None => Arc::new(AllowAll),
        Some(granted) => {
            let mut by_url = HashMap::new();
            for repository in granted {
                keep(&repository.url, &repository.credentials);
                let url = repository.url.trim_end_matches('/');
                let registry = repository
                    .credentials
                    .as_ref()
                    .and_then(|c| registry_credentials(url, c));
                by_url.insert(url.to_owned(), registry);
            }
            Arc::new(Granted(by_url))
        }
    };
    ChartAccess {
        credentials: Some(Arc::new(Scoped(helm))),
        gate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::remote::{GrantedRepository, WireSecret};

    #[test]
    fn a_render_servers_access_is_the_requests_grants_and_nothing_else() {
        let basic = |user: &str| WireCredentials::Basic {
            username: user.into(),
            password: WireSecret(format!("{user}-secret")),
        };
        let chart = ChartSourceRef {
            chart: "app".into(),
            oci: false,
            credentials: Some(basic("alice")),
            dependency_repositories: Some(vec![
                GrantedRepository {
                    url: "https://b.example.com/charts".into(),
                    credentials: Some(basic("bob")),
                },
                GrantedRepository {
                    url: "oci://registry.example.com/charts".into(),
                    credentials: Some(basic("puller")),
                },
            ]),
        };
        let reference =
            ChartRef::new(Some("https://a.example.com/charts"), "app", "1.2.*").unwrap();
        let access = requested(&reference, &chart);
        let user = |repo: &str| {
            let provider = access.credentials.as_ref().unwrap();
            match provider.credentials(&index_key(repo).unwrap()) {
                Some(Credentials::Basic { username, .. }) => Some(username),
                _ => None,
            }
        };
        assert_eq!(
            user("https://a.example.com/charts").as_deref(),
            Some("alice")
        );
        assert_eq!(user("https://b.example.com/charts").as_deref(), Some("bob"));
        assert_eq!(user("https://c.example.com/charts"), None);
        assert_eq!(
            access.gate.admit("https://b.example.com/charts/"),
            Admission::Allowed
        );
        assert_eq!(
            access.gate.admit("oci://registry.example.com/charts"),
            Admission::Allowed
        );
        assert_eq!(
            access.gate.admit("https://c.example.com/charts"),
            Admission::Unknown
        );
        assert_eq!(
            access.gate.admit("https://a.example.com/charts"),
            Admission::Unknown
        );
        assert_eq!(
            format!(
                "{:?}",
                access
                    .gate
                    .registry_credentials("oci://registry.example.com/charts")
            ),
            r#"Some(RegistryCredentials { hosts: ["registry.example.com"] })"#
        );
        assert!(
            access
                .gate
                .registry_credentials("oci://registry.example.com/other")
                .is_none()
        );
        // An older controller's request: dependencies are fetched as
        // before, with no credentials but the chart's own.
        let old = ChartSourceRef {
            dependency_repositories: None,
            ..chart
        };
        let access = requested(&reference, &old);
        assert_eq!(
            access.gate.admit("https://c.example.com/charts"),
            Admission::Allowed
        );
        let provider = access.credentials.as_ref().unwrap();
        assert!(
            provider
                .credentials(&index_key("https://b.example.com/charts").unwrap())
                .is_none()
        );
    }
}
