//! The policy of a namespace, from the `pod-security.kubernetes.io/*`
//! labels of its Namespace object, as Pod Security Admission reads them
//! (`PolicyToEvaluate`): an invalid enforce label fails closed
//! (`restricted`, `latest`), invalid warn and audit levels fail open
//! (`privileged`), and without a warn label, warn follows enforce.

use std::collections::BTreeMap;

use crate::level::{Level, LevelVersion, Version};

/// The label prefix of Pod Security Admission.
pub const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";

/// What to evaluate pods of a namespace against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespacePolicy {
    /// Violations are errors.
    pub enforce: LevelVersion,
    /// Violations are warnings (reported only when enforce allows the pod).
    pub warn: LevelVersion,
    /// Violations are for information.
    pub audit: LevelVersion,
}

/// An invalid policy label on a Namespace (Pod Security Admission refuses
/// such a Namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelError {
    /// The label key.
    pub label: String,
    /// Its value.
    pub value: String,
    /// Pod Security Admission's explanation.
    pub reason: &'static str,
}

const PRIVILEGED_LATEST: LevelVersion = LevelVersion {
    level: Level::Privileged,
    version: Version::Latest,
};

impl NamespacePolicy {
    /// The policy without labels: `enforce` from the settings, warn and
    /// audit privileged (Pod Security Admission's defaults).
    pub fn from_settings(enforce: LevelVersion) -> Self {
        NamespacePolicy {
            enforce,
            warn: PRIVILEGED_LATEST,
            audit: PRIVILEGED_LATEST,
        }
    }

    /// The policy a Namespace's labels give, starting from `defaults`, and
    /// the labels that are invalid.
    pub fn from_labels(
        labels: &BTreeMap<String, String>,
        defaults: NamespacePolicy,
    ) -> (NamespacePolicy, Vec<LabelError>) {
        let mut policy = defaults;
        let mut errors = Vec::new();
        let mut fail = |label: &str, value: &str, reason: &'static str| {
            errors.push(LabelError {
                label: format!("{LABEL_PREFIX}{label}"),
                value: value.to_owned(),
                reason,
            })
        };
        let get = |name: &str| labels.get(&format!("{LABEL_PREFIX}{name}"));
        let mut has_enforce_level = false;
        if let Some(value) = get("enforce") {
            match Level::parse(value) {
                Ok(level) => {
                    policy.enforce.level = level;
                    has_enforce_level = true;
                }
                Err(reason) => {
                    policy.enforce.level = Level::Restricted;
                    fail("enforce", value, reason);
                }
            }
        }
        if let Some(value) = get("enforce-version") {
            policy.enforce.version = Version::parse(value).unwrap_or_else(|reason| {
                fail("enforce-version", value, reason);
                Version::Latest
            });
        }
        if let Some(value) = get("audit") {
            policy.audit.level = Level::parse(value).unwrap_or_else(|reason| {
                fail("audit", value, reason);
                Level::Privileged
            });
        }
        if let Some(value) = get("audit-version") {
            policy.audit.version = Version::parse(value).unwrap_or_else(|reason| {
                fail("audit-version", value, reason);
                Version::Latest
            });
        }
        let warn_level = get("warn");
        if let Some(value) = warn_level {
            policy.warn.level = Level::parse(value).unwrap_or_else(|reason| {
                fail("warn", value, reason);
                Level::Privileged
            });
        }
        let warn_version = get("warn-version");
        if let Some(value) = warn_version {
            policy.warn.version = Version::parse(value).unwrap_or_else(|reason| {
                fail("warn-version", value, reason);
                Version::Latest
            });
        }
        if warn_level.is_none() && has_enforce_level && policy.enforce.level > policy.warn.level {
            policy.warn.level = policy.enforce.level;
            if warn_version.is_none() {
                policy.warn.version = policy.enforce.version;
            }
        }
        (policy, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), v.to_string()))
            .collect()
    }

    fn defaults() -> NamespacePolicy {
        NamespacePolicy::from_settings(LevelVersion {
            level: Level::Baseline,
            version: Version::V1(30),
        })
    }

    #[test]
    fn labels_override_the_settings() {
        let (p, errors) = NamespacePolicy::from_labels(
            &labels(&[
                ("enforce", "restricted"),
                ("enforce-version", "v1.25"),
                ("audit", "baseline"),
            ]),
            defaults(),
        );
        assert!(errors.is_empty());
        assert_eq!(p.enforce.to_string(), "restricted:v1.25");
        assert_eq!(p.warn.to_string(), "restricted:v1.25");
        assert_eq!(p.audit.to_string(), "baseline:latest");
    }

    #[test]
    fn invalid_enforce_fails_closed_and_invalid_warn_fails_open() {
        let (p, errors) = NamespacePolicy::from_labels(
            &labels(&[
                ("enforce", "strict"),
                ("warn", "loud"),
                ("enforce-version", "v1.x"),
            ]),
            defaults(),
        );
        assert_eq!(p.enforce.to_string(), "restricted:latest");
        assert_eq!(p.warn.level, Level::Privileged);
        assert_eq!(errors.len(), 3);
        assert_eq!(
            errors[0].reason,
            "must be one of privileged, baseline, restricted"
        );
    }
}
