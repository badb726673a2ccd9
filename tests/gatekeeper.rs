//! The first-party `gatekeeper` policy through the real wasm component:
//! every runnable gator case of ../shared/testdata/gatekeeper (the sampled
//! Gatekeeper library templates), `kiln render --policy` end to end,
//! settings and bad policies refused with their file and line, enforcement
//! actions, cross-object rules over the rendered set, and hostile input (a
//! looping rule, a huge inventory, deep objects).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kiln::manifest::{self, Object};
use kiln::plugin::{Finding, Limits, Plugin, PluginError, Severity, World};
use serde_json::{Value, json};
use support::require::{Corpus, corpus};
use support::*;

fn policy() -> Plugin {
    host()
        .load_file(&component("gatekeeper"), World::Policy, None)
        .unwrap()
}

fn data() -> PathBuf {
    Corpus::Gatekeeper.path()
}

fn objects_of(path: &Path) -> Vec<Object> {
    let text = std::fs::read_to_string(path).unwrap();
    manifest::parse(&text, Some(&path.display().to_string())).unwrap()
}

async fn review(
    policy: &Plugin,
    root: &Path,
    objects: Vec<Object>,
    settings: &[(&str, &str)],
) -> Result<Vec<Finding>, PluginError> {
    policy
        .review(
            view(root),
            None,
            context("gk", ""),
            objects.into(),
            params(settings),
        )
        .await
}

/// The violation message of a finding: its text after `[constraint] `.
fn msg(finding: &Finding) -> &str {
    finding
        .message
        .split_once("] ")
        .map(|(_, m)| m)
        .unwrap_or(&finding.message)
}

/// Every runnable case of cases.tsv, each reviewed by the component with
/// the case's template, constraint and inventory files as settings, with
/// `engine=rego`; the cases of templates that also carry a
/// `K8sNativeValidation` source again with `engine=cel`.
#[tokio::test]
async fn every_runnable_gator_case_through_the_component() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let policy = policy();
    let tsv = std::fs::read_to_string(data().join("cases.tsv")).unwrap();
    let (mut ran, mut ran_cel, mut failures) = (0, 0, Vec::new());
    for line in tsv.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [
            name,
            dir,
            template,
            constraint,
            object,
            inventory,
            _,
            engines,
            status,
            assertions,
        ] = cols[..]
        else {
            panic!("bad line {line:?}")
        };
        if status != "run" {
            continue;
        }
        let engine_list: &[&str] = if engines == "cel+rego" {
            &["rego", "cel"]
        } else {
            &["rego"]
        };
        for engine in engine_list {
            let rel = |p: &str| format!("{dir}/{p}");
            let mut settings = vec![
                ("template".to_owned(), rel(template)),
                ("constraint".to_owned(), rel(constraint)),
                ("engine".to_owned(), (*engine).to_owned()),
            ];
            if inventory != "-" {
                settings.extend(
                    inventory
                        .split(',')
                        .map(|i| ("inventory".to_owned(), rel(i))),
                );
            }
            let settings: Vec<(&str, &str)> = settings
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            policy.validate_settings(params(&settings)).await.unwrap();
            let objects = objects_of(&data().join(rel(object)));
            let findings = review(&policy, &data(), objects, &settings).await.unwrap();
            if *engine == "cel" {
                ran_cel += 1;
            } else {
                ran += 1;
            }
            let assertions: Vec<Value> = serde_json::from_str(assertions).unwrap();
            for assertion in &assertions {
                let re = assertion["message"]
                    .as_str()
                    .map(|m| regex::Regex::new(m).unwrap());
                let n = findings
                    .iter()
                    .filter(|f| re.as_ref().is_none_or(|re| re.is_match(msg(f))))
                    .count();
                let ok = match &assertion["violations"] {
                    Value::Null => n > 0,
                    Value::String(s) if s == "yes" => n > 0,
                    Value::String(s) if s == "no" => n == 0,
                    Value::Number(k) => Some(n as u64) == k.as_u64(),
                    other => panic!("{name}: violations {other}"),
                };
                if !ok {
                    failures.push(format!("{name} ({engine}): {assertion} got {findings:?}"));
                }
            }
            assert!(
                findings.iter().all(|f| f.severity == Severity::Error),
                "{name}: deny constraints give errors: {findings:?}"
            );
        }
    }
    assert_eq!((ran, ran_cel), (146, 59));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const TEMPLATE: &str = r#"apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8srequiredteam
