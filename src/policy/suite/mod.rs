//! Policy test suites (`kiln policy test`): what `gator verify` and `kyverno
//! test` are to their users.
//!
//! Two formats are read (docs/policies.md, "Testing policies"):
//!
//! - Gatekeeper's `gator verify` suites, unchanged (`apiVersion:
//!   test.gatekeeper.sh/v1alpha1`, `kind: Suite`): each test's template and
//!   constraint become the settings of the Gatekeeper policy plugin, each
//!   case's `inventory` its `inventory` settings.
//! - Kiln's own (`apiVersion: kiln.dev/v1alpha1`, `kind: PolicySuite`):
//!   any policy plugins, with settings and mode, and cases of object files
//!   with expected findings.
//! - Kyverno's `kyverno test` files, unchanged (`apiVersion:
//!   cli.kyverno.io/v1alpha1`, `kind: Test`, usually
//!   `.kyverno-test/kyverno-test.yaml`): its policies become the settings of
//!   the Kyverno policy plugin, its resources are reviewed at once, and each
//!   resource of each expected result (policy, rule, pass/fail/skip) is one
//!   case, checked against the rule results the plugin reports (`kyverno.rs`).
//!
//! An assertion counts the findings it selects (every finding; or those
//! whose message matches the regular expression `message`, an unanchored
//! search as gator does; narrowed in Kiln suites by `policy`, `severity` and
//! `object`) and expects `violations`: `yes` (at least one, the default),
//! `no` (none) or a number (exactly that many).
//!
//! [`load`] discovers and parses suites; [`run`] runs them.

mod kyverno;
mod load;
mod run;

use std::path::PathBuf;

pub use load::{Found, SuiteError, discover, load};
pub use run::{
    AssertionFailure, CaseOutcome, CaseResult, Finding, PolicyLoader, RunReport, Status,
    SuiteResult, Summary, TestResult, run,
};

use crate::plugin::{Params, RuleOutcome, Severity};
use crate::policy::Mode;

/// The `apiVersion` of Kiln's suites.
pub const KILN_API_VERSION: &str = "kiln.dev/v1alpha1";
/// The `kind` of Kiln's suites.
pub const KILN_KIND: &str = "PolicySuite";
/// The API group of Gatekeeper's suites.
pub const GATOR_GROUP: &str = "test.gatekeeper.sh";
/// The `kind` of Gatekeeper's suites.
pub const GATOR_KIND: &str = "Suite";
/// The API group of Kyverno's test files.
pub const KYVERNO_GROUP: &str = "cli.kyverno.io";
/// The `kind` of Kyverno's test files.
pub const KYVERNO_KIND: &str = "Test";

/// Bounds of one `kiln policy test` run; every input is bounded.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest file read: a suite, an object file. Default 4 MiB.
    pub max_file_size: u64,
    /// Cases of all suites together. Default 10 000.
    pub max_cases: usize,
    /// Suite files found. Default 1 000.
    pub max_suites: usize,
    /// YAML files looked at while walking directories. Default 20 000.
    pub max_files: usize,
    /// Directory depth walked below a `DIR/...`. Default 32.
    pub max_depth: usize,
    /// Findings (messages) a failed case reports. Default 20.
    pub max_reported_findings: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_size: 4 << 20,
            max_cases: 10_000,
            max_suites: 1_000,
            max_files: 20_000,
            max_depth: 32,
            max_reported_findings: 20,
        }
    }
}

/// How suites are read and run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Gatekeeper policy plugin Gatekeeper suites run with (a plugin
    /// reference). Default: `plugins/dist/gatekeeper.wasm`.
    pub gatekeeper_plugin: String,
    /// The Kyverno policy plugin Kyverno tests run with (a plugin
    /// reference). Default: `plugins/dist/kyverno.wasm`.
    pub kyverno_plugin: String,
    /// Bounds.
    pub limits: Limits,
    /// Cases run at once. Default 4.
    pub concurrency: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            gatekeeper_plugin: "plugins/dist/gatekeeper.wasm".into(),
            kyverno_plugin: "plugins/dist/kyverno.wasm".into(),
            limits: Limits::default(),
            concurrency: 4,
        }
    }
}

/// Which format a suite was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `gator verify`'s `Suite`.
    Gatekeeper,
    /// Kiln's `PolicySuite`.
    Kiln,
    /// `kyverno test`'s `Test`.
    Kyverno,
}

/// One suite file, parsed.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The file, as found.
    pub file: PathBuf,
    /// `metadata.name`, or the file's directory name.
    pub name: String,
    /// Its format.
    pub format: Format,
    /// The root of the source view the policies read (the directory given
    /// on the command line, or the suite's own directory).
    pub root: PathBuf,
    /// The suite's directory relative to `root` (the Application path the
    /// policies see, so that relative settings resolve from the suite).
    pub dir: String,
    /// Whether the whole suite is skipped (`skip: true`).
    pub skip: bool,
    /// The tests.
    pub tests: Vec<Test>,
}

