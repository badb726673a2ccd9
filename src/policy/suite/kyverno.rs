//! `kyverno test` files (`cli.kyverno.io/v1alpha1` `Test`), read unchanged:
//! the test's policies are the Kyverno policy plugin's `policy` settings,
//! its resources are reviewed at once, and every resource of every
//! `results` entry is one case, passing when the rule's result on that
//! resource is the one expected. Where the rule gave no result on the
//! resource (it did not apply, or the policy has no rule of that name) the
//! case passes as `kyverno test` passes it, "excluded", saying so; a policy
//! none of the test's files holds fails it ("not found").
//!
//! `exceptions` (PolicyException files) are read by the plugin beside the
//! policies. What `kyverno test` reads and Kiln does not run (values,
//! variables, user info, `checks`) is an error naming the field, never a
//! test that passes without checking.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{Case, Options, PolicySpec, RuleExpectation, Test};
use crate::manifest::Object;
use crate::plugin::{ObjectRef, RuleOutcome, RuleResult};
use crate::policy::Mode;
use crate::source::{EntryKind, SourcePath, SourceView};

/// The source view of a Kyverno test: `root` (where the suites were
/// found), or, for a test in a `.kyverno-test` directory that is `root`
/// itself, that directory's parent: by the convention of kyverno/policies
/// a test names the policy beside it as `../policy.yaml`. Nothing above
/// that parent is ever in view.
pub(super) fn view_root(root: &Path, suite_dir: &Path) -> PathBuf {
    let (Ok(canonical_root), Ok(dir)) = (root.canonicalize(), suite_dir.canonicalize()) else {
        return root.to_owned();
    };
    let conventional = dir.file_name().is_some_and(|n| n == ".kyverno-test");
    match dir.parent() {
        Some(parent) if conventional && canonical_root == dir => parent.to_owned(),
        _ => root.to_owned(),
    }
}

/// The longest policy or rule name a test may give (a Kubernetes object
/// name's bound; rule names are bounded alike).
const MAX_NAME: usize = 253;

/// A `kyverno test` file: every field `cli.kyverno.io/v1alpha1` `Test` has,
/// so that a misspelt one is an error, not a test that checks less.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTest {
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(default, rename = "kind")]
    _kind: Option<String>,
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
    /// PolicyException files, read by the plugin beside the policies.
    #[serde(default)]
    exceptions: Vec<String>,
    // What Kiln does not run: read so that it is refused by name.
    #[serde(default)]
    variables: Option<Value>,
    #[serde(default)]
    userinfo: Option<Value>,
    #[serde(default)]
    values: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    json_payload: Option<Value>,
    #[serde(default)]
    json_payloads: Option<Value>,
    #[serde(default)]
    http_payloads: Option<Value>,
    #[serde(default)]
    envoy_payloads: Option<Value>,
    #[serde(default)]
    target_resources: Option<Value>,
    #[serde(default)]
    param_resources: Option<Value>,
    #[serde(default)]
    cluster_resources: Option<Value>,
    #[serde(default)]
    api_call_responses: Option<Value>,
    #[serde(default)]
    global_context_entries: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
}

/// One `results` entry, every field `kyverno test` knows.
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
    result: String,
    /// Whether the policy is a ValidatingPolicy: the plugin tells by its
    /// kind, so this says nothing Kiln needs.
    #[serde(default, rename = "isValidatingPolicy")]
    _is_validating_policy: bool,
    /// Kiln's other policies: a missing resource always fails here.
    #[serde(default, rename = "failOnMissingResources")]
    _fail_on_missing_resources: bool,
    // What the Kyverno plugin does not run: refused by name.
    #[serde(default)]
    is_validating_admission_policy: bool,
    #[serde(default)]
    is_mutating_admission_policy: bool,
    #[serde(default)]
    is_mutating_policy: bool,
    #[serde(default)]
    is_image_validating_policy: bool,
    #[serde(default)]
    is_deleting_policy: bool,
    #[serde(default)]
    is_generating_policy: bool,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    patched_resources: Option<Value>,
    #[serde(default)]
    generated_resource: Option<Value>,
    #[serde(default)]
    generated_resources: Option<Value>,
    #[serde(default)]
    clone_source_resource: Option<Value>,
    #[serde(default)]
    resource_specs: Option<Value>,
}

