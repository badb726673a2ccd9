//! `kiln policy test`: runs policy test suites (the library's
//! [`kiln::policy::suite`]) and prints the outcome as text, JSON or JUnit XML.

use std::io::Write as _;
use std::path::PathBuf;

use kiln::plugin::{Plugin, World};
use kiln::policy::suite::{self, RunReport, Status};

use super::{HostArgs, exit};

/// Policy tools.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PolicyCommand {
    Test(Box<TestArgs>),
}

/// Run policy test suites: what `gator verify` and `kyverno test` are to
/// their users.
///
/// Each PATH is a suite file, a directory (the suites directly in it) or
/// `DIR/...` (the suites in DIR and every directory below it), as `gator
/// verify` reads them. Two formats: Gatekeeper's `kind: Suite`
/// (test.gatekeeper.sh/v1alpha1), read unchanged and run with the
/// Gatekeeper policy plugin, and Kiln's `kind: PolicySuite`
/// (kiln.dev/v1alpha1) naming any policy plugins (see docs/policies.md).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln policy test ../shared/testdata/gatekeeper/...
  kiln policy test policies/labels/suite.yaml -o junit > report.xml

Exit status: 0 every case passed (or was skipped), 1 a case failed, 2 an error (an unreadable or
invalid suite, a missing file, a plugin that cannot load or run; the message names the file).")]
pub(crate) struct TestArgs {
    /// Suite files, directories, or `DIR/...` to walk.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<String>,

    /// Output format: `text` (one line per case), `json`, `junit` (JUnit XML).
    #[arg(short, long, value_enum, default_value = "text")]
    output: Output,

    /// The Gatekeeper policy plugin that Gatekeeper suites run with.
    /// Default: the first-party `gatekeeper.wasm` found in a directory of
    /// $KILN_PLUGIN_PATH (`:`-separated), next to the kiln binary (or in
    /// its `plugins/` or `../share/kiln/plugins/`), or in
    /// `plugins/dist/` of the current directory (a checkout).
    #[arg(long, value_name = "REF")]
    gatekeeper_plugin: Option<String>,

    /// The largest file read (a suite, an object file), e.g. `4Mi`.
    #[arg(long, value_name = "SIZE", default_value = "4Mi", value_parser = super::args::parse_size)]
    max_file_size: u64,

    /// Cases of all suites together.
    #[arg(long, value_name = "N", default_value_t = suite::Limits::default().max_cases)]
    max_cases: usize,

    /// Suite files found.
    #[arg(long, value_name = "N", default_value_t = suite::Limits::default().max_suites)]
    max_suites: usize,

    /// YAML files looked at while walking directories.
    #[arg(long, value_name = "N", default_value_t = suite::Limits::default().max_files)]
    max_files: usize,

    /// Directory depth walked below `DIR/...`.
    #[arg(long, value_name = "N", default_value_t = suite::Limits::default().max_depth)]
    max_depth: usize,

    /// Cases run at once.
    #[arg(long, value_name = "N", default_value_t = suite::Options::default().concurrency,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    jobs: usize,

    /// Verify every plugin against this trust policy (see docs/plugins.md).
    #[arg(long, value_name = "FILE")]
    trust_policy: Option<PathBuf>,

    /// Without --trust-policy, run oci:// and https:// plugins unverified.
    #[arg(long, conflicts_with = "trust_policy")]
    insecure_skip_verify: bool,

    #[command(flatten)]
    host: HostArgs,

