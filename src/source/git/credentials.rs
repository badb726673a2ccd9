//! Repository credentials: supplied by a provider, never logged, never part
//! of an error, never visible to a plugin.

use std::fmt;

use super::{RepoUrl, UrlPrefix};

/// A secret string. Its `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself: only for handing it to a transport.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How to authenticate to a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Credentials {
    /// HTTP(S) basic authentication; a token goes in `password`.
    Basic {
        /// User name (for token auth, anything the server accepts).
        username: String,
        /// Password or token.
        password: Secret,
    },
    /// An SSH private key (OpenSSH format), for `ssh://` and scp-like URLs.
    SshKey {
        /// The private key, PEM/OpenSSH text.
        private_key: Secret,
    },
}

/// Finds the credentials for a repository. The controller backs this with
/// Kubernetes Secrets matched by URL prefix, like Argo CD's repository
/// credentials; the CLI with environment or files.
pub trait CredentialProvider: Send + Sync + fmt::Debug {
    /// The credentials for `url`, if any.
    fn credentials(&self, url: &RepoUrl) -> Option<Credentials>;
}

/// No credentials for anything: public repositories only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCredentials;

impl CredentialProvider for NoCredentials {
    fn credentials(&self, _url: &RepoUrl) -> Option<Credentials> {
        None
    }
}

/// Credentials matched by URL prefix at a path boundary ([`UrlPrefix`]);
/// the longest matching prefix wins.
#[derive(Debug, Clone, Default)]
pub struct PrefixCredentials {
    entries: Vec<(UrlPrefix, Credentials)>,
}

impl PrefixCredentials {
    /// No entries.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds credentials for every URL under `prefix`. A prefix that is not
    /// a URL covers nothing (and is logged).
    pub fn with(mut self, prefix: impl AsRef<str>, credentials: Credentials) -> Self {
        match UrlPrefix::parse(prefix.as_ref()) {
            Ok(prefix) => self.entries.push((prefix, credentials)),
            Err(error) => tracing::warn!(%error, "credentials for an invalid URL prefix ignored"),
        }
        self
    }
}

impl CredentialProvider for PrefixCredentials {
    fn credentials(&self, url: &RepoUrl) -> Option<Credentials> {
        self.entries
            .iter()
            .filter(|(prefix, _)| prefix.covers(url))
            .max_by_key(|(prefix, _)| prefix.as_str().len())
            .map(|(_, c)| c.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let c = Credentials::Basic {
            username: "bob".into(),
            password: Secret::new("hunter2"),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn longest_prefix_wins() {
        let basic = |p: &str| Credentials::Basic {
            username: p.into(),
            password: Secret::new("x"),
        };
        let provider = PrefixCredentials::new()
            .with("https://git.example.com/", basic("org-wide"))
            .with("https://git.example.com/team/", basic("team"));
        let user = |u: &str| match provider.credentials(&RepoUrl::parse(u).unwrap()) {
            Some(Credentials::Basic { username, .. }) => Some(username),
            _ => None,
        };
        assert_eq!(
            user("https://git.example.com/team/app.git").as_deref(),
            Some("team")
        );
        assert_eq!(
            user("https://git.example.com/other").as_deref(),
            Some("org-wide")
        );
        assert_eq!(user("https://elsewhere.com/team/app"), None);
    }

    #[test]
    fn a_prefix_matches_only_at_a_path_boundary() {
        let provider = PrefixCredentials::new().with(
            "https://git.corp",
            Credentials::Basic {
                username: "corp".into(),
                password: Secret::new("x"),
            },
        );
        let found = |u: &str| provider.credentials(&RepoUrl::parse(u).unwrap());
        assert!(found("https://git.corp.evil.com/x").is_none());
        assert!(found("https://git.corp/x").is_some());
    }
}
