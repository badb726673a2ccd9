//! `validate.pattern`: a resource walked against a pattern tree, with
//! Kyverno's anchors and its order of evaluation (anchors first, sorted;
//! then global anchors and keys holding anchors; then the rest).
//!
//! The outcome is three-valued, as Kyverno's: the pattern matches, the
//! resource fails it (with the path where), or a conditional or global
//! anchor did not hold and the rule does not apply (skip).

use serde_json::{Map, Value};

use crate::anchor::{self, Kind};
use crate::value;
use crate::wildcard;

/// Why a pattern did not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The resource matches.
    Pass,
    /// A conditional or global anchor did not hold: the rule does not apply.
    Skip(String),
    /// The resource does not match, at `path`.
    Fail {
        /// Where, `/spec/containers/0/image/`.
        path: String,
        /// What did not match.
        message: String,
    },
}

/// Checks `resource` against `pattern` from the root.
pub fn check(resource: &Value, pattern: &Value) -> Outcome {
    match element(resource, pattern, "/") {
        Ok(()) => Outcome::Pass,
        Err(e) if e.skips() => Outcome::Skip(e.message),
        Err(e) => Outcome::Fail {
            path: e.path,
            message: e.message,
        },
    }
}

/// Where an error comes from, as Kyverno tells them apart: an anchor's own
/// error, the error of a whole map or list whose elements were all skipped,
/// or any other mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Anchor,
    Skipped,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnchorError {
    Conditional,
    Global,
    Negation,
}

impl AnchorError {
    fn prefix(self) -> &'static str {
        match self {
            AnchorError::Conditional => "conditional anchor mismatch",
            AnchorError::Global => "global anchor mismatch",
            AnchorError::Negation => "negation anchor matched in resource",
        }
    }

    fn bit(self) -> u8 {
        match self {
            AnchorError::Conditional => 1,
            AnchorError::Global => 2,
            AnchorError::Negation => 4,
        }
    }
}

/// A mismatch. `anchors` says which anchors' errors it carries (its own
/// and those of the errors it wraps): Kyverno reads them from the
/// message's text, which a resource's own values could then fake; here
/// they are flags.
#[derive(Debug, Clone)]
struct Error {
    origin: Origin,
    anchors: u8,
    path: String,
    message: String,
}

impl Error {
    fn other(path: &str, message: String) -> Error {
        Error {
            origin: Origin::Other,
            anchors: 0,
            path: path.to_owned(),
            message,
        }
    }

    /// An anchor's error, wrapping what the anchor's value gave (if it
    /// gave an error).
    fn anchor(kind: AnchorError, path: &str, message: &str, wrapped: Option<&Error>) -> Error {
        Error {
            origin: Origin::Anchor,
            anchors: kind.bit() | wrapped.map_or(0, |e| e.anchors),
            path: path.to_owned(),
            message: format!("{}: {message}", kind.prefix()),
        }
    }

    fn is(&self, kind: AnchorError) -> bool {
        self.anchors & kind.bit() != 0
    }

    /// A conditional or global anchor did not hold.
    fn skips(&self) -> bool {
        self.is(AnchorError::Conditional) || self.is(AnchorError::Global)
    }
}

type Result = std::result::Result<(), Error>;

fn element(resource: &Value, pattern: &Value, path: &str) -> Result {
    match pattern {
        Value::Object(pattern) => match resource {
            Value::Object(resource) => map(resource, pattern, path),
            _ => Err(Error::other(
                path,
                format!(
                    "pattern and resource have different structures. Path: {path}. Expected a map, found {}",
                    type_name(resource)
                ),
            )),
        },
        Value::Array(pattern) => match resource {
            Value::Array(resource) => array(resource, pattern, path),
            _ => Err(Error::other(
                path,
                format!(
                    "validation rule failed at path {path}, resource does not satisfy the expected overlay pattern"
                ),
            )),
        },
        scalar => {
            let mismatch = || {
                Error::other(
                    path,
                    format!(
                        "resource value '{}' does not match '{}' at path {path}",
                        go_text(resource),
                        go_text(scalar)
                    ),
                )
            };
            match resource {
                // A scalar pattern against a list: every element.
                Value::Array(items) => {
                    if items.iter().all(|item| value::matches(item, scalar)) {
                        Ok(())
                    } else {
                        Err(mismatch())
                    }
                }
                _ if value::matches(resource, scalar) => Ok(()),
                _ => Err(mismatch()),
            }
        }
    }
}

