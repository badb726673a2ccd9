//! Gatekeeper's own `gator verify` suites, natively: the 28 sampled
//! templates of the Gatekeeper corpus (../shared/testdata/gatekeeper): every runnable case of its cases.tsv
//! and every suite.yaml read as gator reads it, with `engine=rego`; the
//! cases of the templates that carry a `K8sNativeValidation` source with
//! `engine=cel`, and every case with `engine=auto` (upstream runs every
//! suite once per engine, with the same assertions).

use std::path::{Path, PathBuf};

// Other projects' data is read from ../shared/testdata (the host's rule:
// a missing corpus fails under CI, else the skip is recorded).
#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

use kiln_gatekeeper::files::Dir;
use kiln_gatekeeper::{Manifest, Policy, Settings, review};
use serde_json::Value;

/// The Gatekeeper library's templates and suites (`../shared/testdata`).
fn gatekeeper() -> PathBuf {
    require::Corpus::Gatekeeper.path()
}

/// One gator case: paths relative to the data root.
#[derive(Debug)]
struct Case {
    name: String,
    template: String,
    constraint: String,
    object: String,
    inventory: Vec<String>,
    assertions: Vec<Value>,
    /// `rego`, or `cel+rego` when the template also carries CEL.
    engines: String,
}

fn yaml_file(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    kiln_gatekeeper::yaml::documents(&text, &path.display().to_string())
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// `Ok(None)`: the case reviews an AdmissionReview (an UPDATE request),
/// which has no meaning before apply.
fn run(root: &Path, case: &Case, engine: &str) -> Result<Option<()>, String> {
    let objects = yaml_file(&root.join(&case.object));
    let [object] = &objects[..] else {
        return Err(format!(
            "{}: {} objects, expected one",
            case.object,
            objects.len()
        ));
    };
    if object["kind"] == "AdmissionReview" {
        return Ok(None);
    }
    let mut pairs = vec![
        ("template", case.template.as_str()),
        ("constraint", case.constraint.as_str()),
    ];
    pairs.extend(case.inventory.iter().map(|i| ("inventory", i.as_str())));
    pairs.push(("engine", engine));
    let settings = Settings::parse(pairs).map_err(|e| e.to_string())?;
    let policy = Policy::load(&settings, &Dir(root.to_owned()), "").map_err(|e| e.to_string())?;
    let json = object.to_string();
    let findings = review(
        &policy,
        &[Manifest {
            content: &json,
            source: Some(&case.object),
        }],
    )
    .map_err(|e| e.to_string())?;
    if let Some(f) = findings.iter().find(|f| f.msg.is_empty()) {
        return Err(format!("not reviewed: {}", f.message));
    }
    let msgs: Vec<&str> = findings.iter().map(|f| f.msg.as_str()).collect();
    for assertion in &case.assertions {
        let re = assertion
            .get("message")
            .and_then(Value::as_str)
            .map(|m| regex::Regex::new(m).unwrap());
        let n = msgs
            .iter()
            .filter(|m| re.as_ref().is_none_or(|re| re.is_match(m)))
            .count();
        let ok = match assertion.get("violations") {
            None => n > 0,
            Some(Value::String(s)) if s == "yes" => n > 0,
            Some(Value::String(s)) if s == "no" => n == 0,
            Some(Value::Bool(b)) => (n > 0) == *b,
            Some(Value::Number(k)) => Some(n as u64) == k.as_u64(),
            Some(other) => return Err(format!("assertion violations {other}")),
        };
        if !ok {
            return Err(format!("assertion {assertion} failed: violations {msgs:?}"));
        }
    }
    Ok(Some(()))
}

/// Every case of one suite.yaml.
fn suite_cases(root: &Path, suite: &Path) -> Vec<Case> {
    let dir = suite
        .parent()
        .unwrap()
        .strip_prefix(root)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let rel = |p: &str| format!("{dir}/{p}");
    let mut out = Vec::new();
    for doc in yaml_file(suite) {
        for test in doc["tests"].as_array().into_iter().flatten() {
            for case in test["cases"].as_array().into_iter().flatten() {
                out.push(Case {
                    name: format!(
                        "{dir}/{}/{}",
                        test["name"].as_str().unwrap(),
                        case["name"].as_str().unwrap()
                    ),
                    template: rel(test["template"].as_str().unwrap()),
                    constraint: rel(test["constraint"].as_str().unwrap()),
                    object: rel(case["object"].as_str().unwrap()),
                    inventory: case["inventory"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|i| rel(i.as_str().unwrap()))
                        .collect(),
                    assertions: case["assertions"].as_array().cloned().unwrap_or_default(),
                    engines: String::new(),
                });
            }
        }
    }
    out
}

fn suites(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            suites(&path, out);
        } else if path.file_name().is_some_and(|n| n == "suite.yaml") {
            out.push(path);
        }
    }
}

