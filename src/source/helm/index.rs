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

use crate::interrupt::Interrupt;

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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChartVersion {
    /// The chart's name.
    pub name: String,
    /// Its version, as written.
    pub version: String,
    /// Where its archive is: absolute, or relative to the repository URL.
    pub urls: Vec<String>,
    /// The archive's SHA-256, hex (with or without `sha256:`).
    pub digest: Option<String>,
    /// When the version was packaged (RFC 3339), as the index says; a
    /// value that is not a string is ignored.
    pub created: Option<String>,
}

/// A parsed `index.yaml`: chart name → versions.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// The charts.
    pub entries: BTreeMap<String, Vec<ChartVersion>>,
}

/// The most versions of one chart an index may list (the largest public
/// charts have a few thousand).
pub const MAX_VERSIONS: usize = 100_000;

impl Index {
    /// Reads every chart of an index (already capped in size by the
    /// download). See [`Index::parse_chart`].
    pub fn parse(text: &[u8], repo: &str) -> Result<Self, IndexError> {
        read(text, repo, None, &Interrupt::new())
    }

    /// Reads the versions of `chart` from an index (already capped in size
    /// by the download) as the text streams by: nothing of the other
    /// charts is kept, so what an index costs is its text and the entries
    /// of the one chart asked for, however many it lists of others.
    /// Aliases elsewhere are never expanded; in the chart's own entries
    /// they are refused.
    pub fn parse_chart(text: &[u8], repo: &str, chart: &str) -> Result<Self, IndexError> {
        read(text, repo, Some(chart), &Interrupt::new())
    }

    /// [`Index::parse_chart`], stopping once `interrupt` is raised (its
    /// fetch was given up).
    pub fn parse_chart_until(
        text: &[u8],
        repo: &str,
        chart: &str,
        interrupt: &Interrupt,
    ) -> Result<Self, IndexError> {
        read(text, repo, Some(chart), interrupt)
    }

    /// The size it takes in memory, about (for the index cache's budget).
    pub fn weight(&self) -> usize {
        self.entries
            .iter()
            .map(|(name, versions)| {
                name.len()
                    + versions
                        .iter()
                        .map(|v| {
                            std::mem::size_of::<ChartVersion>()
                                + v.name.len()
                                + v.version.len()
                                + v.urls.iter().map(|u| u.len() + 24).sum::<usize>()
                                + v.digest.as_ref().map_or(0, String::len)
                                + v.created.as_ref().map_or(0, String::len)
                        })
                        .sum::<usize>()
            })
            .sum()
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

/// Streams `text` (one YAML document: a mapping with `entries`), keeping
/// the versions of `wanted` (every chart when `None`).
fn read(
    text: &[u8],
    repo: &str,
    wanted: Option<&str>,
    interrupt: &Interrupt,
) -> Result<Index, IndexError> {
    let invalid = |message: String| IndexError::Invalid {
        repo: repo.to_owned(),
        message,
    };
    let text = std::str::from_utf8(text).map_err(|e| invalid(e.to_string()))?;
    let mut events = Events {
        parser: granit_parser::Parser::new_from_str(text),
        interrupt,
        seen: 0,
    };
    let mut index = Index::default();
    events.read_index(wanted, &mut index).map_err(invalid)?;
    Ok(index)
}

/// The parser's events, errors as text with their line.
struct Events<'a> {
    parser: granit_parser::Parser<'a, granit_parser::StrInput<'a>>,
    interrupt: &'a Interrupt,
    seen: u64,
}

/// What the reader needs to know of an event.
enum Ev<'a> {
    Scalar(std::borrow::Cow<'a, str>, bool),
    Alias,
    SequenceStart,
    MappingStart,
    End,
    DocumentOrStream,
}

impl<'a> Events<'a> {
    fn next(&mut self) -> Result<(Ev<'a>, usize), String> {
        use granit_parser::{Event, ScalarStyle};
        self.seen += 1;
        if self.seen.is_multiple_of(4096) && self.interrupt.is_raised() {
            return Err("stopped: the fetch was given up".into());
        }
        loop {
            let (event, span) = match self.parser.next() {
                None => return Ok((Ev::DocumentOrStream, 0)),
                Some(Err(e)) => return Err(format!("line {}: {e}", e.marker().line())),
                Some(Ok(item)) => item,
            };
            let line = span.start.line();
            let ev = match event {
                Event::Scalar(value, style, _, _) => Ev::Scalar(value, style != ScalarStyle::Plain),
                Event::Alias(_) | Event::UnresolvedAlias(_) => Ev::Alias,
                Event::SequenceStart(..) => Ev::SequenceStart,
                Event::MappingStart(..) => Ev::MappingStart,
                Event::SequenceEnd | Event::MappingEnd => Ev::End,
                Event::StreamStart | Event::DocumentStart(..) => continue,
                Event::StreamEnd | Event::DocumentEnd => Ev::DocumentOrStream,
                _ => continue,
            };
            return Ok((ev, line));
        }
    }

