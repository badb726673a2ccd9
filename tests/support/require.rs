//! The external tools some tests need (servers and oracles the project does
//! not build), found in one place, with one rule for when one is missing:
//!
//! - under CI (`CI` set, as every CI service does) or with
//!   `KILN_REQUIRE_ALL=1`, the test fails, naming the tool and how to
//!   install it: a test never passes by skipping there;
//! - elsewhere the test is skipped, and the skip is appended to the file
//!   `KILN_SKIP_LOG` names (default: `kiln-skipped.log` in Cargo's
//!   `target/tmp`), which `scripts/test` prints in its summary, so that a
//!   skip is never hidden in captured output.
//!
//! The same rule holds for other projects' test data ([`Corpus`]).
//!
//! Only the standard library is used: `plugins/kustomize/tests/oracle.rs`
//! (another workspace) includes this file too.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An external tool a test needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// OpenSSH's server (`ssh://` Git URLs): `KILN_SSHD`, else `/usr/sbin/sshd`.
    Sshd,
    /// The CNCF distribution registry (OCI plugins): `KILN_DOCKER_REGISTRY`,
    /// else `/usr/bin/docker-registry`.
    DockerRegistry,
    /// A Python with the Sigstore project's `sigstore` package (an
    /// independent verifier): `KILN_SIGSTORE_PYTHON`, else
    /// `$KILN_CACHE_DIR/sigstore-venv/bin/python` (`KILN_CACHE_DIR` defaults
    /// to `~/.cache/kiln`).
    SigstorePython,
    /// A Python with PyPI's `helm-python-sdk` (Helm v4.2.3's Go engine; the
    /// helm plugin's oracle): `KILN_HELM_PYTHON`, else
    /// `$KILN_CACHE_DIR/helm-venv/bin/python`.
    HelmPython,
    /// The real `kubectl` (its built-in kustomize is an oracle; the
    /// dev cluster must serve it): `KILN_KUBECTL`, else `/usr/bin/kubectl`.
    Kubectl,
}

impl Tool {
    /// The environment variable that points at the tool.
    pub fn variable(self) -> &'static str {
        match self {
            Tool::Sshd => "KILN_SSHD",
            Tool::DockerRegistry => "KILN_DOCKER_REGISTRY",
            Tool::SigstorePython => "KILN_SIGSTORE_PYTHON",
            Tool::HelmPython => "KILN_HELM_PYTHON",
            Tool::Kubectl => "KILN_KUBECTL",
        }
    }

    /// How a person gets the tool.
    pub fn install(self) -> &'static str {
        match self {
            Tool::Sshd => "apt-get install openssh-server (scripts/test does)",
            Tool::DockerRegistry => "apt-get install docker-registry (scripts/test does)",
            Tool::HelmPython => {
                "python3 -m venv $KILN_CACHE_DIR/helm-venv && \
                 $KILN_CACHE_DIR/helm-venv/bin/pip install helm-python-sdk==0.2.2 PyYAML (scripts/test does)"
            }
            Tool::SigstorePython => {
                "python3 -m venv $KILN_CACHE_DIR/sigstore-venv && \
                 $KILN_CACHE_DIR/sigstore-venv/bin/pip install sigstore==4.5.1 (scripts/test does)"
            }
            Tool::Kubectl => {
                "kubectl 1.32 from https://kubernetes.io/docs/tasks/tools/ (or set KILN_KUBECTL)"
            }
        }
    }

    /// Where the tool is looked for, from the environment.
    pub fn path(self) -> PathBuf {
        if let Some(path) = std::env::var_os(self.variable()) {
            return PathBuf::from(path);
        }
        match self {
            Tool::Sshd => PathBuf::from("/usr/sbin/sshd"),
            Tool::DockerRegistry => PathBuf::from("/usr/bin/docker-registry"),
            Tool::SigstorePython => cache_dir().join("sigstore-venv/bin/python"),
            Tool::HelmPython => cache_dir().join("helm-venv/bin/python"),
            Tool::Kubectl => PathBuf::from("/usr/bin/kubectl"),
        }
    }

    /// The tool's path when it is there and usable.
    pub fn locate(self) -> Option<PathBuf> {
        let path = self.path();
        let usable = match self {
            Tool::SigstorePython => Command::new(&path)
                .args(["-c", "import sigstore"])
                .output()
                .is_ok_and(|o| o.status.success()),
            Tool::HelmPython => Command::new(&path)
                .args(["-c", "import helm_python, yaml"])
                .output()
                .is_ok_and(|o| o.status.success()),
            _ => path.is_file(),
        };
        usable.then_some(path)
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Tool::Sshd => "sshd",
            Tool::DockerRegistry => "docker-registry",
            Tool::SigstorePython => "sigstore-python",
            Tool::HelmPython => "helm-python-sdk",
            Tool::Kubectl => "kubectl",
        };
        f.write_str(name)
    }
}

