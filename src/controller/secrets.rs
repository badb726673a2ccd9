//! The Secrets the controller reads, in its own namespace, found by the
//! label `kiln.dev/secret-type` (the layout Argo CD users know):
//!
//! - `repository`: credentials for one repository (`url`, and `username` +
//!   `password`, or `sshPrivateKey`);
//! - `repo-creds`: the same for every repository under the URL prefix
//!   `url`, matched at a path boundary on normalized URLs
//!   (`https://git.corp` covers `https://git.corp/team/app`, never
//!   `https://git.corp.evil.com/x`; the longest prefix wins; an exact
//!   `repository` beats any);
//! - `cluster`: a destination cluster ([`super::destination`]);
//! - `registry`: OCI registry credentials for plugins, a
//!   `kubernetes.io/dockerconfigjson` Secret (key `.dockerconfigjson`).
//!
//! They are held by a reflector so that lookups are cheap and synchronous
//! (the Git engine asks for credentials on every fetch). Their values are
//! never logged: errors name the Secret and the key, never the content.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::api::SECRET_TYPE_LABEL;
use crate::source::git::{CredentialProvider, Credentials, RepoUrl, Secret, UrlPrefix};

/// What a labeled Secret is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretType {
    /// Credentials of one repository.
    Repository,
    /// Credentials of every repository under a URL prefix.
    RepoCreds,
    /// A destination cluster.
    Cluster,
    /// OCI registry credentials (`.dockerconfigjson`).
    Registry,
}

impl SecretType {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            SecretType::Repository => "repository",
            SecretType::RepoCreds => "repo-creds",
            SecretType::Cluster => "cluster",
            SecretType::Registry => "registry",
        }
    }
}

/// The controller's labeled Secrets, kept current by a watch.
#[derive(Clone)]
pub struct ControllerSecrets {
    store: Store<KubeSecret>,
    // Stops the watch when the last handle goes.
    _watch: Option<Arc<AbortOnDrop>>,
}

/// A reflector store holding `objects`, ready, that no watch updates (a
/// one-off read, tests).
pub(super) fn fixed_store<K>(objects: impl IntoIterator<Item = K>) -> Store<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    store
}

/// Aborts a watch task when dropped.
pub(super) struct AbortOnDrop(pub(super) tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for ControllerSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the contents.
        f.debug_struct("ControllerSecrets")
            .field("count", &self.store.state().len())
            .finish()
    }
}

impl ControllerSecrets {
    /// Watches the labeled Secrets of `namespace` (a background task that
    /// retries with backoff; it stops with the last clone).
    pub fn watch(client: kube::Client, namespace: &str) -> Self {
        let api: Api<KubeSecret> = Api::namespaced(client, namespace);
        let (store, writer) = reflector::store();
        let config = watcher::Config::default().labels(SECRET_TYPE_LABEL);
        let task = tokio::spawn(async move {
            watcher(api, config)
                .default_backoff()
                .reflect(writer)
                .for_each(|event| async move {
                    if let Err(error) = event {
                        tracing::warn!(%error, "watching the controller's Secrets");
                    }
                })
                .await;
        });
        Self {
            store,
            _watch: Some(Arc::new(AbortOnDrop(task.abort_handle()))),
        }
    }

    /// A fixed set (a one-off read, e.g. by the CLI).
    pub fn fixed(secrets: impl IntoIterator<Item = KubeSecret>) -> Self {
        Self {
            store: fixed_store(secrets),
            _watch: None,
        }
    }

    /// Reads the labeled Secrets of `namespace` once.
    pub async fn list(client: kube::Client, namespace: &str) -> Result<Self, kube::Error> {
        let api: Api<KubeSecret> = Api::namespaced(client, namespace);
        let list = api
            .list(&kube::api::ListParams::default().labels(SECRET_TYPE_LABEL))
            .await?;
        Ok(Self::fixed(list.items))
    }

