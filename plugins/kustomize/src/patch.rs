//! Patches: what a patch text is (strategic merge objects or a JSON 6902
//! operation list) and how it finds the objects it applies to.

use serde::de::DeserializeSeed as _;
use serde_json::Value;

use crate::build::{Id, Res};
use crate::jsonpatch;
use crate::kustomization::PatchOptions;
use crate::scalars;
use crate::select::Selector;
use crate::smp::{self, Outcome};

/// A parsed patch.
#[derive(Debug, Clone)]
pub enum Patch {
    /// Strategic merge patches (one per YAML document).
    Strategic(Vec<Value>),
    /// JSON 6902 operations.
    Json(Vec<jsonpatch::Op>),
}

/// Parses a patch: a YAML (or JSON) list is a JSON 6902 patch, objects are
/// strategic merge patches.
pub fn parse(text: &str) -> Result<Patch, String> {
    crate::check_yaml_text(text)?;
    // Like kustomize: a patch that starts with `[` is JSON, strictly.
    if text.trim_start().starts_with('[') {
        serde_json::from_str::<Value>(text).map_err(|e| {
            format!("a patch starting with `[` must be a JSON 6902 patch in JSON: {e}")
        })?;
        return jsonpatch::parse(text)
            .map(Patch::Json)
            .map_err(|e| format!("JSON 6902 patch: {e}"));
    }
    let mut documents = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let read = scalars::Read::new(text, scalars::Reader::Kyaml);
        let value = read.deserialize(document).map_err(|e| match e.location() {
            Some(l) => format!("line {}: {e}", l.line()),
            None => e.to_string(),
        })?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    match documents.as_slice() {
        [] => Err("the patch is empty".into()),
        [Value::Array(_)] => jsonpatch::parse(text)
            .map(Patch::Json)
            .map_err(|e| format!("JSON 6902 patch: {e}")),
        _ => {
            for document in &documents {
                if !document.is_object() {
                    return Err("a strategic merge patch document is not an object".into());
                }
            }
            Ok(Patch::Strategic(documents))
        }
    }
}

/// Applies `patch` to the objects `target` selects, or (strategic merge
/// without a target) to the one object each patch document names.
pub fn apply(
    resources: &mut Vec<Res>,
    patch: &Patch,
    target: Option<&Selector>,
    options: &PatchOptions,
    strict_targets: bool,
) -> Result<(), String> {
    let Some(target) = target else {
        let Patch::Strategic(documents) = patch else {
            return Err("a JSON 6902 patch needs a `target`".into());
        };
        for document in documents {
            let id = Id::of(document);
            let matches: Vec<usize> = resources
                .iter()
                .enumerate()
                .filter(|(_, r)| r.ids().iter().any(|i| i.same(&id)))
                .map(|(i, _)| i)
                .collect();
            match matches.as_slice() {
                [index] => strategic(resources, *index, document, options, false),
                [] => {
                    return Err(format!(
                        "the patch is for {id}, which is not in the build (a patch without \
                         `target` names its object by apiVersion, kind, name and namespace)"
                    ));
                }
                _ => return Err(format!("the patch for {id} matches several objects")),
            }
        }
        resources.retain(|r| !r.value.is_null());
        return Ok(());
    };
    let matcher = target.matcher().map_err(|e| format!("target: {e}"))?;
    let selected: Vec<usize> = resources
        .iter()
        .enumerate()
        .filter(|(_, r)| matcher.selects(r))
        .map(|(i, _)| i)
        .collect();
    if selected.is_empty() && strict_targets {
        return Err(format!(
            "the patch target ({}) selects no object of the build",
            target.describe()
        ));
    }
    // Deleted objects are removed at the end, so indexes stay valid.
    for &index in &selected {
        match patch {
            Patch::Json(ops) => {
                // A rename by a JSON patch is not remembered (references
                // keep the old name), as in kustomize.
                let res = &mut resources[index];
                jsonpatch::apply(&mut res.value, ops)
                    .map_err(|e| format!("{}: {e}", res.describe()))?;
                // kustomize applies it to the object's JSON: the nulls it
                // reads back are written `null`, which a merge keeps.
                res.blank_nulls.clear();
            }
            Patch::Strategic(documents) => {
                for document in documents {
                    strategic(resources, index, document, options, true);
                }
            }
        }
    }
    resources.retain(|r| !r.value.is_null());
    Ok(())
}

/// Merges one strategic merge patch into `resources[index]`: its name,
/// namespace and kind stay unless the options allow the patch to change
/// them (kustomize's rule); `$patch: delete` marks it deleted (`null`).
fn strategic(
    resources: &mut [Res],
    index: usize,
    patch: &Value,
    options: &PatchOptions,
    targeted: bool,
) {
    let res = &mut resources[index];
    let before = res.value.clone();
    if options.allow_name_change || options.allow_kind_change {
        res.remember();
    }
    let mut patch = patch.clone();
    if targeted && let Some(map) = patch.as_object_mut() {
        // The target's group and version; the patch's kind.
        map.insert("apiVersion".into(), before["apiVersion"].clone());
    }
    // kyaml's merge walks the whole object: fields written without a
    // value go (once; after it the object no longer has any it walks).
    smp::drop_blank_nulls(&mut res.value, &std::mem::take(&mut res.blank_nulls));
    if smp::apply(&mut res.value, &patch) == Outcome::Deleted {
        res.value = Value::Null;
        return;
    }
    let value = &mut res.value;
    if !options.allow_kind_change {
        value["kind"] = before["kind"].clone();
    }
    if !options.allow_name_change {
        value["metadata"]["name"] = before["metadata"]["name"].clone();
    }
    match before["metadata"].get("namespace") {
        Some(ns) => value["metadata"]["namespace"] = ns.clone(),
        None => {
            if let Some(meta) = value["metadata"].as_object_mut() {
                meta.remove("namespace");
            }
        }
    }
    if value["metadata"].as_object().is_some_and(|m| m.is_empty()) {
        value.as_object_mut().map(|o| o.remove("metadata"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_json_patches_and_objects_strategic_merges() {
        assert!(matches!(
            parse("- {op: remove, path: /a}"),
            Ok(Patch::Json(_))
        ));
        assert!(matches!(
            parse("[{\"op\": \"remove\", \"path\": \"/a\"}]"),
            Ok(Patch::Json(_))
        ));
        assert!(
            parse("[{op: remove, path: /a}]")
                .unwrap_err()
                .contains("in JSON")
        );
        match parse("kind: A\nmetadata: {name: a}\n---\nkind: B\nmetadata: {name: b}\n") {
            Ok(Patch::Strategic(d)) => assert_eq!(d.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(parse("").is_err());
        assert!(
            parse("- {op: jump, path: /a}")
                .unwrap_err()
                .contains("jump")
        );
    }
}