fn map(resource: &Map<String, Value>, pattern: &Map<String, Value>, path: &str) -> Result {
    let pattern = expand_metadata_wildcards(pattern, resource);
    let mut anchors = Vec::new();
    let mut others = Vec::new();
    for (key, value) in &pattern {
        match anchor::parse(key).map(|a| a.kind) {
            Some(Kind::Condition | Kind::Existence | Kind::Equality | Kind::Negation) => {
                anchors.push((key.as_str(), value));
            }
            _ => others.push((key.as_str(), value)),
        }
    }
    anchors.sort_by(|a, b| a.0.cmp(b.0));

    // Phase 1: the anchors.
    let mut skipped: Vec<Error> = Vec::new();
    let mut applied = 0;
    for (key, value) in anchors {
        match handle(key, value, resource, path) {
            Ok(()) => applied += 1,
            Err(e) if e.skips() => skipped.push(e),
            Err(e) => {
                // An anchor's own skip among the siblings outweighs a
                // failure (Kyverno's order of evaluation).
                if !skipped.iter().any(|s| s.origin != Origin::Skipped) {
                    return Err(e);
                }
            }
        }
    }
    if !skipped.is_empty() {
        let anchor_skip = skipped.iter().any(|s| s.origin != Origin::Skipped);
        if applied == 0 || anchor_skip {
            return Err(combined_skip(path, &skipped));
        }
    }

    // Phase 2: the other keys, global anchors and keys holding anchors
    // first.
    others.sort_by(|a, b| a.0.cmp(b.0));
    let mut front = Vec::new();
    let mut back = Vec::new();
    for (key, value) in others {
        let global = anchor::parse(key).is_some_and(|a| a.kind == Kind::Global);
        if global || has_nested_anchors(value) {
            front.push((key, value));
        } else {
            back.push((key, value));
        }
    }
    front.reverse();
    for (key, value) in front.into_iter().chain(back) {
        handle(key, value, resource, path)?;
    }
    Ok(())
}

