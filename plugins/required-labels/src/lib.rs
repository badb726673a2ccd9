//! # `required-labels`: every object carries the labels a team requires
//!
//! Settings:
//! - `labels` (required): comma-separated label keys, e.g. `app.kubernetes.io/name,team`.
//!   A key may pin a value: `team=payments`.
//! - `kinds` (optional): comma-separated kinds the rule applies to
//!   (default: every kind).
//! - `severity` (optional): `error` (default) or `warning`.
//! - `templates` (optional, default `true`): for workloads with a pod template
//!   (`spec.template`), the labels must be on the pod template too, so that the
//!   pods themselves are labelled.

use kiln_plugin_sdk::{Finding, ObjectRef, Param, Params, Policy, ReviewRequest, Severity};
use serde_json::Value;

const KNOWN_SETTINGS: &[&str] = &["labels", "kinds", "severity", "templates"];

struct RequiredLabels;

struct Settings<'a> {
    labels: Vec<(&'a str, Option<&'a str>)>,
    kinds: Vec<&'a str>,
    severity: Severity,
    templates: bool,
}

fn parse(settings: &[Param]) -> Result<Settings<'_>, String> {
    let params = Params(settings);
    if let Some(key) = params.unknown_key(KNOWN_SETTINGS) {
        return Err(format!(
            "unknown setting `{key}` (known: {})",
            KNOWN_SETTINGS.join(", ")
        ));
    }
    let labels: Vec<_> = params
        .list("labels")
        .into_iter()
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (l, None),
        })
        .collect();
    if labels.is_empty() {
        return Err("setting `labels` is required: a comma-separated list of label keys".into());
    }
    let severity = match params.get("severity").unwrap_or("error") {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        other => {
            return Err(format!(
                "setting `severity`: `{other}` is neither `error` nor `warning`"
            ));
        }
    };
    let templates = match params.get("templates").unwrap_or("true") {
        "true" => true,
        "false" => false,
        other => {
            return Err(format!(
                "setting `templates`: `{other}` is neither `true` nor `false`"
            ));
        }
    };
    Ok(Settings {
        labels,
        kinds: params.list("kinds"),
        severity,
        templates,
    })
}

impl Policy for RequiredLabels {
    fn validate_settings(settings: Vec<Param>) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn review(request: ReviewRequest) -> Result<Vec<Finding>, String> {
        let settings = parse(&request.settings)?;
        let mut findings = Vec::new();
        for manifest in &request.manifests {
            let object: Value = serde_json::from_str(&manifest.content)
                .map_err(|e| format!("manifest from {:?} is not JSON: {e}", manifest.source))?;
            let Some(object_ref) = ObjectRef::of(&object) else {
                continue;
            };
            if !settings.kinds.is_empty() && !settings.kinds.contains(&object_ref.kind.as_str()) {
                continue;
            }
            let mut places = vec![("metadata.labels", object.pointer("/metadata/labels"))];
            if settings.templates && object.pointer("/spec/template").is_some() {
                places.push((
                    "spec.template.metadata.labels",
                    object.pointer("/spec/template/metadata/labels"),
                ));
            }
            for (place, labels) in places {
                for (key, expected) in &settings.labels {
                    let found = labels.and_then(|l| l.get(*key)).and_then(Value::as_str);
                    let message = match (found, expected) {
                        (None, _) => format!("missing required label `{key}`"),
                        (Some(v), Some(want)) if v != *want => {
                            format!("label `{key}` is `{v}`, the policy requires `{want}`")
                        }
                        _ => continue,
                    };
                    findings.push(Finding {
                        object: Some(object_ref.clone()),
                        field_path: Some(format!("{place}.{key}")),
                        message,
                        severity: settings.severity,
                    });
                }
            }
        }
        Ok(findings)
    }
}

kiln_plugin_sdk::export_policy!(RequiredLabels);