    /// Skips the rest of a node whose first event was `first`.
    fn skip(&mut self, first: &Ev<'_>) -> Result<(), String> {
        let mut depth = match first {
            Ev::SequenceStart | Ev::MappingStart => 1usize,
            _ => return Ok(()),
        };
        while depth > 0 {
            match self.next()?.0 {
                Ev::SequenceStart | Ev::MappingStart => depth += 1,
                Ev::End => depth -= 1,
                Ev::DocumentOrStream => return Err("the text ends inside a node".into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// The next key of a mapping that is text, with its line, skipping
    /// (with their values) the keys that are not; `None` at the mapping's
    /// end. `within` names the mapping for errors; with `refuse_aliases`,
    /// an alias as a key is refused.
    fn key(
        &mut self,
        within: &str,
        refuse_aliases: bool,
    ) -> Result<Option<(std::borrow::Cow<'a, str>, usize)>, String> {
        loop {
            match self.next()? {
                (Ev::End, _) => return Ok(None),
                (Ev::Scalar(key, _), line) => return Ok(Some((key, line))),
                (Ev::DocumentOrStream, line) => {
                    return Err(format!("line {line}: the text ends inside {within}"));
                }
                (Ev::Alias, line) if refuse_aliases => {
                    return Err(format!(
                        "line {line}: {within}: aliases are not supported in a chart's entries"
                    ));
                }
                (other, _) => {
                    self.skip(&other)?;
                    let (value, _) = self.next()?;
                    self.skip(&value)?;
                }
            }
        }
    }

    fn read_index(&mut self, wanted: Option<&str>, index: &mut Index) -> Result<(), String> {
        match self.next()? {
            (Ev::MappingStart, _) => {}
            // An empty text is an index without charts.
            (Ev::DocumentOrStream, _) => return Ok(()),
            (_, line) => return Err(format!("line {line}: the index is not a mapping")),
        }
        while let Some((key, _)) = self.key("the index", false)? {
            let (value, line) = self.next()?;
            if key != "entries" {
                self.skip(&value)?;
                continue;
            }
            match value {
                Ev::MappingStart => self.read_entries(wanted, index)?,
                Ev::Scalar(text, false) if text.is_empty() || text == "null" || text == "~" => {}
                _ => return Err(format!("line {line}: entries is not a mapping")),
            }
        }
        Ok(())
    }

    fn read_entries(&mut self, wanted: Option<&str>, index: &mut Index) -> Result<(), String> {
        loop {
            let Some((name, line)) = self.key("entries", false)? else {
                return Ok(());
            };
            let name = name.into_owned();
            let (value, value_line) = self.next()?;
            if wanted.is_some_and(|w| w != name) {
                self.skip(&value)?;
                continue;
            }
            let versions = match value {
                Ev::SequenceStart => self.read_versions(&name)?,
                Ev::Scalar(text, false) if text.is_empty() || text == "null" || text == "~" => {
                    Vec::new()
                }
                _ => {
                    return Err(format!(
                        "line {value_line}: entries.{name} is not a list (key on line {line})"
                    ));
                }
            };
            index.entries.insert(name, versions);
        }
    }

    fn read_versions(&mut self, chart: &str) -> Result<Vec<ChartVersion>, String> {
        let mut versions = Vec::new();
        loop {
            let line = match self.next()? {
                (Ev::End, _) => return Ok(versions),
                (Ev::MappingStart, line) => line,
                (Ev::Alias, line) => {
                    return Err(format!(
                        "line {line}: entries.{chart}[{}]: aliases are not supported in a chart's entries",
                        versions.len()
                    ));
                }
                (_, line) => {
                    return Err(format!(
                        "line {line}: entries.{chart}[{}] is not a mapping",
                        versions.len()
                    ));
                }
            };
            if versions.len() == MAX_VERSIONS {
                return Err(format!(
                    "line {line}: entries.{chart} lists more than {MAX_VERSIONS} versions"
                ));
            }
            let at = format!("entries.{chart}[{}]", versions.len());
            let mut version = ChartVersion::default();
            let mut has_version = false;
            while let Some((key, _)) = self.key(&at, true)? {
                let (value, line) = self.next()?;
                let text = |value: Ev<'_>| -> Result<Option<(String, bool)>, String> {
                    match value {
                        Ev::Scalar(text, quoted) => Ok(Some((text.into_owned(), quoted))),
                        Ev::Alias => Err(format!(
                            "line {line}: {at}.{key}: aliases are not supported in a chart's entries"
                        )),
                        _ => Ok(None),
                    }
                };
                match &*key {
                    "name" | "version" | "digest" | "created" => {
                        let collection = matches!(value, Ev::SequenceStart | Ev::MappingStart);
                        let field = if collection {
                            self.skip(&value)?;
                            None
                        } else {
                            text(value)?
                        };
                        match &*key {
                            "name" => version.name = field.map(|f| f.0).unwrap_or_default(),
                            "version" => {
                                let Some((field, _)) = field else {
                                    return Err(format!("line {line}: {at}.version is not text"));
                                };
                                version.version = field;
                                has_version = true;
                            }
                            "digest" => version.digest = field.map(|f| f.0),
                            // A time written plainly is text; a number,
                            // boolean or null is not.
                            _ => {
                                version.created = field
                                    .filter(|(text, quoted)| *quoted || plain_text(text))
                                    .map(|f| f.0);
                            }
                        }
                    }
                    "urls" => match value {
                        Ev::SequenceStart => loop {
                            match self.next()? {
                                (Ev::End, _) => break,
                                (Ev::Scalar(url, _), _) => version.urls.push(url.into_owned()),
                                (Ev::Alias, line) => {
                                    return Err(format!(
                                        "line {line}: {at}.urls: aliases are not supported in a chart's entries"
                                    ));
                                }
                                (Ev::DocumentOrStream, line) => {
                                    return Err(format!(
                                        "line {line}: the text ends inside {at}.urls"
                                    ));
                                }
                                (other, line) => {
                                    self.skip(&other)?;
                                    return Err(format!(
                                        "line {line}: {at}.urls holds a non-text item"
                                    ));
                                }
                            }
                        },
                        other => {
                            if matches!(other, Ev::Alias) {
                                return Err(format!(
                                    "line {line}: {at}.urls: aliases are not supported in a chart's entries"
                                ));
                            }
                            self.skip(&other)?;
                        }
                    },
                    _ => self.skip(&value)?,
                }
            }
            if !has_version {
                return Err(format!("line {line}: {at} has no version"));
            }
            versions.push(version);
        }
    }
}

/// Whether a plain scalar is text in YAML 1.2's core schema (not null, a
/// boolean or a number).
fn plain_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "" | "~" | "null" | "true" | "false" | ".nan" | ".inf" | "+.inf" | "-.inf"
    ) {
        return false;
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let number = !digits.is_empty()
        && (digits.parse::<f64>().is_ok()
            || digits
                .strip_prefix("0x")
                .is_some_and(|h| u64::from_str_radix(h, 16).is_ok())
            || digits
                .strip_prefix("0o")
                .is_some_and(|o| u64::from_str_radix(o, 8).is_ok()));
    !number
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
    fn an_alias_bomb_index_costs_nothing_and_aliases_in_the_entries_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        text.push_str("entries:\n  web:\n  - {name: web, version: 1.0.0, urls: [*a8]}\n");
        // The bomb is never expanded; the alias in web's entries is refused.
        let err = Index::parse_chart(text.as_bytes(), "https://r", "web").unwrap_err();
        assert!(
            err.to_string().contains("aliases are not supported"),
            "{err}"
        );
        let other = Index::parse_chart(text.as_bytes(), "https://r", "api").unwrap();
        assert!(other.entries.is_empty());
    }

    #[test]
    fn only_the_chart_asked_for_is_kept() {
        let mut text = String::from("apiVersion: v1\nentries:\n");
        for chart in 0..200 {
            text.push_str(&format!("  c{chart}:\n"));
            for v in 0..20 {
                text.push_str(&format!(
                    "  - name: c{chart}\n    version: 1.{v}.0\n    urls: [c{chart}-1.{v}.0.tgz]\n    annotations: {{a: b}}\n    maintainers: [{{name: x}}]\n"
                ));
            }
        }
        let all = Index::parse(text.as_bytes(), "https://r").unwrap();
        let one = Index::parse_chart(text.as_bytes(), "https://r", "c7").unwrap();
        assert_eq!(all.entries.len(), 200);
        assert_eq!(one.entries.keys().collect::<Vec<_>>(), ["c7"]);
        assert_eq!(one.entries["c7"], all.entries["c7"]);
        assert_eq!(one.entries["c7"][3].urls, ["c7-1.3.0.tgz"]);
        assert!(
            one.weight() * 100 < all.weight(),
            "{} {}",
            one.weight(),
            all.weight()
        );
        assert_eq!(
            one.resolve("https://r", "c7", "1.*").unwrap().version,
            "1.19.0"
        );
    }

    #[test]
    fn a_version_written_as_a_number_is_its_text() {
        let index = Index::parse_chart(
            b"entries:\n  web:\n  - {name: web, version: 1.10, urls: [a.tgz]}\n",
            "https://r",
            "web",
        )
        .unwrap();
        assert_eq!(index.entries["web"][0].version, "1.10");
    }

    #[test]
    fn malformed_entries_are_refused_naming_the_line() {
        for (text, words) in [
            ("entries:\n  web: 3\n", "line 2: entries.web is not a list"),
            (
                "entries:\n  web:\n  - 3\n",
                "line 3: entries.web[0] is not a mapping",
            ),
            (
                "entries:\n  web:\n  - {name: web}\n",
                "entries.web[0] has no version",
            ),
            ("entries: [\n", "line"),
            ("- a\n", "the index is not a mapping"),
        ] {
            let err = Index::parse_chart(text.as_bytes(), "https://r", "web").unwrap_err();
            assert!(err.to_string().contains(words), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_given_up_fetch_stops_reading_its_index() {
        let mut text = String::from("entries:\n");
        for chart in 0..2_000 {
            text.push_str(&format!(
                "  c{chart}:\n  - {{name: c{chart}, version: 1.0.0}}\n"
            ));
        }
        let interrupt = Interrupt::new();
        interrupt.raise();
        let err = Index::parse_chart_until(text.as_bytes(), "https://r", "c1999", &interrupt)
            .unwrap_err();
        assert!(
            err.to_string().ends_with("stopped: the fetch was given up"),
            "{err}"
        );
        Index::parse_chart_until(text.as_bytes(), "https://r", "c1999", &Interrupt::new()).unwrap();
    }
}
