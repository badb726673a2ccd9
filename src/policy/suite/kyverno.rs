//! `kyverno test` files (`cli.kyverno.io/v1alpha1` `Test`), read unchanged:
//! the test's policies are the Kyverno policy plugin's `policy` settings,
//! its resources are reviewed at once, and every resource of every
//! `results` entry is one case, passing when the rule's result on that
//! resource is the one expected (a `skip` when the rule did not apply).
//!
//! What `kyverno test` reads and Kiln does not run (values, variables,
//! user info, `checks`, exceptions) is an error naming the field, never a
//! test that passes without checking.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{Case, Options, PolicySpec, RuleExpectation, Test};
use crate::plugin::{RuleOutcome, RuleResult};
use crate::policy::Mode;

/// The source view of a Kyverno test: `root` (where the suites were found),
/// or the suite directory's parent when the suite directory is `root`
/// itself, since tests name their policy as `../policy.yaml`.
pub(super) fn view_root(root: &Path, suite_dir: &Path) -> PathBuf {
    let same = match (root.canonicalize(), suite_dir.canonicalize()) {
        (Ok(root), Ok(dir)) => root == dir,
        _ => false,
    };
    match suite_dir
        .canonicalize()
        .ok()
        .and_then(|d| d.parent().map(Path::to_owned))
    {
        Some(parent) if same => parent,
        _ => root.to_owned(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTest {
    #[serde(default)]
    metadata: Option<Meta>,
    /// The older, top-level form of the name.
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    results: Vec<RawResult>,
    // Read so that they are refused by name, never ignored.
    #[serde(default)]
    exceptions: Vec<Value>,
    #[serde(default)]
    variables: Option<String>,
    #[serde(default)]
    user_info: Option<String>,
    #[serde(default)]
    values: Option<Value>,
    #[serde(default)]
    checks: Vec<Value>,
    #[serde(default)]
    target_resources: Vec<Value>,
    #[serde(default)]
    json_payload: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(default, rename = "kind")]
    _kind: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawResult {
    policy: String,
    #[serde(default)]
    rule: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    resources: Vec<String>,
    /// The older single-resource form.
    #[serde(default)]
    resource: Option<String>,
    result: String,
    #[serde(default)]
    is_validating_policy: bool,
    #[serde(default)]
    is_validating_admission_policy: bool,
    #[serde(default)]
    is_mutating_policy: bool,
    #[serde(default)]
    is_image_validating_policy: bool,
    #[serde(default)]
    is_deleting_policy: bool,
    #[serde(default)]
    is_generating_policy: bool,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    patched_resources: Option<String>,
    #[serde(default)]
    generated_resource: Option<String>,
    #[serde(default)]
    cloned_resource: Option<String>,
}

/// Parses a Kyverno test (`document`, in `suite_dir`, whose path in the
/// source view is `view_dir`): its name, if it has one, and the test.
pub(super) fn test(
    document: &Value,
    suite_dir: &Path,
    view_dir: &str,
    options: &Options,
) -> Result<(Option<String>, Test), String> {
    let raw: RawTest = serde_json::from_value(document.clone()).map_err(|e| e.to_string())?;
    let unsupported = [
        ("exceptions", !raw.exceptions.is_empty()),
        ("variables", raw.variables.is_some()),
        ("userinfo", raw.user_info.is_some()),
        ("values", raw.values.is_some()),
        ("checks", !raw.checks.is_empty()),
        ("targetResources", !raw.target_resources.is_empty()),
        ("jsonPayload", raw.json_payload.is_some()),
        ("context", raw.context.is_some()),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(format!(
            "`{field}` is not supported by kiln policy test yet (Kiln runs policies, resources and results)"
        ));
    }
    if raw.policies.is_empty() {
        return Err("`policies` is empty: name the policy files the test runs".into());
    }
    if raw.resources.is_empty() {
        return Err("`resources` is empty: name the resource files the test reviews".into());
    }
    let name = raw.metadata.and_then(|m| m.name).or(raw.name);
    let settings = raw
        .policies
        .iter()
        .map(|file| {
            let path = match view_dir {
                "" | "." => file.clone(),
                dir => format!("{dir}/{file}"),
            };
            ("policy".to_owned(), path)
        })
        .collect();
    let mut cases = Vec::new();
    for (index, result) in raw.results.into_iter().enumerate() {
        cases.extend(result_cases(index, result)?);
    }
    let test = Test {
        name: name.clone().unwrap_or_else(|| "test".into()),
        policies: vec![PolicySpec {
            plugin: options.kyverno_plugin.clone(),
            settings,
            mode: Mode::Enforce,
            message_prefixes: Vec::new(),
        }],
        objects: raw.resources.iter().map(|r| suite_dir.join(r)).collect(),
        skip: false,
        cases,
    };
    Ok((name, test))
}

/// The cases of one `results` entry: one per resource.
fn result_cases(index: usize, result: RawResult) -> Result<Vec<Case>, String> {
    let at = |m: &str| format!("results[{index}] (policy {}): {m}", result.policy);
    let kinds = [
        ("isMutatingPolicy", result.is_mutating_policy),
        ("isImageValidatingPolicy", result.is_image_validating_policy),
        ("isDeletingPolicy", result.is_deleting_policy),
        ("isGeneratingPolicy", result.is_generating_policy),
        ("patchedResources", result.patched_resources.is_some()),
        ("generatedResource", result.generated_resource.is_some()),
        ("clonedResource", result.cloned_resource.is_some()),
    ];
    if let Some((field, _)) = kinds.iter().find(|(_, set)| *set) {
        return Err(at(&format!(
            "`{field}`: Kiln runs validation only (no mutate, generate, delete or image verification)"
        )));
    }
    let _ = (
        result.is_validating_policy,
        result.is_validating_admission_policy,
    );
    let outcome = match result.result.as_str() {
        "pass" => RuleOutcome::Pass,
        "fail" => RuleOutcome::Fail,
        "warn" => RuleOutcome::Warn,
        "error" => RuleOutcome::Error,
        "skip" => RuleOutcome::Skip,
        other => {
            return Err(at(&format!(
                "result `{other}` is not pass, fail, warn, error or skip"
            )));
        }
    };
    let resources: Vec<String> = result
        .resources
        .iter()
        .cloned()
        .chain(result.resource.clone())
        .collect();
    if resources.is_empty() {
        return Err(at("`resources` is empty"));
    }
    Ok(resources
        .into_iter()
        .map(|resource| {
            let (namespace, name) = match resource.split_once('/') {
                Some((ns, name)) => (Some(ns.to_owned()), name.to_owned()),
                None => (result.namespace.clone(), resource.clone()),
            };
            let rule = RuleExpectation {
                policy: result.policy.clone(),
                rule: result.rule.clone(),
                kind: result.kind.clone().filter(|k| !k.is_empty()),
                namespace,
                name,
                outcome,
            };
            Case {
                name: format!(
                    "{}/{} {}{resource}: {}",
                    result.policy,
                    result.rule,
                    result
                        .kind
                        .as_deref()
                        .map(|k| format!("{k} "))
                        .unwrap_or_default(),
                    result.result
                ),
                objects: Vec::new(),
                single_object: false,
                settings: Vec::new(),
                namespace: String::new(),
                skip: false,
                assertions: Vec::new(),
                rule: Some(rule),
            }
        })
        .collect())
}

/// Whether a case's expectation holds for the rule results of its test's
/// review: `Ok` when it does, else why not.
pub(super) fn check(expected: &RuleExpectation, results: &[RuleResult]) -> Result<(), String> {
    let policy_named = |name: &str| {
        name == expected.policy
            || expected
                .policy
                .split_once('/')
                .is_some_and(|(_, bare)| bare == name)
    };
    let rule_named = |rule: &str| {
        rule == expected.rule
            || rule.strip_prefix("autogen-") == Some(expected.rule.as_str())
            || rule.strip_prefix("autogen-cronjob-") == Some(expected.rule.as_str())
    };
    let object_named = |r: &RuleResult| {
        r.object.as_ref().is_some_and(|o| {
            o.name == expected.name
                && expected.kind.as_ref().is_none_or(|k| *k == o.kind)
                && expected
                    .namespace
                    .as_ref()
                    .is_none_or(|ns| *ns == o.namespace.as_deref().unwrap_or("default"))
        })
    };
    let mut found = results
        .iter()
        .filter(|r| policy_named(&r.rule.policy) && rule_named(&r.rule.rule) && object_named(r));
    let got = found.next();
    let holds = |outcome: RuleOutcome| match expected.outcome {
        // An audited failure is a `warn` result to Kiln, a `fail` to
        // `kyverno test` (which says `warn` only for unscored policies).
        RuleOutcome::Fail | RuleOutcome::Warn => {
            matches!(outcome, RuleOutcome::Fail | RuleOutcome::Warn)
        }
        other => outcome == other,
    };
    match got {
        Some(result) if holds(result.outcome) => Ok(()),
        Some(result) => Err(format!(
            "expected {}, got {}{}",
            expected.outcome,
            result.outcome,
            if result.message.is_empty() {
                String::new()
            } else {
                format!(": {}", result.message)
            }
        )),
        None if expected.outcome == RuleOutcome::Skip => Ok(()),
        None => Err(format!(
            "expected {}, but the rule did not apply to it (skip)",
            expected.outcome
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{ObjectRef, RuleRef};

    fn parse(yaml: &str) -> Result<Test, String> {
        let document: Value = serde_yaml::from_str(yaml).unwrap();
        test(
            &document,
            Path::new("suite"),
            "pol/.kyverno-test",
            &Options::default(),
        )
        .map(|(_, t)| t)
    }

    const TEST: &str = "
apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata:
  name: t
policies: [../policy.yaml]
resources: [resource.yaml]
results:
- policy: require-labels
  rule: check-team
  kind: Pod
  resources: [good, ns1/bad]
  result: fail
";

    #[test]
    fn each_resource_of_each_result_is_a_case() {
        let test = parse(TEST).unwrap();
        assert_eq!(test.name, "t");
        assert_eq!(
            test.policies[0].settings,
            vec![(
                "policy".to_owned(),
                "pol/.kyverno-test/../policy.yaml".to_owned()
            )]
        );
        assert_eq!(test.objects, vec![PathBuf::from("suite/resource.yaml")]);
        assert_eq!(test.cases.len(), 2);
        let second = test.cases[1].rule.as_ref().unwrap();
        assert_eq!(second.namespace.as_deref(), Some("ns1"));
        assert_eq!(second.name, "bad");
        assert_eq!(second.outcome, RuleOutcome::Fail);
        assert_eq!(
            test.cases[1].name,
            "require-labels/check-team Pod ns1/bad: fail"
        );
    }

    #[test]
    fn what_kiln_does_not_run_is_refused_by_name() {
        for (field, yaml) in [
            ("variables", "variables: values.yaml"),
            ("exceptions", "exceptions: [e.yaml]"),
            ("checks", "checks: [{match: {}}]"),
            ("userinfo", "userInfo: u.yaml"),
        ] {
            let error = parse(&format!("{TEST}{yaml}\n")).unwrap_err();
            assert!(error.contains(&format!("`{field}`")), "{field}: {error}");
        }
        let mutate = TEST.replace("result: fail", "result: pass\n  patchedResources: p.yaml");
        assert!(parse(&mutate).unwrap_err().contains("patchedResources"));
        let odd = TEST.replace("result: fail", "result: maybe");
        assert!(parse(&odd).unwrap_err().contains("`maybe`"));
        let typo = TEST.replace("result: fail", "result: fail\n  rsult: x");
        assert!(parse(&typo).unwrap_err().contains("rsult"));
    }

    fn result(rule: &str, kind: &str, name: &str, outcome: RuleOutcome) -> RuleResult {
        RuleResult {
            rule: RuleRef {
                policy: "p".into(),
                rule: rule.into(),
            },
            object: Some(ObjectRef {
                api_version: "v1".into(),
                kind: kind.into(),
                namespace: None,
                name: name.into(),
            }),
            field_path: None,
            outcome,
            message: "why".into(),
        }
    }

    fn expect(rule: &str, kind: Option<&str>, name: &str, outcome: RuleOutcome) -> RuleExpectation {
        RuleExpectation {
            policy: "p".into(),
            rule: rule.into(),
            kind: kind.map(Into::into),
            namespace: None,
            name: name.into(),
            outcome,
        }
    }

    #[test]
    fn expectations_are_checked_against_rule_results() {
        let results = vec![
            result("r", "Pod", "a", RuleOutcome::Pass),
            result("autogen-r", "Deployment", "d", RuleOutcome::Fail),
            result("r", "Pod", "w", RuleOutcome::Warn),
        ];
        let check = |e: RuleExpectation| check(&e, &results);
        assert!(check(expect("r", Some("Pod"), "a", RuleOutcome::Pass)).is_ok());
        assert!(check(expect("r", Some("Deployment"), "d", RuleOutcome::Fail)).is_ok());
        // An audited failure answers for `fail`.
        assert!(check(expect("r", None, "w", RuleOutcome::Fail)).is_ok());
        // A rule that did not apply is a skip, and nothing else.
        assert!(check(expect("r", Some("Pod"), "zzz", RuleOutcome::Skip)).is_ok());
        let error = check(expect("r", Some("Pod"), "zzz", RuleOutcome::Pass)).unwrap_err();
        assert!(error.contains("did not apply"), "{error}");
        let error = check(expect("r", Some("Pod"), "a", RuleOutcome::Fail)).unwrap_err();
        assert_eq!(error, "expected fail, got pass: why");
        // The kind narrows: a Pod named `d` has no result.
        assert!(check(expect("r", Some("Pod"), "d", RuleOutcome::Fail)).is_err());
    }
}
