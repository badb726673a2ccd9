//! A Helm repository's `index.yaml`, and choosing a chart version from it
//! with Helm's semver constraints.
//!
//! Helm resolves a version with Masterminds/semver v3, whose constraints
//! differ from Cargo's (the `semver` crate's `VersionReq`): a bare `1.2`
//! means `1.2.x` (not `^1.2`), `>1.2` means above every `1.2.x`, `<=1.2`
//! includes every `1.2.x`, comparators are separated by spaces or commas,
//! `||` separates alternatives, `1.2 - 1.4` is a range, and a pre-release
//! version matches a comparator only if that comparator names a
//! pre-release itself. [`Constraint`] implements those rules over
//! [`semver::Version`]s.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use semver::{Prerelease, Version};

/// Default cap on an `index.yaml`: 64 MiB (the largest public indexes are
/// a few tens of MiB).
pub const DEFAULT_MAX_INDEX: u64 = 64 << 20;

/// An `index.yaml` could not be used, or has no matching version. Each
/// names the repository.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The index is not YAML of the expected shape.
    #[error("{repo}/index.yaml: {message}")]
    Invalid {
        /// The repository URL.
        repo: String,
        /// What is wrong.
        message: String,
    },
    /// The chart is not in the index.
    #[error("{repo}: no chart named `{chart}` in index.yaml")]
    NoChart {
        /// The repository URL.
        repo: String,
        /// The chart.
        chart: String,
    },
    /// No version of the chart matches.
    #[error("{repo}: chart `{chart}` has no version matching `{constraint}`")]
    NoVersion {
        /// The repository URL.
        repo: String,
        /// The chart.
        chart: String,
        /// The constraint.
        constraint: String,
    },
    /// The constraint does not parse.
    #[error("`{constraint}` is not a version or semver constraint: {message}")]
    Constraint {
        /// The constraint.
        constraint: String,
        /// What is wrong.
        message: String,
    },
}

/// One version of a chart, as an index lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ChartVersion {
    /// The chart's name.
    #[serde(default)]
    pub name: String,
    /// Its version, as written.
    pub version: String,
    /// Where its archive is: absolute, or relative to the repository URL.
    #[serde(default)]
    pub urls: Vec<String>,
    /// The archive's SHA-256, hex (with or without `sha256:`).
    #[serde(default)]
    pub digest: Option<String>,
    /// When the version was packaged (RFC 3339), as the index says; a
    /// value that is not a string is ignored.
    #[serde(default, deserialize_with = "text_or_nothing")]
    pub created: Option<String>,
}

fn text_or_nothing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = <serde_yaml::Value as serde::Deserialize>::deserialize(d)?;
    Ok(match value {
        serde_yaml::Value::String(s) => Some(s),
        _ => None,
    })
}

/// A parsed `index.yaml`: chart name → versions.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Index {
    /// The charts.
    #[serde(default)]
    pub entries: BTreeMap<String, Vec<ChartVersion>>,
}

impl Index {
    /// Parses an index (already capped in size by the download), bounding
    /// alias expansion first.
    pub fn parse(text: &[u8], repo: &str) -> Result<Self, IndexError> {
        let invalid = |message: String| IndexError::Invalid {
            repo: repo.to_owned(),
            message,
        };
        let text = std::str::from_utf8(text).map_err(|e| invalid(e.to_string()))?;
        kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
            .map_err(|e| invalid(e.to_string()))?;
        serde_yaml::from_str(text).map_err(|e| invalid(e.to_string()))
    }

    /// The version of `chart` Helm would pick for `constraint`: an exact
    /// match of the text first, else the highest version matching it (an
    /// empty constraint: the highest release, no pre-release).
    pub fn resolve(
        &self,
        repo: &str,
        chart: &str,
        constraint: &str,
    ) -> Result<&ChartVersion, IndexError> {
        let versions = self.entries.get(chart).ok_or_else(|| IndexError::NoChart {
            repo: repo.to_owned(),
            chart: chart.to_owned(),
        })?;
        let constraint = constraint.trim();
        if !constraint.is_empty()
            && let Some(exact) = versions.iter().find(|v| v.version == constraint)
        {
            return Ok(exact);
        }
        let parsed = Constraint::parse(if constraint.is_empty() {
            "*"
        } else {
            constraint
        })?;
        versions
            .iter()
            .filter_map(|v| Some((parse_version(&v.version)?, v)))
            .filter(|(version, _)| parsed.matches(version))
            .max_by(|a, b| precedence(&a.0, &b.0))
            .map(|(_, v)| v)
            .ok_or_else(|| IndexError::NoVersion {
                repo: repo.to_owned(),
                chart: chart.to_owned(),
                constraint: constraint.to_owned(),
            })
    }
}

