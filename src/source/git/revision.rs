//! `targetRevision`: what it may be, and resolving it against a ref
//! advertisement.

use std::collections::BTreeMap;
use std::fmt;

use super::CommitId;

/// A target revision, parsed once at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Revision {
    /// The remote's `HEAD` (also: empty).
    Head,
    /// A full commit id: needs no ref lookup.
    Commit(CommitId),
    /// A branch or tag, short (`main`, `v1.2.0`) or full (`refs/heads/main`).
    Ref(String),
    /// A semver constraint over tags (`v1.2.*`, `>=1.0.0 <2.0.0`); the
    /// highest matching tag wins. Tags may carry a leading `v`.
    Semver(semver::VersionReq),
}

impl Revision {
    /// Parses a `targetRevision`.
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if text.is_empty() || text == "HEAD" {
            return Revision::Head;
        }
        if let Ok(id) = text.parse::<CommitId>() {
            return Revision::Commit(id);
        }
        let looks_like_constraint = text.contains(['*', '>', '<', '=', '~', '^', ' ', ','])
            || text.split('.').any(|p| p == "x" || p == "X");
        if looks_like_constraint {
            let normalized = normalize_constraint(text);
            if let Ok(req) = semver::VersionReq::parse(&normalized) {
                return Revision::Semver(req);
            }
        }
        Revision::Ref(text.to_owned())
    }
}

/// `v1.2.*` → `1.2.*`; `>=1.0.0 <2.0.0` → `>=1.0.0, <2.0.0` (the semver
/// crate wants commas between comparators).
fn normalize_constraint(text: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut pending_op = String::new();
    for token in text.split([' ', ',']).filter(|t| !t.is_empty()) {
        if token.chars().all(|c| "<>=~^".contains(c)) {
            pending_op.push_str(token);
            continue;
        }
        let split = token
            .find(|c: char| !"<>=~^".contains(c))
            .unwrap_or(token.len());
        let (op, version) = token.split_at(split);
        let version = version.strip_prefix(['v', 'V']).unwrap_or(version);
        parts.push(format!("{pending_op}{op}{version}"));
        pending_op.clear();
    }
    parts.join(", ")
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Revision::Head => f.write_str("HEAD"),
            Revision::Commit(id) => write!(f, "{id}"),
            Revision::Ref(name) => f.write_str(name),
            Revision::Semver(req) => write!(f, "{req}"),
        }
    }
}

/// One advertised ref: what it points at, peeled to a commit for annotated
/// tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdvertisedRef {
    /// The object the ref names (a tag object for annotated tags).
    pub target: CommitId,
    /// The commit an annotated tag points at, if it is one.
    pub peeled: Option<CommitId>,
}

impl AdvertisedRef {
    /// The commit this ref resolves to.
    pub fn commit(&self) -> CommitId {
        self.peeled.unwrap_or(self.target)
    }
}

/// A remote's refs, as a ref advertisement gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefList {
    /// Full ref name (`HEAD`, `refs/heads/main`, `refs/tags/v1`) → target.
    pub refs: BTreeMap<String, AdvertisedRef>,
}

/// A revision that names nothing on the remote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("revision `{revision}` not found{hint}")]
pub struct NotFound {
    revision: String,
    hint: String,
}

