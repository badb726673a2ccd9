//! An ApplicationSet's generators, read from their JSON and checked: each
//! an enum variant with typed fields; an error names the field
//! (`spec.generators[1].git.directories[0].path`).

use serde_json::{Map, Value};

use super::AppSetError;
use super::selector::Selector;

/// How deep `matrix` and `merge` may nest (Argo CD allows one level of
/// nesting inside them; a little more is harmless, unbounded is not).
pub const MAX_NESTING: usize = 3;
/// Generators one set (all nesting levels together) may have.
pub const MAX_GENERATORS: usize = 64;

/// One generator, with the selector that filters its parameter sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    /// What generates.
    pub kind: GeneratorKind,
    /// `selector`: parameter sets it does not select are dropped.
    pub selector: Option<Selector>,
    /// Where it is written, for messages (`spec.generators[0]`).
    pub at: String,
}

/// The generators Kiln runs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GeneratorKind {
    /// `list`: `elements` (objects), or `elementsYaml` (a YAML list, with
    /// goTemplate).
    List {
        /// The elements.
        elements: Vec<Map<String, Value>>,
        /// A YAML text of more elements (read once templated).
        elements_yaml: Option<String>,
    },
    /// `clusters`: the registered destination clusters.
    Clusters {
        /// Which (by their Secrets' labels).
        selector: Option<Selector>,
        /// `values` added to every set (templates themselves).
        values: Map<String, Value>,
    },
    /// `git`: directories or files of a repository at a revision.
    Git(Git),
    /// `matrix`: every pair of two generators' sets, the second generator
    /// templated with each of the first's sets.
    Matrix(Vec<Generator>),
    /// `merge`: the first generator's sets, overridden by the later ones'
    /// sets with equal values of `merge_keys`.
    Merge {
        /// The keys that pair sets.
        merge_keys: Vec<String>,
        /// The generators, the first one the base.
        generators: Vec<Generator>,
    },
}

/// The `git` generator.
#[derive(Debug, Clone, PartialEq)]
pub struct Git {
    /// The repository.
    pub repo_url: String,
    /// The revision (default `HEAD`).
    pub revision: String,
    /// `directories`: one set per matching directory.
    pub directories: Vec<PathPattern>,
    /// `files`: sets read from each matching JSON or YAML file.
    pub files: Vec<PathPattern>,
    /// `pathParamPrefix`: the path parameters under this prefix.
    pub path_param_prefix: String,
    /// `values` added to every set.
    pub values: Map<String, Value>,
}

/// A path glob, including or (`exclude: true`) excluding.
#[derive(Debug, Clone, PartialEq)]
pub struct PathPattern {
    /// The glob (`*` within a path segment, `**` across them).
    pub path: String,
    /// Whether what it matches is left out.
    pub exclude: bool,
}

/// Reads `spec.generators`.
pub fn generators(values: &[Value]) -> Result<Vec<Generator>, AppSetError> {
    let mut count = 0;
    values
        .iter()
        .enumerate()
        .map(|(i, v)| generator(v, &format!("spec.generators[{i}]"), 0, &mut count))
        .collect()
}

fn invalid(at: &str, message: impl std::fmt::Display) -> AppSetError {
    AppSetError::InvalidSpec(format!("{at}: {message}"))
}