/// Semver precedence (build metadata ignored).
fn precedence(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre))
}

/// Parses a version as Masterminds' `NewVersion` does: an optional `v`, one
/// to three numbers (missing ones are 0), then pre-release and build.
pub fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim();
    let text = text.strip_prefix(['v', 'V']).unwrap_or(text);
    let end = text.find(['-', '+']).unwrap_or(text.len());
    let (core, rest) = text.split_at(end);
    let numbers: Vec<&str> = core.split('.').collect();
    if numbers.is_empty()
        || numbers.len() > 3
        || numbers
            .iter()
            .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let mut padded: Vec<String> = numbers
        .iter()
        .map(|n| n.parse::<u64>().ok().map(|n| n.to_string()))
        .collect::<Option<_>>()?;
    padded.resize(3, "0".to_owned());
    Version::parse(&format!("{}{rest}", padded.join("."))).ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Tilde,
    Caret,
}

/// One comparator: an operator and a possibly partial version (`1.2`,
/// `1.x`, `*`): `given` counts the numbers written (0 to 3).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
    given: u8,
}

impl Comparator {
    fn parse(op: &str, text: &str, whole: &str) -> Result<Self, IndexError> {
        let bad = |message: &str| IndexError::Constraint {
            constraint: whole.to_owned(),
            message: message.to_owned(),
        };
        let op = match op {
            "" | "=" | "==" => Op::Eq,
            "!=" => Op::Ne,
            ">" => Op::Gt,
            ">=" | "=>" => Op::Ge,
            "<" => Op::Lt,
            "<=" | "=<" => Op::Le,
            "~" | "~>" => Op::Tilde,
            "^" => Op::Caret,
            other => return Err(bad(&format!("unknown operator `{other}`"))),
        };
        let text = text.strip_prefix(['v', 'V']).unwrap_or(text);
        let end = text.find(['-', '+']).unwrap_or(text.len());
        let (core, rest) = text.split_at(end);
        let mut numbers = Vec::new();
        for part in core.split('.') {
            if matches!(part, "*" | "x" | "X") {
                break;
            }
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(&format!("`{text}` is not a version")));
            }
            numbers.push(part.parse::<u64>().map_err(|_| bad("number too large"))?);
        }
        if numbers.len() > 3 || core.split('.').count() > 3 {
            return Err(bad(&format!("`{text}` has more than three numbers")));
        }
        let given = numbers.len() as u8;
        numbers.resize(3, 0);
        let version = Version::parse(&format!(
            "{}.{}.{}{rest}",
            numbers[0], numbers[1], numbers[2]
        ))
        .map_err(|e| bad(&e.to_string()))?;
        Ok(Comparator { op, version, given })
    }

    /// The lowest version above the range a partial version names
    /// (`1.2` → `1.3.0-0`, `1` → `2.0.0-0`); `None` for `*`.
    fn wildcard_end(&self) -> Option<Version> {
        let v = &self.version;
        let mut end = match self.given {
            0 => return None,
            1 => Version::new(v.major + 1, 0, 0),
            2 => Version::new(v.major, v.minor + 1, 0),
            _ => Version::new(v.major, v.minor, v.patch + 1),
        };
        end.pre = Prerelease::new("0").expect("valid");
        Some(end)
    }

    fn matches(&self, v: &Version) -> bool {
        // Masterminds v3: a pre-release only matches a comparator that
        // names one.
        if !v.pre.is_empty() && self.version.pre.is_empty() {
            return false;
        }
        let c = &self.version;
        let cmp = precedence(v, c);
        let below_end =
            |end: Option<Version>| end.is_none_or(|end| precedence(v, &end) == Ordering::Less);
        let exact = self.given == 3;
        match self.op {
            Op::Eq if exact => cmp == Ordering::Equal,
            Op::Eq => cmp != Ordering::Less && below_end(self.wildcard_end()),
            Op::Ne if exact => cmp != Ordering::Equal,
            Op::Ne => !(cmp != Ordering::Less && below_end(self.wildcard_end())),
            Op::Gt if exact => cmp == Ordering::Greater,
            Op::Gt => self
                .wildcard_end()
                .is_some_and(|end| precedence(v, &end) != Ordering::Less),
            Op::Ge => cmp != Ordering::Less,
            Op::Lt => cmp == Ordering::Less,
            Op::Le if exact => cmp != Ordering::Greater,
            Op::Le => below_end(self.wildcard_end()),
            Op::Tilde => {
                // ~1.2.3 and ~1.2: <1.3.0; ~1: <2.0.0.
                let end = match self.given {
                    0 => None,
                    1 => Some(Version::new(c.major + 1, 0, 0)),
                    _ => Some(Version::new(c.major, c.minor + 1, 0)),
                };
                cmp != Ordering::Less && below_end(end.map(pre0))
            }
            Op::Caret => {
                // The leftmost non-zero number given stays.
                let end = if self.given == 0 {
                    None
                } else if c.major > 0 || self.given == 1 {
                    Some(Version::new(c.major + 1, 0, 0))
                } else if c.minor > 0 || self.given == 2 {
                    Some(Version::new(0, c.minor + 1, 0))
                } else {
                    Some(Version::new(0, 0, c.patch + 1))
                };
                cmp != Ordering::Less && below_end(end.map(pre0))
            }
        }
    }
}