    #[command(flatten)]
    registry: super::plugin::RegistryArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Output {
    Text,
    Json,
    Junit,
}

pub(crate) async fn run(command: &PolicyCommand) -> anyhow::Result<u8> {
    match command {
        PolicyCommand::Test(args) => test(args).await,
    }
}

/// Loads plugins through the command's loader (fetch, verify, compile).
struct CliLoader {
    loader: super::load::Loader,
    /// Where the Gatekeeper plugin was looked for in vain, if it was.
    gatekeeper_missing: Option<Vec<PathBuf>>,
}

/// The reference that stands for a Gatekeeper plugin not found.
const MISSING_GATEKEEPER: &str = "gatekeeper.wasm (not found)";

#[async_trait::async_trait]
impl suite::PolicyLoader for CliLoader {
    async fn load(&self, reference: &str) -> Result<Plugin, String> {
        if let (MISSING_GATEKEEPER, Some(places)) = (reference, &self.gatekeeper_missing) {
            let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
            return Err(format!(
                "the Gatekeeper plugin was not found (looked for {}): pass \
                 --gatekeeper-plugin REF, set KILN_PLUGIN_PATH to a directory holding \
                 gatekeeper.wasm, or build it (scripts/build-plugins gatekeeper)",
                looked.join(", ")
            ));
        }
        self.loader
            .load(reference, World::Policy)
            .await
            .map_err(|e| format!("plugin {reference}: {e:#}"))
    }
}

/// The Gatekeeper plugin Gatekeeper suites run with: the one given, else
/// the first found where [`first_party_places`] looks; `Err` lists those
/// places (an error only if a Gatekeeper suite needs it).
fn gatekeeper_plugin(given: Option<&str>) -> Result<String, Vec<PathBuf>> {
    if let Some(given) = given {
        return Ok(given.to_owned());
    }
    let places = super::load::first_party_places("gatekeeper");
    places
        .iter()
        .find(|place| place.is_file())
        .map(|place| place.display().to_string())
        .ok_or(places)
}

async fn test(args: &TestArgs) -> anyhow::Result<u8> {
    let (gatekeeper, missing) = match gatekeeper_plugin(args.gatekeeper_plugin.as_deref()) {
        Ok(found) => (found, None),
        Err(places) => (MISSING_GATEKEEPER.to_owned(), Some(places)),
    };
    let options = suite::Options {
        gatekeeper_plugin: gatekeeper,
        limits: suite::Limits {
            max_file_size: args.max_file_size,
            max_cases: args.max_cases,
            max_suites: args.max_suites,
            max_files: args.max_files,
            max_depth: args.max_depth,
            ..suite::Limits::default()
        },
        concurrency: args.jobs,
    };
    let loader = CliLoader {
        loader: super::load::Loader::new(
            args.host.host()?,
            args.registry.fetcher()?,
            args.trust_policy.as_ref(),
            args.insecure_skip_verify,
        )?,
        gatekeeper_missing: missing,
    };
    let report = suite::run(&args.paths, &options, &loader).await;
    if report.suites.is_empty() {
        anyhow::bail!("no test suites found in {}", args.paths.join(", "));
    }
    let text = match args.output {
        Output::Text => text(&report),
        Output::Json => serde_json::to_string_pretty(&report)? + "\n",
        Output::Junit => junit::render(&report)?,
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other?,
    }
    let summary = report.summary;
    Ok(if summary.errors > 0 {
        exit::ERROR
    } else if summary.failed > 0 {
        exit::POLICY_BLOCKED
    } else {
        exit::OK
    })
}

/// One line per case; failures with what each assertion found.
fn text(report: &RunReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for suite in &report.suites {
        let file = suite.file.display();
        if let Some(error) = &suite.error {
            let _ = writeln!(out, "ERROR {file}: {error}");
            continue;
        }
        for test in &suite.tests {
            for case in &test.cases {
                let o = &case.outcome;
                let word = match o.status {
                    Status::Pass => "PASS ",
                    Status::Fail => "FAIL ",
                    Status::Skip => "SKIP ",
                    Status::Error => "ERROR",
                };
                let _ = write!(out, "{word} {file}: {} / {}", test.name, case.name);
                match (&o.status, &o.reason) {
                    (Status::Skip | Status::Error, Some(reason)) => {
                        let _ = writeln!(out, ": {reason}");
                    }
                    _ => out.push('\n'),
                }
                for failure in &o.failures {
                    let _ = writeln!(
                        out,
                        "      assertion {} ({}): expected {}, found {}",
                        failure.index, failure.assertion, failure.expected, failure.found
                    );
                }
                if o.status == Status::Fail {
                    for finding in &o.findings {
                        let object = finding.object.as_deref().unwrap_or("(set)");
                        let _ = writeln!(
                            out,
                            "      finding {} {} {object}: {}",
                            finding.policy, finding.severity, finding.message
                        );
                    }
                    if o.finding_count > o.findings.len() {
                        let _ = writeln!(
                            out,
                            "      … {} more finding(s)",
                            o.finding_count - o.findings.len()
                        );
                    }
                }
            }
        }
    }
    let s = report.summary;
    let _ = writeln!(
        out,
        "{} passed, {} failed, {} skipped, {} error(s)",
        s.passed, s.failed, s.skipped, s.errors
    );
    out
}

/// JUnit XML, as CI systems read it: one `testsuite` per suite file, one
/// `testcase` per case (`classname` SUITE.TEST).
mod junit {
    use quick_xml::Writer;
    use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

    use kiln::policy::suite::{RunReport, Status, SuiteResult};

    /// Text XML 1.0 can hold: other control characters (from a message, a
    /// name) become U+FFFD, as escaping cannot carry them.
    fn xml_text(text: &str) -> String {
        text.chars()
            .map(|c| match c {
                '\t' | '\n' | '\r' => c,
                c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
                c => c,
            })
            .collect()
    }