    /// Waits until the first list has arrived (a reconcile before it would
    /// see no credentials and no clusters).
    pub async fn ready(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    /// The Secrets of one type, by name.
    pub fn of_type(&self, kind: SecretType) -> Vec<Arc<KubeSecret>> {
        let mut found: Vec<Arc<KubeSecret>> = self
            .store
            .state()
            .into_iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SECRET_TYPE_LABEL))
                    .is_some_and(|v| v == kind.label())
            })
            .collect();
        found.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        found
    }

    /// The repository credentials these Secrets hold, as the Git engine's
    /// provider.
    pub fn repo_credentials(&self) -> RepoCredentials {
        RepoCredentials {
            secrets: self.clone(),
        }
    }
}

/// A Secret's string value (`data`, base64-decoded by the client).
pub fn value(secret: &KubeSecret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .filter(|v| !v.is_empty())
}

/// The name of a Secret, for messages.
pub fn name(secret: &KubeSecret) -> &str {
    secret.metadata.name.as_deref().unwrap_or_default()
}

/// Repository credentials from `repository` and `repo-creds` Secrets.
#[derive(Clone, Debug)]
pub struct RepoCredentials {
    secrets: ControllerSecrets,
}

fn credentials_of(secret: &KubeSecret) -> Option<Credentials> {
    if let Some(key) = value(secret, "sshPrivateKey") {
        return Some(Credentials::SshKey {
            private_key: Secret::new(key),
        });
    }
    let password = value(secret, "password")?;
    Some(Credentials::Basic {
        username: value(secret, "username").unwrap_or_else(|| "git".into()),
        password: Secret::new(password),
    })
}

impl CredentialProvider for RepoCredentials {
    fn credentials(&self, url: &RepoUrl) -> Option<Credentials> {
        // An exact repository entry first, compared in normalized form. A
        // Helm repository's credentials are asked for by its index's URL
        // (`REPO/index.yaml`), and its Secret names `REPO` (which may have
        // no path).
        let helm_repo = url.key().strip_suffix("/index.yaml");
        for secret in self.secrets.of_type(SecretType::Repository) {
            let Some(repo) = value(&secret, "url") else {
                continue;
            };
            let exact = RepoUrl::parse(&repo).is_ok_and(|r| r.key() == url.key())
                || helm_repo.is_some_and(|helm_repo| {
                    UrlPrefix::parse(&repo).is_ok_and(|r| r.as_str() == helm_repo)
                });
            if exact {
                return credentials_of(&secret);
            }
        }
        // Then the longest prefix covering the URL at a path boundary.
        let mut best: Option<(usize, Credentials)> = None;
        for secret in self.secrets.of_type(SecretType::RepoCreds) {
            let Some(raw) = value(&secret, "url") else {
                continue;
            };
            let prefix = match UrlPrefix::parse(&raw) {
                Ok(prefix) => prefix,
                Err(error) => {
                    tracing::warn!(secret = name(&secret), %error, "repo-creds Secret ignored");
                    continue;
                }
            };
            let length = prefix.as_str().len();
            if prefix.covers(url)
                && best.as_ref().is_none_or(|(best, _)| length > *best)
                && let Some(credentials) = credentials_of(&secret)
            {
                best = Some((length, credentials));
            }
        }
        best.map(|(_, c)| c)
    }
}

/// A chart repository as its Secret describes it (Argo CD's layout: `url`,
/// `type: helm`, `enableOCI`, `username`, `password`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HelmRepository {
    /// `type: helm`: the Secret is meant for a chart repository (Helm or
    /// OCI); without it, Argo CD reads it as a Git repository's.
    pub helm: bool,
    /// `type: helm` and `enableOCI: "true"`: the URL, written without
    /// `oci://`, is an OCI registry path.
    pub enable_oci: bool,
    /// Its credentials, if it has some.
    pub credentials: Option<Credentials>,
}

/// A chart repository URL as Secrets and Applications write it, compared
/// without an `oci://` scheme, a trailing `/` or case in the host.
fn chart_repo_key(raw: &str) -> String {
    let raw = raw.trim().trim_end_matches('/');
    let raw = raw.strip_prefix("oci://").unwrap_or(raw);
    let (scheme, rest) = match raw.split_once("://") {
        Some((scheme, rest)) => (format!("{}://", scheme.to_ascii_lowercase()), rest),
        None => (String::new(), raw),
    };
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if path.is_empty() {
        format!("{scheme}{}", host.to_ascii_lowercase())
    } else {
        format!("{scheme}{}/{path}", host.to_ascii_lowercase())
    }
}

