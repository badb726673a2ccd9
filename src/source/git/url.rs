//! Repository URLs, normalized so that one repository has one cache.

use std::fmt;

use crate::digest::Digest;

/// A repository URL in canonical form.
///
/// `https://GitHub.com/org/repo`, `https://github.com/org/repo.git/` and
/// `https://github.com:443/org/repo` are the same repository (one
/// [`key`](Self::key), one cache): scheme and host are lowercased, default
/// ports, empty path segments and trailing `/` dropped, percent-escapes
/// decoded, and the key ignores a trailing `.git`. scp-like
/// `git@host:org/repo` becomes `ssh://git@host/org/repo`. A path that
/// clients or servers could read differently (`.`/`..` segments, escaped
/// or back-slashed separators, `?`, `#`) is refused, so that the URL a
/// project admits and the one fetched are the same.
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

/// A URL taken apart and normalized: what [`RepoUrl`] and [`UrlPrefix`]
/// compare.
struct Parts {
    /// Lowercase.
    scheme: String,
    /// The user of an ssh URL.
    user: Option<String>,
    /// `host[:port]`, lowercase, without a default port.
    authority: String,
    /// `/`-separated segments, each starting with `/`; empty for no path.
    path: String,
}

impl Parts {
    fn parse(raw: &str) -> Result<Self, UrlError> {
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
        let path = std::str::from_utf8(&parsed.path).map_err(|_| fail("path is not UTF-8"))?;
        let path = normalize_path(path).map_err(fail)?;
        let authority = match port {
            Some(port) => format!("{host}:{port}"),
            None => host,
        };
        Ok(Parts {
            scheme,
            user: parsed.user().map(str::to_owned),
            authority,
            path,
        })
    }

    /// `scheme://authority` followed by `path`.
    fn with_path(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.authority)
    }
}

/// The path as every client and server will understand it, or why it is
/// refused. gix has decoded its escapes once; escapes still in it (a path
/// escaped twice, which a server may decode again) are decoded once more
/// when they stand for unreserved characters (`%2e` is `.`), refused when
/// they stand for separators, and otherwise kept in upper case. Empty
/// segments are dropped; `.` and `..` segments, backslashes, `?`, `#` and
/// control characters are refused (HTTP clients resolve or cut at them, so
/// the repository fetched would not be the one the project admitted).
fn normalize_path(raw: &str) -> Result<String, &'static str> {
    let mut decoded = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => {
                let hex: String = chars.by_ref().take(2).collect();
                let byte = u8::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 2)
                    .ok_or("malformed percent-escape in the path")?;
                match byte {
                    b'/' | b'\\' | 0 => {
                        return Err("escaped separators are not allowed in the path");
                    }
                    b if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => {
                        decoded.push(char::from(b));
                    }
                    b => decoded.push_str(&format!("%{b:02X}")),
                }
            }
            '\\' | '?' | '#' => {
                return Err("backslashes, `?` and `#` are not allowed in the path");
            }
            c if c.is_control() => return Err("control characters are not allowed in the path"),
            c => decoded.push(c),
        }
    }
    let mut path = String::with_capacity(decoded.len() + 1);
    for segment in decoded.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." {
            return Err("`.` and `..` segments are not allowed in the path");
        }
        path.push('/');
        path.push_str(segment);
    }
    Ok(path)
}

impl RepoUrl {
    /// Parses and normalizes a URL.
    pub fn parse(raw: &str) -> Result<Self, UrlError> {
        let parts = Parts::parse(raw)?;
        // The identity ignores a `.git` suffix; the connection keeps the path
        // as given (a file:// path or a server without suffix magic needs it).
        let identity_path = parts.path.strip_suffix(".git").unwrap_or(&parts.path);
        if identity_path.is_empty() || identity_path.ends_with('/') {
            return Err(UrlError {
                url: redact(raw),
                reason: "no repository path".into(),
            });
        }
        let key = parts.with_path(identity_path);
        let url = match (&parts.user, parts.scheme.as_str()) {
            (Some(user), "ssh") => format!("ssh://{user}@{}{}", parts.authority, parts.path),
            _ => parts.with_path(&parts.path),
        };
        Ok(RepoUrl { url, key })
    }

