//! Kyverno's policies in the sandbox: the first-party `kyverno.wasm`
//! through the real wasm host, rule by rule (the contract's `rules`
//! export), and `kiln policy test` running `kyverno test` files unchanged —
//! kyverno/policies' own suites (`../shared/testdata/kyverno`, never copied
//! into the repository) and the project's example.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kiln::manifest::{self, Object};
use kiln::plugin::{Plugin, PluginError, RuleOutcome, Severity, World};
use support::require::{Corpus, corpus};
use support::*;

/// Expected results of kyverno/policies' suites that `kiln policy test`
/// gets right with the wasm plugin: every one of them (a miss is listed by
/// the test).
const FLOOR: u64 = 2285;

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["policy", "test", "--no-compile-cache", "--kyverno-plugin"])
        .arg(component("kyverno"))
        .args(args)
        .env_remove("KILN_LOG")
        .output()
        .expect("kiln runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policies/kyverno")
}

#[test]
fn kyverno_policies_own_suites_pass_through_kiln_policy_test() {
    let Some(root) = corpus(Corpus::Kyverno) else {
        return;
    };
    let out = kiln(&[&format!("{}/...", root.display()), "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let mut misses = Vec::new();
    for suite in report["suites"].as_array().unwrap() {
        assert!(suite["error"].is_null(), "{suite}");
        for test in suite["tests"].as_array().unwrap() {
            for case in test["cases"].as_array().unwrap() {
                if case["status"] != "pass" {
                    misses.push(format!(
                        "{}: {}: {}",
                        suite["file"].as_str().unwrap_or_default(),
                        case["name"].as_str().unwrap_or_default(),
                        case["reason"].as_str().unwrap_or_default()
                    ));
                }
            }
        }
    }
    for miss in &misses {
        eprintln!("{miss}");
    }
    let summary = &report["summary"];
    let passed = summary["passed"].as_u64().unwrap();
    eprintln!("kyverno corpus through kiln policy test: {summary}");
    // Every expected result of the corpus is a case (2,285 in cases.tsv).
    let total: u64 = ["passed", "failed", "skipped", "errors"]
        .iter()
        .map(|k| summary[k].as_u64().unwrap())
        .sum();
    assert_eq!(total, 2285, "{summary}");
    assert!(passed >= FLOOR, "{passed} passed, fewer than {FLOOR}");
}

#[test]
fn the_example_suite_passes_case_by_case() {
    let out = kiln(&[&example().join(".kyverno-test").display().to_string()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("PASS  ")
            && stdout.contains("guestbook-rules/no-latest-tag Deployment frontend: fail"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("7 passed, 0 failed, 0 skipped, 0 error(s)\n"),
        "{stdout}"
    );
}

/// A scratch Kyverno test beside a copy of the example policy.
fn scratch(test: &str, resources: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        example().join("guestbook-rules.yaml"),
        dir.path().join("guestbook-rules.yaml"),
    )
    .unwrap();
    let tests = dir.path().join(".kyverno-test");
    std::fs::create_dir(&tests).unwrap();
    std::fs::write(tests.join("kyverno-test.yaml"), test).unwrap();
    std::fs::write(tests.join("resources.yaml"), resources).unwrap();
    dir
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web, labels: {team: a}}
spec: {containers: [{name: c, image: 'x:latest'}]}
";

fn test_file(results: &str) -> String {
    format!(
        "apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {{name: scratch}}
policies: [../guestbook-rules.yaml]
resources: [resources.yaml]
results:
{results}"
    )
}

#[test]
fn a_wrong_expectation_exits_1_saying_what_the_rule_did() {
    let dir = scratch(
        &test_file(
            "- {policy: guestbook-rules, rule: team-label, kind: Pod, resources: [web], result: pass}
- {policy: guestbook-rules, rule: no-latest-tag, kind: Pod, resources: [web], result: pass}
- {policy: guestbook-rules, rule: no-latest-tag, kind: ConfigMap, resources: [settings], result: fail}
- {policy: guestbook-rules, rule: no-latest-tag, kind: Pod, resources: [ghost], result: skip}
",
        ),
        &format!("{POD}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\n"),
    );
    let out = kiln(&[&dir.path().join(".kyverno-test").display().to_string()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "guestbook-rules/no-latest-tag Pod web: pass\n      expected pass, got fail: "
        ),
        "{stdout}"
    );
    // A rule that gave no result passes, as kyverno test passes it
    // ("excluded"), and says so.
    assert!(
        stdout.contains(
            "guestbook-rules/no-latest-tag ConfigMap settings: fail\n      excluded: the rule gave no result"
        ),
        "{stdout}"
    );
    // A resource the test does not have is never a passing skip.
    assert!(
        stdout.contains("no resource Pod ghost among the test's resources"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("2 passed, 2 failed, 0 skipped, 0 error(s)\n"),
        "{stdout}"
    );
}

#[test]
fn a_policy_exception_skips_what_it_names() {
    let dir = scratch(
        &format!(
            "{}exceptions: [exception.yaml]\n",
            test_file(
                "- {policy: guestbook-rules, rule: no-latest-tag, kind: Pod, resources: [web], result: skip}
- {policy: guestbook-rules, rule: team-label, kind: Pod, resources: [web], result: pass}
- {policy: guestbook-rules, rule: no-latest-tag, kind: Pod, resources: [other], result: fail}
"
            )
        ),
        &format!(
            "{POD}---\n{}",
            POD.replace("name: web", "name: other")
        ),
    );
    std::fs::write(
        dir.path().join(".kyverno-test/exception.yaml"),
        "apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: web-may-float, namespace: ops}
spec:
  exceptions:
  - {policyName: guestbook-rules, ruleNames: [no-latest-tag, autogen-no-latest-tag]}
  match:
    any:
    - resources: {kinds: [Pod], names: [web]}
",
    )
    .unwrap();
    let out = kiln(&[&dir.path().join(".kyverno-test").display().to_string()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.ends_with("3 passed, 0 failed, 0 skipped, 0 error(s)\n"),
        "{stdout}"
    );
}

#[test]
fn what_kiln_does_not_run_exits_2_naming_the_field() {
    for (extra, named) in [
        ("variables: values.yaml\n", "`variables`"),
        ("checks: [{match: {}}]\n", "`checks`"),
    ] {
        let dir = scratch(
            &format!(
                "{}{extra}",
                test_file(
                    "- {policy: guestbook-rules, rule: team-label, resources: [web], result: pass}\n"
                )
            ),
            POD,
        );
        let out = kiln(&[&dir.path().join(".kyverno-test").display().to_string()]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{stdout}");
        assert!(stdout.contains(named), "{named}: {stdout}");
        assert!(stdout.contains("kyverno-test.yaml"), "{stdout}");
    }
}

#[test]
fn attack_a_test_cannot_read_files_outside_its_tree() {
    // A policy path climbing out of the source view is refused by the host.
    let dir = scratch(
        "apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: escape}
policies: [../../../../../../../../etc/passwd]
resources: [resources.yaml]
results:
- {policy: p, rule: r, resources: [web], result: pass}
",
        POD,
    );
    let out = kiln(&[&dir.path().join(".kyverno-test").display().to_string()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("access denied") && stdout.contains("climbs above the source root"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("root:"),
        "nothing of the file is shown: {stdout}"
    );
    // So is a resource file outside the tree the suites were found in.
    let dir = scratch(
        &test_file(
            "- {policy: guestbook-rules, rule: team-label, resources: [web], result: pass}\n",
        )
        .replace("[resources.yaml]", "[/etc/hostname]"),
        POD,
    );
    let out = kiln(&[&dir.path().join(".kyverno-test").display().to_string()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("is outside"), "{stdout}");
}

fn policy() -> Plugin {
    host()
        .load_file(&component("kyverno"), World::Policy, None)
        .unwrap()
}

fn objects(yaml: &str) -> Vec<Object> {
    manifest::parse(yaml, Some("objects.yaml")).unwrap()
}

#[tokio::test]
async fn every_rule_reports_its_result_and_findings_name_their_rule() {
    let plugin = policy();
    assert!(
        plugin.reports_rules(),
        "kyverno.wasm exports kiln:plugin/rules"
    );
    let set = objects(&format!(
        "{POD}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\n"
    ));
    let settings = params(&[("policy", "guestbook-rules.yaml")]);
    let results = plugin
        .review_rules(
            view(&example()),
            None,
            context("guestbook", ""),
            set.clone().into(),
            settings.clone(),
        )
        .await
        .unwrap();
    let seen: Vec<(String, String, RuleOutcome)> = results
        .iter()
        .map(|r| {
            (
                r.rule.to_string(),
                r.object.as_ref().unwrap().to_string(),
                r.outcome,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "guestbook-rules/team-label".into(),
                "Pod/web".into(),
                RuleOutcome::Pass
            ),
            (
                "guestbook-rules/no-latest-tag".into(),
                "Pod/web".into(),
                RuleOutcome::Fail
            ),
        ]
    );
    // `review` is derived from them: the failure, with its rule.
    let findings = plugin
        .review(
            view(&example()),
            None,
            context("guestbook", ""),
            set.into(),
            settings,
        )
        .await
        .unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    let finding = &findings[0];
    assert_eq!(finding.severity, Severity::Error);
    assert_eq!(
        finding.rule.as_ref().map(ToString::to_string).as_deref(),
        Some("guestbook-rules/no-latest-tag")
    );
    assert!(
        finding
            .message
            .starts_with("[guestbook-rules/no-latest-tag] "),
        "{}",
        finding.message
    );
}

#[tokio::test]
async fn a_policy_of_findings_only_reports_no_rules() {
    let plugin = host()
        .load_file(&component("required-labels"), World::Policy, None)
        .unwrap();
    assert!(!plugin.reports_rules());
    let error = plugin
        .review_rules(
            view(&example()),
            None,
            context("guestbook", ""),
            objects(POD).into(),
            params(&[("labels", "team")]),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, PluginError::ContractMismatch { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("kiln:plugin/rules"), "{error}");
}

#[tokio::test]
async fn a_validating_policy_runs_in_the_sandbox() {
    let dir = tree(&[(
        "vpol.yaml",
        "apiVersion: policies.kyverno.io/v1alpha1
kind: ValidatingPolicy
metadata: {name: no-latest}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: \"object.spec.containers.all(c, !c.image.endsWith(':latest'))\"
    messageExpression: \"'latest tag in ' + object.metadata.name\"
",
    )]);
    let deployment = "apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  template:
    metadata: {name: tpl}
    spec: {containers: [{name: c, image: 'x:latest'}]}
";
    let findings = policy()
        .review(
            view(dir.path()),
            None,
            context("vpol", ""),
            objects(&format!("{POD}---\n{deployment}")).into(),
            params(&[("policy", "vpol.yaml")]),
        )
        .await
        .unwrap();
    let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    // The Pod, and the Deployment's template through autogen.
    assert_eq!(
        messages,
        vec![
            "[no-latest] latest tag in web",
            "[no-latest] latest tag in tpl"
        ],
        "{findings:?}"
    );
}

/// Policies that read the destination (a namespaceSelector on a namespace
/// the set does not render, a `configMap` context entry, `operations`)
/// read it through the review's cluster view: a first review asks, the
/// objects are read into the view, a second review answers; what it read
/// is recorded so that a cached review holds only while the cluster gives
/// the same answers.
#[tokio::test]
async fn policies_read_the_destination_through_the_cluster_view() {
    use std::sync::Arc;

    use kiln::plugin::cluster::{ClusterKey, ClusterView, Observed};
    use kiln::policy::{Mode, PolicySource, PolicyStep, ReviewCache, evaluate_cached};

    let dir = tree(&[(
        "destination.yaml",
        "apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: destination}
spec:
  validationFailureAction: Enforce
  rules:
  - name: critical-no-latest
    match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {tier: critical}}}}]}
    validate:
      message: no latest tag in a critical namespace
      pattern: {spec: {containers: [{image: '!*:latest'}]}}
  - name: allowed-registries
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: registries
      configMap: {name: registries, namespace: kyverno}
    validate:
      message: 'registry not in {{ registries.data.allowed }}'
      deny: {conditions: {any: [{key: '{{ images.containers.*.registry }}', operator: AnyNotIn, value: \"{{ registries.data.allowed | split(@, ',') }}\"}]}}
  - name: created-with-owner
    match: {any: [{resources: {kinds: [Pod], operations: [CREATE]}}]}
    validate:
      message: a new Pod names its owner
      pattern: {metadata: {labels: {owner: '?*'}}}
",
    )]);
    let set = objects(
        "apiVersion: v1
kind: Pod
metadata: {name: new, namespace: shop}
spec: {containers: [{name: c, image: 'docker.io/app:latest'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: old, namespace: shop}
spec: {containers: [{name: c, image: 'ghcr.io/app:1'}]}
",
    );
    let step = PolicyStep {
        plugin: policy(),
        settings: params(&[("policy", "destination.yaml")]),
        mode: Mode::Enforce,
        source: PolicySource::Application(view(dir.path())),
    };
    let steps = [step];
    let cache = ReviewCache::default();
    let key = |kind: &str, namespace: Option<&str>, name: &str| {
        ClusterKey::new("v1", kind, namespace, name).unwrap()
    };
    // The destination: Pod `old` exists (the Application's status says so).
    let mut destination = ClusterView::new();
    destination.insert_existing(key("Pod", Some("shop"), "old"));
    let review = |view: &ClusterView| {
        let view = Arc::new(view.clone());
        let (cache, set, steps) = (&cache, set.clone(), &steps);
        async move { evaluate_cached(cache, &context("app", ""), set, steps, Some(&view)).await }
    };

    // First round: the namespace and the ConfigMap are not in the view.
    let first = review(&destination).await;
    assert_eq!(
        first.pending(),
        vec![
            key("ConfigMap", Some("kyverno"), "registries"),
            key("Namespace", None, "shop")
        ]
    );
    let error = first.results[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("not read from the destination yet"),
        "{error}"
    );

    // Second round, with them read.
    destination.insert(
        key("Namespace", None, "shop"),
        Observed::Present {
            object: r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","labels":{"tier":"critical"}}}"#.into(),
        },
    );
    destination.insert(
        key("ConfigMap", Some("kyverno"), "registries"),
        Observed::Present {
            object: r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"registries","namespace":"kyverno"},"data":{"allowed":"ghcr.io,quay.io"}}"#.into(),
        },
    );
    let second = review(&destination).await;
    assert!(second.pending().is_empty());
    let result = &second.results[0];
    assert_eq!(result.error, None);
    let mut seen: Vec<String> = result
        .findings
        .iter()
        .map(|f| format!("{} {}", f.object.as_ref().unwrap(), f.message))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            "Pod/shop/new [destination/allowed-registries] validation error: registry not in ghcr.io,quay.io".to_owned(),
            "Pod/shop/new [destination/created-with-owner] validation error: a new Pod names its owner rule created-with-owner failed at path /metadata/labels/".to_owned(),
            "Pod/shop/new [destination/critical-no-latest] validation error: no latest tag in a critical namespace rule critical-no-latest failed at path /spec/containers/0/image/".to_owned(),
        ],
        "the existing Pod `old` is an update: the CREATE rule skips it"
    );
    assert!(!result.cached);

    // Reviewed again as it is: reused. The namespace relabelled: run again,
    // and the critical rule no longer applies.
    assert!(review(&destination).await.results[0].cached);
    destination.insert(
        key("Namespace", None, "shop"),
        Observed::Present {
            object: r#"{"metadata":{"name":"shop","labels":{"tier":"sandbox"}}}"#.into(),
        },
    );
    let relabelled = review(&destination).await;
    assert!(!relabelled.results[0].cached);
    assert_eq!(relabelled.results[0].findings.len(), 2);

    // A ConfigMap the destination could not give fails closed, saying why.
    destination.insert(
        key("ConfigMap", Some("kyverno"), "registries"),
        Observed::Unreadable {
            reason: "its JSON is 3000000 bytes".into(),
        },
    );
    let unreadable = review(&destination).await;
    let error = unreadable.results[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("failed to get configmap kyverno/registries: the destination could not tell: its JSON is 3000000 bytes"),
        "{error}"
    );
}

#[test]
fn inspect_says_the_plugin_reports_its_rules() {
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["plugin", "inspect"])
        .arg(component("kyverno"))
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("world:    policy, reporting each rule's result (kiln:plugin/rules)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("  kiln:plugin/rules@0.1.2\n"), "{stdout}");
}

/// A ClusterPolicy named `hostile` with one Enforce rule `r` on Pods.
fn hostile(validate: &str) -> String {
    format!(
        "apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {{name: hostile}}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match:
      any:
      - resources: {{kinds: [Pod]}}
    validate:
{validate}"
    )
}

#[tokio::test]
async fn attack_hostile_policies_fail_closed_naming_the_rule() {
    // A pod of 200 containers with 200 variables each.
    let env: Vec<serde_json::Value> = (0..200)
        .map(|i| serde_json::json!({"name": format!("V{i}"), "value": "x"}))
        .collect();
    let containers: Vec<serde_json::Value> = (0..200)
        .map(|i| serde_json::json!({"name": format!("c{i}"), "image": "nginx:1.27", "env": env}))
        .collect();
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "big", "namespace": "a"}, "spec": {"containers": containers}});
    let big = objects(&serde_json::to_string(&pod).unwrap());
    let bomb = (0..9).fold("a: &a [x,x,x,x,x,x,x,x,x]".to_owned(), |text, i| {
        format!(
            "{text}\\n{}: &{} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]",
            char::from(b'b' + i),
            char::from(b'b' + i),
            p = char::from(b'a' + i)
        )
    });
    let cases = [
        (
            "nested foreach over 200 x 200 elements",
            "      foreach:
      - list: request.object.spec.containers
        foreach:
        - list: element.env
          deny:
            conditions:
              any:
              - {key: '{{ element.name }}', operator: Equals, value: never}
",
            "steps",
        ),
        (
            "parse_yaml of an alias bomb",
            &format!(
                "      deny:
        conditions:
          any:
          - key: \"{{{{ parse_yaml('{}') | length(@) }}}}\"
            operator: Equals
            value: 0
",
                bomb.replace('\n', "\\n")
            ),
            "alias",
        ),
        (
            "a regular expression too large to compile",
            &format!(
                "      deny:
        conditions:
          any:
          - key: \"{{{{ regex_match('{}', 'x') }}}}\"
            operator: Equals
            value: true
",
                "(a{1000}){1000}"
            ),
            "regex",
        ),
    ];
    for (what, validate, says) in cases {
        let dir = tree(&[("policy.yaml", &hostile(validate))]);
        let error = policy()
            .review(
                view(dir.path()),
                None,
                context("attack", ""),
                big.clone().into(),
                params(&[("policy", "policy.yaml")]),
            )
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, PluginError::Failed { .. }),
            "{what}: fails as the policy's own error, not a trap: {message}"
        );
        assert!(
            message.contains("rule hostile/r on Pod/a/big"),
            "{what}: names the policy, rule and object: {message}"
        );
        assert!(
            message.to_lowercase().contains(says),
            "{what}: says why ({says}): {message}"
        );
    }
}
