//! Which repositories a chart's dependencies may be fetched from, and with
//! whose credentials.
//!
//! A chart names its dependencies' repositories itself, so each is checked
//! against the Application's project (`sourceRepos`, as the chart's own
//! repository is) before anything is sent to it; a repository outside it is
//! refused with a condition naming the chart, the dependency and the URL.
//! (Argo CD sends its repo-server the Helm repositories and credentials
//! that `sourceRepos` permits, so a dependency elsewhere gets no
//! credentials; Kiln refuses it outright.)
//!
//! - In this process the project is the fetch's gate ([`for_project`]) and
//!   the credentials are the repository Secrets'.
//! - A render server holds no Secrets: a request grants the dependency
//!   repositories the controller checked, each with its own credentials
//!   ([`requested`](crate::render::engine::access::requested)), and the server answers any other it meets with
//!   [`DependencyRepositoriesNeeded`](crate::condition::Reason::DependencyRepositoriesNeeded) instead of fetching it. The controller then
//!   checks those against the project, adds them with their Secrets'
//!   credentials and asks again ([`grant`]), a bounded number of times.
//!   A repository's credentials thus go to the render server only for a
//!   chart that depends on it, and only to that repository. A render
//!   server that lies about what a chart needs obtains at most the
//!   credentials of chart repositories the project's `sourceRepos` admit
//!   (what Argo CD sends its repo-server with every request): only Secrets
//!   marked `type: helm` are granted, never a Git repository's.
//!   Dependencies of one repository in one answer get it granted once.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::project::Project;
use super::secrets::ControllerSecrets;
use crate::artifact::RegistryCredentials;
use crate::condition::{Reason, Stop};
use crate::render::engine::access::registry_credentials;
use crate::render::remote::{GrantedRepository, RenderRequest, WireCredentials};
use crate::source::git::{CredentialProvider, Credentials};
use crate::source::helm::fetch::index_key;
use crate::source::helm::{Admission, ChartAccess, NeededRepository, RepositoryGate};

/// Requests a render server may be sent for one chart render: the first,
/// and one more for each level of dependencies whose repositories it asks
/// for, that is one more than
/// [`crate::source::helm::DEFAULT_MAX_DEPENDENCY_DEPTH`] (9): deeper
/// dependencies are refused by the server anyway.
pub const MAX_GRANT_ROUNDS: usize = crate::source::helm::DEFAULT_MAX_DEPENDENCY_DEPTH + 1;

/// Dependency repositories one chart render may be granted: 32.
pub const MAX_GRANTED_REPOSITORIES: usize = 32;

/// The project as a fetch's gate: a dependency repository outside
/// `sourceRepos` is refused; an OCI one's credentials are the Secret's
/// naming its registry path.
struct ProjectGate {
    project: Project,
    secrets: ControllerSecrets,
}

impl std::fmt::Debug for ProjectGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectGate")
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl RepositoryGate for ProjectGate {
    fn admit(&self, repository: &str) -> Admission {
        match self.project.admit_dependency_repository(repository) {
            Ok(()) => Admission::Allowed,
            Err(violation) => Admission::Refused(violation.to_string()),
        }
    }

    fn registry_credentials(&self, repository: &str) -> Option<RegistryCredentials> {
        registry_credentials(repository, &credentials_of(&self.secrets, repository)?)
    }
}

/// The chart access of a render in this process: dependency repositories
/// held to `project`'s `sourceRepos`, credentials from the fetcher's
/// provider (the repository Secrets) and, for an OCI dependency, the
/// Secret naming its registry path.
pub fn for_project(project: &Project, secrets: &ControllerSecrets) -> ChartAccess {
    ChartAccess {
        credentials: None,
        gate: Arc::new(ProjectGate {
            project: project.clone(),
            secrets: secrets.clone(),
        }),
    }
}

/// The credentials of dependency repository `url` (`https://…` or
/// `oci://…`) from the repository Secrets: basic credentials only.
fn credentials_of(secrets: &ControllerSecrets, url: &str) -> Option<WireCredentials> {
    let credentials = match url.strip_prefix("oci://") {
        Some(path) => secrets.helm_repository(path).and_then(|r| r.credentials),
        None => index_key(url).and_then(|key| secrets.repo_credentials().credentials(&key)),
    };
    match credentials? {
        c @ Credentials::Basic { .. } => Some(c.into()),
        _ => None,
    }
}

