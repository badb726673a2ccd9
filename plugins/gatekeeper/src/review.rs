//! Reviews a rendered set: every constraint against every object it
//! matches, with `input.review` as Gatekeeper builds it for an object
//! (`kind`, `object`, `name`, `namespace`; no `operation`, no `userInfo`),
//! `input.parameters` from the constraint and `data.inventory` from the
//! whole rendered set plus the inventory files.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cel::Inputs;
use crate::constraint::Action;
use crate::inventory::Inventory;
use crate::matching::{NamespaceLabels, Target};
use crate::policy::Policy;
use crate::template::Program;

/// How deep a reviewed object (or inventory object) may nest; deeper ones
/// are refused with an error finding rather than risking the guest's stack.
pub const MAX_OBJECT_DEPTH: usize = 100;

/// One manifest of the rendered set (JSON text, as the host sends it).
#[derive(Debug, Clone, Copy)]
pub struct Manifest<'a> {
    /// The object as JSON text.
    pub content: &'a str,
    /// Where it came from, for messages.
    pub source: Option<&'a str>,
}

/// Identifies an object in a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectId {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// A `dryrun` constraint's violation.
    Info,
    /// A `warn` constraint's violation.
    Warning,
    /// A `deny` constraint's violation, or an object that cannot be reviewed.
    Error,
}

impl From<Action> for Severity {
    fn from(action: Action) -> Self {
        match action {
            Action::Deny => Severity::Error,
            Action::Warn => Severity::Warning,
            Action::Dryrun => Severity::Info,
        }
    }
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The object (`None` when its text could not even be read).
    pub object: Option<ObjectId>,
    /// `[constraint] msg`, or why the object could not be reviewed.
    pub message: String,
    /// The violation's `msg` alone (empty for other findings).
    pub msg: String,
    /// The constraint's `metadata.name` (empty for other findings).
    pub constraint: String,
    /// From the constraint's `enforcementAction`.
    pub severity: Severity,
}

/// Why a review could not be done (the policy could not do its job).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    /// regorus failed on a rule (a runtime error, or the execution limit).
    #[error(
        "constraint `{constraint}` ({kind}, template {file}) on {object}: Rego evaluation failed: {message}"
    )]
    Evaluation {
        /// The constraint.
        constraint: String,
        /// Its kind.
        kind: String,
        /// The template's file.
        file: String,
        /// `KIND NAMESPACE/NAME`.
        object: String,
        /// regorus's message.
        message: String,
    },
    /// A template's CEL failed on an object: a runtime error of an
    /// expression (unless the source's `failurePolicy` is `Ignore`), a
    /// result that is not a bool, or the cost budget spent.
    #[error(
        "constraint `{constraint}` ({kind}, template {file}) on {object}: CEL evaluation failed: {message}"
    )]
    Cel {
        /// The constraint.
        constraint: String,
        /// Its kind.
        kind: String,
        /// The template's file.
        file: String,
        /// `KIND NAMESPACE/NAME`.
        object: String,
        /// Which expression of the template (its field), and the error.
        message: String,
    },
    /// The inventory could not be given to a template's engine.
    #[error("data.inventory for template {file}: {message}")]
    Data {
        /// The template's file.
        file: String,
        /// regorus's message.
        message: String,
    },
}

/// One object of the set, read once.
struct Object {
    id: ObjectId,
    group: String,
    /// `metadata.generateName` (`""` when absent).
    generate_name: String,
    labels: Option<serde_json::Map<String, Value>>,
    /// `input.review` for it.
    review: regorus::Value,
    /// The object as a CEL value (only when a template is evaluated by
    /// CEL): `Err` when it cannot be converted.
    cel: Option<Result<kiln_cel_k8s::Value, String>>,
}