/// `KILN_CACHE_DIR`, default `~/.cache/kiln`.
fn cache_dir() -> PathBuf {
    std::env::var_os("KILN_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kiln")))
        .unwrap_or_else(|| PathBuf::from(".cache/kiln"))
}

/// What a missing tool does to a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The test fails (CI, or `KILN_REQUIRE_ALL`).
    Require,
    /// The test is skipped and the skip recorded.
    Skip,
}

impl Policy {
    /// The policy the values of `CI` and `KILN_REQUIRE_ALL` ask for: either
    /// set to anything but empty, `0` or `false` requires every tool.
    pub fn from_vars(ci: Option<&str>, require_all: Option<&str>) -> Policy {
        let on = |v: Option<&str>| {
            v.is_some_and(|v| !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false")))
        };
        if on(ci) || on(require_all) {
            Policy::Require
        } else {
            Policy::Skip
        }
    }

    /// The policy of this process's environment.
    pub fn from_env() -> Policy {
        let var = |name| std::env::var(name).ok();
        Policy::from_vars(var("CI").as_deref(), var("KILN_REQUIRE_ALL").as_deref())
    }
}

/// The decision about one test's tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The tool is there: run with it.
    Run(PathBuf),
    /// Missing, and skipping is allowed: the line for the skip log.
    Skip(String),
    /// Missing, and required: the failure message.
    Fail(String),
}

/// Decides for `test` (how to run it again: `package --test binary name`)
/// whether it runs with `found`, is skipped or fails.
pub fn decide(test: &str, tool: Tool, found: Option<PathBuf>, policy: Policy) -> Decision {
    if let Some(path) = found {
        return Decision::Run(path);
    }
    let missing = format!(
        "{tool} is missing (looked for {}; {} points elsewhere); install: {}",
        tool.path().display(),
        tool.variable(),
        tool.install()
    );
    match policy {
        Policy::Require => Decision::Fail(format!(
            "{test}: {missing}. Under CI (CI=true) or KILN_REQUIRE_ALL=1 a missing tool fails the test"
        )),
        Policy::Skip => Decision::Skip(format!("{test}: SKIPPED: {missing}")),
    }
}

/// Other projects' test data a suite checks Kiln against. It is never
/// copied into the repository: it is read from `KILN_CONFORMANCE_DATA/NAME`,
/// else from `../shared/testdata/NAME` beside the clone (the first
/// ancestor of the crate whose sibling `shared/testdata` exists). A missing
/// corpus is handled as a missing tool: the test fails under CI, else it is
/// skipped and the skip recorded ([`corpus`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corpus {
    /// The Gatekeeper library's templates and gator suites.
    Gatekeeper,
    /// Pod Security Admission's fixtures.
    PodSecurity,
    /// The Sigstore conformance bundles.
    SigstoreConformance,
    /// kyverno/policies' policies and `kyverno test` suites.
    Kyverno,
}

