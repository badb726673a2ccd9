//! Running suites: each case's objects through its test's policies, each
//! assertion checked against the findings.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt as _;
use serde::Serialize;

use super::{Assertion, Case, Expected, Format, Options, Suite, Test, load};
use crate::plugin::{AppContext, ObjectRef, Plugin, Severity};
use crate::policy::{self, PolicyStep};
use crate::source::{LocalDir, SourceView};

/// Loads the policy plugins suites name (fetching and verifying as the
/// command line says).
#[async_trait::async_trait]
pub trait PolicyLoader: Send + Sync {
    /// The policy plugin at `reference`; the error names it and why.
    async fn load(&self, reference: &str) -> Result<Plugin, String>;
}

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every assertion held.
    Pass,
    /// An assertion did not hold.
    Fail,
    /// The suite, test or case says `skip: true`, or the case cannot be
    /// run before apply (an AdmissionReview object).
    Skip,
    /// The case could not run (a missing file, a policy that failed).
    Error,
}

/// One finding, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The policy.
    pub policy: String,
    /// Its severity.
    pub severity: Severity,
    /// The object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The message as matched (a Gatekeeper constraint's `[NAME] ` prefix
    /// taken off).
    pub message: String,
}

/// An assertion that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AssertionFailure {
    /// Its position in the case's `assertions` (from 0).
    pub index: usize,
    /// The assertion, as written.
    pub assertion: String,
    /// What it expected.
    pub expected: Expected,
    /// How many findings it selected.
    pub found: usize,
}

/// The outcome of one case.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseOutcome {
    /// How it ended.
    pub status: Status,
    /// Why it was skipped, or could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The assertions that did not hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<AssertionFailure>,
    /// The findings (of a failed case; at most
    /// [`super::Limits::max_reported_findings`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// How many findings there were in all.
    pub finding_count: usize,
    /// How long it took, in seconds.
    pub seconds: f64,
}

impl CaseOutcome {
    fn status(status: Status, reason: impl Into<String>) -> Self {
        CaseOutcome {
            status,
            reason: Some(reason.into()),
            failures: Vec::new(),
            findings: Vec::new(),
            finding_count: 0,
            seconds: 0.0,
        }
    }
}

/// One case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// Its outcome.
    #[serde(flatten)]
    pub outcome: CaseOutcome,
}

/// One test's results.
#[derive(Debug, Clone, Serialize)]
pub struct TestResult {
    /// The test's name.
    pub name: String,
    /// Its cases.
    pub cases: Vec<CaseResult>,
}

/// One suite's results.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteResult {
    /// The suite file.
    pub file: PathBuf,
    /// Its name.
    pub name: String,
    /// Its format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// Why it could not be read (then it has no tests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its tests.
    pub tests: Vec<TestResult>,
}

/// Counts of cases by outcome (an unreadable suite counts one error).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Passed.
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
    /// Could not run.
    pub errors: usize,
}

/// Everything a run found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunReport {
    /// Per suite, in the order found.
    pub suites: Vec<SuiteResult>,
    /// The counts.
    pub summary: Summary,
}

impl RunReport {
    fn count(&mut self) {
        let mut summary = Summary::default();
        for suite in &self.suites {
            if suite.error.is_some() {
                summary.errors += 1;
            }
            for case in suite.tests.iter().flat_map(|t| &t.cases) {
                match case.outcome.status {
                    Status::Pass => summary.passed += 1,
                    Status::Fail => summary.failed += 1,
                    Status::Skip => summary.skipped += 1,
                    Status::Error => summary.errors += 1,
                }
            }
        }
        self.summary = summary;
    }
}

/// Runs every suite `targets` name (see [`super::discover`]). Nothing here
/// fails: an unreadable suite, a missing file or a policy that cannot load
/// is an error result naming the file or plugin.
pub async fn run(targets: &[String], options: &Options, loader: &dyn PolicyLoader) -> RunReport {
    let mut report = RunReport::default();
    let plugins = Plugins {
        loader,
        loaded: tokio::sync::Mutex::new(HashMap::new()),
    };
    let mut cases_left = options.limits.max_cases;
    for target in targets {
        let found = match super::discover(target, &options.limits) {
            Ok(found) => found,
            Err(e) => {
                report.suites.push(unreadable(PathBuf::from(target), &e));
                continue;
            }
        };
        for super::Found { root, file, named } in found {
            let suite = match load(&root, &file, options) {
                Ok(suite) => suite,
                // Another group's `kind: Suite`, met while walking.
                Err(super::SuiteError::NotASuite { .. }) if !named => continue,
                Err(e) => {
                    report.suites.push(unreadable(file, &e));
                    continue;
                }
            };
            let cases: usize = suite.tests.iter().map(|t| t.cases.len()).sum();
            if cases > cases_left {
                let e = super::SuiteError::TooMany {
                    what: format!("cases of every suite, at {}", file.display()),
                    max: options.limits.max_cases,
                    flag: "--max-cases",
                };
                report.suites.push(unreadable(file, &e));
                break;
            }
            cases_left -= cases;
            report
                .suites
                .push(run_suite(&suite, options, &plugins).await);
        }
    }
    report.count();
    report
}

