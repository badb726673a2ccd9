//! Parsing and emitting YAML manifests.

pub use serde_yaml::{Mapping, Value};

use crate::Manifest;

/// A YAML error located in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    /// The file, as given to [`documents`].
    pub file: Option<String>,
    /// 1-based line, when the parser knows it.
    pub line: Option<u32>,
    /// What the parser said.
    pub message: String,
}

impl core::fmt::Display for YamlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            _ => write!(f, "{}", self.message),
        }
    }
}

/// Parses every document of a (multi-document) YAML text, skipping empty
/// documents. `file` only labels errors. A text whose aliases expand beyond
/// Kiln's limits ([`kiln_yaml_limits::YamlLimits`]) is refused before it is
/// parsed.
pub fn documents(text: &str, file: Option<&str>) -> Result<Vec<Value>, YamlError> {
    kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default()).map_err(|e| {
        YamlError {
            file: file.map(str::to_owned),
            line: e.line.and_then(|l| u32::try_from(l).ok()),
            message: e.to_string(),
        }
    })?;
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value =
            <Value as serde::Deserialize>::deserialize(document).map_err(|e| YamlError {
                file: file.map(str::to_owned),
                line: e.location().map(|l| l.line() as u32),
                message: e.to_string(),
            })?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// Emits one value as a YAML manifest.
pub fn to_manifest(value: &Value, source: Option<String>) -> Manifest {
    // Serializing a `Value` cannot fail: every key is itself a value.
    let content = serde_yaml::to_string(value).unwrap_or_default();
    Manifest { content, source }
}