/// One test: policies, and cases run against them.
#[derive(Debug, Clone)]
pub struct Test {
    /// Its name.
    pub name: String,
    /// The policies every case runs.
    pub policies: Vec<PolicySpec>,
    /// Object files every case of the test shares, reviewed once for all of
    /// them (a Kyverno test's `resources`); Gatekeeper and Kiln cases name
    /// their own.
    pub objects: Vec<PathBuf>,
    /// Whether it is skipped (`skip: true`).
    pub skip: bool,
    /// The cases.
    pub cases: Vec<Case>,
}

/// A policy plugin with its settings.
#[derive(Debug, Clone)]
pub struct PolicySpec {
    /// The plugin reference (a local path is resolved from the suite).
    pub plugin: String,
    /// Settings, in order (keys may repeat).
    pub settings: Params,
    /// Its mode.
    pub mode: Mode,
    /// Message prefixes stripped before a message is matched: Gatekeeper's
    /// findings read `[CONSTRAINT] msg`, gator matches `msg` alone.
    pub message_prefixes: Vec<String>,
}

/// One case: objects and what the policies must say about them.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its name.
    pub name: String,
    /// The object files (resolved from the suite's directory).
    pub objects: Vec<PathBuf>,
    /// Whether the object file must hold exactly one object (gator's rule).
    pub single_object: bool,
    /// Settings added to every policy of the test for this case (a
    /// Gatekeeper case's `inventory`).
    pub settings: Params,
    /// Destination namespace given to the policies.
    pub namespace: String,
    /// Whether it is skipped (`skip: true`).
    pub skip: bool,
    /// Every one must hold.
    pub assertions: Vec<Assertion>,
    /// The rule result expected (a Kyverno test's case), checked against
    /// the rule results of a policy that reports them.
    pub rule: Option<RuleExpectation>,
}

/// What one rule must have done to one object (a resource of a Kyverno
/// test's `results` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleExpectation {
    /// The policy the rule belongs to (`policy`; a namespaced Policy may be
    /// written `NAMESPACE/NAME`).
    pub policy: String,
    /// The rule (`rule`); rules autogen made from it (`autogen-RULE`,
    /// `autogen-cronjob-RULE`) answer for it on pod controllers.
    pub rule: String,
    /// The object's `kind`, when given.
    pub kind: Option<String>,
    /// Its namespace, when given (`NAMESPACE/NAME`).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The outcome expected: `pass`, `fail`, `warn`, `error` or `skip` (the
    /// rule did not apply).
    pub outcome: RuleOutcome,
}

/// How many findings an assertion expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    /// At least one.
    Yes,
    /// None.
    No,
    /// Exactly this many.
    Exactly(u64),
}

impl Expected {
    /// Whether `found` findings satisfy it.
    pub fn holds(self, found: usize) -> bool {
        match self {
            Expected::Yes => found > 0,
            Expected::No => found == 0,
            Expected::Exactly(n) => found as u64 == n,
        }
    }
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::Yes => f.write_str("yes"),
            Expected::No => f.write_str("no"),
            Expected::Exactly(n) => write!(f, "{n}"),
        }
    }
}

/// The objects an assertion is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectSelector {
    /// `kind` (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `metadata.name` (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `metadata.namespace` (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// One expectation of a case.
#[derive(Debug, Clone)]
pub struct Assertion {
    /// How many selected findings are expected.
    pub violations: Expected,
    /// Only findings whose message matches (unanchored search).
    pub message: Option<regex::Regex>,
    /// Only findings of this policy (the plugin's name).
    pub policy: Option<String>,
    /// Only findings of this severity.
    pub severity: Option<Severity>,
    /// Only findings about this object.
    pub object: Option<ObjectSelector>,
}

impl std::fmt::Display for Assertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "violations: {}", self.violations)?;
        if let Some(message) = &self.message {
            write!(f, ", message: {:?}", message.as_str())?;
        }
        if let Some(policy) = &self.policy {
            write!(f, ", policy: {policy}")?;
        }
        if let Some(severity) = &self.severity {
            write!(f, ", severity: {severity}")?;
        }
        if let Some(object) = &self.object {
            let part = |p: &Option<String>| p.clone().unwrap_or_else(|| "*".into());
            write!(
                f,
                ", object: {}/{}/{}",
                part(&object.kind),
                part(&object.namespace),
                part(&object.name)
            )?;
        }
        Ok(())
    }
}
