//! Repository URLs, normalized so that one repository has one cache.

use std::fmt;

use crate::digest::Digest;

/// A repository URL in canonical form.
///
/// `https://GitHub.com/org/repo`, `https://github.com/org/repo.git/` and
/// `https://github.com:443/org/repo` are the same repository (one
/// [`key`](Self::key), one cache): scheme and host are lowercased, default
/// ports and trailing `/` dropped, and the key ignores a trailing `.git`. scp-like `git@host:org/repo` becomes `ssh://git@host/org/repo`.
/// Credentials embedded in a URL are refused: they would end up in logs and
/// status fields; they come from a [`CredentialProvider`](super::CredentialProvider).
#[derive(Clone)]
pub struct RepoUrl {
    /// What the transport connects to (keeps a ssh user).
    url: String,
    /// The identity: `scheme://host[:port]/path`, without any user.
    key: String,
}

/// A URL Kiln cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("repository URL `{url}`: {reason}")]
pub struct UrlError {
    url: String,
    reason: String,
}

impl RepoUrl {
    /// Parses and normalizes a URL.
    pub fn parse(raw: &str) -> Result<Self, UrlError> {
        let fail = |reason: &str| UrlError {
            url: redact(raw),
            reason: reason.to_owned(),
        };
        let parsed = gix::Url::from_bytes(raw.trim().into()).map_err(|e| fail(&e.to_string()))?;
        if parsed.password().is_some() {
            return Err(fail(
                "credentials must not be part of the URL; configure them as repository credentials",
            ));
        }
        let scheme = parsed.scheme.as_str().to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "https" => Some(443),
            "http" => Some(80),
            "git" => Some(9418),
            "ssh" => Some(22),
            "file" => None,
            other => {
                return Err(fail(&format!(
                    "unsupported scheme `{other}` (https, http, ssh, git, file)"
                )));
            }
        };
        let host = parsed.host().unwrap_or_default().to_ascii_lowercase();
        if scheme != "file" && host.is_empty() {
            return Err(fail("no host"));
        }
        let port = parsed.port.filter(|p| Some(*p) != default_port);
        let mut path =
            String::from_utf8(parsed.path.to_vec()).map_err(|_| fail("path is not UTF-8"))?;
        while path.ends_with('/') {
            path.pop();
        }
        if !path.starts_with('/') {
            path.insert(0, '/');
        }
        // The identity ignores a `.git` suffix; the connection keeps the path
        // as given (a file:// path or a server without suffix magic needs it).
        let identity_path = path.strip_suffix(".git").unwrap_or(&path).to_owned();
        if identity_path == "/" || identity_path.is_empty() {
            return Err(fail("no repository path"));
        }
        let authority = match port {
            Some(port) => format!("{host}:{port}"),
            None => host,
        };
        let key = format!("{scheme}://{authority}{identity_path}");
        let url = match (parsed.user(), scheme.as_str()) {
            (Some(user), "ssh") => format!("ssh://{user}@{authority}{path}"),
            _ => format!("{scheme}://{authority}{path}"),
        };
        Ok(RepoUrl { url, key })
    }

    /// The URL to connect to.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The repository's identity (no user, no default port).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The scheme, lowercase.
    pub fn scheme(&self) -> &str {
        self.key.split("://").next().unwrap_or_default()
    }

    /// A directory name for this repository's cache: readable, unique, safe.
    pub fn cache_dir_name(&self) -> String {
        let tail: String = self
            .key
            .rsplit('/')
            .next()
            .unwrap_or("repo")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        format!("{tail}-{}", &Digest::of(self.key.as_bytes()).hex()[..16])
    }
}

/// Hides a password that somebody put in a URL, for error messages.
fn redact(raw: &str) -> String {
    match (raw.find("://"), raw.find('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &raw[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &raw[..scheme_end + 3], &raw[at..]),
                None => raw.to_owned(),
            }
        }
        _ => raw.to_owned(),
    }
}

