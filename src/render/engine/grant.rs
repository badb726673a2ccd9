//! The Git credentials and SSH known hosts one render request brought,
//! for that request only.
//!
//! A render server holds no credentials of its own: each request carries
//! those of the repositories it names (the Application's, its policies'
//! sources'). [`Grant::scope`] runs the request's work with them as a
//! task-local value; [`Granted`], the provider the server's Git engine
//! asks, reads them from there. Nothing is stored in shared state, so two
//! requests in flight never see each other's credentials, and none
//! outlives its request.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use crate::render::remote::RenderRequest;
use crate::source::git::{CredentialProvider, Credentials, KnownHostsSource, RepoUrl};

tokio::task_local! {
    static GRANT: Arc<Grant>;
}

/// What one request may use.
#[derive(Debug, Default)]
pub struct Grant {
    /// Credentials by repository identity ([`RepoUrl::key`]: the spelling
    /// the Git engine fetches with may differ from the request's by a
    /// `.git` suffix, a user or a default port).
    repositories: HashMap<String, Credentials>,
    /// The SSH known hosts the request brought (`None`: trust on first
    /// use, as configured).
    known_hosts: Option<String>,
}

impl Grant {
    /// The grant of `request`: its repository's credentials, its policy
    /// sources' (a policy source that is the Application's repository
    /// shares its entry; the last one named wins) and its known hosts. A
    /// URL that does not parse grants nothing (the work refuses it by
    /// name).
    pub fn of(request: &RenderRequest) -> Self {
        let mut repositories = HashMap::new();
        let mut grant =
            |raw: &str, credentials: &Option<crate::render::remote::WireCredentials>| {
                if let (Ok(url), Some(credentials)) = (RepoUrl::parse(raw), credentials) {
                    repositories.insert(url.key().to_owned(), credentials.clone().into());
                }
            };
        grant(&request.app.repo_url, &request.repository_credentials);
        for source in request.policies.iter().filter_map(|p| p.source.as_ref()) {
            grant(&source.repo_url, &source.credentials);
        }
        Self {
            repositories,
            known_hosts: request.ssh_known_hosts.clone(),
        }
    }

    /// Runs `work` with this grant: what [`Granted`] answers inside it.
    pub async fn scope<F: Future>(self, work: F) -> F::Output {
        GRANT.scope(Arc::new(self), work).await
    }
}

/// The credentials and known hosts of the request being served (none
/// outside a [`Grant::scope`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Granted;

impl CredentialProvider for Granted {
    fn credentials(&self, url: &RepoUrl) -> Option<Credentials> {
        GRANT
            .try_with(|grant| grant.repositories.get(url.key()).cloned())
            .ok()
            .flatten()
    }
}

impl KnownHostsSource for Granted {
    fn known_hosts(&self) -> Option<String> {
        GRANT
            .try_with(|grant| grant.known_hosts.clone())
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(user: &str) -> Grant {
        let url = RepoUrl::parse("https://git.example.com/team/app.git").unwrap();
        Grant {
            repositories: HashMap::from([(
                url.key().to_owned(),
                Credentials::Basic {
                    username: user.into(),
                    password: crate::source::git::Secret::new(format!("{user}-secret")),
                },
            )]),
            known_hosts: Some(format!("{user}.example.com ssh-ed25519 AAAA")),
        }
    }

    fn user() -> Option<String> {
        let url = RepoUrl::parse("https://git.example.com/team/app.git").unwrap();
        match Granted.credentials(&url) {
            Some(Credentials::Basic { username, .. }) => Some(username),
            _ => None,
        }
    }

    #[tokio::test]
    async fn two_requests_in_flight_see_only_their_own_credentials() {
        let (bob_done, after_bob) = tokio::sync::oneshot::channel::<()>();
        let first = grant("alice").scope(async move {
            // Bob's request runs while Alice's is in flight.
            let _ = after_bob.await;
            (user(), Granted.known_hosts())
        });
        let second = grant("bob").scope(async move {
            let seen = (user(), Granted.known_hosts());
            let _ = bob_done.send(());
            seen
        });
        let (first, second) = tokio::join!(first, second);
        assert_eq!(first.0.as_deref(), Some("alice"));
        assert!(first.1.unwrap().starts_with("alice."));
        assert_eq!(second.0.as_deref(), Some("bob"));
        assert!(second.1.unwrap().starts_with("bob."));
    }

    #[tokio::test]
    async fn nothing_is_granted_outside_a_request_or_after_it() {
        assert_eq!(user(), None);
        assert_eq!(
            grant("alice").scope(async { user() }).await.as_deref(),
            Some("alice")
        );
        assert_eq!(user(), None);
        assert_eq!(Granted.known_hosts(), None);
    }

    #[tokio::test]
    async fn the_repository_is_found_by_identity_not_spelling() {
        use crate::render::remote::{AppRef, WireCredentials, WireSecret};
        // The request names the repository without `.git`; the Git engine
        // may fetch with another spelling of the same repository.
        let request = RenderRequest {
            app: AppRef {
                repo_url: "https://GIT.example.com:443/team/app".into(),
                ..AppRef::default()
            },
            revision: "main".into(),
            chain: Vec::new(),
            policies: Vec::new(),
            refresh: false,
            repository_credentials: Some(WireCredentials::Basic {
                username: "alice".into(),
                password: WireSecret("alice-secret".into()),
            }),
            registry_credentials: Vec::new(),
            ssh_known_hosts: None,
            chart: None,
            helm: None,
            scopes: None,
            cluster: None,
        };
        let seen = Grant::of(&request).scope(async { user() }).await;
        assert_eq!(seen.as_deref(), Some("alice"));
        let other = RepoUrl::parse("https://git.example.com/team/other.git").unwrap();
        let other = Grant::of(&request)
            .scope(async move { Granted.credentials(&other) })
            .await;
        assert!(other.is_none(), "another repository is granted nothing");
    }
}