/// The credentials dependency repository `url` (`https://…` or `oci://…`)
/// is granted on a render server's word: those of the Secret describing it
/// as [`ControllerSecrets::helm_repository`] finds it, only if that Secret
/// is meant for a chart repository (`type: helm`; for `oci://`, also
/// `enableOCI: "true"`), never for the URL of a Git repository's Secret,
/// and basic credentials only. A render server naming a Git repository
/// thus obtains no Git token. (Stricter than [`credentials_of`], used in
/// this process where the credentials go only to the repository itself,
/// and than a chart's own repository, whose Secret needs no `type: helm`:
/// the Application, not the render server, names that one.)
fn granted_credentials(secrets: &ControllerSecrets, url: &str) -> Option<WireCredentials> {
    if secrets.is_git_repository(url) {
        return None;
    }
    let repository = secrets.helm_repository(url)?;
    if !repository.helm || (url.starts_with("oci://") && !repository.enable_oci) {
        return None;
    }
    match repository.credentials? {
        c @ Credentials::Basic { .. } => Some(c.into()),
        _ => None,
    }
}

/// After a render server's answer `stop`: if it asks for dependency
/// repositories (and `round`, counted from 0, may have a successor), checks
/// each against `project`, adds it to `request` with its credentials and
/// returns `Ok` (ask again); otherwise the stop to record. Credentials are
/// granted only from chart repositories' Secrets (`granted_credentials`).
pub fn grant(
    project: &Project,
    secrets: &ControllerSecrets,
    request: &mut RenderRequest,
    stop: Stop,
    round: usize,
) -> Result<(), Stop> {
    let Some(chart) = request.chart.as_mut() else {
        return Err(stop);
    };
    if stop.reason != Reason::DependencyRepositoriesNeeded || stop.repositories_needed.is_empty() {
        return Err(stop);
    }
    let granted = chart.dependency_repositories.get_or_insert_with(Vec::new);
    if round + 1 >= MAX_GRANT_ROUNDS {
        return Err(Stop::new(
            Reason::TooManyDependencyRounds,
            format!(
                "chart {}: its dependencies still name new repositories after {MAX_GRANT_ROUNDS} requests to the render server: {}",
                chart.chart,
                list(&stop.repositories_needed)
            ),
        ));
    }
    let wanted: BTreeSet<&NeededRepository> = stop.repositories_needed.iter().collect();
    // The server names a repository once per dependency from it: one
    // named again in this round (two dependencies of one repository) is
    // granted once; one granted in an earlier round is the server's fault.
    let earlier = granted.len();
    for needed in wanted {
        if let Err(violation) = project.admit_dependency_repository(&needed.url) {
            return Err(Stop::new(
                Reason::DependencyRepositoryNotPermitted,
                format!("{needed}: {violation}"),
            ));
        }
        let url = needed.url.trim_end_matches('/');
        if granted[..earlier].iter().any(|g| g.url == url) {
            return Err(Stop::new(
                Reason::RenderServerFailed,
                format!("{needed}: the render server asks again for a repository it was granted"),
            ));
        }
        if granted[earlier..].iter().any(|g| g.url == url) {
            continue;
        }
        if granted.len() >= MAX_GRANTED_REPOSITORIES {
            return Err(Stop::new(
                Reason::TooManyDependencyRepositories,
                format!(
                    "chart {}: its dependencies name more than {MAX_GRANTED_REPOSITORIES} repositories (at {needed})",
                    chart.chart
                ),
            ));
        }
        granted.push(GrantedRepository {
            url: url.to_owned(),
            credentials: granted_credentials(secrets, url),
        });
    }
    Ok(())
}