spec:
  crd:
    spec:
      names:
        kind: K8sRequiredTeam
  targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package k8srequiredteam

        violation[{"msg": msg}] {
          not input.review.object.metadata.labels.team
          msg := sprintf("%v %v has no team label (%v)", [input.review.kind.kind, input.review.name, input.parameters.why])
        }
"#;

/// The K8sRequiredTeam template with only a `K8sNativeValidation` source
/// whose validation is `expression`.
fn cel_template(expression: &str) -> String {
    format!(
        r#"apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8srequiredteam
spec:
  crd:
    spec:
      names:
        kind: K8sRequiredTeam
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
      - engine: K8sNativeValidation
        source:
          validations:
          - expression: "{expression}"
            messageExpression: "request.kind.kind + ' ' + object.metadata.name + ' has no team label (' + variables.params.why + ')'"
"#
    )
}

const UNIQUE_HOSTS: &str = r#"apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8suniquehost
spec:
  crd:
    spec:
      names:
        kind: K8sUniqueHost
  targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package k8suniquehost

        violation[{"msg": msg}] {
          host := input.review.object.spec.rules[_].host
          other := data.inventory.namespace[ns][_]["Ingress"][name]
          other.spec.rules[_].host == host
          [ns, name] != [input.review.namespace, input.review.name]
          msg := sprintf("host %v is also used by %v/%v", [host, ns, name])
        }
"#;

fn constraint(kind: &str, name: &str, action: &str, matching: Value) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"enforcementAction": action, "match": matching, "parameters": {"why": "cost reports"}},
    }))
    .unwrap()
}

fn obj(value: Value) -> Object {
    match value {
        Value::Object(map) => Object::new(map, None),
        other => panic!("not an object: {other}"),
    }
}

fn cm(name: &str, ns: Option<&str>, labels: Value) -> Object {
    let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}});
    if let Some(ns) = ns {
        v["metadata"]["namespace"] = json!(ns);
    }
    obj(v)
}

fn namespace(name: &str, labels: Value) -> Object {
    obj(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
    )
}