impl ControllerSecrets {
    /// The chart repository `repo` (`https://…`, `oci://…`, or an OCI
    /// registry path without scheme, as an Application's `repoURL` or a
    /// chart reference names it): the `repository` Secret whose `url` is
    /// that repository, else the `repo-creds` Secret with the longest `url`
    /// covering it at a path boundary. `None`: no Secret names it.
    pub fn helm_repository(&self, repo: &str) -> Option<HelmRepository> {
        let wanted = chart_repo_key(repo);
        let describe = |secret: &KubeSecret| HelmRepository {
            helm: is_helm(secret),
            enable_oci: is_helm(secret)
                && value(secret, "enableOCI").is_some_and(|v| v.eq_ignore_ascii_case("true")),
            credentials: credentials_of(secret),
        };
        for secret in self.of_type(SecretType::Repository) {
            if value(&secret, "url").is_some_and(|url| chart_repo_key(&url) == wanted) {
                return Some(describe(&secret));
            }
        }
        let mut best: Option<(usize, HelmRepository)> = None;
        for secret in self.of_type(SecretType::RepoCreds) {
            let Some(prefix) = value(&secret, "url").map(|url| chart_repo_key(&url)) else {
                continue;
            };
            let covers = wanted
                .strip_prefix(&prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
            if covers
                && best
                    .as_ref()
                    .is_none_or(|(length, _)| prefix.len() > *length)
            {
                best = Some((prefix.len(), describe(&secret)));
            }
        }
        best.map(|(_, repository)| repository)
    }

    /// Whether a `repository` Secret without `type: helm` (a Git
    /// repository's) names `repo` (compared as [`Self::helm_repository`]
    /// compares).
    pub fn is_git_repository(&self, repo: &str) -> bool {
        let wanted = chart_repo_key(repo);
        self.of_type(SecretType::Repository).iter().any(|secret| {
            !is_helm(secret)
                && value(secret, "url").is_some_and(|url| chart_repo_key(&url) == wanted)
        })
    }
}

/// Whether `secret` says `type: helm` (Argo CD's mark of a Helm or OCI
/// chart repository's Secret).
fn is_helm(secret: &KubeSecret) -> bool {
    value(secret, "type").is_some_and(|t| t.eq_ignore_ascii_case("helm"))
}

/// A labeled Secret for tests and examples: `data` from string pairs.
pub fn labeled(name: &str, kind: SecretType, data: &[(&str, &str)]) -> KubeSecret {
    let data: BTreeMap<String, k8s_openapi::ByteString> = data
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                k8s_openapi::ByteString(v.as_bytes().to_vec()),
            )
        })
        .collect();
    KubeSecret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                SECRET_TYPE_LABEL.to_owned(),
                kind.label().to_owned(),
            )])),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn password(c: Option<Credentials>) -> Option<String> {
        match c? {
            Credentials::Basic { password, .. } => Some(password.expose().to_owned()),
            _ => None,
        }
    }

    #[test]
    fn an_exact_repository_beats_the_longest_prefix_which_beats_a_shorter_one() {
        let secrets = ControllerSecrets::fixed([
            labeled(
                "org",
                SecretType::RepoCreds,
                &[("url", "https://git.example.com/org"), ("password", "org")],
            ),
            labeled(
                "team",
                SecretType::RepoCreds,
                &[
                    ("url", "https://git.example.com/org/team"),
                    ("password", "team"),
                ],
            ),
            labeled(
                "one",
                SecretType::Repository,
                &[
                    ("url", "https://git.example.com/org/team/one.git"),
                    ("password", "one"),
                ],
            ),
            labeled(
                "cluster",
                SecretType::Cluster,
                &[("url", "https://git.example.com/"), ("password", "no")],
            ),
        ]);
        let creds = secrets.repo_credentials();
        let url = |u: &str| RepoUrl::parse(u).unwrap();
        assert_eq!(
            password(creds.credentials(&url("https://git.example.com/org/team/one"))),
            Some("one".into())
        );
        assert_eq!(
            password(creds.credentials(&url("https://git.example.com/org/team/two"))),
            Some("team".into())
        );
        assert_eq!(
            password(creds.credentials(&url("https://git.example.com/org/other"))),
            Some("org".into())
        );
        assert_eq!(
            creds.credentials(&url("https://elsewhere.example.com/x")),
            None
        );
        assert!(!format!("{secrets:?}").contains("team"));
    }

    #[test]
    fn an_ssh_key_is_preferred_and_a_secret_without_credentials_gives_none() {
        let secrets = ControllerSecrets::fixed([
            labeled(
                "ssh",
                SecretType::Repository,
                &[
                    ("url", "ssh://git@git.example.com/a.git"),
                    ("sshPrivateKey", "KEY"),
                ],
            ),
            labeled(
                "empty",
                SecretType::Repository,
                &[("url", "https://git.example.com/b.git")],
            ),
        ]);
        let creds = secrets.repo_credentials();
        assert!(matches!(
            creds.credentials(&RepoUrl::parse("ssh://git@git.example.com/a.git").unwrap()),
            Some(Credentials::SshKey { .. })
        ));
        assert_eq!(
            creds.credentials(&RepoUrl::parse("https://git.example.com/b.git").unwrap()),
            None
        );
    }

    #[test]
    fn a_prefix_matches_only_at_a_path_boundary() {
        let secrets = ControllerSecrets::fixed([
            labeled(
                "corp",
                SecretType::RepoCreds,
                &[("url", "https://git.corp"), ("password", "corp")],
            ),
            labeled(
                "team",
                SecretType::RepoCreds,
                &[("url", "https://git.corp/team"), ("password", "team")],
            ),
        ]);
        let creds = secrets.repo_credentials();
        let found = |u: &str| password(creds.credentials(&RepoUrl::parse(u).unwrap()));
        // Another host that merely starts with the same letters.
        assert_eq!(found("https://git.corp.evil.com/team/x"), None);
        assert_eq!(found("https://git.corp:8443/team/x"), None);
        // Another path that merely starts with the same letters.
        assert_eq!(found("https://git.corp/team-evil/x"), Some("corp".into()));
        assert_eq!(found("https://git.corp/team/x.git"), Some("team".into()));
        // Prefixes are normalized like URLs.
        assert_eq!(found("HTTPS://GIT.CORP:443/team/x"), Some("team".into()));
    }

    #[test]
    fn a_helm_oci_repository_is_named_by_its_secret_in_argo_cds_form() {
        let secrets = ControllerSecrets::fixed([
            labeled(
                "oci",
                SecretType::Repository,
                &[
                    ("url", "Registry.example.com/charts/"),
                    ("type", "helm"),
                    ("enableOCI", "true"),
                    ("username", "puller"),
                    ("password", "oci"),
                ],
            ),
            labeled(
                "not-oci",
                SecretType::Repository,
                &[("url", "registry.example.com/plain"), ("type", "helm")],
            ),
            labeled(
                "org",
                SecretType::RepoCreds,
                &[
                    ("url", "oci://registry.example.com/org"),
                    ("type", "helm"),
                    ("enableOCI", "true"),
                    ("password", "org"),
                ],
            ),
        ]);
        let found = |u: &str| secrets.helm_repository(u);
        let oci = found("registry.example.com/charts").unwrap();
        assert!(oci.enable_oci);
        assert_eq!(password(oci.credentials), Some("oci".into()));
        assert_eq!(
            found("oci://registry.example.com/charts"),
            found("registry.example.com/charts")
        );
        let plain = found("registry.example.com/plain").unwrap();
        assert!(!plain.enable_oci, "enableOCI is required");
        assert!(plain.credentials.is_none());
        let org = found("registry.example.com/org/team").unwrap();
        assert!(org.enable_oci);
        assert_eq!(password(org.credentials), Some("org".into()));
        // Neither another path that starts with the same letters nor
        // another host.
        assert_eq!(found("registry.example.com/organic"), None);
        assert_eq!(found("registry.example.com.evil/charts"), None);
        assert_eq!(found("https://registry.example.com/charts"), None);
    }
}
