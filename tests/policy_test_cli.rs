//! `kiln policy test`, run as a user runs it: Gatekeeper's gator suites
//! read unchanged, Kiln's PolicySuites, exit codes, and every output format.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::require::{Corpus, corpus};
use support::*;

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "policy",
            "test",
            "--no-compile-cache",
            "--gatekeeper-plugin",
        ])
        .arg(component("gatekeeper"))
        .args(args)
        .env_remove("KILN_LOG")
        .output()
        .expect("kiln runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn gatekeeper_data() -> PathBuf {
    Corpus::Gatekeeper.path()
}

/// A copy of the allowedrepos sample (template, constraint, objects) with
/// `suite` as its suite.yaml.
fn allowedrepos_with(suite: &str) -> tempfile::TempDir {
    let from = gatekeeper_data().join("general/allowedrepos");
    let dir = tempfile::tempdir().unwrap();
    let samples = "samples/repo-must-be-openpolicyagent";
    std::fs::create_dir_all(dir.path().join(samples)).unwrap();
    std::fs::copy(from.join("template.yaml"), dir.path().join("template.yaml")).unwrap();
    for entry in std::fs::read_dir(from.join(samples)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            dir.path().join(samples).join(entry.file_name()),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("suite.yaml"), suite).unwrap();
    dir
}

const SUITE_HEAD: &str = "\
kind: Suite
apiVersion: test.gatekeeper.sh/v1alpha1
metadata:
  name: allowedrepos
tests:
- name: allowed-repos
  template: template.yaml
  constraint: samples/repo-must-be-openpolicyagent/constraint.yaml
  cases:
";

#[test]
fn the_gatekeeper_librarys_suites_pass_unchanged() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let out = kiln(&[&format!("{}/...", path(&gatekeeper_data()))]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    // Every runnable case of cases.tsv passes; the 16 AdmissionReview
    // (UPDATE request) cases are reported as skipped, with the reason.
    assert!(
        stdout.ends_with("146 passed, 0 failed, 16 skipped, 0 error(s)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "general/allowedrepos/suite.yaml: allowed-repos / initcontainer-disallowed\n"
        )
    );
    assert!(
        stdout.contains(
            ": automount-serviceaccount-token / update: the object is an AdmissionReview"
        )
    );
}

#[test]
fn a_directory_without_dots_holds_only_its_own_suites() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let out = kiln(&[&path(&gatekeeper_data())]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("no test suites found"),
        "{}",
        text(&out.stderr)
    );
    let out = kiln(&[&path(&gatekeeper_data().join("general/allowedrepos"))]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).ends_with("5 passed, 0 failed, 0 skipped, 0 error(s)\n"));
}

#[test]
fn a_wrong_expectation_exits_1_naming_suite_test_case_and_assertion() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: example-allowed
    object: samples/repo-must-be-openpolicyagent/example_allowed.yaml
    assertions:
    - violations: no
  - name: wrongly-expected
    object: samples/repo-must-be-openpolicyagent/example_disallowed_both.yaml
    assertions:
    - violations: 2
    - violations: 3
      message: initContainer
"
    ));
    let out = kiln(&[&path(dir.path())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let suite = path(&dir.path().join("suite.yaml"));
    assert!(
        stdout.contains(&format!(
            "FAIL  {suite}: allowed-repos / wrongly-expected\n      assertion 1 (violations: 3, message: \"initContainer\"): expected 3, found 1\n"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("      finding gatekeeper error Pod/"),
        "what was found is shown: {stdout}"
    );
    assert!(stdout.contains(&format!("PASS  {suite}: allowed-repos / example-allowed\n")));
    assert!(stdout.ends_with("1 passed, 1 failed, 0 skipped, 0 error(s)\n"));
}

#[test]
fn messages_are_matched_without_the_constraint_prefix_as_gator_matches_msg() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: anchored
    object: samples/repo-must-be-openpolicyagent/example_disallowed_container.yaml
    assertions:
    - violations: 1
      message: ^container <
"
    ));
    let out = kiln(&[&path(dir.path())]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn skipped_suites_tests_and_cases_are_reported_as_skipped() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: skipped
    skip: true
    object: samples/repo-must-be-openpolicyagent/missing.yaml
    assertions:
    - violations: 5
"
    ));
    let out = kiln(&[&path(dir.path())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("SKIP  "), "{stdout}");
    assert!(stdout.ends_with("0 passed, 0 failed, 1 skipped, 0 error(s)\n"));
}

