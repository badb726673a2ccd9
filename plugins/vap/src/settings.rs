//! The policy's settings.
//!
//! - `policy=PATH` (repeatable, at least one): a YAML file of
//!   ValidatingAdmissionPolicies, or a directory of such files (`.yaml`,
//!   `.yml`, `.json`, recursively).
//! - `binding=PATH` (repeatable, at least one): the same for
//!   ValidatingAdmissionPolicyBindings.
//! - `params=PATH` (repeatable, optional): the same for param objects (any
//!   kind; a binding's `paramRef` picks them by `paramKind`, name, namespace
//!   or selector).
//!
//! Paths are relative to the policy's source tree.

/// Setting names this policy knows.
pub const KNOWN_SETTINGS: &[&str] = &["policy", "binding", "params"];

/// The settings, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Files or directories of policies.
    pub policies: Vec<String>,
    /// Files or directories of bindings.
    pub bindings: Vec<String>,
    /// Files or directories of param objects.
    pub params: Vec<String>,
}

/// Settings that cannot be used; the message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A key this policy does not know.
    #[error("unknown setting `{key}` (known: {})", KNOWN_SETTINGS.join(", "))]
    Unknown {
        /// The key.
        key: String,
    },
    /// An empty path.
    #[error("setting `{0}`: the path is empty")]
    EmptyPath(&'static str),
    /// A required setting is missing.
    #[error("setting `{0}` is required (a file or directory of the policy source)")]
    Missing(&'static str),
}

impl Settings {
    /// Parses settings given as ordered key/value pairs.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Settings, SettingsError> {
        let mut settings = Settings::default();
        for (key, value) in pairs {
            let (list, name) = match key {
                "policy" => (&mut settings.policies, "policy"),
                "binding" => (&mut settings.bindings, "binding"),
                "params" => (&mut settings.params, "params"),
                other => {
                    return Err(SettingsError::Unknown {
                        key: other.to_owned(),
                    });
                }
            };
            let value = value.trim();
            if value.is_empty() {
                return Err(SettingsError::EmptyPath(name));
            }
            list.push(value.to_owned());
        }
        if settings.policies.is_empty() {
            return Err(SettingsError::Missing("policy"));
        }
        if settings.bindings.is_empty() {
            return Err(SettingsError::Missing("binding"));
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let s = Settings::parse([
            ("policy", "p"),
            ("binding", "b"),
            ("params", "x"),
            ("params", "y"),
        ])
        .unwrap();
        assert_eq!(s.params, ["x", "y"]);
        assert_eq!(
            Settings::parse([("binding", "b")]),
            Err(SettingsError::Missing("policy"))
        );
        assert_eq!(
            Settings::parse([("policy", "p"), ("binding", " ")]),
            Err(SettingsError::EmptyPath("binding"))
        );
        assert!(matches!(
            Settings::parse([("polciy", "p")]),
            Err(SettingsError::Unknown { .. })
        ));
    }
}
