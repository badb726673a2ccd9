//! The rule for tests whose external tool is missing
//! (`tests/support/require.rs`): a failure naming the tool under CI or
//! `KILN_REQUIRE_ALL`, a recorded skip elsewhere — never a silent pass.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

use support::require::{Decision, Policy, decide, record_skip};
use support::{Tool, require};

const TEST: &str = "kiln --test example a_test";

#[test]
fn ci_or_require_all_requires_every_tool() {
    for (ci, all) in [
        (Some("true"), None),
        (Some("1"), None),
        (Some("TRUE"), None),
        (None, Some("1")),
        (Some("false"), Some("1")),
    ] {
        assert_eq!(
            Policy::from_vars(ci, all),
            Policy::Require,
            "CI={ci:?} KILN_REQUIRE_ALL={all:?}"
        );
    }
    for (ci, all) in [
        (None, None),
        (Some("false"), None),
        (Some("0"), Some("")),
        (Some(""), Some("0")),
    ] {
        assert_eq!(
            Policy::from_vars(ci, all),
            Policy::Skip,
            "CI={ci:?} KILN_REQUIRE_ALL={all:?}"
        );
    }
}

#[test]
fn a_present_tool_runs_under_every_policy() {
    let path = PathBuf::from("/opt/tools/sshd");
    for policy in [Policy::Require, Policy::Skip] {
        assert_eq!(
            decide(TEST, Tool::Sshd, Some(path.clone()), policy),
            Decision::Run(path.clone())
        );
    }
}

#[test]
fn a_missing_tool_fails_under_ci_naming_it_and_how_to_install_it() {
    for (tool, name, install) in [
        (Tool::Sshd, "sshd", "openssh-server"),
        (
            Tool::DockerRegistry,
            "docker-registry",
            "apt-get install docker-registry",
        ),
        (Tool::SigstorePython, "sigstore-python", "sigstore==4.5.1"),
        (Tool::Kubectl, "kubectl", "KILN_KUBECTL"),
    ] {
        let Decision::Fail(message) = decide(TEST, tool, None, Policy::Require) else {
            panic!("{tool} missing under CI must fail");
        };
        assert!(message.starts_with(TEST), "{message}");
        assert!(message.contains(&format!("{name} is missing")), "{message}");
        assert!(message.contains(install), "{message}");
        assert!(message.contains(tool.variable()), "{message}");
    }
}

#[test]
fn a_missing_tool_elsewhere_is_a_skip_naming_the_test_and_the_tool() {
    let Decision::Skip(line) = decide(TEST, Tool::DockerRegistry, None, Policy::Skip) else {
        panic!("a missing tool outside CI is skipped");
    };
    assert!(
        line.starts_with("kiln --test example a_test: SKIPPED: docker-registry is missing"),
        "{line}"
    );
    assert!(!line.contains('\n'), "one line per skip: {line}");
}

#[test]
fn skips_are_appended_to_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nested/skipped.log");
    record_skip(&log, "first: SKIPPED: sshd is missing");
    record_skip(&log, "second: SKIPPED: kubectl is missing");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "first: SKIPPED: sshd is missing\nsecond: SKIPPED: kubectl is missing\n"
    );
}

/// sshd found through the helper; the tests below also run it in a child
/// process with the environment they choose.
#[test]
fn probe_requires_sshd() {
    let Some(sshd) = require(Tool::Sshd) else {
        return;
    };
    assert!(sshd.is_file());
}

/// This test binary running only the probe, with sshd pointed at a path
/// that does not exist and no CI settings from the parent's environment.
fn probe(env: &[(&str, &str)], skip_log: &std::path::Path) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "probe_requires_sshd", "--nocapture"])
        .env_remove("CI")
        .env_remove("KILN_REQUIRE_ALL")
        .env("KILN_SSHD", "/nonexistent/kiln-test/sshd")
        .env("KILN_SKIP_LOG", skip_log)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn under_ci_a_test_whose_tool_is_missing_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skipped.log");
    for env in [[("CI", "true")], [("KILN_REQUIRE_ALL", "1")]] {
        let out = probe(&env, &log);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{env:?}: {stdout}{stderr}");
        assert!(
            stderr.contains("probe_requires_sshd: sshd is missing")
                && stderr.contains("/nonexistent/kiln-test/sshd")
                && stderr.contains("apt-get install openssh-server"),
            "{env:?}: {stderr}"
        );
        assert!(!log.exists(), "a failure is not a skip");
    }
}

#[test]
fn elsewhere_a_test_whose_tool_is_missing_records_its_skip() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skipped.log");
    let out = probe(&[("CI", "false")], &log);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recorded = std::fs::read_to_string(&log).unwrap();
    assert_eq!(recorded.lines().count(), 1, "{recorded}");
    assert!(
        recorded.starts_with(
            "kiln --test test_prerequisites probe_requires_sshd: SKIPPED: sshd is missing"
        ),
        "{recorded}"
    );
}