fn unreadable(file: PathBuf, error: &super::SuiteError) -> SuiteResult {
    SuiteResult {
        name: file.display().to_string(),
        file,
        format: None,
        error: Some(crate::text::chain(error)),
        tests: Vec::new(),
    }
}

/// Plugins loaded once per run.
struct Plugins<'a> {
    loader: &'a dyn PolicyLoader,
    loaded: tokio::sync::Mutex<HashMap<String, Result<Plugin, String>>>,
}

impl Plugins<'_> {
    async fn get(&self, reference: &str) -> Result<Plugin, String> {
        let mut loaded = self.loaded.lock().await;
        if let Some(done) = loaded.get(reference) {
            return done.clone();
        }
        let result = self.loader.load(reference).await;
        loaded.insert(reference.to_owned(), result.clone());
        result
    }
}

async fn run_suite(suite: &Suite, options: &Options, plugins: &Plugins<'_>) -> SuiteResult {
    let mut result = SuiteResult {
        file: suite.file.clone(),
        name: suite.name.clone(),
        format: Some(suite.format),
        error: None,
        tests: Vec::new(),
    };
    let view: Arc<dyn SourceView> = match LocalDir::open(&suite.root) {
        Ok(view) => Arc::new(view),
        Err(e) => {
            result.error = Some(format!(
                "{}: cannot open the suite's directory: {}",
                suite.root.display(),
                crate::text::chain(&e)
            ));
            return result;
        }
    };
    for test in &suite.tests {
        if !test.objects.is_empty() {
            result
                .tests
                .push(run_rule_test(suite, test, view.clone(), plugins, options).await);
            continue;
        }
        let cases = futures_util::stream::iter(&test.cases)
            .map(|case| {
                let view = view.clone();
                async move {
                    let outcome = if suite.skip || test.skip || case.skip {
                        CaseOutcome::status(Status::Skip, "skip: true")
                    } else {
                        run_case(suite, test, case, view, plugins, options).await
                    };
                    CaseResult {
                        name: case.name.clone(),
                        outcome,
                    }
                }
            })
            .buffered(options.concurrency.max(1))
            .collect()
            .await;
        result.tests.push(TestResult {
            name: test.name.clone(),
            cases,
        });
    }
    result
}

/// A test whose cases share its objects and expect rule results (a Kyverno
/// test): the objects are reviewed once by each policy, rule by rule, and
/// each case checked against the results.
async fn run_rule_test(
    suite: &Suite,
    test: &Test,
    view: Arc<dyn SourceView>,
    plugins: &Plugins<'_>,
    options: &Options,
) -> TestResult {
    let started = std::time::Instant::now();
    let every_case = |outcome: CaseOutcome| TestResult {
        name: test.name.clone(),
        cases: test
            .cases
            .iter()
            .map(|case| CaseResult {
                name: case.name.clone(),
                outcome: outcome.clone(),
            })
            .collect(),
    };
    if suite.skip || test.skip {
        return every_case(CaseOutcome::status(Status::Skip, "skip: true"));
    }
    let (objects, policies, results) = match review_rules(suite, test, view, plugins, options).await
    {
        Ok(reviewed) => reviewed,
        Err(e) => return every_case(CaseOutcome::status(Status::Error, e)),
    };
    let reviewed = super::kyverno::Reviewed::new(&objects, policies, &results);
    let seconds = started.elapsed().as_secs_f64();
    let cases = test
        .cases
        .iter()
        .map(|case| {
            let outcome = match &case.rule {
                _ if case.skip => CaseOutcome::status(Status::Skip, "skip: true"),
                None => CaseOutcome::status(Status::Error, "the case expects no rule result"),
                Some(expected) => match super::kyverno::check(expected, &reviewed) {
                    Ok(note) => CaseOutcome {
                        status: Status::Pass,
                        reason: note.map(str::to_owned),
                        failures: Vec::new(),
                        findings: Vec::new(),
                        finding_count: 0,
                        seconds,
                    },
                    Err(why) => CaseOutcome {
                        seconds,
                        ..CaseOutcome::status(Status::Fail, why)
                    },
                },
            };
            CaseResult {
                name: case.name.clone(),
                outcome,
            }
        })
        .collect();
    TestResult {
        name: test.name.clone(),
        cases,
    }
}

