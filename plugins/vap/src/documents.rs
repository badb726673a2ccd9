//! Reading the YAML (or JSON) documents of the files the settings name.

use serde::Deserialize;

use crate::engine::{Document, ReviewError};

/// Parses every document of `text` (read from `file`); empty documents
/// are skipped; `List` objects are flattened into their items. The text's
/// aliases are bounded first ([`kiln_yaml_limits`]).
pub fn parse(file: &str, text: &str) -> Result<Vec<Document>, ReviewError> {
    let error = |message: String| ReviewError::Invalid {
        file: file.to_owned(),
        what: "the file".to_owned(),
        message,
    };
    kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
        .map_err(|e| error(e.to_string()))?;
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document).map_err(|e| error(e.to_string()))?;
        match value {
            serde_json::Value::Null => {}
            serde_json::Value::Object(_) if value["kind"] == "List" => {
                for item in value["items"].as_array().into_iter().flatten() {
                    out.push(Document {
                        file: file.to_owned(),
                        value: item.clone(),
                    });
                }
            }
            serde_json::Value::Object(_) => out.push(Document {
                file: file.to_owned(),
                value,
            }),
            _ => return Err(error("a document is not a mapping".to_owned())),
        }
    }
    Ok(out)
}
