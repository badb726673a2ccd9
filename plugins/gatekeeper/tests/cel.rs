//! The `K8sNativeValidation` (CEL) engine on hostile templates and objects:
//! compile errors name the template file and the expression; runtime errors,
//! runaway expressions and hostile inputs fail the review closed, naming
//! the template; never a panic.

use std::collections::BTreeMap;

use kiln_gatekeeper::files::Files;
use kiln_gatekeeper::{Finding, Manifest, Policy, Settings, review};

/// Files in memory.
struct Memory(BTreeMap<String, String>);

impl Files for Memory {
    fn read(&self, path: &str) -> Result<String, String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| format!("{path}: no such file"))
    }

    fn list(&self, _path: &str) -> Result<Option<Vec<String>>, String> {
        Ok(None)
    }
}

/// A template of kind `K8sTest` whose CEL source is `source` (YAML, indented
/// under `source:`).
fn template(source: &str) -> String {
    let indented: String = source.lines().map(|l| format!("          {l}\n")).collect();
    format!(
        "apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8stest
spec:
  crd:
    spec:
      names:
        kind: K8sTest
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
      - engine: K8sNativeValidation
        source:
{indented}"
    )
}

const CONSTRAINT: &str = "apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sTest
metadata:
  name: test-constraint
spec:
  match:
    kinds:
    - apiGroups: ['']
      kinds: [Pod]
  parameters:
    allowed: [a, b]
";

fn pod(annotation: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "apps", "annotations": {"note": annotation}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    })
    .to_string()
}

fn load(source: &str) -> Result<Policy, String> {
    let files = Memory(BTreeMap::from([
        ("template.yaml".to_owned(), template(source)),
        ("constraint.yaml".to_owned(), CONSTRAINT.to_owned()),
    ]));
    let settings = Settings::parse([
        ("template", "template.yaml"),
        ("constraint", "constraint.yaml"),
        ("engine", "cel"),
    ])
    .unwrap();
    Policy::load(&settings, &files, "").map_err(|e| e.to_string())
}

fn run(source: &str, annotation: &str) -> Result<Vec<Finding>, String> {
    let policy = load(source)?;
    let json = pod(annotation);
    review(
        &policy,
        &[Manifest {
            content: &json,
            source: Some("pod.yaml"),
        }],
    )
    .map_err(|e| e.to_string())
}

fn messages(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.msg.as_str()).collect()
}

#[test]
fn gatekeeper_variables_params_and_any_object() {
    let source = "variables:
- name: name
  expression: variables.anyObject.metadata.name
validations:
- expression: variables.params.allowed.exists(a, a == variables.name)
  messageExpression: \"'name ' + variables.name + ' not in ' + variables.params.allowed.join(', ') + ' of ' + params.metadata.name\"
- expression: object.metadata.namespace == request.namespace && request.operation == 'CREATE' && namespaceObject.metadata.name == 'apps' && oldObject == null
  message: request";
    assert_eq!(
        messages(&run(source, "").unwrap()),
        ["name web not in a, b of test-constraint"]
    );
}

#[test]
fn match_conditions_skip_objects() {
    let source = "matchConditions:
- name: only-named-db
  expression: object.metadata.name == 'db'
validations:
- expression: 'false'
  message: never";
    assert!(run(source, "").unwrap().is_empty());
}

#[test]
fn a_template_that_does_not_compile_is_refused_naming_file_and_expression() {
    let err = load("validations:\n- expression: object.metadata.name ==").unwrap_err();
    assert!(err.starts_with("template.yaml:"), "{err}");
    assert!(
        err.contains("ConstraintTemplate `k8stest`")
            && err.contains("spec.targets[0].code[0].source.validations[0].expression")
            && err.contains("`object.metadata.name ==`")
            && err.contains("does not compile"),
        "{err}"
    );
}

#[test]
fn missing_libraries_and_reserved_names_are_refused_by_name() {
    let err = load("validations:\n- expression: isSemver(object.metadata.name)\n  message: x")
        .unwrap_err();
    assert!(
        err.contains("`isSemver`") && err.contains("template.yaml"),
        "{err}"
    );
    let err = load(
        "validations:\n- expression: authorizer.group('').check('get').allowed()\n  message: x",
    )
    .unwrap_err();
    assert!(err.contains("`check`"), "{err}");
    for name in ["params", "anyObject", "gatekeeper_internal_x"] {
        let err = load(&format!(
            "variables:\n- name: {name}\n  expression: '1'\nvalidations:\n- expression: 'true'"
        ))
        .unwrap_err();
        assert!(err.contains("is reserved by Gatekeeper"), "{err}");
    }
    let err = load("validations: []").unwrap_err();
    assert!(err.contains("would allow everything"), "{err}");
    let err = load("validations:\n- expression: 'true'\n  extra: 1").unwrap_err();
    assert!(err.contains("unknown field `extra`"), "{err}");
}