// One repository, one identity: equality, hashing and order use the key.
impl PartialEq for RepoUrl {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for RepoUrl {}

impl std::hash::Hash for RepoUrl {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl PartialOrd for RepoUrl {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RepoUrl {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

impl fmt::Display for RepoUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

impl fmt::Debug for RepoUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.url)
    }
}

impl std::str::FromStr for RepoUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RepoUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_repository_share_a_key() {
        let a = RepoUrl::parse("https://GitHub.com/org/repo").unwrap();
        for other in [
            "https://github.com/org/repo.git/",
            "https://github.com:443/org/repo.git",
            "HTTPS://GITHUB.COM/org/repo/",
        ] {
            let b = RepoUrl::parse(other).unwrap();
            assert_eq!(a, b, "{other}");
            assert_eq!(a.cache_dir_name(), b.cache_dir_name());
        }
        assert_ne!(
            a,
            RepoUrl::parse("https://github.com/org/Repo").unwrap(),
            "paths are case-sensitive"
        );
        assert_eq!(a.cache_dir_name().len(), "repo-".len() + 16);
    }

    #[test]
    fn scp_like_and_other_schemes() {
        let ssh = RepoUrl::parse("git@example.com:org/repo.git").unwrap();
        assert_eq!(ssh.as_str(), "ssh://git@example.com/org/repo.git");
        assert_eq!(ssh.key(), "ssh://example.com/org/repo");
        assert_eq!(
            RepoUrl::parse("git://127.0.0.1:9418/r").unwrap().as_str(),
            "git://127.0.0.1/r"
        );
        assert_eq!(
            RepoUrl::parse("file:///srv/git/r.git/").unwrap().as_str(),
            "file:///srv/git/r.git"
        );
        assert_eq!(
            RepoUrl::parse("file:///srv/git/r.git").unwrap().key(),
            "file:///srv/git/r"
        );
        assert!(RepoUrl::parse("ftp://h/r").is_err());
    }

    #[test]
    fn credentials_in_urls_are_refused_and_never_echoed() {
        let err = RepoUrl::parse("https://bob:hunter2@example.com/r")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("bob:***@example.com"), "{err}");
    }

    #[test]
    fn dot_segments_and_their_encodings_are_refused() {
        for raw in [
            "https://git.example.com/team/../evil/repo",
            "https://git.example.com/team/./repo",
            "https://git.example.com/team/%2e%2e/evil/repo",
            "https://git.example.com/team/%2E./evil/repo",
            "https://git.example.com/team\\..\\evil/repo",
            "https://git.example.com/team/repo?/../../evil",
            "https://git.example.com/team/repo#x",
            "ssh://git@git.example.com/team/../evil/repo.git",
            "file:///srv/git/team/../evil",
        ] {
            let err = RepoUrl::parse(raw).expect_err(raw).to_string();
            assert!(err.contains("repository URL"), "{raw}: {err}");
        }
    }

    #[test]
    fn safe_escapes_are_decoded_and_empty_segments_dropped() {
        let a = RepoUrl::parse("https://git.example.com/team/%72epo").unwrap();
        let b = RepoUrl::parse("https://git.example.com//team///repo.git").unwrap();
        assert_eq!(a.key(), "https://git.example.com/team/repo");
        assert_eq!(a, b);
        // What is fetched is what is matched.
        assert_eq!(b.as_str(), "https://git.example.com/team/repo.git");
        // A reserved character stays escaped (normalized to upper case);
        // an escaped separator is refused (a server may decode it).
        assert_eq!(
            RepoUrl::parse("https://git.example.com/team/a%40b")
                .unwrap()
                .key(),
            "https://git.example.com/team/a%40b"
        );
        for separator in ["a%2fb", "a%5Cb", "a%00b"] {
            let raw = format!("https://git.example.com/team/{separator}");
            assert!(RepoUrl::parse(&raw).is_err(), "{raw}");
        }
    }
}