#[test]
fn malformed_suites_exit_2_naming_the_file() {
    let suites = [
        ("bad.yaml", "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\ntests: [\n", "line"),
        (
            "bad-violations.yaml",
            &format!("{SUITE_HEAD}  - name: c\n    object: x.yaml\n    assertions:\n    - violations: maybe\n"),
            "violations `maybe` is not yes, no or a number",
        ),
        (
            "bad-regex.yaml",
            &format!("{SUITE_HEAD}  - name: c\n    object: x.yaml\n    assertions:\n    - message: \"(\"\n"),
            "not a regular expression",
        ),
        (
            "no-assertions.yaml",
            &format!("{SUITE_HEAD}  - name: c\n    object: x.yaml\n"),
            "case c: a case needs at least one assertion",
        ),
        (
            "aliases.yaml",
            &format!(
                "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\na: &a [x,x,x,x,x,x,x,x,x,x]\n{}",
                (b'b'..=b'k')
                    .map(|c| {
                        let prev = (c - 1) as char;
                        format!(
                            "{0}: &{0} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n",
                            c as char
                        )
                    })
                    .collect::<String>()
            ),
            "alias",
        ),
    ];
    for (name, suite, expected) in suites {
        let dir = tree(&[(name, suite)]);
        let file = path(&dir.path().join(name));
        let out = kiln(&[&file]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{name}: {stdout}");
        assert!(
            stdout.contains(&format!("ERROR {file}: {file}:")) && stdout.contains(expected),
            "{name}: {stdout}"
        );
    }
}

#[test]
fn a_file_that_is_not_a_suite_exits_2() {
    let dir = tree(&[(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )]);
    let file = path(&dir.path().join("cm.yaml"));
    let out = kiln(&[&file]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stdout).contains(&format!("{file}: not a test suite")));
}

#[test]
fn huge_files_exit_2_naming_the_file_and_the_flag() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: huge\n    object: huge.yaml\n    assertions:\n    - violations: no\n"
    ));
    let huge = dir.path().join("huge.yaml");
    std::fs::write(
        &huge,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: {{a: \"{}\"}}\n",
            "x".repeat(20_000)
        ),
    )
    .unwrap();
    let out = kiln(&[&path(dir.path()), "--max-file-size", "8Ki"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "ERROR {}: allowed-repos / huge: {}: ",
            path(&dir.path().join("suite.yaml")),
            path(&huge)
        )) && stdout.contains("more than the limit of 8192 (--max-file-size)"),
        "{stdout}"
    );
    // The suite file itself is bounded too.
    let out = kiln(&[&path(dir.path()), "--max-file-size", "100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stdout).contains("(--max-file-size)"));
}

#[test]
fn too_many_cases_exit_2_naming_the_flag() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let out = kiln(&[
        &format!("{}/...", path(&gatekeeper_data())),
        "--max-cases",
        "10",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("more than the limit of 10 (--max-cases)"),
        "{stdout}"
    );
}

#[test]
fn a_missing_object_file_exits_2_naming_it() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: gone\n    object: samples/nothing-here.yaml\n    assertions:\n    - violations: no\n"
    ));
    let out = kiln(&[&path(dir.path())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains(&path(&dir.path().join("samples/nothing-here.yaml"))),
        "{stdout}"
    );
}

#[test]
fn attack_an_object_file_outside_the_suites_root_is_refused() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    // A file beside the suites' directory, named by `..` and by a link.
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.yaml");
    std::fs::write(
        &secret,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: hunter2}\n",
    )
    .unwrap();
    for object in [secret.display().to_string(), "link.yaml".to_owned()] {
        let dir = allowedrepos_with(&format!(
            "{SUITE_HEAD}  - name: escape\n    object: {object}\n    assertions:\n    - violations: no\n"
        ));
        std::os::unix::fs::symlink(&secret, dir.path().join("link.yaml")).unwrap();
        let out = kiln(&[&path(dir.path())]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{object}: {stdout}");
        assert!(stdout.contains("is outside"), "{object}: {stdout}");
        assert!(!stdout.contains("hunter2"), "{stdout}");
    }
    // A FIFO is refused, not waited on.
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: fifo\n    object: samples/fifo.yaml\n    assertions:\n    - violations: no\n"
    ));
    let fifo = dir.path().join("samples/fifo.yaml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = kiln(&[&path(dir.path())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("not a regular file"), "{stdout}");
}