    fn counts(suite: &SuiteResult) -> (usize, usize, usize, usize) {
        let (mut tests, mut failures, mut errors, mut skipped) = (0, 0, 0, 0);
        if suite.error.is_some() {
            tests += 1;
            errors += 1;
        }
        for case in suite.tests.iter().flat_map(|t| &t.cases) {
            tests += 1;
            match case.outcome.status {
                Status::Fail => failures += 1,
                Status::Error => errors += 1,
                Status::Skip => skipped += 1,
                Status::Pass => {}
            }
        }
        (tests, failures, errors, skipped)
    }

    pub(super) fn render(report: &RunReport) -> anyhow::Result<String> {
        let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
        w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        let s = report.summary;
        let total = s.passed + s.failed + s.skipped + s.errors;
        w.write_event(Event::Start(BytesStart::new("testsuites").with_attributes(
            [
                ("name", "kiln policy test"),
                ("tests", total.to_string().as_str()),
                ("failures", s.failed.to_string().as_str()),
                ("errors", s.errors.to_string().as_str()),
                ("skipped", s.skipped.to_string().as_str()),
            ],
        )))?;
        for suite in &report.suites {
            let (tests, failures, errors, skipped) = counts(suite);
            let file = xml_text(&suite.file.display().to_string());
            let name = xml_text(&suite.name);
            let seconds: f64 = suite
                .tests
                .iter()
                .flat_map(|t| &t.cases)
                .map(|c| c.outcome.seconds)
                .sum();
            w.write_event(Event::Start(BytesStart::new("testsuite").with_attributes(
                [
                    ("name", name.as_str()),
                    ("file", file.as_str()),
                    ("tests", tests.to_string().as_str()),
                    ("failures", failures.to_string().as_str()),
                    ("errors", errors.to_string().as_str()),
                    ("skipped", skipped.to_string().as_str()),
                    ("time", format!("{seconds:.3}").as_str()),
                ],
            )))?;
            if let Some(error) = &suite.error {
                w.write_event(Event::Start(BytesStart::new("testcase").with_attributes([
                    ("classname", name.as_str()),
                    ("name", "(suite)"),
                    ("file", file.as_str()),
                ])))?;
                element(&mut w, "error", error, error)?;
                w.write_event(Event::End(BytesEnd::new("testcase")))?;
            }
            for test in &suite.tests {
                let classname = xml_text(&format!("{}.{}", suite.name, test.name));
                for case in &test.cases {
                    let o = &case.outcome;
                    let case_name = xml_text(&case.name);
                    w.write_event(Event::Start(BytesStart::new("testcase").with_attributes([
                        ("classname", classname.as_str()),
                        ("name", case_name.as_str()),
                        ("file", file.as_str()),
                        ("time", format!("{:.3}", o.seconds).as_str()),
                    ])))?;
                    let reason = o.reason.clone().unwrap_or_default();
                    match o.status {
                        Status::Pass => {}
                        Status::Skip => {
                            w.write_event(Event::Empty(
                                BytesStart::new("skipped")
                                    .with_attributes([("message", xml_text(&reason).as_str())]),
                            ))?;
                        }
                        Status::Error => element(&mut w, "error", &reason, &reason)?,
                        Status::Fail => {
                            let mut details = String::new();
                            for f in &o.failures {
                                details.push_str(&format!(
                                    "assertion {} ({}): expected {}, found {}\n",
                                    f.index, f.assertion, f.expected, f.found
                                ));
                            }
                            for f in &o.findings {
                                details.push_str(&format!(
                                    "finding {} {} {}: {}\n",
                                    f.policy,
                                    f.severity,
                                    f.object.as_deref().unwrap_or("(set)"),
                                    f.message
                                ));
                            }
                            let message = format!("{} assertion(s) failed", o.failures.len());
                            element(&mut w, "failure", &message, &details)?;
                        }
                    }
                    w.write_event(Event::End(BytesEnd::new("testcase")))?;
                }
            }
            w.write_event(Event::End(BytesEnd::new("testsuite")))?;
        }
        w.write_event(Event::End(BytesEnd::new("testsuites")))?;
        let mut text = String::from_utf8(w.into_inner())?;
        text.push('\n');
        Ok(text)
    }

    /// `<tag message="…">body</tag>`.
    fn element(
        w: &mut Writer<Vec<u8>>,
        tag: &str,
        message: &str,
        body: &str,
    ) -> anyhow::Result<()> {
        w.write_event(Event::Start(
            BytesStart::new(tag).with_attributes([("message", xml_text(message).as_str())]),
        ))?;
        w.write_event(Event::Text(BytesText::new(&xml_text(body))))?;
        w.write_event(Event::End(BytesEnd::new(tag)))?;
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn control_characters_never_reach_the_xml() {
            assert_eq!(xml_text("a\u{1}b\u{1b}[0m\tc"), "a\u{FFFD}b\u{FFFD}[0m\tc");
        }
    }
}