/// deny/warn/dryrun give error/warning/info findings with the violation's
/// msg; spec.match (namespaces, excludedNamespaces, namespaceSelector
/// against the rendered Namespaces, kinds) decides which objects are
/// reviewed; a constraint directory reads every YAML in it.
#[tokio::test]
async fn enforcement_actions_and_match_over_the_rendered_set() {
    let deny = constraint(
        "K8sRequiredTeam",
        "team-prod",
        "deny",
        json!({"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}],
               "namespaceSelector": {"matchLabels": {"env": "prod"}}}),
    );
    let warn = constraint(
        "K8sRequiredTeam",
        "team-dev",
        "warn",
        json!({"namespaces": ["dev-*"], "excludedNamespaces": ["dev-sandbox"]}),
    );
    let dryrun = constraint(
        "K8sRequiredTeam",
        "team-all",
        "dryrun",
        json!({"kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}]}),
    );
    let root = tree(&[
        ("policy/templates/team.yaml", TEMPLATE),
        ("policy/constraints/deny.yaml", &deny),
        ("policy/constraints/warn.yaml", &warn),
        ("policy/constraints/dryrun.json", &dryrun),
        ("policy/constraints/notes.txt", "not a constraint"),
    ]);
    let objects = vec![
        namespace("shop", json!({"env": "prod", "team": "a"})),
        namespace("dev-x", json!({"env": "dev"})),
        cm("prod-bad", Some("shop"), json!({})),
        cm("prod-good", Some("shop"), json!({"team": "a"})),
        cm("dev-bad", Some("dev-x"), json!({})),
        cm("sandbox", Some("dev-sandbox"), json!({})),
        cm("cluster-wide", None, json!({})),
    ];
    let findings = review(
        &policy(),
        root.path(),
        objects,
        &[
            ("template", "policy/templates"),
            ("constraint", "policy/constraints"),
        ],
    )
    .await
    .unwrap();
    let mut got: Vec<(String, Severity, String)> = findings
        .iter()
        .map(|f| {
            (
                f.object.as_ref().unwrap().name.clone(),
                f.severity,
                f.message.clone(),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
    assert_eq!(
        got,
        [
            // Cluster-scoped: not excluded by the warn constraint's namespace rules.
            ("cluster-wide".into(), Severity::Warning, "[team-dev] ConfigMap cluster-wide has no team label (cost reports)".into()),
            // Nor by the deny constraint's namespaceSelector.
            ("cluster-wide".into(), Severity::Error, "[team-prod] ConfigMap cluster-wide has no team label (cost reports)".into()),
            ("dev-bad".into(), Severity::Warning, "[team-dev] ConfigMap dev-bad has no team label (cost reports)".into()),
            // A Namespace is matched by its own name (dev-x is under dev-*).
            ("dev-x".into(), Severity::Info, "[team-all] Namespace dev-x has no team label (cost reports)".into()),
            ("dev-x".into(), Severity::Warning, "[team-dev] Namespace dev-x has no team label (cost reports)".into()),
            ("prod-bad".into(), Severity::Error, "[team-prod] ConfigMap prod-bad has no team label (cost reports)".into()),
            // dev-sandbox is excluded by the warn constraint, but the deny
            // constraint's namespaceSelector cannot be decided without the
            // Namespace: fail closed, with the constraint's severity.
            ("sandbox".into(), Severity::Error, "[team-prod] spec.match.namespaceSelector needs the labels of Namespace `dev-sandbox`, which is neither in the rendered set nor in the inventory files; not reviewed".into()),
        ]
    );
}

/// data.inventory holds the whole rendered set plus the inventory files:
/// a host used twice in the set, or once in the set and once in the
/// cluster's inventory, is found; the object itself is not its own
/// duplicate.
#[tokio::test]
async fn cross_object_rules_see_the_whole_rendered_set_and_the_inventory() {
    let ingress = |name: &str, host: &str| {
        obj(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "metadata": {"name": name, "namespace": "web"},
                   "spec": {"rules": [{"host": host}]}}),
        )
    };
    let inventory = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: legacy, namespace: old}\nspec:\n  rules: [{host: shop.example.com}]\n";
    let root = tree(&[
        ("p/t.yaml", UNIQUE_HOSTS),
        (
            "p/c.yaml",
            &constraint("K8sUniqueHost", "unique", "deny", json!({})),
        ),
        ("p/cluster.yaml", inventory),
    ]);
    let settings = [
        ("template", "p/t.yaml"),
        ("constraint", "p/c.yaml"),
        ("inventory", "p/cluster.yaml"),
    ];
    let findings = review(
        &policy(),
        root.path(),
        vec![
            ingress("a", "a.example.com"),
            ingress("b", "a.example.com"),
            ingress("c", "c.example.com"),
            ingress("d", "shop.example.com"),
        ],
        &settings,
    )
    .await
    .unwrap();
    let mut got: Vec<String> = findings.iter().map(|f| f.message.clone()).collect();
    got.sort();
    assert_eq!(
        got,
        [
            "[unique] host a.example.com is also used by web/b",
            "[unique] host a.example.com is also used by web/a",
            "[unique] host shop.example.com is also used by old/legacy",
        ]
        .map(String::from)
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
}

/// Settings are refused by name at validate-settings; bad policy files end
/// in a policy error naming the file and line, never in an allow.
#[tokio::test]
async fn bad_settings_and_bad_policies_are_refused_with_file_and_line() {
    let policy = policy();
    for (settings, expected) in [
        (
            vec![("template", "t"), ("constraint", "c"), ("engine", "wasm")],
            "setting `engine`: `wasm` is not one of rego, cel, auto",
        ),
        (
            vec![("template", "t"), ("constraint", "c"), ("engin", "rego")],
            "unknown setting `engin`",
        ),
        (vec![("template", "t")], "setting `constraint` is required"),
    ] {
        let err = policy
            .validate_settings(params(&settings))
            .await
            .unwrap_err();
        assert!(
            matches!(err, PluginError::InvalidSettings { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(expected), "{err}");
    }
    let broken = TEMPLATE.replace(
        "not input.review.object.metadata.labels.team",
        "not input.review.object.metadata.labels.team ==",
    );
    let other_kind = TEMPLATE
        .replace("kind: K8sRequiredTeam", "kind: K8sOtherKind")
        .replace("name: k8srequiredteam", "name: k8sotherkind");
    let c = constraint("K8sRequiredTeam", "team", "deny", json!({}));
    let root = tree(&[
        ("broken.yaml", &broken),
        ("other.yaml", &other_kind),
        ("ok.yaml", TEMPLATE),
        ("c.yaml", &c),
        ("bad-action.yaml", &c.replace("\"deny\"", "\"block\"")),
        (
            "cel-broken.yaml",
            &cel_template("has(object.metadata.labels.team) &&"),
        ),
        (
            "loop.yaml",
            &TEMPLATE.replace(
                "not input.review.object.metadata.labels.team",
                "count([x | x := numbers.range(1, 100000000)[_]]) > 0",
            ),
        ),
    ]);
    for (settings, expected) in [
        // Rego that does not parse: the template file and the line in it.
        // (the `==` runs on to the next line, where regorus stops).
        (
            vec![("template", "broken.yaml"), ("constraint", "c.yaml")],
            "--> broken.yaml:17:",
        ),
        // The constraint's kind is not the template's CRD kind.
        (
            vec![("template", "other.yaml"), ("constraint", "c.yaml")],
            "c.yaml:1: constraint `team` is of kind `K8sRequiredTeam`, which no template defines (templates define: K8sOtherKind)",
        ),
        (
            vec![("template", "ok.yaml"), ("constraint", "bad-action.yaml")],
            "bad-action.yaml:1: constraint `team`: spec.enforcementAction `block` is not one of deny, warn, dryrun",
        ),
        (
            vec![("template", "ok.yaml"), ("constraint", "missing.yaml")],
            "missing.yaml",
        ),
        // A Rego-only template under the CEL engine: refused by name.
        (
            vec![
                ("template", "ok.yaml"),
                ("constraint", "c.yaml"),
                ("engine", "cel"),
            ],
            "ok.yaml:1: ConstraintTemplate `k8srequiredteam`: no K8sNativeValidation engine",
        ),
        // CEL that does not compile: the file, the field and the expression.
        (
            vec![
                ("template", "cel-broken.yaml"),
                ("constraint", "c.yaml"),
                ("engine", "auto"),
            ],
            "spec.targets[0].code[0].source.validations[0].expression `has(object.metadata.labels.team) &&`: the expression does not compile",
        ),
    ] {
        let err = review(
            &policy,
            root.path(),
            vec![cm("x", Some("a"), json!({}))],
            &settings,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains(expected), "{expected:?} not in {err}");
    }
}

/// The CEL engine through the component: violations with the constraint's
/// enforcement action, and a runaway expression failing the review closed.
#[tokio::test]
async fn the_cel_engine_through_the_component() {
    let policy = policy();
    let root = tree(&[
        ("t.yaml", &cel_template("has(object.metadata.labels.team)")),
        (
            "runaway.yaml",
            &cel_template(
                "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, object.metadata.name.size() > 0 && [a, b].map(x, object.metadata.name + object.metadata.name).join('').size() > 0)) && has(object.metadata.labels.team)",
            ),
        ),
        (
            "c.yaml",
            &constraint("K8sRequiredTeam", "team", "warn", json!({})),
        ),
    ]);
    let settings = [
        ("template", "t.yaml"),
        ("constraint", "c.yaml"),
        ("engine", "cel"),
    ];
    let findings = review(
        &policy,
        root.path(),
        vec![
            cm("with", Some("a"), json!({"team": "x"})),
            cm("without", Some("a"), json!({})),
        ],
        &settings,
    )
    .await
    .unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].severity, Severity::Warning);
    assert_eq!(
        findings[0].message,
        "[team] ConfigMap without has no team label (cost reports)"
    );
    let huge = "n".repeat(60_000);
    let err = review(
        &policy,
        root.path(),
        vec![cm(&huge, Some("a"), json!({}))],
        &[
            ("template", "runaway.yaml"),
            ("constraint", "c.yaml"),
            ("engine", "auto"),
        ],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("template runaway.yaml") && err.contains("cost budget"),
        "{err}"
    );
}

/// A rule that loops (27 billion iterations of a comprehension) fails closed: the review is an
/// error (regorus's limit or the host's deadline), never an allow.
#[tokio::test]
async fn a_looping_rule_fails_closed() {
    let looping = TEMPLATE.replace(
        "not input.review.object.metadata.labels.team",
        "xs := numbers.range(1, 3000)\n          count([1 | xs[_]; xs[_]; xs[_]]) > 0",
    );
    let root = tree(&[
        ("t.yaml", &looping),
        (
            "c.yaml",
            &constraint("K8sRequiredTeam", "team", "deny", json!({})),
        ),
    ]);
    let policy = host()
        .load_file(
            &component("gatekeeper"),
            World::Policy,
            Some(Limits {
                timeout: Duration::from_secs(5),
                ..Limits::default()
            }),
        )
        .unwrap();
    let err = review(
        &policy,
        root.path(),
        vec![cm("x", Some("a"), json!({}))],
        &[("template", "t.yaml"), ("constraint", "c.yaml")],
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("Rego evaluation failed")
            || text.contains("deadline")
            || text.contains("memory")
            || text.contains("limit"),
        "{text}"
    );
}

/// 20,000 inventory objects (a large cluster) are indexed and reviewed; a
/// rule over them still finds its match.
#[tokio::test]
async fn a_huge_inventory_is_reviewed() {
    let mut inventory = String::new();
    for i in 0..20_000 {
        inventory.push_str(&format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i{i}, namespace: ns{}}}\nspec:\n  rules: [{{host: h{i}.example.com}}]\n",
            i % 100
        ));
    }
    let root = tree(&[
        ("t.yaml", UNIQUE_HOSTS),
        (
            "c.yaml",
            &constraint("K8sUniqueHost", "unique", "deny", json!({})),
        ),
        ("inv.yaml", &inventory),
    ]);
    let ingress = obj(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "new", "namespace": "web"}, "spec": {"rules": [{"host": "h19999.example.com"}]}}),
    );
    let findings = review(
        &policy(),
        root.path(),
        vec![ingress],
        &[
            ("template", "t.yaml"),
            ("constraint", "c.yaml"),
            ("inventory", "inv.yaml"),
        ],
    )
    .await
    .unwrap();
    let got: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(
        got,
        ["[unique] host h19999.example.com is also used by ns99/i19999"]
    );
}