impl Corpus {
    /// Its directory name.
    pub fn name(self) -> &'static str {
        match self {
            Corpus::Gatekeeper => "gatekeeper",
            Corpus::PodSecurity => "pod-security",
            Corpus::SigstoreConformance => "sigstore-conformance",
            Corpus::Kyverno => "kyverno",
        }
    }

    /// A file every complete copy holds.
    fn marker(self) -> &'static str {
        match self {
            Corpus::Gatekeeper | Corpus::PodSecurity | Corpus::Kyverno => "cases.tsv",
            Corpus::SigstoreConformance => "a.txt",
        }
    }

    /// Where it is looked for.
    pub fn path(self) -> PathBuf {
        if let Some(root) = std::env::var_os("KILN_CONFORMANCE_DATA") {
            return PathBuf::from(root).join(self.name());
        }
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        manifest
            .ancestors()
            .filter_map(Path::parent)
            .map(|parent| parent.join("shared/testdata"))
            .find(|dir| dir.is_dir())
            .unwrap_or_else(|| manifest.join("../shared/testdata"))
            .join(self.name())
    }

    /// Its directory when it is there.
    pub fn locate(self) -> Option<PathBuf> {
        let path = self.path();
        path.join(self.marker()).is_file().then_some(path)
    }
}

/// The corpus's directory, for the calling test. When it is missing: under
/// CI or `KILN_REQUIRE_ALL`, panics naming it; otherwise records the skip
/// and returns `None`, and the test returns.
#[track_caller]
pub fn corpus(corpus: Corpus) -> Option<PathBuf> {
    let found = corpus.locate();
    if let Some(path) = found {
        return Some(path);
    }
    let missing = format!(
        "the {} corpus is missing (looked in {}; KILN_CONFORMANCE_DATA names another root): \
         other projects' test data is read from ../shared/testdata, never copied into the repository",
        corpus.name(),
        corpus.path().display()
    );
    let test = current_test();
    match Policy::from_env() {
        Policy::Require => panic!(
            "{test}: {missing}. Under CI (CI=true) or KILN_REQUIRE_ALL=1 a missing corpus fails the test"
        ),
        Policy::Skip => {
            let line = format!("{test}: SKIPPED: {missing}");
            eprintln!("{line}");
            record_skip(&skip_log(), &line);
            None
        }
    }
}

/// The tool's path, for the calling test. When it is missing: under CI or
/// `KILN_REQUIRE_ALL`, panics naming it; otherwise records the skip (see
/// the module's documentation) and returns `None`, and the test returns.
#[track_caller]
pub fn require(tool: Tool) -> Option<PathBuf> {
    match decide(&current_test(), tool, tool.locate(), Policy::from_env()) {
        Decision::Run(path) => Some(path),
        Decision::Fail(message) => panic!("{message}"),
        Decision::Skip(line) => {
            eprintln!("{line}");
            record_skip(&skip_log(), &line);
            None
        }
    }
}

/// The file skips are appended to: `KILN_SKIP_LOG`, else
/// `kiln-skipped.log` in Cargo's `target/tmp`.
pub fn skip_log() -> PathBuf {
    std::env::var_os("KILN_SKIP_LOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("kiln-skipped.log"))
}

/// Appends `line` to `log` (one write, so concurrent tests do not
/// interleave). A log that cannot be written fails the test: the skip must
/// be visible.
pub fn record_skip(log: &Path, line: &str) {
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(err) = written {
        panic!(
            "{line}\n(and the skip could not be recorded in {}: {err})",
            log.display()
        );
    }
}

/// `package --test binary test_name` of the running test (libtest names
/// each test's thread after the test).
fn current_test() -> String {
    let thread = std::thread::current();
    format!(
        "{} --test {} {}",
        env!("CARGO_PKG_NAME"),
        env!("CARGO_CRATE_NAME"),
        thread.name().unwrap_or("(unnamed test)")
    )
}
