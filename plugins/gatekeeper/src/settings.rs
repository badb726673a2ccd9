//! The policy's settings, checked before any review.
//!
//! Every key may repeat (the host passes settings as an ordered list whose
//! keys may repeat); each value is one path relative to the Application's
//! path (or the source root with a leading `/`), a directory meaning every
//! `.yaml`/`.yml`/`.json` file in it, sorted by name, not recursive:
//!
//! - `template` (at least one): files holding `ConstraintTemplate`s.
//! - `constraint` (at least one): files holding Constraints (objects of the
//!   kinds the templates define).
//! - `inventory` (default none): files whose objects join the rendered set
//!   in `data.inventory` (objects already in the cluster that the rendered
//!   set does not hold).
//! - `engine` (default `rego`): which of a template's engines evaluates it.
//!   `rego`: its Rego (`spec.targets[].rego` or `code[].engine: Rego`); a
//!   template without one is refused. `cel`: its `K8sNativeValidation`
//!   source (CEL, [`crate::cel`]); a template without one is refused.
//!   `auto`: CEL when the template has it, else Rego. An expression that
//!   does not compile (or uses a Kubernetes CEL function Kiln does not
//!   provide) refuses the template, naming its file and the expression.

/// Setting names this policy knows.
pub const KNOWN_SETTINGS: &[&str] = &["template", "constraint", "inventory", "engine"];

/// Which engine evaluates a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// The template's `Rego` engine (`spec.targets[].rego` and `libs`).
    #[default]
    Rego,
    /// The template's `K8sNativeValidation` engine (CEL).
    Cel,
    /// CEL when the template has it, else Rego.
    Auto,
}

/// The settings, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// Paths of template files or directories, in order.
    pub templates: Vec<String>,
    /// Paths of constraint files or directories, in order.
    pub constraints: Vec<String>,
    /// Paths of inventory files or directories, in order.
    pub inventory: Vec<String>,
    /// The engine.
    pub engine: Engine,
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
        reason: &'static str,
    },
    /// A required key is missing.
    #[error("setting `{key}` is required (a file or directory of {what})")]
    Missing {
        /// The key.
        key: &'static str,
        /// What it names.
        what: &'static str,
    },
}

impl Settings {
    /// Parses settings given as ordered key/value pairs.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Settings, SettingsError> {
        let mut settings = Settings::default();
        for (key, value) in pairs {
            let invalid = |key: &'static str, reason: &'static str| SettingsError::Invalid {
                key,
                value: value.to_owned(),
                reason,
            };
            let list = match key {
                "template" => &mut settings.templates,
                "constraint" => &mut settings.constraints,
                "inventory" => &mut settings.inventory,
                "engine" => {
                    settings.engine = match value {
                        "rego" => Engine::Rego,
                        "cel" => Engine::Cel,
                        "auto" => Engine::Auto,
                        _ => return Err(invalid("engine", "is not one of rego, cel, auto")),
                    };
                    continue;
                }
                other => {
                    return Err(SettingsError::Unknown {
                        key: other.to_owned(),
                    });
                }
            };
            let path = value.trim();
            if path.is_empty() {
                return Err(invalid(
                    if key == "template" {
                        "template"
                    } else if key == "constraint" {
                        "constraint"
                    } else {
                        "inventory"
                    },
                    "is empty: a path is expected",
                ));
            }
            list.push(path.to_owned());
        }
        if settings.templates.is_empty() {
            return Err(SettingsError::Missing {
                key: "template",
                what: "ConstraintTemplates",
            });
        }
        if settings.constraints.is_empty() {
            return Err(SettingsError::Missing {
                key: "constraint",
                what: "Constraints",
            });
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_accumulate_in_order() {
        let s = Settings::parse([
            ("template", "a.yaml"),
            ("constraint", "c"),
            ("template", "dir"),
            ("inventory", "inv.yaml"),
            ("engine", "rego"),
        ])
        .unwrap();
        assert_eq!(s.templates, ["a.yaml", "dir"]);
        assert_eq!(s.constraints, ["c"]);
        assert_eq!(s.inventory, ["inv.yaml"]);
        assert_eq!(s.engine, Engine::Rego);
        for (value, engine) in [("cel", Engine::Cel), ("auto", Engine::Auto)] {
            let s = Settings::parse([("template", "t"), ("constraint", "c"), ("engine", value)])
                .unwrap();
            assert_eq!(s.engine, engine);
        }
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let base = [("template", "t"), ("constraint", "c")];
        for (key, value, expected) in [
            ("engine", "wasm", "setting `engine`: `wasm` is not one of"),
            ("templates", "x", "unknown setting `templates`"),
            ("inventory", " ", "setting `inventory`"),
        ] {
            let err = Settings::parse(base.into_iter().chain([(key, value)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{err}");
        }
        let err = Settings::parse([("template", "t")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("setting `constraint` is required"), "{err}");
        let err = Settings::parse([("constraint", "c")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("setting `template` is required"), "{err}");
    }
}