/// A rule test's objects, the names of the policies it loads, and every
/// rule result of its policies on them.
async fn review_rules(
    suite: &Suite,
    test: &Test,
    view: Arc<dyn SourceView>,
    plugins: &Plugins<'_>,
    options: &Options,
) -> Result<
    (
        Arc<[crate::manifest::Object]>,
        HashSet<String>,
        Vec<crate::plugin::RuleResult>,
    ),
    String,
> {
    // Not single-object files: never `None` (an AdmissionReview case).
    let objects = read_files(test.objects.clone(), false, &options.limits)
        .await?
        .unwrap_or_default();
    let objects: Arc<[crate::manifest::Object]> = objects.into();
    let context = context_of(suite, String::new());
    let mut results = Vec::new();
    for spec in &test.policies {
        let plugin = plugins.get(&spec.plugin).await?;
        let reviewed = plugin
            .review_rules(
                view.clone(),
                None,
                context.clone(),
                objects.clone(),
                spec.settings.clone(),
            )
            .await
            .map_err(|e| {
                format!(
                    "policy {} could not run: {}",
                    plugin.name(),
                    crate::text::chain(&e)
                )
            })?;
        results.extend(reviewed);
    }
    // Read after the plugin read them: a path it refused is refused in its
    // words.
    let policies = {
        let paths: Vec<String> = test
            .policies
            .iter()
            .flat_map(|spec| spec.settings.iter())
            .filter(|(key, _)| key == "policy")
            .map(|(_, path)| path.clone())
            .collect();
        let max_files = options.limits.max_files;
        tokio::task::spawn_blocking(move || {
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            super::kyverno::policy_names(view.as_ref(), &paths, max_files)
        })
        .await
        .map_err(|e| format!("reading the policies failed on the host: {e}"))??
    };
    Ok((objects, policies, results))
}