#[test]
fn a_plugin_that_cannot_load_exits_2_naming_it() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: c\n    object: samples/repo-must-be-openpolicyagent/example_allowed.yaml\n    assertions:\n    - violations: no\n"
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["policy", "test", "--no-compile-cache"])
        .args(["--gatekeeper-plugin", "/no/such/gatekeeper.wasm"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("plugin /no/such/gatekeeper.wasm"),
        "{stdout}"
    );
}

#[test]
fn a_missing_template_is_an_error_naming_it() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let suite = "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\ntests:\n- name: t\n  template: nowhere.yaml\n  constraint: samples/repo-must-be-openpolicyagent/constraint.yaml\n  cases:\n  - name: c\n    object: samples/repo-must-be-openpolicyagent/example_allowed.yaml\n    assertions:\n    - violations: no\n".to_owned();
    let dir = allowedrepos_with(&suite);
    let out = kiln(&[&path(dir.path())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("policy gatekeeper could not run"),
        "{stdout}"
    );
    assert!(stdout.contains("nowhere.yaml"), "{stdout}");
}

/// A Kiln suite: the required-labels policy, settings, a mode, object
/// selectors and severities.
fn kiln_suite(expect_web: &str) -> tempfile::TempDir {
    let plugin = path(&component("required-labels"));
    tree(&[
        (
            "labels/kiln-suite.yaml",
            &format!(
                "\
apiVersion: kiln.dev/v1alpha1
kind: PolicySuite
metadata: {{name: labels}}
policies:
- plugin: {plugin}
  settings: {{labels: team}}
tests:
- name: team label
  cases:
  - name: labelled
    objects: [ok.yaml]
    assertions:
    - violations: no
  - name: unlabelled
    objects: [ok.yaml, bad.yaml]
    assertions:
    - violations: {expect_web}
      object: {{kind: Deployment, name: web}}
      severity: error
      message: missing required label `team`
    - violations: no
      object: {{name: ok}}
- name: warn mode
  policies:
  - plugin: {plugin}
    settings: {{labels: 'team,app'}}
    mode: warn
  cases:
  - name: two labels
    objects: [bad.yaml]
    assertions:
    - violations: 2
      policy: required-labels
"
            ),
        ),
        (
            "labels/ok.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, labels: {team: a, app: b}}\n",
        ),
        (
            "labels/bad.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n",
        ),
    ])
}

#[test]
fn kiln_suites_name_policies_settings_objects_and_findings() {
    let dir = kiln_suite("1");
    let out = kiln(&[&format!("{}/...", path(dir.path()))]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.ends_with("3 passed, 0 failed, 0 skipped, 0 error(s)\n"),
        "{stdout}"
    );

    let dir = kiln_suite("2");
    let out = kiln(&[&format!("{}/...", path(dir.path()))]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(": team label / unlabelled\n      assertion 0 (violations: 2, message: \"missing required label `team`\", severity: error, object: Deployment/*/web): expected 2, found 1\n"), "{stdout}");
}