fn pre0(mut v: Version) -> Version {
    v.pre = Prerelease::new("0").expect("valid");
    v
}

/// A Helm (Masterminds/semver v3) constraint: alternatives (`||`) of
/// comparators that must all match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    alternatives: Vec<Vec<Comparator>>,
}

impl Constraint {
    /// Parses a constraint (`1.2.*`, `~1.2`, `^1.2`, `>=1.0 <2.0`,
    /// `1.0 - 1.4`, `>=1 || ^0.9`).
    pub fn parse(text: &str) -> Result<Self, IndexError> {
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let tokens: Vec<&str> = alternative
                .split([' ', ','])
                .filter(|t| !t.is_empty())
                .collect();
            let mut comparators = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                let token = tokens[i];
                // `1.2 - 1.4`: a hyphen range.
                if tokens.get(i + 1) == Some(&"-") {
                    let low = Comparator::parse(">=", token, text)?;
                    let high_text = tokens.get(i + 2).ok_or_else(|| IndexError::Constraint {
                        constraint: text.to_owned(),
                        message: "a range `A - B` needs its upper bound".into(),
                    })?;
                    let high = Comparator::parse("<=", high_text, text)?;
                    comparators.extend([low, high]);
                    i += 3;
                    continue;
                }
                let split = token
                    .find(|c: char| !"<>=!~^".contains(c))
                    .unwrap_or(token.len());
                let (op, version) = token.split_at(split);
                if version.is_empty() {
                    // `>= 1.2`: the operator stands apart from its version.
                    let next = tokens.get(i + 1).ok_or_else(|| IndexError::Constraint {
                        constraint: text.to_owned(),
                        message: format!("operator `{op}` without a version"),
                    })?;
                    comparators.push(Comparator::parse(op, next, text)?);
                    i += 2;
                    continue;
                }
                comparators.push(Comparator::parse(op, version, text)?);
                i += 1;
            }
            if comparators.is_empty() {
                return Err(IndexError::Constraint {
                    constraint: text.to_owned(),
                    message: "empty".into(),
                });
            }
            alternatives.push(comparators);
        }
        Ok(Constraint { alternatives })
    }

    /// Whether `version` satisfies the constraint.
    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|all| all.iter().all(|c| c.matches(version)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_versions_creation_time_is_kept_and_a_strange_one_ignored() {
        let index = Index::parse(
            b"apiVersion: v1\nentries:\n  web:\n  - {name: web, version: 1.0.0, created: \"2024-05-06T07:08:09Z\"}\n  \
              - {name: web, version: 1.1.0, created: 12}\n  - {name: web, version: 1.2.0, created: {a: b}}\n",
            "https://charts.example",
        )
        .unwrap();
        let created: Vec<_> = index.entries["web"]
            .iter()
            .map(|v| v.created.clone())
            .collect();
        assert_eq!(
            created,
            [Some("2024-05-06T07:08:09Z".to_owned()), None, None]
        );
    }

    fn ok(constraint: &str, version: &str) -> bool {
        Constraint::parse(constraint)
            .unwrap()
            .matches(&parse_version(version).unwrap())
    }

    #[test]
    fn constraints_follow_masterminds_not_cargo() {
        // Wildcards and partial versions.
        assert!(ok("1.2.*", "1.2.9"));
        assert!(!ok("1.2.*", "1.3.0"));
        assert!(ok("1.2", "1.2.7"), "a bare 1.2 is 1.2.x, not ^1.2");
        assert!(!ok("1.2", "1.3.0"));
        assert!(ok("*", "9.9.9"));
        assert!(ok("1.x", "1.9.0"));
        assert!(ok("=1.2.3", "1.2.3"));
        assert!(!ok("1.2.3", "1.2.4"));
        // Tilde and caret.
        assert!(ok("~1.2", "1.2.9") && !ok("~1.2", "1.3.0"));
        assert!(ok("~1.2.3", "1.2.5") && !ok("~1.2.3", "1.2.2"));
        assert!(ok("~1", "1.9.0") && !ok("~1", "2.0.0"));
        assert!(ok("^1.2", "1.9.0") && !ok("^1.2", "2.0.0") && !ok("^1.2", "1.1.0"));
        assert!(ok("^0.2.3", "0.2.9") && !ok("^0.2.3", "0.3.0"));
        assert!(ok("^0.0.3", "0.0.3") && !ok("^0.0.3", "0.0.4"));
        // Ranges: spaces or commas, hyphens, alternatives.
        assert!(ok(">=1.0 <2.0", "1.5.0") && !ok(">=1.0 <2.0", "2.0.0"));
        assert!(ok(">=1.0, <2.0", "1.0.0"));
        assert!(ok(">= 1.0", "1.0.0"));
        assert!(
            ok("1.1 - 1.3", "1.3.9"),
            "the upper bound of a hyphen range is inclusive"
        );
        assert!(!ok("1.1 - 1.3", "1.4.0"));
        assert!(ok("<1.0 || >=3", "3.1.0") && !ok("<1.0 || >=3", "2.0.0"));
        assert!(!ok(">1.2", "1.2.9"), ">1.2 is above every 1.2.x");
        assert!(ok(">1.2", "1.3.0"));
        assert!(ok("<=1.2", "1.2.9") && !ok("<=1.2", "1.3.0"));
        assert!(ok("!=1.2.3", "1.2.4") && !ok("!=1.2.3", "1.2.3"));
        assert!(ok("v1.2.*", "1.2.0"));
    }

    #[test]
    fn pre_releases_only_when_asked_for() {
        assert!(!ok(">=1.0", "1.5.0-rc.1"));
        assert!(!ok("*", "1.0.0-beta"));
        assert!(ok(">=1.5.0-0", "1.5.0-rc.1"));
        assert!(ok("~1.5.0-0", "1.5.0-rc.1"));
    }

    #[test]
    fn garbage_constraints_are_refused() {
        for bad in ["", "abc", ">>1", "1.2.3.4", "1.0 -", ">="] {
            assert!(Constraint::parse(bad).is_err(), "{bad:?}");
        }
    }

    const INDEX: &str = r#"apiVersion: v1
entries:
  web:
  - {name: web, version: 1.2.3, urls: [web-1.2.3.tgz], digest: aa}
  - {name: web, version: 1.2.10, urls: [web-1.2.10.tgz]}
  - {name: web, version: 1.3.0-rc.1, urls: [web-1.3.0-rc.1.tgz]}
  - {name: web, version: 1.1.0, urls: [web-1.1.0.tgz]}
  - {name: web, version: not-semver, urls: [x.tgz]}
"#;

    #[test]
    fn resolves_as_helm_does() {
        let index = Index::parse(INDEX.as_bytes(), "https://r").unwrap();
        let pick = |c: &str| {
            index
                .resolve("https://r", "web", c)
                .map(|v| v.version.as_str())
        };
        assert_eq!(
            pick("1.2.*").unwrap(),
            "1.2.10",
            "highest match, numerically"
        );
        assert_eq!(pick("").unwrap(), "1.2.10", "no pre-release by default");
        assert_eq!(pick(">=1.3.0-0").unwrap(), "1.3.0-rc.1");
        assert_eq!(
            pick("not-semver").unwrap(),
            "not-semver",
            "exact text first"
        );
        assert_eq!(pick("~1.1").unwrap(), "1.1.0");
        let err = pick("2.*").unwrap_err().to_string();
        assert_eq!(err, "https://r: chart `web` has no version matching `2.*`");
        let err = index
            .resolve("https://r", "api", "*")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "https://r: no chart named `api` in index.yaml");
    }

    #[test]
    fn an_alias_bomb_index_is_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        text.push_str("entries: {}\n");
        let err = Index::parse(text.as_bytes(), "https://r").unwrap_err();
        assert!(matches!(err, IndexError::Invalid { .. }), "{err}");
    }
}