impl RefList {
    /// Resolves a revision as `git rev-parse` would in a fresh clone: full
    /// ref names first, then tags, then branches (git prefers a tag over a
    /// branch of the same name). `Commit` resolves to itself.
    pub fn resolve(&self, revision: &Revision) -> Result<CommitId, NotFound> {
        let not_found = |hint: &str| NotFound {
            revision: revision.to_string(),
            hint: hint.to_owned(),
        };
        match revision {
            Revision::Commit(id) => Ok(*id),
            Revision::Head => self
                .refs
                .get("HEAD")
                .map(AdvertisedRef::commit)
                .ok_or_else(|| not_found(": the remote has no HEAD (empty repository?)")),
            Revision::Ref(name) => [name.clone(), format!("refs/tags/{name}"), format!("refs/heads/{name}")]
                .iter()
                .find_map(|candidate| self.refs.get(candidate))
                .map(AdvertisedRef::commit)
                .ok_or_else(|| {
                    if name.len() >= 7 && name.len() < 40 && name.chars().all(|c| c.is_ascii_hexdigit()) {
                        not_found(": abbreviated commit ids cannot be resolved remotely; use the full 40-digit id")
                    } else {
                        not_found(" as a branch or tag")
                    }
                }),
            Revision::Semver(req) => self
                .refs
                .iter()
                .filter_map(|(name, r)| {
                    let tag = name.strip_prefix("refs/tags/")?;
                    let version = semver::Version::parse(tag.strip_prefix(['v', 'V']).unwrap_or(tag)).ok()?;
                    req.matches(&version).then_some((version, r.commit()))
                })
                .max_by(|a, b| a.0.cmp(&b.0))
                .map(|(_, commit)| commit)
                .ok_or_else(|| not_found(": no tag matches the constraint")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> CommitId {
        CommitId::from_bytes([n; 20])
    }

    fn list() -> RefList {
        let mut refs = BTreeMap::new();
        let mut add = |name: &str, target, peeled| {
            refs.insert(name.to_owned(), AdvertisedRef { target, peeled });
        };
        add("HEAD", id(1), None);
        add("refs/heads/main", id(1), None);
        add("refs/heads/dev", id(2), None);
        add("refs/heads/v1.0.0", id(9), None);
        add("refs/tags/v1.0.0", id(10), Some(id(3)));
        add("refs/tags/v1.2.3", id(4), None);
        add("refs/tags/1.2.9", id(5), None);
        add("refs/tags/v2.0.0", id(6), None);
        add("refs/tags/v2.1.0-rc.1", id(7), None);
        RefList { refs }
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(Revision::parse(""), Revision::Head);
        assert_eq!(Revision::parse("HEAD"), Revision::Head);
        assert_eq!(
            Revision::parse(&"ab".repeat(20)),
            Revision::Commit(CommitId::from_bytes([0xab; 20]))
        );
        assert_eq!(Revision::parse("main"), Revision::Ref("main".into()));
        assert_eq!(Revision::parse("v1.2.0"), Revision::Ref("v1.2.0".into()));
        assert!(matches!(Revision::parse("v1.2.*"), Revision::Semver(_)));
        assert!(matches!(
            Revision::parse(">=1.0.0 <2.0.0"),
            Revision::Semver(_)
        ));
    }

    #[test]
    fn resolves_like_git() {
        let l = list();
        let r = |s: &str| l.resolve(&Revision::parse(s));
        assert_eq!(r("HEAD").unwrap(), id(1));
        assert_eq!(r("dev").unwrap(), id(2));
        assert_eq!(r("refs/heads/dev").unwrap(), id(2));
        assert_eq!(
            r("v1.0.0").unwrap(),
            id(3),
            "annotated tag peeled; tag wins over a branch of the same name"
        );
        assert_eq!(r("refs/heads/v1.0.0").unwrap(), id(9));
        assert_eq!(
            r("v1.2.*").unwrap(),
            id(5),
            "highest match, with or without the v prefix"
        );
        assert_eq!(r(">=1.0.0 <2.0.0").unwrap(), id(5));
        assert_eq!(
            r(">=2.0.0").unwrap(),
            id(6),
            "pre-releases only when asked for"
        );
        assert!(
            r("nope")
                .unwrap_err()
                .to_string()
                .contains("`nope` not found as a branch or tag")
        );
        assert!(
            r("abc1234")
                .unwrap_err()
                .to_string()
                .contains("full 40-digit id")
        );
        assert!(r("v9.*").is_err());
    }
}