/// Whether an optional field says something (an empty list or string
/// does not).
fn given(value: &Option<Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// Parses a Kyverno test (`document`, in `suite_dir`, whose path in the
/// source view is `view_dir`): its name, if it has one, and the test.
pub(super) fn test(
    document: Value,
    suite_dir: &Path,
    view_dir: &str,
    options: &Options,
) -> Result<(Option<String>, Test), String> {
    let raw: RawTest = serde_json::from_value(document).map_err(|e| e.to_string())?;
    let unsupported = [
        ("variables", given(&raw.variables)),
        ("userinfo", given(&raw.userinfo)),
        ("values", given(&raw.values)),
        ("context", given(&raw.context)),
        ("jsonPayload", given(&raw.json_payload)),
        ("jsonPayloads", given(&raw.json_payloads)),
        ("httpPayloads", given(&raw.http_payloads)),
        ("envoyPayloads", given(&raw.envoy_payloads)),
        ("targetResources", given(&raw.target_resources)),
        ("paramResources", given(&raw.param_resources)),
        ("clusterResources", given(&raw.cluster_resources)),
        ("apiCallResponses", given(&raw.api_call_responses)),
        ("globalContextEntries", given(&raw.global_context_entries)),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(format!(
            "`{field}` is not supported by kiln policy test yet (Kiln runs policies, exceptions, resources and results)"
        ));
    }
    if raw.policies.is_empty() {
        return Err("`policies` is empty: name the policy files the test runs".into());
    }
    if raw.resources.is_empty() {
        return Err("`resources` is empty: name the resource files the test reviews".into());
    }
    if raw.results.is_empty() {
        return Err("`results` is empty: the test would check nothing".into());
    }
    let files = raw.policies.len() + raw.exceptions.len() + raw.resources.len();
    if files > options.limits.max_files {
        return Err(format!(
            "{files} files named, more than the limit of {} (--max-files)",
            options.limits.max_files
        ));
    }
    // Counted before any case is built: a small file cannot make many.
    let cases: usize = raw.results.iter().map(|r| r.resources.len()).sum();
    if cases > options.limits.max_cases {
        return Err(format!(
            "{cases} cases, more than the limit of {} (--max-cases)",
            options.limits.max_cases
        ));
    }
    let name = raw.metadata.and_then(|m| m.name).or(raw.name);
    let settings = raw
        .policies
        .iter()
        .chain(&raw.exceptions)
        .map(|file| {
            let path = match view_dir {
                "" | "." => file.clone(),
                dir => format!("{dir}/{file}"),
            };
            ("policy".to_owned(), path)
        })
        // The clock `time_now` reads, as `kyverno test` reads its own.
        .chain([("now".to_owned(), jiff::Timestamp::now().to_string())])
        .collect();
    let mut cases = Vec::with_capacity(cases);
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
    let policy = crate::text::bounded(&result.policy, MAX_NAME);
    let at = |m: &str| format!("results[{index}] (policy {policy}): {m}");
    for (what, name) in [("policy", &result.policy), ("rule", &result.rule)] {
        if name.len() > MAX_NAME {
            return Err(at(&format!(
                "the {what} name is longer than {MAX_NAME} bytes"
            )));
        }
    }
    let kinds = [
        (
            "isValidatingAdmissionPolicy (run ValidatingAdmissionPolicies with the vap plugin, in a Kiln PolicySuite)",
            result.is_validating_admission_policy,
        ),
        (
            "isMutatingAdmissionPolicy",
            result.is_mutating_admission_policy,
        ),
        ("isMutatingPolicy", result.is_mutating_policy),
        ("isImageValidatingPolicy", result.is_image_validating_policy),
        ("isDeletingPolicy", result.is_deleting_policy),
        ("isGeneratingPolicy", result.is_generating_policy),
        ("patchedResources", given(&result.patched_resources)),
        ("generatedResource", given(&result.generated_resource)),
        ("generatedResources", given(&result.generated_resources)),
        ("cloneSourceResource", given(&result.clone_source_resource)),
        ("resourceSpecs", given(&result.resource_specs)),
    ];
    if let Some((field, _)) = kinds.iter().find(|(_, set)| *set) {
        return Err(at(&format!(
            "`{field}`: the Kyverno plugin runs validation only (no mutate, generate, delete or image verification)"
        )));
    }
    if let Some(operation) = result.operation.as_deref().filter(|o| *o != "CREATE") {
        return Err(at(&format!(
            "operation `{operation}`: Kiln reviews objects before they are applied (CREATE)"
        )));
    }
    let outcome = match result.result.as_str() {
        "pass" => RuleOutcome::Pass,
        "fail" => RuleOutcome::Fail,
        "warn" => RuleOutcome::Warn,
        "error" => RuleOutcome::Error,
        "skip" => RuleOutcome::Skip,
        other => {
            return Err(at(&format!(
                "result `{}` is not pass, fail, warn, error or skip",
                crate::text::bounded(other, MAX_NAME)
            )));
        }
    };
    if result.resources.is_empty() {
        return Err(at("`resources` is empty"));
    }
    let kind = result.kind.clone().filter(|k| !k.is_empty());
    let mut cases = Vec::with_capacity(result.resources.len());
    for resource in result.resources {
        if resource.len() > 2 * MAX_NAME {
            return Err(at(
                "a resource name is longer than a namespace and name can be",
            ));
        }
        let (namespace, name) = match resource.split_once('/') {
            Some((ns, name)) => (Some(ns.to_owned()), name.to_owned()),
            None => (None, resource.clone()),
        };
        cases.push(Case {
            name: format!(
                "{}/{} {}{resource}: {}",
                result.policy,
                result.rule,
                kind.as_deref().map(|k| format!("{k} ")).unwrap_or_default(),
                result.result
            ),
            objects: Vec::new(),
            single_object: false,
            settings: Vec::new(),
            namespace: String::new(),
            skip: false,
            assertions: Vec::new(),
            rule: Some(RuleExpectation {
                policy: result.policy.clone(),
                rule: result.rule.clone(),
                kind: kind.clone(),
                namespace,
                name,
                outcome,
            }),
        });
    }
    Ok(cases)
}

/// The kinds of Kyverno policy a test's result can name, by API group.
const POLICY_KINDS: [(&str, &str); 4] = [
    ("kyverno.io/", "ClusterPolicy"),
    ("kyverno.io/", "Policy"),
    ("policies.kyverno.io/", "ValidatingPolicy"),
    ("policies.kyverno.io/", "NamespacedValidatingPolicy"),
];

/// The names of the Kyverno policies in `paths` of `view` (files, or
/// directories read for their `.yaml`, `.yml` and `.json` files at any
/// depth, as the plugin reads its `policy` settings); at most `max_files`
/// files are read.
pub(super) fn policy_names(
    view: &dyn SourceView,
    paths: &[&str],
    max_files: usize,
) -> Result<HashSet<String>, String> {
    let mut names = HashSet::new();
    let mut pending: Vec<SourcePath> = paths
        .iter()
        .map(|p| SourcePath::parse(p).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let mut read = 0usize;
    while let Some(path) = pending.pop() {
        let at = |e: crate::source::SourceError| format!("{path}: {e}");
        match view.stat(&path).map_err(at)? {
            None => return Err(format!("{path}: no such file or directory")),
            Some(meta) if meta.kind == EntryKind::Directory => {
                // Directories count toward the bound too: links cannot
                // make the walk endless.
                read += 1;
                if read > max_files {
                    return Err(format!(
                        "the policies are more than {max_files} files and directories (--max-files)"
                    ));
                }
                for entry in view.read_dir(&path).map_err(at)? {
                    let manifest = [".yaml", ".yml", ".json"]
                        .iter()
                        .any(|ext| entry.name.ends_with(ext));
                    if entry.kind == EntryKind::Directory || manifest {
                        pending.push(path.join(&entry.name).map_err(|e| e.to_string())?);
                    }
                }
            }
            Some(_) => {
                read += 1;
                if read > max_files {
                    return Err(format!(
                        "the policies are more than {max_files} files (--max-files)"
                    ));
                }
                let bytes = view.read_file(&path).map_err(at)?;
                let text = String::from_utf8_lossy(&bytes);
                let documents = super::load::documents(Path::new(path.as_str()), &text)
                    .map_err(|e| e.to_string())?;
                names.extend(documents.iter().filter_map(|d| {
                    let kind = d.get("kind").and_then(Value::as_str)?;
                    let api_version = d.get("apiVersion").and_then(Value::as_str)?;
                    POLICY_KINDS
                        .iter()
                        .any(|(group, k)| *k == kind && api_version.starts_with(group))
                        .then_some(())?;
                    d.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                }));
            }
        }
    }
    Ok(names)
}

/// Why a case passes whose rule gave no result on its resource.
pub(super) const EXCLUDED: &str = "excluded: the rule gave no result on this resource (it did not apply, or the policy has no rule of that name), which kyverno test counts as passing";

/// A test's review: the objects reviewed, the policies loaded and every
/// rule result, by object name.
pub(super) struct Reviewed<'a> {
    objects: Vec<ObjectRef>,
    policies: HashSet<String>,
    by_name: HashMap<&'a str, Vec<&'a RuleResult>>,
}

impl<'a> Reviewed<'a> {
    /// Indexes `results` of the review of `objects` by `policies` (their
    /// names).
    pub(super) fn new(
        objects: &[Object],
        policies: HashSet<String>,
        results: &'a [RuleResult],
    ) -> Self {
        let mut by_name: HashMap<&str, Vec<&RuleResult>> = HashMap::new();
        for result in results {
            if let Some(object) = &result.object {
                by_name
                    .entry(object.name.as_str())
                    .or_default()
                    .push(result);
            }
        }
        Reviewed {
            policies,
            objects: objects
                .iter()
                .map(|o| ObjectRef {
                    api_version: o.api_version().to_owned(),
                    kind: o.kind().to_owned(),
                    namespace: o.namespace().map(str::to_owned),
                    name: o.name().to_owned(),
                })
                .collect(),
            by_name,
        }
    }
}

/// Whether `object` is the one `expected` names: its name, and its kind and
/// namespace when given (an object without one is in `default`, as the
/// Kyverno CLI places it).
fn names(expected: &RuleExpectation, object: &ObjectRef) -> bool {
    object.name == expected.name
        && expected.kind.as_ref().is_none_or(|k| *k == object.kind)
        && expected
            .namespace
            .as_ref()
            .is_none_or(|ns| *ns == object.namespace.as_deref().unwrap_or("default"))
}

/// Whether a case's expectation holds for its test's review: `Ok` when it
/// does (with a note when it passes as excluded), else why not. The
/// resource must be one the test reviewed and the policy one it loaded;
/// every result of the rule on the resource must be the one expected (a
/// rule autogen made from it answers for it on pod controllers); none is
/// [`EXCLUDED`], a pass as `kyverno test` counts it.
pub(super) fn check(
    expected: &RuleExpectation,
    reviewed: &Reviewed<'_>,
) -> Result<Option<&'static str>, String> {
    if !reviewed.objects.iter().any(|o| names(expected, o)) {
        return Err(format!(
            "no resource {}{}{} among the test's resources",
            expected
                .kind
                .as_deref()
                .map(|k| format!("{k} "))
                .unwrap_or_default(),
            expected
                .namespace
                .as_deref()
                .map(|ns| format!("{ns}/"))
                .unwrap_or_default(),
            expected.name
        ));
    }
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
    let holds = |outcome: RuleOutcome| match expected.outcome {
        // An audited failure is a `warn` result to Kiln, a `fail` to
        // `kyverno test` (which says `warn` only for unscored policies).
        RuleOutcome::Fail | RuleOutcome::Warn => {
            matches!(outcome, RuleOutcome::Fail | RuleOutcome::Warn)
        }
        other => outcome == other,
    };
    let found: Vec<&RuleResult> = reviewed
        .by_name
        .get(expected.name.as_str())
        .into_iter()
        .flatten()
        .copied()
        .filter(|r| {
            policy_named(&r.rule.policy)
                && rule_named(&r.rule.rule)
                && r.object.as_ref().is_some_and(|o| names(expected, o))
        })
        .collect();
    if found.is_empty() {
        return if !reviewed.policies.iter().any(|p| policy_named(p)) {
            Err(format!(
                "no policy {} among the test's policies",
                expected.policy
            ))
        } else if expected.outcome == RuleOutcome::Skip {
            Ok(None)
        } else {
            Ok(Some(EXCLUDED))
        };
    }
    match found.iter().find(|r| !holds(r.outcome)) {
        None => Ok(None),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{ObjectRef, RuleRef};

    #[test]
    fn policy_names_are_read_by_group_and_the_walk_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("policies/deeper");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(
            dir.path().join("policies/a.yaml"),
            "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: a}\n---\n\
             apiVersion: example.com/v1\nkind: ClusterPolicy\nmetadata: {name: impostor}\n",
        )
        .unwrap();
        std::fs::write(
            nested.join("b.yaml"),
            "apiVersion: policies.kyverno.io/v1alpha1\nkind: ValidatingPolicy\nmetadata: {name: b}\n",
        )
        .unwrap();
        std::fs::write(nested.join("notes.txt"), "not read").unwrap();
        let view = crate::source::LocalDir::open(dir.path()).unwrap();
        let names = policy_names(&view, &["policies"], 10).unwrap();
        assert_eq!(names, HashSet::from(["a".to_owned(), "b".to_owned()]));
        // Directories count toward the bound as files do.
        let error = policy_names(&view, &["policies"], 2).unwrap_err();
        assert!(
            error.contains("the policies are more than 2 files"),
            "{error}"
        );
        let error = policy_names(&view, &["../outside"], 10).unwrap_err();
        assert!(!error.is_empty());
        let error = policy_names(&view, &["missing.yaml"], 10).unwrap_err();
        assert!(error.contains("no such file or directory"), "{error}");
    }

    fn parse(yaml: &str) -> Result<Test, String> {
        let document: Value = serde_yaml::from_str(yaml).unwrap();
        test(
            document,
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
        let settings = &test.policies[0].settings;
        assert_eq!(
            settings[0],
            (
                "policy".to_owned(),
                "pol/.kyverno-test/../policy.yaml".to_owned()
            )
        );
        // The clock the time functions read, now, in RFC 3339.
        assert_eq!(settings[1].0, "now");
        assert!(
            settings[1].1.parse::<jiff::Timestamp>().is_ok(),
            "{:?}",
            settings[1]
        );
        assert_eq!(settings.len(), 2);
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
        let typo = TEST.replace("results:", "reslts:");
        assert!(parse(&typo).unwrap_err().contains("reslts"));
        let empty = TEST.split("results:").next().unwrap().to_owned() + "results: []\n";
        assert!(parse(&empty).unwrap_err().contains("`results` is empty"));
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
        let objects: Vec<Object> = [
            ("Pod", "a"),
            ("Deployment", "d"),
            ("Pod", "w"),
            ("Pod", "zzz"),
        ]
        .iter()
        .map(|(kind, name)| {
            let value =
                serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}});
            Object::new(value.as_object().unwrap().clone(), None)
        })
        .collect();
        let policies = HashSet::from(["p".to_owned()]);
        let reviewed = Reviewed::new(&objects, policies, &results);
        let check = |e: RuleExpectation| check(&e, &reviewed);
        assert_eq!(
            check(expect("r", Some("Pod"), "a", RuleOutcome::Pass)),
            Ok(None)
        );
        assert_eq!(
            check(expect("r", Some("Deployment"), "d", RuleOutcome::Fail)),
            Ok(None)
        );
        // An audited failure answers for `fail`.
        assert_eq!(check(expect("r", None, "w", RuleOutcome::Fail)), Ok(None));
        // A rule that did not apply is a skip; any other expectation passes
        // as excluded, as kyverno test passes it, and says so.
        assert_eq!(
            check(expect("r", Some("Pod"), "zzz", RuleOutcome::Skip)),
            Ok(None)
        );
        assert_eq!(
            check(expect("r", Some("Pod"), "zzz", RuleOutcome::Fail)),
            Ok(Some(EXCLUDED))
        );
        // So does a rule the policy does not have (a typo kyverno test
        // does not catch either).
        assert_eq!(
            check(expect("typo", Some("Pod"), "a", RuleOutcome::Fail)),
            Ok(Some(EXCLUDED))
        );
        // A policy the test did not load is not found, whatever expected.
        let mut other = expect("r", Some("Pod"), "zzz", RuleOutcome::Skip);
        other.policy = "q".into();
        let error = check(other).unwrap_err();
        assert_eq!(error, "no policy q among the test's policies");
        let error = check(expect("r", Some("Pod"), "a", RuleOutcome::Fail)).unwrap_err();
        assert_eq!(error, "expected fail, got pass: why");
        // The kind narrows: there is no Pod named `d`.
        let error = check(expect("r", Some("Pod"), "d", RuleOutcome::Fail)).unwrap_err();
        assert!(error.contains("no resource Pod d"), "{error}");
        // A resource the test does not have is never a passing skip.
        let error = check(expect("r", None, "ghost", RuleOutcome::Skip)).unwrap_err();
        assert!(error.contains("among the test's resources"), "{error}");
    }
}