#[test]
fn kiln_suites_refuse_unknown_fields() {
    let dir = tree(&[(
        "s.yaml",
        "apiVersion: kiln.dev/v1alpha1\nkind: PolicySuite\ntests:\n- name: t\n  polices: []\n  cases: []\n",
    )]);
    let out = kiln(&[&path(&dir.path().join("s.yaml"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stdout).contains("unknown field `polices`"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn json_output_parses_and_carries_every_case() {
    let dir = kiln_suite("2");
    let out = kiln(&[&format!("{}/...", path(dir.path())), "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["summary"],
        serde_json::json!({"passed": 2, "failed": 1, "skipped": 0, "errors": 0})
    );
    let suite = &report["suites"][0];
    assert_eq!(suite["name"], "labels");
    assert_eq!(suite["format"], "kiln");
    let case = &suite["tests"][0]["cases"][1];
    assert_eq!(case["name"], "unlabelled");
    assert_eq!(case["status"], "fail");
    assert_eq!(case["failures"][0]["found"], 1);
    assert_eq!(case["findings"][0]["object"], "Deployment/web");
}

#[test]
fn junit_output_is_valid_xml_even_with_hostile_names() {
    let Some(_) = corpus(Corpus::Gatekeeper) else {
        return;
    };
    let dir = allowedrepos_with(&format!(
        "{SUITE_HEAD}  - name: \"a <b> & \\\"c\\\" \\x01\\x1b]0;x\\x07 ]]>\"
    object: samples/repo-must-be-openpolicyagent/example_disallowed_both.yaml
    assertions:
    - violations: 7
  - name: fine
    object: samples/repo-must-be-openpolicyagent/example_allowed.yaml
    assertions:
    - violations: no
  - name: gone
    object: nothing.yaml
    assertions:
    - violations: no
"
    ));
    let out = kiln(&[&path(dir.path()), "-o", "junit"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let xml = text(&out.stdout);
    let mut reader = quick_xml::Reader::from_str(&xml);
    let (mut cases, mut failures, mut errors, mut names) = (0, 0, 0, Vec::new());
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e)) => {
                match e.name().as_ref() {
                    "testcase" => {
                        cases += 1;
                        let name = e.try_get_attribute("name").unwrap().unwrap();
                        names.push(
                            name.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                .unwrap()
                                .into_owned(),
                        );
                    }
                    "failure" => failures += 1,
                    "error" => errors += 1,
                    _ => {}
                }
            }
            Ok(_) => {}
            Err(e) => panic!("invalid XML at {}: {e}\n{xml}", reader.buffer_position()),
        }
    }
    assert_eq!((cases, failures, errors), (3, 1, 1), "{xml}");
    assert_eq!(names[0], "a <b> & \"c\" \u{FFFD}\u{FFFD}]0;x\u{FFFD} ]]>");
    // Every character is one XML 1.0 allows.
    assert!(
        !xml.chars()
            .any(|c| (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r')),
        "{xml}"
    );
}

#[test]
fn the_documented_kiln_suite_passes() {
    // docs/policies.md shows examples/policy-suite/suite.yaml, and says it
    // passes: it must. Its plugin path is relative to the suite, as written
    // in the docs (plugins/dist, which scripts/build-plugins fills).
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policy-suite/suite.yaml");
    let _ = component("required-labels");
    let out = kiln(&[suite.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("1 passed, 0 failed"),
        "{}",
        text(&out.stdout)
    );
}

/// A Gatekeeper suite written for this test: one template, one constraint,
/// one object that violates it.
fn own_gatekeeper_suite() -> tempfile::TempDir {
    tree(&[
        (
            "suite.yaml",
            "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\ntests:\n- name: team\n  \
             template: template.yaml\n  constraint: constraint.yaml\n  cases:\n  - name: no-team\n    \
             object: bad.yaml\n    assertions:\n    - violations: yes\n",
        ),
        (
            "template.yaml",
            "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nmetadata:\n  name: k8srequiredteam\n\
             spec:\n  crd:\n    spec:\n      names:\n        kind: K8sRequiredTeam\n  targets:\n  \
             - target: admission.k8s.gatekeeper.sh\n    rego: |\n      package k8srequiredteam\n\n      \
             violation[{\"msg\": msg}] {\n        not input.review.object.metadata.labels.team\n        \
             msg := \"no team label\"\n      }\n",
        ),
        (
            "constraint.yaml",
            "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sRequiredTeam\nmetadata: {name: team}\n",
        ),
        (
            "bad.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n",
        ),
    ])
}

#[test]
fn the_gatekeeper_plugin_is_found_wherever_kiln_runs() {
    let suite = own_gatekeeper_suite();
    let run = |plugin_path: Option<&Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
        command
            .args(["policy", "test", "--no-compile-cache", "suite.yaml"])
            // Not the repository: no plugins/dist here.
            .current_dir(suite.path())
            .env_remove("KILN_LOG")
            .env_remove("KILN_PLUGIN_PATH");
        if let Some(dir) = plugin_path {
            command.env("KILN_PLUGIN_PATH", dir);
        }
        command.output().unwrap()
    };
    let out = run(None);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("the Gatekeeper plugin was not found (looked for")
            && all.contains("plugins/dist/gatekeeper.wasm")
            && all.contains("KILN_PLUGIN_PATH"),
        "{all}"
    );

    let dist = component("gatekeeper").parent().unwrap().to_owned();
    let out = run(Some(&dist));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("1 passed, 0 failed"), "{all}");
}