async fn run_case(
    suite: &Suite,
    test: &Test,
    case: &Case,
    view: Arc<dyn SourceView>,
    plugins: &Plugins<'_>,
    options: &Options,
) -> CaseOutcome {
    let started = std::time::Instant::now();
    let objects = match read_objects(case, &options.limits).await {
        Ok(Some(objects)) => objects,
        Ok(None) => {
            return CaseOutcome::status(
                Status::Skip,
                "the object is an AdmissionReview (an admission request): Kiln reviews objects before they are applied",
            );
        }
        Err(e) => return CaseOutcome::status(Status::Error, e),
    };
    let mut steps = Vec::new();
    for spec in &test.policies {
        let plugin = match plugins.get(&spec.plugin).await {
            Ok(plugin) => plugin,
            Err(e) => return CaseOutcome::status(Status::Error, e),
        };
        let mut settings = spec.settings.clone();
        settings.extend(case.settings.iter().cloned());
        steps.push(PolicyStep {
            plugin,
            settings,
            mode: spec.mode,
            source: policy::PolicySource::Application(view.clone()),
        });
    }
    let context = context_of(suite, case.namespace.clone());
    // Reviewed where `kiln render` (and the controller) would review them.
    let objects = policy::placement::as_applied(&objects, &context.namespace, None);
    let report = policy::evaluate(&context, objects, &steps, None).await;
    if let Some(failed) = report.results.iter().find(|r| r.error.is_some()) {
        return CaseOutcome::status(
            Status::Error,
            format!(
                "policy {} could not run: {}",
                failed.policy,
                failed.error.as_deref().unwrap_or_default()
            ),
        );
    }
    let prefixes: Vec<&str> = test
        .policies
        .iter()
        .flat_map(|p| p.message_prefixes.iter().map(String::as_str))
        .collect();
    let findings: Vec<(Finding, Option<&ObjectRef>)> = report
        .results
        .iter()
        .flat_map(|r| {
            r.findings.iter().map(|f| {
                let message = prefixes
                    .iter()
                    .find_map(|p| f.message.strip_prefix(p))
                    .unwrap_or(&f.message)
                    .to_owned();
                (
                    Finding {
                        policy: r.policy.clone(),
                        severity: f.severity,
                        object: f.object.as_ref().map(ToString::to_string),
                        message,
                    },
                    f.object.as_ref(),
                )
            })
        })
        .collect();
    let failures: Vec<AssertionFailure> = case
        .assertions
        .iter()
        .enumerate()
        .filter_map(|(index, assertion)| {
            let found = findings
                .iter()
                .filter(|(f, object)| selects(assertion, f, *object))
                .count();
            (!assertion.violations.holds(found)).then(|| AssertionFailure {
                index,
                assertion: assertion.to_string(),
                expected: assertion.violations,
                found,
            })
        })
        .collect();
    let status = if failures.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    CaseOutcome {
        status,
        reason: None,
        findings: if failures.is_empty() {
            Vec::new()
        } else {
            findings
                .iter()
                .take(options.limits.max_reported_findings)
                .map(|(f, _)| f.clone())
                .collect()
        },
        finding_count: findings.len(),
        failures,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The Application the policies of `suite` see: the suite, its directory
/// as the path, destined for `namespace`.
fn context_of(suite: &Suite, namespace: String) -> AppContext {
    AppContext {
        name: suite.name.clone(),
        namespace,
        project: "default".into(),
        repo_url: String::new(),
        revision: "local".into(),
        path: suite.dir.clone(),
    }
}

/// Whether `assertion` counts `finding`.
fn selects(assertion: &Assertion, finding: &Finding, object: Option<&ObjectRef>) -> bool {
    if assertion
        .message
        .as_ref()
        .is_some_and(|re| !re.is_match(&finding.message))
    {
        return false;
    }
    if assertion
        .policy
        .as_ref()
        .is_some_and(|p| *p != finding.policy)
    {
        return false;
    }
    if assertion.severity.is_some_and(|s| s != finding.severity) {
        return false;
    }
    if let Some(selector) = &assertion.object {
        let Some(object) = object else {
            return false;
        };
        let differs = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_some_and(|w| Some(w) != have)
        };
        if differs(&selector.kind, Some(&object.kind))
            || differs(&selector.name, Some(&object.name))
            || differs(&selector.namespace, object.namespace.as_deref())
        {
            return false;
        }
    }
    true
}

/// The objects of a case, read off the async workers. `None`: a gator case
/// whose object is an AdmissionReview.
async fn read_objects(
    case: &Case,
    limits: &super::Limits,
) -> Result<Option<Vec<crate::manifest::Object>>, String> {
    read_files(case.objects.clone(), case.single_object, limits).await
}

/// The objects of `files`, read off the async workers. `None`: a file
/// (holding exactly one object when `single`) is an AdmissionReview.
async fn read_files(
    files: Vec<PathBuf>,
    single: bool,
    limits: &super::Limits,
) -> Result<Option<Vec<crate::manifest::Object>>, String> {
    let max = limits.max_file_size;
    tokio::task::spawn_blocking(move || {
        let mut objects = Vec::new();
        for file in &files {
            match read_object_file(file, single, max)? {
                Some(read) => objects.extend(read),
                None => return Ok(None),
            }
        }
        Ok(Some(objects))
    })
    .await
    .map_err(|e| format!("reading the objects failed on the host: {e}"))?
}

/// The objects of one file; `None` for a gator case's AdmissionReview.
fn read_object_file(
    file: &Path,
    single: bool,
    max: u64,
) -> Result<Option<Vec<crate::manifest::Object>>, String> {
    let text = super::load::read_bounded(file, max).map_err(|e| crate::text::chain(&e))?;
    if single {
        let documents = super::load::documents(file, &text).map_err(|e| e.to_string())?;
        if let [document] = &documents[..]
            && document.get("kind").and_then(serde_json::Value::as_str) == Some("AdmissionReview")
        {
            return Ok(None);
        }
    }
    let source = file.display().to_string();
    let objects = crate::manifest::parse(&text, Some(&source)).map_err(|e| e.to_string())?;
    if single && objects.len() != 1 {
        return Err(format!(
            "{source}: {} objects; a case's object file holds exactly one",
            objects.len()
        ));
    }
    Ok(Some(objects))
}