#[test]
fn runtime_errors_fail_the_review_naming_the_template() {
    let source = "validations:\n- expression: object.spec.missing.field == 1\n  message: x";
    let err = run(source, "").unwrap_err();
    assert!(
        err.contains(
            "constraint `test-constraint` (K8sTest, template template.yaml) on Pod apps/web"
        ) && err.contains("CEL evaluation failed")
            && err.contains("validations[0].expression"),
        "{err}"
    );
    let err = run("validations:\n- expression: '1'\n  message: x", "").unwrap_err();
    assert!(err.contains("not a bool"), "{err}");
    // failurePolicy Ignore: the error is ignored (Gatekeeper's semantics).
    let ignored = format!("failurePolicy: Ignore\n{source}");
    assert!(run(&ignored, "").unwrap().is_empty());
}

#[test]
fn a_message_expression_that_errors_falls_back_to_the_message() {
    let source = "validations:
- expression: 'false'
  message: static message
  messageExpression: object.spec.nope.name";
    assert_eq!(messages(&run(source, "").unwrap()), ["static message"]);
    let source = "validations:
- expression: 'false'
  messageExpression: object.spec.nope.name";
    assert_eq!(
        messages(&run(source, "").unwrap()),
        ["failed expression: false"]
    );
}

#[test]
fn attack_huge_strings_fail_closed_naming_the_template() {
    // Each variable doubles the previous one: 100 KB * 2^12 unless counted.
    let mut source =
        "variables:\n- name: v0\n  expression: object.metadata.annotations.note\n".to_owned();
    for i in 1..=12 {
        source.push_str(&format!(
            "- name: v{i}\n  expression: variables.v{} + variables.v{}\n",
            i - 1,
            i - 1
        ));
    }
    source.push_str("validations:\n- expression: size(variables.v12) > 0\n  message: x");
    let err = run(&source, &"a".repeat(100_000)).unwrap_err();
    assert!(
        err.contains("template template.yaml") && err.contains("cost budget"),
        "{err}"
    );
}

#[test]
fn attack_huge_lists_fail_closed() {
    let range = (0..500)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let source = format!(
        "validations:\n- expression: '[{range}].all(a, [{range}].all(b, [{range}].all(c, true)))'\n  message: x"
    );
    let err = run(&source, "").unwrap_err();
    assert!(
        err.contains("template.yaml") && err.contains("cost budget"),
        "{err}"
    );
}

#[test]
fn attack_a_message_expression_over_the_budget_fails_closed() {
    let source = "validations:
- expression: 'false'
  message: x
  messageExpression: \"[1,2,3,4,5,6,7,8,9,10].map(i, object.metadata.annotations.note).join('')\"";
    let err = run(source, &"a".repeat(1_000_000)).unwrap_err();
    assert!(
        err.contains("template template.yaml")
            && err.contains("messageExpression")
            && err.contains("cost budget"),
        "{err}"
    );
}

#[test]
fn attack_deep_nesting_is_refused_at_load() {
    let deep = format!("{}true{}", "(".repeat(300), ")".repeat(300));
    let err = load(&format!(
        "validations:\n- expression: '{deep}'\n  message: x"
    ))
    .unwrap_err();
    assert!(
        err.contains("template.yaml") && err.contains("levels deep"),
        "{err}"
    );
    let long = format!("'{}' == ''", "a".repeat(20_000));
    let err = load(&format!(
        "validations:\n- expression: \"{long}\"\n  message: x"
    ))
    .unwrap_err();
    assert!(
        err.contains("template.yaml") && err.contains("bytes long"),
        "{err}"
    );
}

#[test]
fn attack_deep_objects_fail_closed() {
    let policy = load("validations:\n- expression: 'true'").unwrap();
    let mut deep = serde_json::json!(1);
    for _ in 0..120 {
        deep = serde_json::json!({ "a": deep });
    }
    let json = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "apps"},
        "spec": deep,
    })
    .to_string();
    let findings = review(
        &policy,
        &[Manifest {
            content: &json,
            source: None,
        }],
    )
    .unwrap();
    assert!(
        findings.iter().any(|f| f.message.contains("nests deeper")),
        "{findings:?}"
    );
}

#[test]
fn attack_megabyte_strings_to_the_parsers_fail_closed() {
    let huge = "1".repeat(1 << 20);
    for call in [
        "quantity(object.metadata.annotations.note).sign() == 1",
        "url(object.metadata.annotations.note).getHost() == ''",
        "ip(object.metadata.annotations.note).family() == 4",
        "cidr(object.metadata.annotations.note).prefixLength() == 8",
    ] {
        let err = run(
            &format!("validations:\n- expression: \"{call}\"\n  message: x"),
            &huge,
        )
        .unwrap_err();
        assert!(
            err.contains("template template.yaml")
                && err.contains("bytes long, more than the limit of 4096"),
            "{call}: {err}"
        );
    }
    // The predicates are false without parsing: the validation fails.
    let source = "validations:
- expression: isQuantity(object.metadata.annotations.note) || isURL(object.metadata.annotations.note) || isIP(object.metadata.annotations.note) || isCIDR(object.metadata.annotations.note)
  message: not a quantity";
    assert_eq!(messages(&run(source, &huge).unwrap()), ["not a quantity"]);
}