fn depth(value: &Value) -> usize {
    // Iterative: a hostile depth must not exhaust the stack here either.
    let mut max = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        if d > MAX_OBJECT_DEPTH {
            break;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

fn id_of(value: &Value) -> ObjectId {
    let s = |p: &str| value.pointer(p).and_then(Value::as_str);
    ObjectId {
        api_version: s("/apiVersion").unwrap_or_default().to_owned(),
        kind: s("/kind").unwrap_or_default().to_owned(),
        namespace: s("/metadata/namespace")
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        name: s("/metadata/name").unwrap_or_default().to_owned(),
    }
}

impl ObjectId {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// Reads one object; `Err` is the reason it cannot be reviewed. With
/// `cel_depth`, also converts it into a CEL value (nested at most that deep).
fn read(value: Value, cel_depth: Option<usize>) -> Result<(Object, regorus::Value), String> {
    if !value.is_object() {
        return Err("not a JSON object".into());
    }
    if depth(&value) > MAX_OBJECT_DEPTH {
        return Err(format!(
            "nests deeper than {MAX_OBJECT_DEPTH} levels; not reviewed"
        ));
    }
    let id = id_of(&value);
    let (group, version) = match id.api_version.split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), id.api_version.clone()),
    };
    let labels = value
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned();
    let generate_name = value
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let cel = cel_depth
        .map(|depth| kiln_cel_k8s::from_json(&value, depth).map_err(|e| format!("object: {e}")));
    let object = regorus::Value::from(value);
    let mut review = BTreeMap::new();
    let kind = BTreeMap::from([
        (
            regorus::Value::from("group"),
            regorus::Value::from(group.as_str()),
        ),
        (
            regorus::Value::from("version"),
            regorus::Value::from(version.as_str()),
        ),
        (
            regorus::Value::from("kind"),
            regorus::Value::from(id.kind.as_str()),
        ),
    ]);
    review.insert(regorus::Value::from("kind"), regorus::Value::from(kind));
    review.insert(regorus::Value::from("object"), object.clone());
    review.insert(
        regorus::Value::from("name"),
        regorus::Value::from(id.name.as_str()),
    );
    if let Some(ns) = &id.namespace {
        review.insert(
            regorus::Value::from("namespace"),
            regorus::Value::from(ns.as_str()),
        );
    }
    Ok((
        Object {
            id,
            group,
            generate_name,
            labels,
            review: regorus::Value::from(review),
            cel,
        },
        object,
    ))
}