/// Reads one generator at `at`, `depth` levels inside matrix/merge.
pub fn generator(
    value: &Value,
    at: &str,
    depth: usize,
    count: &mut usize,
) -> Result<Generator, AppSetError> {
    *count += 1;
    if *count > MAX_GENERATORS {
        return Err(invalid(
            at,
            format!("more than {MAX_GENERATORS} generators in one set"),
        ));
    }
    let Value::Object(map) = value else {
        return Err(invalid(at, "not an object"));
    };
    let selector = match map.get("selector") {
        None | Some(Value::Null) => None,
        Some(s) => Some(Selector::parse(s).map_err(|e| invalid(&format!("{at}.selector"), e))?),
    };
    let kinds: Vec<&String> = map.keys().filter(|k| *k != "selector").collect();
    let [kind] = kinds.as_slice() else {
        return Err(invalid(
            at,
            format!(
                "a generator has exactly one of list, clusters, git, matrix, merge (found {})",
                if kinds.is_empty() {
                    "none".to_owned()
                } else {
                    kinds
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ));
    };
    let body = &map[kind.as_str()];
    let here = format!("{at}.{kind}");
    check_fields(kind, body, &here)?;
    let nested = |list: &Value, count: &mut usize| -> Result<Vec<Generator>, AppSetError> {
        if depth >= MAX_NESTING {
            return Err(invalid(
                &here,
                format!("matrix and merge nest at most {MAX_NESTING} deep"),
            ));
        }
        let Value::Array(items) = &list["generators"] else {
            return Err(invalid(&here, "generators: not a list"));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, g)| generator(g, &format!("{here}.generators[{i}]"), depth + 1, count))
            .collect()
    };
    let kind = match kind.as_str() {
        "list" => {
            let elements = match &body["elements"] {
                Value::Null => Vec::new(),
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        e.as_object().cloned().ok_or_else(|| {
                            invalid(&format!("{here}.elements[{i}]"), "not an object")
                        })
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(invalid(&here, "elements: not a list")),
            };
            let elements_yaml = optional_string(body, "elementsYaml", &here)?;
            GeneratorKind::List {
                elements,
                elements_yaml,
            }
        }
        "clusters" => GeneratorKind::Clusters {
            selector: match body.get("selector") {
                None | Some(Value::Null) => None,
                Some(s) => {
                    Some(Selector::parse(s).map_err(|e| invalid(&format!("{here}.selector"), e))?)
                }
            },
            values: values(body, &here)?,
        },
        "git" => GeneratorKind::Git(git(body, &here)?),
        "matrix" => {
            let generators = nested(body, count)?;
            if generators.len() != 2 {
                return Err(invalid(
                    &here,
                    format!(
                        "a matrix has exactly two generators (found {})",
                        generators.len()
                    ),
                ));
            }
            GeneratorKind::Matrix(generators)
        }
        "merge" => {
            let generators = nested(body, count)?;
            if generators.len() < 2 {
                return Err(invalid(&here, "a merge has at least two generators"));
            }
            let merge_keys: Vec<String> = match &body["mergeKeys"] {
                Value::Array(keys) if !keys.is_empty() => keys
                    .iter()
                    .map(|k| k.as_str().map(str::to_owned))
                    .collect::<Option<_>>()
                    .ok_or_else(|| invalid(&here, "mergeKeys: not a list of strings"))?,
                _ => return Err(invalid(&here, "mergeKeys: a merge needs at least one key")),
            };
            GeneratorKind::Merge {
                merge_keys,
                generators,
            }
        }
        other => {
            return Err(invalid(
                at,
                format!(
                    "generator {other:?} is not run by Kiln (list, clusters, git, matrix and merge are); \
                     scmProvider, pullRequest, clusterDecisionResource and plugin generators reach services the controller does not"
                ),
            ));
        }
    };
    Ok(Generator {
        kind,
        selector,
        at: at.to_owned(),
    })
}

/// Refuses a generator field Kiln does not run (a per-generator
/// `template`, `requeueAfterSeconds`, a misspelling): never a generator
/// that silently does something else than written.
fn check_fields(kind: &str, body: &Value, at: &str) -> Result<(), AppSetError> {
    let known: &[&str] = match kind {
        "list" => &["elements", "elementsYaml"],
        "clusters" => &["selector", "values"],
        "git" => &[
            "repoURL",
            "revision",
            "directories",
            "files",
            "pathParamPrefix",
            "values",
        ],
        "matrix" => &["generators"],
        "merge" => &["generators", "mergeKeys"],
        _ => return Ok(()),
    };
    let Value::Object(map) = body else {
        return Err(invalid(at, "not an object"));
    };
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(field) if field == "template" => Err(invalid(
            at,
            "a generator's own template is not run yet: write it in spec.template",
        )),
        Some(field) => Err(invalid(
            at,
            format!("unknown field {field:?} (known: {})", known.join(", ")),
        )),
    }
}

fn optional_string(body: &Value, field: &str, at: &str) -> Result<Option<String>, AppSetError> {
    match &body[field] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(invalid(&format!("{at}.{field}"), "not a string")),
    }
}