fn list(needed: &[NeededRepository]) -> String {
    needed
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::secrets::{SecretType, labeled};
    use crate::render::remote::{AppRef, ChartSourceRef};

    fn project() -> Project {
        Project::new(
            "fenced",
            serde_json::from_value(serde_json::json!({
                "sourceRepos": ["https://a.example.com/charts", "https://b.example.com/charts",
                    "oci://registry.example.com/charts"]
            }))
            .unwrap(),
        )
    }

    fn secrets() -> ControllerSecrets {
        ControllerSecrets::fixed([
            labeled(
                "a",
                SecretType::Repository,
                &[
                    ("url", "https://a.example.com/charts"),
                    ("type", "helm"),
                    ("username", "alice"),
                    ("password", "a-secret"),
                ],
            ),
            labeled(
                "b",
                SecretType::Repository,
                &[
                    ("url", "https://b.example.com/charts"),
                    ("type", "helm"),
                    ("username", "bob"),
                    ("password", "b-secret"),
                ],
            ),
            labeled(
                "oci",
                SecretType::Repository,
                &[
                    ("url", "registry.example.com/charts"),
                    ("type", "helm"),
                    ("enableOCI", "true"),
                    ("username", "puller"),
                    ("password", "oci-secret"),
                ],
            ),
        ])
    }

    fn request() -> RenderRequest {
        RenderRequest {
            app: AppRef {
                repo_url: "https://a.example.com/charts".into(),
                ..AppRef::default()
            },
            revision: "1.2.*".into(),
            chain: Vec::new(),
            policies: Vec::new(),
            refresh: false,
            repository_credentials: None,
            registry_credentials: Vec::new(),
            ssh_known_hosts: None,
            chart: Some(ChartSourceRef {
                chart: "app".into(),
                oci: false,
                credentials: None,
                dependency_repositories: Some(Vec::new()),
            }),
            helm: None,
            scopes: None,
            cluster: None,
        }
    }

    fn needs(urls: &[&str]) -> Stop {
        let mut stop = Stop::new(Reason::DependencyRepositoriesNeeded, "needed");
        stop.repositories_needed = urls
            .iter()
            .enumerate()
            .map(|(i, url)| NeededRepository {
                chart: "app".into(),
                dependency: format!("d{i}"),
                url: (*url).into(),
            })
            .collect();
        stop
    }

    fn granted(request: &RenderRequest) -> Vec<(String, Option<String>)> {
        let chart = request.chart.as_ref().unwrap();
        chart
            .dependency_repositories
            .iter()
            .flatten()
            .map(|g| {
                let user = match &g.credentials {
                    Some(WireCredentials::Basic { username, .. }) => Some(username.clone()),
                    _ => None,
                };
                (g.url.clone(), user)
            })
            .collect()
    }

    #[test]
    fn each_named_repository_is_granted_with_its_own_credentials_only() {
        let mut request = request();
        grant(
            &project(),
            &secrets(),
            &mut request,
            needs(&[
                "https://b.example.com/charts/",
                "oci://registry.example.com/charts",
            ]),
            0,
        )
        .unwrap();
        assert_eq!(
            granted(&request),
            [
                ("https://b.example.com/charts".into(), Some("bob".into())),
                (
                    "oci://registry.example.com/charts".into(),
                    Some("puller".into())
                ),
            ]
        );
        // Another failure is recorded as it is.
        let other = Stop::new(Reason::ChartUnavailable, "401");
        assert_eq!(
            grant(&project(), &secrets(), &mut request, other.clone(), 1).unwrap_err(),
            other
        );
    }

    #[test]
    fn a_repository_outside_source_repos_is_refused_naming_chart_dependency_and_url() {
        let mut request = request();
        let stop = grant(
            &project(),
            &secrets(),
            &mut request,
            needs(&["https://evil.example.com/charts"]),
            0,
        )
        .unwrap_err();
        assert_eq!(
            stop.condition(),
            crate::condition::Condition::ProjectViolation
        );
        assert_eq!(stop.reason, Reason::DependencyRepositoryNotPermitted);
        assert!(
            stop.message
                .starts_with("app: dependency `d0` from https://evil.example.com/charts: "),
            "{}",
            stop.message
        );
        assert!(stop.message.contains("sourceRepos"), "{}", stop.message);
        assert!(granted(&request).is_empty());
    }

    #[test]
    fn rounds_and_repositories_are_bounded_and_a_repeated_ask_stops() {
        let open = Project::new(
            "open",
            serde_json::from_value(serde_json::json!({"sourceRepos": ["*"]})).unwrap(),
        );
        // Too many repositories.
        let urls: Vec<String> = (0..=MAX_GRANTED_REPOSITORIES)
            .map(|i| format!("https://r{i}.example.com/charts"))
            .collect();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let stop = grant(&open, &secrets(), &mut request(), needs(&urls), 0).unwrap_err();
        assert_eq!(stop.reason, Reason::TooManyDependencyRepositories, "{stop}");
        // Too many rounds.
        let stop = grant(
            &open,
            &secrets(),
            &mut request(),
            needs(&["https://b.example.com/charts"]),
            MAX_GRANT_ROUNDS - 1,
        )
        .unwrap_err();
        assert_eq!(stop.reason, Reason::TooManyDependencyRounds, "{stop}");
        // A server asking again for what it was granted.
        let mut request = request();
        let again = || needs(&["https://b.example.com/charts"]);
        grant(&open, &secrets(), &mut request, again(), 0).unwrap();
        let stop = grant(&open, &secrets(), &mut request, again(), 1).unwrap_err();
        assert_eq!(stop.reason, Reason::RenderServerFailed, "{stop}");
    }

    #[test]
    fn dependencies_sharing_a_repository_in_one_round_get_it_granted_once() {
        // An umbrella chart's postgresql and redis from one repository: the
        // server names the repository once per dependency.
        let mut request = request();
        grant(
            &project(),
            &secrets(),
            &mut request,
            needs(&[
                "https://b.example.com/charts",
                "https://b.example.com/charts/",
                "https://a.example.com/charts",
                "https://b.example.com/charts",
            ]),
            0,
        )
        .unwrap();
        assert_eq!(
            granted(&request),
            [
                ("https://b.example.com/charts".into(), Some("bob".into())),
                ("https://a.example.com/charts".into(), Some("alice".into())),
            ]
        );
        // Asked for again in a later round, it is still the server's fault.
        let stop = grant(
            &project(),
            &secrets(),
            &mut request,
            needs(&["https://b.example.com/charts"]),
            1,
        )
        .unwrap_err();
        assert_eq!(stop.reason, Reason::RenderServerFailed, "{stop}");
    }

    #[test]
    fn a_git_repositorys_credentials_are_never_granted_to_a_render_server() {
        let open = Project::new(
            "open",
            serde_json::from_value(serde_json::json!({"sourceRepos": ["*"]})).unwrap(),
        );
        let secrets = ControllerSecrets::fixed([
            // Git repositories (no `type: helm`): a repository, an
            // organisation's repo-creds, a registry path without a type.
            labeled(
                "git",
                SecretType::Repository,
                &[
                    ("url", "https://git.example.com/org/config"),
                    ("username", "ci"),
                    ("password", "git-pat"),
                ],
            ),
            labeled(
                "git-org",
                SecretType::RepoCreds,
                &[
                    ("url", "https://git.example.com/org"),
                    ("password", "org-pat"),
                ],
            ),
            labeled(
                "git-registry",
                SecretType::Repository,
                &[
                    ("url", "registry.example.com/git"),
                    ("password", "registry-pat"),
                ],
            ),
            // A Helm repo-creds covering a Git repository's URL.
            labeled(
                "charts",
                SecretType::RepoCreds,
                &[
                    ("url", "https://charts.example.com"),
                    ("type", "helm"),
                    ("username", "charts"),
                    ("password", "charts-secret"),
                ],
            ),
            labeled(
                "git-on-charts",
                SecretType::Repository,
                &[
                    ("url", "https://charts.example.com/team/config"),
                    ("type", "git"),
                    ("password", "team-pat"),
                ],
            ),
            // A Helm repository whose registry path lacks `enableOCI`.
            labeled(
                "not-oci",
                SecretType::Repository,
                &[
                    ("url", "registry.example.com/plain"),
                    ("type", "helm"),
                    ("password", "plain-secret"),
                ],
            ),
        ]);
        let mut request = request();
        grant(
            &open,
            &secrets,
            &mut request,
            needs(&[
                "https://git.example.com/org/config",
                "https://git.example.com/org/other/",
                "oci://registry.example.com/git",
                "https://charts.example.com/team/config",
                "oci://registry.example.com/plain",
                "https://charts.example.com/stable",
            ]),
            0,
        )
        .unwrap();
        assert_eq!(
            granted(&request),
            [
                ("https://git.example.com/org/config".into(), None),
                ("https://git.example.com/org/other".into(), None),
                ("oci://registry.example.com/git".into(), None),
                ("https://charts.example.com/team/config".into(), None),
                ("oci://registry.example.com/plain".into(), None),
                (
                    "https://charts.example.com/stable".into(),
                    Some("charts".into())
                ),
            ]
        );
    }
}
