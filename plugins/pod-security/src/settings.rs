//! The policy's settings, checked before any review.
//!
//! - `level` (default `restricted`): `privileged`, `baseline` or `restricted`.
//! - `version` (default `latest`): `latest` or `v1.N`; a version newer than
//!   the newest this policy knows ([`LATEST_MINOR`](crate::level::LATEST_MINOR))
//!   acts as the newest.
//! - `exemptRuntimeClasses` (default none): comma-separated RuntimeClass
//!   names; pods using one are not checked.
//! - `namespaceLabels` (default `false`): `true` takes the level and version
//!   of each object's namespace from the `pod-security.kubernetes.io/*`
//!   labels of that Namespace when the rendered set holds it.

use crate::level::{Level, LevelVersion, Version};

/// Setting names this policy knows.
pub const KNOWN_SETTINGS: &[&str] = &[
    "level",
    "version",
    "exemptRuntimeClasses",
    "namespaceLabels",
];

/// The settings, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Level and version to enforce where no namespace label says otherwise.
    pub enforce: LevelVersion,
    /// RuntimeClass names whose pods are exempt.
    pub exempt_runtime_classes: Vec<String>,
    /// Whether Namespace labels of the rendered set choose the policy.
    pub namespace_labels: bool,
}

impl Default for Settings {
    /// `restricted:latest`, no exemptions, namespace labels ignored.
    fn default() -> Self {
        Settings {
            enforce: LevelVersion {
                level: Level::Restricted,
                version: Version::Latest,
            },
            exempt_runtime_classes: Vec::new(),
            namespace_labels: false,
        }
    }
}

/// Settings that cannot be used; the message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A key this policy does not know (a typo, most likely).
    #[error("unknown setting `{key}` (known: {})", KNOWN_SETTINGS.join(", "))]
    Unknown {
        /// The key.
        key: String,
    },
    /// A known key with a value it cannot take.
    #[error("setting `{key}`: `{value}` {reason}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// The value given.
        value: String,
        /// Why it is refused.
        reason: String,
    },
}

impl Settings {
    /// Parses settings given as ordered key/value pairs; when a key repeats,
    /// the last value wins.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Settings, SettingsError> {
        let mut settings = Settings::default();
        for (key, value) in pairs {
            let invalid = |key: &'static str, reason: &str| SettingsError::Invalid {
                key,
                value: value.to_owned(),
                reason: reason.to_owned(),
            };
            match key {
                "level" => {
                    settings.enforce.level = Level::parse(value).map_err(|e| invalid("level", e))?
                }
                "version" => {
                    settings.enforce.version =
                        Version::parse(value).map_err(|e| invalid("version", e))?
                }
                "exemptRuntimeClasses" => {
                    settings.exempt_runtime_classes = value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect();
                }
                "namespaceLabels" => {
                    settings.namespace_labels = match value {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(invalid(
                                "namespaceLabels",
                                "is neither `true` nor `false`",
                            ));
                        }
                    }
                }
                other => {
                    return Err(SettingsError::Unknown {
                        key: other.to_owned(),
                    });
                }
            }
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values() {
        assert_eq!(Settings::parse([]).unwrap(), Settings::default());
        let s = Settings::parse([
            ("level", "baseline"),
            ("version", "v1.30"),
            ("exemptRuntimeClasses", "kata, gvisor,"),
            ("namespaceLabels", "true"),
        ])
        .unwrap();
        assert_eq!(s.enforce.to_string(), "baseline:v1.30");
        assert_eq!(s.exempt_runtime_classes, ["kata", "gvisor"]);
        assert!(s.namespace_labels);
    }

    #[test]
    fn invalid_settings_name_the_setting() {
        for (key, value) in [
            ("level", "strict"),
            ("version", "1.30"),
            ("version", "v2.0"),
            ("namespaceLabels", "yes"),
        ] {
            let err = Settings::parse([(key, value)]).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("setting `{key}`: `{value}`")),
                "{err}"
            );
        }
        let err = Settings::parse([("levle", "baseline")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown setting `levle`"), "{err}");
    }
}