fn values(body: &Value, at: &str) -> Result<Map<String, Value>, AppSetError> {
    match &body["values"] {
        Value::Null => Ok(Map::new()),
        Value::Object(values) => {
            if let Some((key, _)) = values.iter().find(|(_, v)| !v.is_string()) {
                return Err(invalid(&format!("{at}.values.{key}"), "not a string"));
            }
            Ok(values.clone())
        }
        _ => Err(invalid(&format!("{at}.values"), "not an object of strings")),
    }
}

fn git(body: &Value, at: &str) -> Result<Git, AppSetError> {
    let repo_url = optional_string(body, "repoURL", at)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid(&format!("{at}.repoURL"), "required"))?;
    let revision = optional_string(body, "revision", at)?
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "HEAD".to_owned());
    let patterns = |field: &str| -> Result<Vec<PathPattern>, AppSetError> {
        match &body[field] {
            Value::Null => Ok(Vec::new()),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let here = format!("{at}.{field}[{i}]");
                    let path = item["path"]
                        .as_str()
                        .filter(|p| !p.is_empty())
                        .ok_or_else(|| invalid(&format!("{here}.path"), "required"))?;
                    let exclude = match &item["exclude"] {
                        Value::Null => false,
                        Value::Bool(b) => *b,
                        _ => return Err(invalid(&format!("{here}.exclude"), "not a boolean")),
                    };
                    Ok(PathPattern {
                        path: path.to_owned(),
                        exclude,
                    })
                })
                .collect(),
            _ => Err(invalid(&format!("{at}.{field}"), "not a list")),
        }
    };
    let directories = patterns("directories")?;
    let files = patterns("files")?;
    if directories.is_empty() == files.is_empty() {
        return Err(invalid(
            at,
            "a git generator has either directories or files",
        ));
    }
    Ok(Git {
        repo_url,
        revision,
        directories,
        files,
        path_param_prefix: optional_string(body, "pathParamPrefix", at)?.unwrap_or_default(),
        values: values(body, at)?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn error(value: Value) -> String {
        generators(&[value]).unwrap_err().to_string()
    }

    #[test]
    fn generators_are_read_and_errors_name_the_field() {
        let read = generators(&[json!({"matrix": {"generators": [
            {"git": {"repoURL": "https://r", "directories": [{"path": "apps/*"}, {"path": "apps/skip", "exclude": true}]}},
            {"list": {"elements": [{"env": "prod"}]}, "selector": {"matchLabels": {"env": "prod"}}}
        ]}})])
        .unwrap();
        let GeneratorKind::Matrix(children) = &read[0].kind else {
            panic!()
        };
        let GeneratorKind::Git(git) = &children[0].kind else {
            panic!()
        };
        assert_eq!(git.revision, "HEAD");
        assert_eq!(
            git.directories[1],
            PathPattern {
                path: "apps/skip".into(),
                exclude: true
            }
        );
        assert_eq!(children[1].at, "spec.generators[0].matrix.generators[1]");
        assert!(children[1].selector.is_some());

        assert!(error(json!({"list": {}, "git": {}})).contains("exactly one of"));
        assert!(error(json!({"scmProvider": {}})).contains("\"scmProvider\" is not run by Kiln"));
        assert!(
            error(json!({"git": {"directories": [{"path": "a"}]}}))
                .contains("spec.generators[0].git.repoURL: required")
        );
        assert!(
            error(json!({"git": {"repoURL": "r", "files": [{"path": ""}]}}))
                .contains("files[0].path: required")
        );
        assert!(error(json!({"list": {"elements": [3]}})).contains("elements[0]: not an object"));
        assert!(error(json!({"matrix": {"generators": [{"list": {}}]}})).contains("exactly two"));
        assert!(
            error(json!({"merge": {"generators": [{"list": {}}, {"list": {}}]}}))
                .contains("mergeKeys")
        );
        assert!(
            error(json!({"clusters": {"values": {"a": 1}}}))
                .contains("clusters.values.a: not a string")
        );
    }

    #[test]
    fn attack_nesting_and_counts_are_bounded() {
        let mut deep = json!({"list": {}});
        for _ in 0..10 {
            deep = json!({"matrix": {"generators": [deep, {"list": {}}]}});
        }
        assert!(error(deep).contains("nest at most"));
        let many: Vec<Value> = (0..100).map(|_| json!({"list": {}})).collect();
        assert!(
            generators(&many)
                .unwrap_err()
                .to_string()
                .contains("more than 64 generators")
        );
    }
}
