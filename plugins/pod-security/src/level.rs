//! Levels and versions of the Pod Security Standards, parsed as Pod Security
//! Admission parses them (`pod-security.kubernetes.io/enforce` and
//! `enforce-version` values, and this policy's `level` and `version`
//! settings).

use std::fmt;

/// The newest minor version of the standards this policy knows: `latest`
/// means this one, and so does any newer `v1.N` (as in Pod Security
/// Admission, a version newer than the evaluator's newest acts as its newest).
pub const LATEST_MINOR: u32 = 37;

/// A Pod Security Standards level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Unrestricted: no check applies.
    Privileged,
    /// Prevents known privilege escalations.
    Baseline,
    /// Pod hardening best practices; includes baseline.
    Restricted,
}

impl Level {
    /// The level's name as written in labels and settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// Parses a level name. The error is Pod Security Admission's wording.
    pub fn parse(text: &str) -> Result<Level, &'static str> {
        match text {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err("must be one of privileged, baseline, restricted"),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version of the standards: `latest` or `v1.N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// The newest version the policy knows, whatever that is.
    Latest,
    /// `v1.N` as written (N may exceed [`LATEST_MINOR`]).
    V1(u32),
}

impl Version {
    /// Parses `latest` or `v1.N` (no leading zeros, as Pod Security
    /// Admission's `^v1\.([0-9]|[1-9][0-9]*)$`). The error is Pod Security
    /// Admission's wording.
    pub fn parse(text: &str) -> Result<Version, &'static str> {
        const WORDING: &str = r#"must be "latest" or "v1.x""#;
        if text == "latest" {
            return Ok(Version::Latest);
        }
        let minor = text.strip_prefix("v1.").ok_or(WORDING)?;
        let digits_only = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
        if !digits_only || (minor.len() > 1 && minor.starts_with('0')) {
            return Err(WORDING);
        }
        minor.parse().map(Version::V1).map_err(|_| WORDING)
    }

    /// The minor version whose checks apply: [`LATEST_MINOR`] for `latest`
    /// and for anything newer.
    pub fn effective_minor(self) -> u32 {
        match self {
            Version::Latest => LATEST_MINOR,
            Version::V1(minor) => minor.min(LATEST_MINOR),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::V1(minor) => write!(f, "v1.{minor}"),
        }
    }
}

/// A level at a version, printed as Pod Security Admission prints it
/// (`restricted:latest`, `baseline:v1.30`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version, as written (not clamped to [`LATEST_MINOR`]).
    pub version: Version,
}

impl LevelVersion {
    /// Whether two level-versions evaluate the same checks (as Pod Security
    /// Admission's `Equivalent`: any two privileged ones are).
    pub fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_psa_parses_them() {
        assert_eq!(Version::parse("latest"), Ok(Version::Latest));
        assert_eq!(Version::parse("v1.0"), Ok(Version::V1(0)));
        assert_eq!(Version::parse("v1.25"), Ok(Version::V1(25)));
        for bad in [
            "",
            "v1",
            "v1.",
            "v1.01",
            "v2.0",
            "1.25",
            "v1.x",
            "v1.-1",
            "v1.+1",
            "Latest",
            "v1.99999999999",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn newer_versions_act_as_latest() {
        assert_eq!(Version::V1(99).effective_minor(), LATEST_MINOR);
        assert_eq!(Version::Latest.effective_minor(), LATEST_MINOR);
        assert_eq!(Version::V1(3).effective_minor(), 3);
    }

    #[test]
    fn levels_parse() {
        assert_eq!(Level::parse("baseline"), Ok(Level::Baseline));
        assert!(Level::parse("Baseline").is_err());
    }
}