fn combined_skip(path: &str, skipped: &[Error]) -> Error {
    Error {
        origin: Origin::Skipped,
        anchors: skipped.iter().fold(0, |bits, e| bits | e.anchors),
        path: path.to_owned(),
        message: skipped
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// One key of a pattern map against the resource map.
fn handle(key: &str, pattern: &Value, resource: &Map<String, Value>, path: &str) -> Result {
    let Some(anchored) = anchor::parse(key) else {
        return plain(key, pattern, resource, path);
    };
    let name = anchored.key;
    let here = format!("{path}{name}/");
    let found = resource.get(name);
    match anchored.kind {
        Kind::Negation => match found {
            Some(_) => Err(Error::anchor(
                AnchorError::Negation,
                &here,
                &format!("{here} is not allowed"),
                None,
            )),
            None => Ok(()),
        },
        Kind::Equality => match found {
            Some(value) => element(value, pattern, &here),
            None => Ok(()),
        },
        Kind::Condition => match found {
            Some(value) => element(value, pattern, &here)
                .map_err(|e| Error::anchor(AnchorError::Conditional, &e.path, &e.message, Some(&e))),
            None => Err(Error::anchor(
                AnchorError::Conditional,
                &here,
                "conditional anchor key doesn't exist in the resource",
                None,
            )),
        },
        Kind::Global => match found {
            Some(value) => element(value, pattern, &here)
                .map_err(|e| Error::anchor(AnchorError::Global, &e.path, &e.message, Some(&e))),
            None => Ok(()),
        },
        Kind::Existence => match found {
            None => Ok(()),
            Some(Value::Array(items)) => {
                let Value::Array(patterns) = pattern else {
                    return Err(Error::other(
                        &here,
                        "invalid pattern type: Pattern has to be of list to compare against resource"
                            .into(),
                    ));
                };
                for one in patterns {
                    if !one.is_object() {
                        return Err(Error::other(
                            &here,
                            "invalid pattern type: Pattern has to be of type map to compare against items in resource".into(),
                        ));
                    }
                    let found = items
                        .iter()
                        .enumerate()
                        .any(|(i, item)| element(item, one, &format!("{here}{i}/")).is_ok());
                    if !found {
                        return Err(Error::other(
                            &here,
                            format!("existence anchor validation failed at path {here}"),
                        ));
                    }
                }
                Ok(())
            }
            Some(_) => Err(Error::other(
                &here,
                "invalid resource type: Existence ^ () anchor can be used only on list/array type resource".into(),
            )),
        },
        // Mutation only; validation reads it as the plain key.
        Kind::AddIfNotPresent => plain(key, pattern, resource, path),
    }
}

fn plain(key: &str, pattern: &Value, resource: &Map<String, Value>, path: &str) -> Result {
    let here = format!("{path}{key}/");
    let found = resource.get(key).filter(|v| !v.is_null());
    if pattern.as_str() == Some("*") {
        return match found {
            Some(_) => Ok(()),
            None => Err(Error::other(path, format!("{path}/{key} not found"))),
        };
    }
    element(resource.get(key).unwrap_or(&Value::Null), pattern, &here)
}

fn array(resource: &[Value], pattern: &[Value], path: &str) -> Result {
    let Some(first) = pattern.first() else {
        return Err(Error::other(path, "pattern Array empty".into()));
    };
    match first {
        // Every element against the (first) map of the pattern.
        Value::Object(_) => each(resource.iter().map(|item| (item, first)), path),
        Value::Array(_) => {
            if resource.len() < pattern.len() {
                return Err(Error::other(
                    "",
                    format!(
                        "validate Array failed, array length mismatch, resource Array len is {} and pattern Array len is {}",
                        resource.len(),
                        pattern.len()
                    ),
                ));
            }
            // Element by element.
            each(resource.iter().zip(pattern), path)
        }
        // A scalar: every element of the resource's list against it.
        scalar => element(&Value::Array(resource.to_vec()), scalar, path),
    }
}

/// Pairs of a list checked in order: the first failure fails the list;
/// the list is skipped when every element was.
fn each<'a>(pairs: impl Iterator<Item = (&'a Value, &'a Value)>, path: &str) -> Result {
    let mut applied = 0;
    let mut skipped = Vec::new();
    for (i, (item, pattern)) in pairs.enumerate() {
        match element(item, pattern, &format!("{path}{i}/")) {
            Ok(()) => applied += 1,
            Err(e) if e.skips() => skipped.push(e),
            Err(e) => return Err(e),
        }
    }
    if applied == 0 && !skipped.is_empty() {
        return Err(combined_skip(path, &skipped));
    }
    Ok(())
}

fn has_nested_anchors(pattern: &Value) -> bool {
    match pattern {
        Value::Object(map) => map.iter().any(|(key, value)| {
            anchor::parse(key).is_some_and(|a| a.kind != Kind::AddIfNotPresent)
                || has_nested_anchors(value)
        }),
        Value::Array(items) => items.iter().any(has_nested_anchors),
        _ => false,
    }
}

/// Wildcard keys of `metadata.labels` and `metadata.annotations` in the
/// pattern become the resource's keys they match (value included), as
/// Kyverno expands them before the walk; a key nothing matches keeps its
/// text with `*` and `?` made `0`, so that it matches nothing by chance.
fn expand_metadata_wildcards(
    pattern: &Map<String, Value>,
    resource: &Map<String, Value>,
) -> Map<String, Value> {
    let metadata_key = pattern
        .keys()
        .find(|k| anchor::key_of(k) == "metadata")
        .cloned();
    let (Some(metadata_key), Some(Value::Object(resource_metadata))) =
        (metadata_key, resource.get("metadata"))
    else {
        return pattern.clone();
    };
    let Some(Value::Object(pattern_metadata)) = pattern.get(&metadata_key) else {
        return pattern.clone();
    };
    let mut metadata = pattern_metadata.clone();
    for tag in ["labels", "annotations"] {
        let Some(tag_key) = metadata.keys().find(|k| anchor::key_of(k) == tag).cloned() else {
            continue;
        };
        let (Some(Value::Object(wanted)), Some(Value::Object(have))) =
            (metadata.get(&tag_key), resource_metadata.get(tag))
        else {
            continue;
        };
        let mut have: Vec<(&String, &str)> = have
            .iter()
            .filter_map(|(k, v)| Some((k, v.as_str()?)))
            .collect();
        have.sort();
        let mut expanded = Map::new();
        for (key, value) in wanted {
            let Some(text) = value.as_str() else {
                continue;
            };
            if !wildcard::contains_wildcard(key) {
                expanded.insert(key.clone(), value.clone());
                continue;
            }
            let bare = anchor::key_of(key);
            match have.iter().find(|(k, _)| wildcard::matches(bare, k)) {
                Some((k, _)) => {
                    let renamed = key.replacen(bare, k, 1);
                    expanded.insert(renamed, Value::String(text.to_owned()));
                }
                None => {
                    expanded.insert(
                        key.replace(['*', '?'], "0"),
                        Value::String(text.replace(['*', '?'], "0")),
                    );
                }
            }
        }
        metadata.insert(tag_key, Value::Object(expanded));
    }
    let mut out = pattern.clone();
    out.insert(metadata_key, Value::Object(metadata));
    out
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A value as Go's `%v` prints it, for messages.
fn go_text(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn plain_keys_and_wildcards() {
        let pattern = json!({"spec": {"containers": [{"image": "!*:latest"}]}});
        assert_eq!(
            check(&pod(json!({"containers": [{"image": "a:1"}]})), &pattern),
            Outcome::Pass
        );
        assert!(matches!(
            check(&pod(json!({"containers": [{"image": "a:1"}, {"image": "b:latest"}]})), &pattern),
            Outcome::Fail { path, .. } if path == "/spec/containers/1/image/"
        ));
        // `*` asks for a value.
        let pattern = json!({"metadata": {"labels": {"team": "*"}}});
        assert!(matches!(
            check(&pod(json!({})), &pattern),
            Outcome::Fail { .. }
        ));
        let pattern = json!({"metadata": {"labels": {"team": "?*"}}});
        assert!(matches!(
            check(&pod(json!({})), &pattern),
            Outcome::Fail { .. }
        ));
    }

    #[test]
    fn conditional_anchors_skip_what_they_do_not_hold_for() {
        // Only containers named "web" need a tag.
        let pattern = json!({"spec": {"containers": [{"(name)": "web", "image": "*:*"}]}});
        let other = pod(json!({"containers": [{"name": "db", "image": "db"}]}));
        assert!(matches!(check(&other, &pattern), Outcome::Skip(_)));
        let mixed = pod(
            json!({"containers": [{"name": "db", "image": "db"}, {"name": "web", "image": "w:1"}]}),
        );
        assert_eq!(check(&mixed, &pattern), Outcome::Pass);
        let bad = pod(json!({"containers": [{"name": "web", "image": "w"}]}));
        assert!(matches!(check(&bad, &pattern), Outcome::Fail { .. }));
    }

    #[test]
    fn equality_negation_existence_and_global_anchors() {
        let pattern = json!({"spec": {"=(hostNetwork)": false}});
        assert_eq!(check(&pod(json!({})), &pattern), Outcome::Pass);
        assert!(matches!(
            check(&pod(json!({"hostNetwork": true})), &pattern),
            Outcome::Fail { .. }
        ));

        let pattern = json!({"spec": {"X(hostPID)": "null"}});
        assert_eq!(check(&pod(json!({})), &pattern), Outcome::Pass);
        assert!(matches!(
            check(&pod(json!({"hostPID": false})), &pattern),
            Outcome::Fail { .. }
        ));

        let pattern = json!({"spec": {"^(containers)": [{"image": "nginx*"}]}});
        assert_eq!(
            check(
                &pod(json!({"containers": [{"image": "x"}, {"image": "nginx:1"}]})),
                &pattern
            ),
            Outcome::Pass
        );
        assert!(matches!(
            check(&pod(json!({"containers": [{"image": "x"}]})), &pattern),
            Outcome::Fail { .. }
        ));

        let pattern = json!({"spec": {"containers": [{"<(image)": "*corp.com*"}], "imagePullSecrets": [{"name": "regcred"}]}});
        let outside = pod(json!({"containers": [{"image": "nginx"}]}));
        assert!(matches!(check(&outside, &pattern), Outcome::Skip(_)));
        let inside = pod(
            json!({"containers": [{"image": "corp.com/a"}], "imagePullSecrets": [{"name": "regcred"}]}),
        );
        assert_eq!(check(&inside, &pattern), Outcome::Pass);
        let missing = pod(json!({"containers": [{"image": "corp.com/a"}]}));
        assert!(matches!(check(&missing, &pattern), Outcome::Fail { .. }));
    }

    #[test]
    fn attack_a_value_that_spells_an_anchor_error_is_not_a_skip() {
        // Kyverno reads the kind of an error from its text; a value of the
        // resource quoted in a mismatch could fake a skip.
        let pattern = json!({"spec": {"containers": [{"=(args)": "!*--insecure*"}]}});
        let hostile =
            pod(json!({"containers": [{"args": ["--insecure", "conditional anchor mismatch"]}]}));
        assert!(matches!(check(&hostile, &pattern), Outcome::Fail { .. }));
    }

    #[test]
    fn wildcard_label_keys_are_expanded() {
        let pattern = json!({"metadata": {"labels": {"app.kubernetes.io/*": "web*"}}});
        let labeled = json!({"metadata": {"labels": {"app.kubernetes.io/name": "web-1"}}});
        assert_eq!(check(&labeled, &pattern), Outcome::Pass);
        let unlabeled = json!({"metadata": {"labels": {"team": "web"}}});
        assert!(matches!(check(&unlabeled, &pattern), Outcome::Fail { .. }));
        // Kyverno's quirk, kept: an unmatched `?*` becomes `00`, which a
        // missing value (read as the quantity 0) equals.
        let pattern = json!({"metadata": {"labels": {"app.kubernetes.io/*": "?*"}}});
        assert_eq!(check(&unlabeled, &pattern), Outcome::Pass);
    }
}