/// An object nested deeper than the policy reads is an error finding (fail
/// closed), not a trap and not an allow; the other objects are reviewed.
#[tokio::test]
async fn deep_objects_fail_closed_without_trapping() {
    let mut deep = json!("leaf");
    for _ in 0..120 {
        deep = json!({"a": deep});
    }
    let mut deep_cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep", "namespace": "a", "labels": {"team": "x"}}});
    deep_cm["data"] = deep;
    let root = tree(&[
        ("t.yaml", TEMPLATE),
        (
            "c.yaml",
            &constraint("K8sRequiredTeam", "team", "deny", json!({})),
        ),
    ]);
    let findings = review(
        &policy(),
        root.path(),
        vec![obj(deep_cm), cm("plain", Some("a"), json!({}))],
        &[("template", "t.yaml"), ("constraint", "c.yaml")],
    )
    .await
    .unwrap();
    assert_eq!(findings.len(), 2, "{findings:?}");
    assert!(findings.iter().all(|f| f.severity == Severity::Error));
    assert!(
        findings
            .iter()
            .any(|f| f.message.contains("nests deeper than 100 levels")),
        "{findings:?}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f.message.contains("ConfigMap plain has no team label")),
        "{findings:?}"
    );
}

/// `kiln render --policy gatekeeper.wasm` end to end: policy files outside
/// the Application's directory (`/`-rooted settings), an enforced deny
/// blocks with exit 1 and names the object and the message.
#[test]
fn kiln_render_with_the_gatekeeper_policy() {
    let root = tree(&[
        (
            "app/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {a: b}\n",
        ),
        (
            "app/ok.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: shop, labels: {team: a}}\n",
        ),
        ("policy/templates/team.yaml", TEMPLATE),
        (
            "policy/constraints/team.yaml",
            &constraint(
                "K8sRequiredTeam",
                "team",
                "deny",
                json!({"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}]}),
            ),
        ),
    ]);
    let gatekeeper = component("gatekeeper").display().to_string();
    let run = |mode: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args([
                "render",
                "app",
                "--root",
                ".",
                "--no-compile-cache",
                "--policy",
                &gatekeeper,
                "--setting",
                "template=/policy/templates",
                "--setting",
                "constraint=/policy/constraints",
                "--mode",
                mode,
            ])
            .current_dir(root.path())
            .env_remove("KILN_LOG")
            .output()
            .unwrap()
    };
    let out = run("enforce");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("policy gatekeeper (enforce): 1 finding(s), 1 error(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error    ConfigMap/shop/settings: [team]"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[team] ConfigMap settings has no team label (cost reports)"),
        "{stderr}"
    );
    let out = run("warn");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 36: `kiln render --namespace shop` reviews each object where
/// `kubectl apply -n shop` puts it. A constraint for namespaced objects of
/// `shop` applies to a ConfigMap that names no namespace (it was reviewed
/// as cluster-scoped and passed), and a ClusterRoleBinding that claims
/// `kube-system` is not excluded with that namespace (the API server
/// clears the namespace of a cluster-scoped object).
#[test]
fn kiln_render_reviews_objects_in_the_namespace_they_land_in() {
    let root = tree(&[
        (
            "app/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
        ),
        (
            "app/crb.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
             metadata: {name: pwn, namespace: kube-system}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n\
             subjects: [{kind: ServiceAccount, name: x, namespace: shop}]\n",
        ),
        ("policy/templates/team.yaml", TEMPLATE),
        (
            "policy/constraints/namespaced.yaml",
            &constraint(
                "K8sRequiredTeam",
                "team-shop",
                "deny",
                json!({"scope": "Namespaced", "namespaces": ["shop"],
                       "kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}]}),
            ),
        ),
        (
            "policy/constraints/cluster.yaml",
            &constraint(
                "K8sRequiredTeam",
                "team-rbac",
                "deny",
                json!({"excludedNamespaces": ["kube-system"],
                       "kinds": [{"apiGroups": ["rbac.authorization.k8s.io"], "kinds": ["ClusterRoleBinding"]}]}),
            ),
        ),
    ]);
    let gatekeeper = component("gatekeeper").display().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "render",
            "app",
            "--root",
            ".",
            "--namespace",
            "shop",
            "--no-compile-cache",
            // The refused render is printed only when asked for.
            "--output-on-block",
            "--policy",
            &gatekeeper,
            "--setting",
            "template=/policy/templates",
            "--setting",
            "constraint=/policy/constraints",
        ])
        .current_dir(root.path())
        .env_remove("KILN_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("policy gatekeeper (enforce): 2 finding(s), 2 error(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("ConfigMap/shop/settings: [team-shop]"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[team-rbac] ClusterRoleBinding pwn"),
        "{stderr}"
    );
    // What is printed is the render, untouched: the namespace is filled in
    // only for the review (and at apply).
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("name: settings\n"), "{stdout}");
    assert!(stdout.contains("namespace: kube-system"), "{stdout}");
}