/// Reviews `manifests` (the whole rendered set) with `policy`.
pub fn review(policy: &Policy, manifests: &[Manifest<'_>]) -> Result<Vec<Finding>, ReviewError> {
    let mut findings = Vec::new();
    let mut objects = Vec::new();
    let mut inventory = Inventory::default();
    let mut namespaces = NamespaceLabels::new();
    let mut add = |object: &Object, value: regorus::Value, namespaces: &mut NamespaceLabels| {
        let id = &object.id;
        inventory.add(
            &id.api_version,
            &id.kind,
            id.namespace.as_deref(),
            &id.name,
            value,
        );
        // A rendered Namespace's labels join the inventory's (server-side
        // apply keeps the labels other managers set), its own winning.
        if object.group.is_empty() && id.kind == "Namespace" {
            namespaces
                .entry(id.name.clone())
                .or_default()
                .extend(object.labels.clone().unwrap_or_default());
        }
    };
    // Inventory files first: the rendered set's version of an object wins.
    for value in &policy.inventory {
        if let Ok((object, value)) = read(value.clone(), None) {
            add(&object, value, &mut namespaces);
        }
    }
    let cel_depth = policy.templates.iter().find_map(|t| match &t.program {
        Program::Cel(program) => Some(program.max_value_depth()),
        Program::Rego { .. } => None,
    });
    for manifest in manifests {
        let parsed: Result<Value, String> =
            serde_json::from_str(manifest.content).map_err(|e| e.to_string());
        match parsed.and_then(|v| {
            let id = id_of(&v);
            read(v, cel_depth)
                .map_err(|e| (e, id))
                .map_err(|(e, id)| format!("{}: {e}", id.describe()))
        }) {
            Ok((object, value)) => {
                add(&object, value, &mut namespaces);
                objects.push(object);
            }
            Err(reason) => findings.push(Finding {
                object: None,
                message: format!(
                    "{}cannot be reviewed: {reason}",
                    manifest
                        .source
                        .map(|s| format!("{s}: "))
                        .unwrap_or_default()
                ),
                msg: String::new(),
                constraint: String::new(),
                severity: Severity::Error,
            }),
        }
    }
    let data = inventory.into_data();
    let mut engines: BTreeMap<usize, regorus::Engine> = BTreeMap::new();
    for (constraint, template_index) in &policy.constraints {
        let template = &policy.templates[*template_index];
        let severity = Severity::from(constraint.action);
        let matching: Vec<&Object> = objects
            .iter()
            .filter(|object| {
                let target = Target {
                    group: &object.group,
                    kind: &object.id.kind,
                    name: &object.id.name,
                    generate_name: &object.generate_name,
                    namespace: object.id.namespace.as_deref(),
                    labels: object.labels.as_ref(),
                };
                match constraint.matching.matches(&target, &namespaces) {
                    Ok(matched) => matched,
                    Err(e) => {
                        findings.push(Finding {
                            object: Some(object.id.clone()),
                            message: format!("[{}] {e}; not reviewed", constraint.name),
                            msg: String::new(),
                            constraint: constraint.name.clone(),
                            severity,
                        });
                        false
                    }
                }
            })
            .collect();
        let violations = match &template.program {
            Program::Rego { engine, rule } => {
                if !engines.contains_key(template_index) {
                    let mut engine = (**engine).clone();
                    engine.set_strict_builtin_errors(false);
                    engine
                        .add_data(data.clone())
                        .map_err(|e| ReviewError::Data {
                            file: template.file.clone(),
                            message: e.to_string(),
                        })?;
                    engines.insert(*template_index, engine);
                }
                let engine = engines.get_mut(template_index).expect("inserted above");
                rego_violations(engine, rule, template, constraint, &matching)?
            }
            Program::Cel(program) => cel_violations(program, template, constraint, &matching)?,
        };
        for (object, msg) in violations {
            findings.push(Finding {
                object: Some(object.clone()),
                message: format!("[{}] {msg}", constraint.name),
                msg,
                constraint: constraint.name.clone(),
                severity,
            });
        }
    }
    Ok(findings)
}

/// The violations of `constraint` (a Rego template's) on `objects`.
fn rego_violations(
    engine: &mut regorus::Engine,
    rule: &str,
    template: &crate::template::Template,
    constraint: &crate::constraint::Constraint,
    objects: &[&Object],
) -> Result<Vec<(ObjectId, String)>, ReviewError> {
    let parameters = constraint.parameters.clone().map(regorus::Value::from);
    let mut out = Vec::new();
    for object in objects {
        let mut input = BTreeMap::from([(regorus::Value::from("review"), object.review.clone())]);
        if let Some(p) = &parameters {
            input.insert(regorus::Value::from("parameters"), p.clone());
        }
        engine.set_input(regorus::Value::from(input));
        let result = engine
            .eval_rule(rule.to_owned())
            .map_err(|e| ReviewError::Evaluation {
                constraint: constraint.name.clone(),
                kind: constraint.kind.clone(),
                file: template.file.clone(),
                object: object.id.describe(),
                message: e.to_string(),
            })?;
        let violations: Vec<&regorus::Value> = match &result {
            regorus::Value::Set(set) => set.iter().collect(),
            regorus::Value::Array(items) => items.iter().collect(),
            _ => Vec::new(),
        };
        for violation in violations {
            let msg = match &violation["msg"] {
                regorus::Value::String(s) => s.to_string(),
                regorus::Value::Undefined => violation.to_string(),
                other => other.to_string(),
            };
            out.push((object.id.clone(), msg));
        }
    }
    Ok(out)
}

/// The admission request Gatekeeper's CEL engine sees for an object: a
/// creation (Kiln reviews what it is about to apply).
fn cel_request(object: &Object) -> serde_json::Value {
    let version = object
        .id
        .api_version
        .rsplit_once('/')
        .map_or(object.id.api_version.as_str(), |(_, v)| v);
    serde_json::json!({
        "kind": {"group": object.group, "version": version, "kind": object.id.kind},
        "name": object.id.name,
        "namespace": object.id.namespace.clone().unwrap_or_default(),
        "operation": "CREATE",
        "userInfo": {},
        "dryRun": false,
    })
}

/// The violations of `constraint` (a CEL template's) on `objects`.
fn cel_violations(
    program: &crate::cel::CelProgram,
    template: &crate::template::Template,
    constraint: &crate::constraint::Constraint,
    objects: &[&Object],
) -> Result<Vec<(ObjectId, String)>, ReviewError> {
    let depth = program.max_value_depth();
    let failure = |object: &Object, message: String| ReviewError::Cel {
        constraint: constraint.name.clone(),
        kind: constraint.kind.clone(),
        file: template.file.clone(),
        object: object.id.describe(),
        message,
    };
    let convert = |value: &serde_json::Value, what: &str| {
        kiln_cel_k8s::from_json(value, depth).map_err(|e| format!("{what}: {e}"))
    };
    let constraint_value = convert(&constraint.object, "the constraint");
    let parameters = constraint
        .parameters
        .as_ref()
        .map(|p| convert(p, "the constraint's spec.parameters"))
        .transpose();
    let mut out = Vec::new();
    for object in objects {
        let (constraint_value, parameters, value) =
            match (&constraint_value, &parameters, &object.cel) {
                (Ok(c), Ok(p), Some(Ok(o))) => (c, p, o),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Some(Err(e))) => {
                    return Err(failure(object, e.clone()));
                }
                (_, _, None) => {
                    return Err(failure(object, "the object was not read for CEL".into()));
                }
            };
        let namespace_object = match &object.id.namespace {
            Some(ns) => serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}
            }),
            None => serde_json::Value::Null,
        };
        let inputs = Inputs {
            object: value.clone(),
            request: convert(&cel_request(object), "the request")
                .map_err(|e| failure(object, e))?,
            constraint: constraint_value.clone(),
            parameters: parameters.clone().unwrap_or(kiln_cel_k8s::Value::Null),
            namespace_object: convert(&namespace_object, "the namespace")
                .map_err(|e| failure(object, e))?,
        };
        let messages = program
            .evaluate(&inputs)
            .map_err(|e| failure(object, e.to_string()))?;
        out.extend(messages.into_iter().map(|m| (object.id.clone(), m)));
    }
    Ok(out)
}
