//! Golden files for the diff normalizer: each `tests/golden/diff/NAME.yaml`
//! holds `desired`, `live` (either may be absent) and optional `ignore`
//! rules; `NAME.out` is the expected text report. `KILN_UPDATE_GOLDEN=1`
//! rewrites the `.out` files (review the changes before committing them).

use std::path::Path;

use kiln::diff::{self, DiffOptions, IgnoreDifferences, IgnoreRules, Jq, JqConfig, Masker, Report};
use serde_json::Value;

async fn run(case: &Path) -> String {
    let text = std::fs::read_to_string(case).unwrap();
    let doc: Value =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    let rules: Vec<IgnoreDifferences> =
        serde_json::from_value(doc.get("ignore").cloned().unwrap_or(Value::Array(vec![]))).unwrap();
    let options = DiffOptions {
        // jq runs in `kiln __jq-worker` processes.
        ignore: IgnoreRules::new(
            rules,
            &Jq::new(JqConfig {
                program: env!("CARGO_BIN_EXE_kiln").into(),
                ..JqConfig::default()
            }),
        )
        .await
        .unwrap(),
        // A fixed key: the hashes in the golden files are stable.
        masker: Masker::with_key([7; 32]),
        ..DiffOptions::default()
    };
    let object = diff::compare(
        doc.get("desired"),
        doc.get("live"),
        doc.get("predicted"),
        &options,
    )
    .await
    .unwrap();
    diff::output::text(
        &Report {
            objects: vec![object],
            ..Report::default()
        },
        false,
    )
}

#[tokio::test]
async fn every_golden_case_matches() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/diff");
    let update = std::env::var_os("KILN_UPDATE_GOLDEN").is_some();
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "the golden cases are there");
    let mut failures = Vec::new();
    for case in cases {
        let actual = run(&case).await;
        let golden = case.with_extension("out");
        if update {
            std::fs::write(&golden, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
            panic!(
                "{} is missing (KILN_UPDATE_GOLDEN=1 writes it)",
                golden.display()
            )
        });
        if actual != expected {
            failures.push(format!(
                "{}:\n--- expected\n{expected}\n--- actual\n{actual}",
                case.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn secret_plaintext_never_reaches_any_output() {
    let case =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/diff/secret-values-masked.yaml");
    let doc: Value = serde_yaml::from_str(&std::fs::read_to_string(case).unwrap()).unwrap();
    let object = diff::compare(
        doc.get("desired"),
        doc.get("live"),
        None,
        &DiffOptions::default(),
    )
    .await
    .unwrap();
    let report = Report {
        objects: vec![object],
        ..Report::default()
    };
    for output in [
        diff::output::text(&report, false),
        diff::output::text(&report, true),
        diff::output::json(&report),
        format!("{report:?}"),
    ] {
        for secret in [
            "new-password",
            "old-password",
            "b2xkLXBhc3N3b3Jk",
            "bmV3LXBhc3N3b3Jk",
            "admin",
            "YWRtaW4=",
        ] {
            assert!(!output.contains(secret), "{secret} leaked into:\n{output}");
        }
    }
}