    /// Whether the repository is on the local filesystem (`file://` or a
    /// plain path).
    pub fn is_local(&self) -> bool {
        self.scheme() == "file"
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

/// A URL prefix, as `repo-creds` Secrets give: it covers the repositories
/// whose [`RepoUrl::key`] continues it at a path boundary.
/// `https://git.corp` covers `https://git.corp/team/app`, never
/// `https://git.corp.evil.com/x` nor `https://git.corp:8443/x`;
/// `https://git.corp/team` covers `https://git.corp/team/app`, never
/// `https://git.corp/team-b/app`. The prefix is normalized like a URL
/// (scheme and host lowercase, default port, user, `.git` suffix and
/// trailing `/` dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlPrefix {
    key: String,
}

impl UrlPrefix {
    /// Parses and normalizes a prefix.
    pub fn parse(raw: &str) -> Result<Self, UrlError> {
        let parts = Parts::parse(raw)?;
        let path = parts.path.strip_suffix(".git").unwrap_or(&parts.path);
        Ok(UrlPrefix {
            key: parts.with_path(path),
        })
    }

    /// Whether `url` is this prefix or lies under it.
    pub fn covers(&self, url: &RepoUrl) -> bool {
        url.key()
            .strip_prefix(&self.key)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// The normalized prefix; a longer one is more specific.
    pub fn as_str(&self) -> &str {
        &self.key
    }
}

/// A URL glob (an AppProject's `sourceRepos` entry) in the form of
/// [`RepoUrl::key`], so that it is matched against what is fetched:
/// scheme and host lowercase, user and default port dropped, trailing `/`
/// and `.git` dropped; scp-like `user@host:path` becomes `ssh://host/path`.
/// Anything that is not URL-shaped (`*`) is returned unchanged.
pub fn pattern_key(pattern: &str) -> String {
    let pattern = pattern.trim();
    let (scheme, rest) = match pattern.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest.to_owned()),
        None => match pattern.split_once(':') {
            Some((user_host, path))
                if user_host.contains('@')
                    && !user_host.contains('/')
                    && !path.starts_with("//") =>
            {
                ("ssh".to_owned(), format!("{user_host}/{path}"))
            }
            _ => return pattern.to_owned(),
        },
    };
    let (authority, path) = rest.split_once('/').unwrap_or((&rest, ""));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
        .to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => ":443",
        "http" => ":80",
        "git" => ":9418",
        "ssh" => ":22",
        _ => "",
    };
    let host = match host.strip_suffix(default_port) {
        Some(bare) if !default_port.is_empty() => bare.to_owned(),
        _ => host,
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    if path.is_empty() {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}/{path}")
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
        // Escapes are decoded: an escaped separator is a separator, and an
        // escaped dot segment or backslash is refused like a plain one, also
        // when escaped twice (a server may decode again).
        assert_eq!(
            RepoUrl::parse("https://git.example.com/team/a%40b")
                .unwrap()
                .key(),
            "https://git.example.com/team/a@b"
        );
        assert_eq!(
            RepoUrl::parse("https://git.example.com/team%2fa").unwrap(),
            RepoUrl::parse("https://git.example.com/team/a").unwrap()
        );
        for escaped in [
            "a%5Cb",
            "a%00b",
            "a%252F..%252Fb",
            "%252e%252e/b",
            "a%3Fb",
            "a%23b",
        ] {
            let raw = format!("https://git.example.com/team/{escaped}");
            assert!(RepoUrl::parse(&raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn prefixes_cover_at_a_path_boundary() {
        let covers = |prefix: &str, url: &str| {
            UrlPrefix::parse(prefix)
                .unwrap()
                .covers(&RepoUrl::parse(url).unwrap())
        };
        assert!(covers("https://git.corp", "https://git.corp/a/b"));
        assert!(covers("https://git.corp/", "https://git.corp/a/b"));
        assert!(covers("https://GIT.corp:443/a", "https://git.corp/a/b.git"));
        assert!(covers("https://git.corp/a/b.git", "https://git.corp/a/b"));
        assert!(!covers("https://git.corp", "https://git.corp.evil.com/a"));
        assert!(!covers("https://git.corp", "https://git.corp:8443/a"));
        assert!(!covers("https://git.corp/a", "https://git.corp/ab/c"));
        assert!(!covers("https://git.corp/a", "http://git.corp/a/c"));
        assert!(covers("git@git.corp:org", "ssh://git@git.corp/org/r"));
    }

    #[test]
    fn patterns_take_the_form_of_keys() {
        assert_eq!(
            pattern_key("HTTPS://Git.Example.com:443/team/*.git/"),
            "https://git.example.com/team/*"
        );
        assert_eq!(
            pattern_key("git@GitHub.com:org/*"),
            "ssh://github.com/org/*"
        );
        assert_eq!(pattern_key("*"), "*");
    }
}