/// Runs cases; returns (passed, skipped AdmissionReview cases, the names of
/// the cases of `known` that failed as expected).
fn run_all(
    root: &Path,
    cases: &[Case],
    known: &[&str],
    engine: &str,
) -> (usize, usize, Vec<String>) {
    let (mut passed, mut skipped, mut failures, mut diverged) = (0, 0, Vec::new(), Vec::new());
    for case in cases {
        match run(root, case, engine) {
            Ok(Some(())) => passed += 1,
            Ok(None) => skipped += 1,
            Err(_) if known.contains(&case.name.as_str()) => diverged.push(case.name.clone()),
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    (passed, skipped, diverged)
}

/// The runnable cases of cases.tsv.
fn tsv_cases(root: &Path) -> Vec<Case> {
    let tsv = std::fs::read_to_string(root.join("cases.tsv")).unwrap();
    let mut cases = Vec::new();
    let mut admission_reviews = 0;
    for line in tsv.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [
            name,
            dir,
            template,
            constraint,
            object,
            inventory,
            _kind,
            engines,
            status,
            assertions,
        ] = cols[..]
        else {
            panic!("bad line {line:?}")
        };
        if status != "run" {
            assert_eq!(status, "skip-admissionreview-update");
            admission_reviews += 1;
            continue;
        }
        let rel = |p: &str| format!("{dir}/{p}");
        cases.push(Case {
            name: name.to_owned(),
            template: rel(template),
            constraint: rel(constraint),
            object: rel(object),
            inventory: if inventory == "-" {
                Vec::new()
            } else {
                inventory.split(',').map(rel).collect()
            },
            assertions: serde_json::from_str(assertions).unwrap(),
            engines: engines.to_owned(),
        });
    }
    assert_eq!((cases.len(), admission_reviews), (146, 16));
    cases
}

#[test]
fn every_runnable_case_of_the_sampled_templates_passes() {
    let Some(_) = require::corpus(require::Corpus::Gatekeeper) else {
        return;
    };
    let root = gatekeeper();
    let cases = tsv_cases(&root);
    let (passed, skipped, diverged) = run_all(&root, &cases, &[], "rego");
    assert_eq!((passed, skipped, diverged.len()), (146, 0, 0));
}

#[test]
fn every_cel_case_passes_with_the_cel_engine() {
    let Some(_) = require::corpus(require::Corpus::Gatekeeper) else {
        return;
    };
    let root = gatekeeper();
    let cases: Vec<Case> = tsv_cases(&root)
        .into_iter()
        .filter(|c| c.engines == "cel+rego")
        .collect();
    let (passed, skipped, diverged) = run_all(&root, &cases, &[], "cel");
    assert_eq!((passed, skipped, diverged.len()), (59, 0, 0));
}

#[test]
fn every_runnable_case_passes_with_the_auto_engine() {
    let Some(_) = require::corpus(require::Corpus::Gatekeeper) else {
        return;
    };
    let root = gatekeeper();
    let cases = tsv_cases(&root);
    let (passed, skipped, diverged) = run_all(&root, &cases, &[], "auto");
    assert_eq!((passed, skipped, diverged.len()), (146, 0, 0));
}

#[test]
fn the_cel_engine_refuses_a_template_without_cel_by_name() {
    let Some(_) = require::corpus(require::Corpus::Gatekeeper) else {
        return;
    };
    let root = gatekeeper();
    let case = tsv_cases(&root)
        .into_iter()
        .find(|c| c.engines == "rego")
        .unwrap();
    let err = run(&root, &case, "cel").unwrap_err();
    assert!(
        err.contains(&case.template) && err.contains("no K8sNativeValidation engine"),
        "{err}"
    );
}

#[test]
fn every_suite_of_the_sampled_templates_passes_as_gator_reads_it() {
    let Some(_) = require::corpus(require::Corpus::Gatekeeper) else {
        return;
    };
    let root = gatekeeper();
    let mut files = Vec::new();
    suites(&root, &mut files);
    let cases: Vec<Case> = files.iter().flat_map(|s| suite_cases(&root, s)).collect();
    let (passed, skipped, diverged) = run_all(&root, &cases, &[], "rego");
    assert!(diverged.is_empty());
    assert_eq!((files.len(), passed, skipped), (28, 146, 16));
}
