//! # `kustomize`: Kustomize overlays, rendered inside the sandbox
//!
//! Reads `kustomization.yaml` (or `.yml`, or `Kustomization`) at the
//! Application's path through the host's source interface, follows its
//! `resources` (files, and directories holding bases and overlays, `../`
//! included as long as it stays inside the repository) and gives the objects
//! `kustomize build` gives: same names (generator hash suffixes included),
//! same fields, same order (kustomize's legacy order).
//!
//! Supported: resources and bases, components, generators, patches,
//! replacements, the built-in transformations with kustomize's
//! name-reference updates, `crds`, `vars` (`$(NAME)` substitution, see
//! [`vars`]) and `configurations` (transformer field specs, see
//! [`config`]); `docs/kustomize.md` lists it all. Fields that need a
//! process, a network or a schema (`helmCharts`, plugins, `openapi`) are
//! refused by name with the reason, never ignored. Remote resources are
//! refused: the sandbox has no network.
//!
//! Parameters (what Argo CD offers for Kustomize applications): `image`
//! (repeatable, `[NAME=]NEWNAME[:TAG][@DIGEST]`), `namePrefix`,
//! `nameSuffix`, `namespace`, `commonLabel` and `commonAnnotation`
//! (repeatable, `KEY=VALUE`), `replicas` (repeatable, `NAME=COUNT`).

pub mod build;
pub mod config;
pub mod crds;
pub mod fieldspec;
pub mod fs;
pub mod generate;
pub mod jsonpatch;
pub mod kustomization;
pub mod metadata;
pub mod order;
pub mod patch;
pub mod replace;
pub mod restrict;
pub mod scalars;
pub mod select;
pub mod smp;
pub mod transform;
pub mod vars;
pub mod yaml;

#[cfg(target_arch = "wasm32")]
mod plugin;

use kiln_yaml_limits::ExpansionError;

/// A build failure, located in a file where possible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The file (a kustomization, a resource, a generator input).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// What is wrong.
    pub message: String,
}

impl Failure {
    /// A failure in `file`.
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> Self {
        Failure {
            file: file.into(),
            line: None,
            message: message.into(),
        }
    }
}

impl From<(&str, ExpansionError)> for Failure {
    /// A YAML text of `file` whose aliases expand too far.
    fn from((file, error): (&str, ExpansionError)) -> Self {
        Failure {
            file: file.to_owned(),
            line: error.line.and_then(|l| u32::try_from(l).ok()),
            message: error.to_string(),
        }
    }
}

/// Checks a YAML text from the tree (a file, or a patch written inline)
/// against Kiln's limits on alias expansion, before it is parsed.
pub(crate) fn check_yaml(text: &str) -> Result<(), ExpansionError> {
    kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
}

/// [`check_yaml`] for the parsers whose errors are text: `line N: …`.
pub(crate) fn check_yaml_text(text: &str) -> Result<(), String> {
    check_yaml(text).map_err(|e| match e.line {
        Some(line) => format!("line {line}: {e}"),
        None => e.to_string(),
    })
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}
