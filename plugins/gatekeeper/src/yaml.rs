//! YAML documents of a policy file, as JSON values, with the line each
//! document starts on.

use serde_json::Value;

/// One document of a file.
#[derive(Debug, Clone)]
pub struct Document {
    /// 1-based line the document starts on.
    pub line: usize,
    /// The document.
    pub value: Value,
}

/// A file that is not valid YAML (or expands its aliases too far).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct YamlError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What the parser said.
    pub message: String,
}

/// Every non-empty document of `text`, in order.
pub fn documents(text: &str, file: &str) -> Result<Vec<Document>, YamlError> {
    let error = |line: Option<usize>, message: String| YamlError {
        file: file.to_owned(),
        line,
        message,
    };
    kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
        .map_err(|e| error(e.line, e.to_string()))?;
    let starts = document_starts(text);
    let mut out = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = <Value as serde::Deserialize>::deserialize(document)
            .map_err(|e| error(e.location().map(|l| l.line()), e.to_string()))?;
        if !value.is_null() {
            out.push(Document {
                line: starts.get(index).copied().unwrap_or(1),
                value,
            });
        }
    }
    Ok(out)
}

/// 1-based first line of each document: after each `---` separator.
fn document_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    let mut first_content = true;
    for (n, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") {
            if first_content {
                // A leading separator opens the first document.
                starts[0] = n + 2;
            } else {
                starts.push(n + 2);
            }
        }
        if !line.trim().is_empty() && !line.starts_with('#') {
            first_content = false;
        }
    }
    starts
}

/// The 1-based line of `text` at which `needle`'s first non-blank line
/// appears (as a whole line, ignoring indentation) at or after `from`: how a
/// Rego text embedded in a YAML block scalar is found back in its file.
pub fn line_of_block(text: &str, needle: &str, from: usize) -> Option<usize> {
    let (skipped, first) = needle
        .lines()
        .enumerate()
        .find(|(_, l)| !l.trim().is_empty())?;
    let first = first.trim();
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| l.trim() == first)
        .map(|(n, _)| n + 1 - skipped.min(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_know_their_first_line() {
        let docs = documents("a: 1\n---\nb: 2\n---\n\n---\nc: 3\n", "f.yaml").unwrap();
        let lines: Vec<_> = docs.iter().map(|d| d.line).collect();
        assert_eq!(lines, [1, 3, 7]);
        let docs = documents("---\na: 1\n", "f.yaml").unwrap();
        assert_eq!(docs[0].line, 2);
    }

    #[test]
    fn a_block_is_found_at_its_line() {
        let text = "x:\n  rego: |\n    package a\n\n    p { true }\n";
        assert_eq!(line_of_block(text, "package a\n\np { true }\n", 1), Some(3));
        assert_eq!(line_of_block(text, "\npackage a\n", 1), Some(2));
        assert_eq!(line_of_block(text, "package b\n", 1), None);
    }

    #[test]
    fn syntax_errors_name_file_and_line() {
        let err = documents("a: 1\nb: [\n", "t.yaml").unwrap_err();
        assert_eq!(err.file, "t.yaml");
        assert!(err.line.is_some(), "{err}");
    }
}
