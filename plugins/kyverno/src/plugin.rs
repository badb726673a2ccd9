//! The component glue: settings and manifests from the host, policy files
//! through the `source` interface, the destination through `cluster`,
//! findings back.

use std::cell::RefCell;
use std::collections::BTreeMap;

use kiln_plugin_sdk::{Outcome, Param, ReviewRequest, RulePolicy, RuleResult};
use kiln_plugin_sdk::{cluster, source};
use serde_json::Value;

use crate::engine::Status;
use crate::settings::Settings;
use crate::{model, review};

struct Kyverno;

fn settings(params: &[Param]) -> Result<Settings, String> {
    Settings::parse(params.iter().map(|p| (p.key.as_str(), p.value.as_str())))
}

fn load(path: &str) -> Result<Vec<model::Document>, String> {
    let describe =
        |e: &source::SourceError| format!("setting `policy`: {path}: {}", source::describe(e));
    let Some(files) = source::manifest_files(path).map_err(|e| describe(&e))? else {
        return Err(format!(
            "setting `policy`: {path}: no such file or directory"
        ));
    };
    let mut out = Vec::new();
    for file in files {
        let text = source::read_to_string(&file).map_err(|e| describe(&e))?;
        out.extend(model::documents(&file, &text)?);
    }
    if out.is_empty() {
        // A typo in `kind`, or a policy kind not run yet: never a review
        // that checks nothing and passes.
        return Err(format!(
            "setting `policy`: {path}: no Kyverno policy found (kyverno.io ClusterPolicy or Policy, policies.kyverno.io ValidatingPolicy)"
        ));
    }
    Ok(out)
}

impl RulePolicy for Kyverno {
    fn validate_settings(params: Vec<Param>) -> Result<(), String> {
        settings(&params).map(|_| ())
    }

    fn review_rules(request: ReviewRequest) -> Result<Vec<RuleResult>, String> {
        let settings = settings(&request.settings)?;
        let mut documents = Vec::new();
        for path in &settings.paths {
            documents.extend(load(path)?);
        }
        let set = model::PolicySet::of(documents);
        settings.check_actions(&set)?;
        let objects = request
            .manifests
            .iter()
            .map(|m| {
                serde_json::from_str::<Value>(&m.content)
                    .map_err(|e| format!("{}: {e}", m.source.as_deref().unwrap_or("manifest")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        crate::functions::time::set_now(settings.now);
        let mut outcomes = review::review(&set, &objects, &Host::default())?;
        settings.apply(&mut outcomes);
        Ok(outcomes
            .into_iter()
            .map(|o| RuleResult {
                policy: o.policy,
                rule: o.rule,
                manifest: u32::try_from(o.object).ok(),
                field_path: None,
                outcome: match o.status {
                    Status::Pass => Outcome::Pass,
                    Status::Skip => Outcome::Skip,
                    Status::Error => Outcome::Error,
                    Status::Fail if o.enforce => Outcome::Fail,
                    Status::Fail => Outcome::Warn,
                },
                message: o.message,
            })
            .collect())
    }
}

/// An object of the destination: kind, namespace, name.
type Key = (String, Option<String>, String);

/// The destination, as the host answers for it; each object asked once per
/// review.
#[derive(Default)]
struct Host {
    objects: RefCell<BTreeMap<Key, Result<Option<Value>, String>>>,
}

impl Host {
    fn get(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, String> {
        let key = (
            kind.to_owned(),
            namespace.map(str::to_owned),
            name.to_owned(),
        );
        if let Some(known) = self.objects.borrow().get(&key) {
            return known.clone();
        }
        let found = match cluster::get("v1", kind, namespace, name) {
            Ok(None) => Ok(None),
            Ok(Some(text)) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("the host gave {kind} {name} as invalid JSON: {e}")),
            Err(e) => Err(cluster::describe(&e)),
        };
        self.objects.borrow_mut().insert(key, found.clone());
        found
    }
}

impl review::Destination for Host {
    fn namespace(&self, name: &str) -> Result<Option<Value>, String> {
        self.get("Namespace", None, name)
    }

    fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Value>, String> {
        self.get("ConfigMap", Some(namespace), name)
    }

    fn exists(&self, object: &Value) -> Result<bool, String> {
        let field = |name: &str| object["metadata"][name].as_str();
        let (Some(api_version), Some(kind), Some(name)) = (
            object["apiVersion"].as_str(),
            object["kind"].as_str(),
            field("name"),
        ) else {
            return Ok(false);
        };
        match cluster::exists(api_version, kind, field("namespace"), name) {
            Ok(exists) => Ok(exists),
            // No destination: a creation, as `kyverno test` has it.
            Err(cluster::ClusterError::NoCluster) => Ok(false),
            Err(e) => Err(cluster::describe(&e)),
        }
    }
}

kiln_plugin_sdk::export_rule_policy!(Kyverno);
