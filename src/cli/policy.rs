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
/// verify` reads them. Three formats: Gatekeeper's `kind: Suite`
/// (test.gatekeeper.sh/v1alpha1), read unchanged and run with the
/// Gatekeeper policy plugin; Kyverno's `kind: Test` (cli.kyverno.io/v1alpha1,
/// `kyverno-test.yaml`), read unchanged and run with the Kyverno policy
/// plugin, each resource of each expected result one case; and Kiln's
/// `kind: PolicySuite` (kiln.dev/v1alpha1) naming any policy plugins (see
/// docs/policies.md).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln policy test ../shared/testdata/gatekeeper/...
  kiln policy test policies/require-labels/.kyverno-test
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

    /// The Kyverno policy plugin that Kyverno tests run with. Default: the
    /// first-party `kyverno.wasm`, looked for as `gatekeeper.wasm` is.
    #[arg(long, value_name = "REF")]
    kyverno_plugin: Option<String>,

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
    /// First-party plugins looked for in vain: the reference standing for
    /// each, and where it was looked for.
    missing: Vec<(String, FirstParty, Vec<PathBuf>)>,
}

/// A first-party policy plugin a suite format runs with.
#[derive(Debug, Clone, Copy)]
struct FirstParty {
    /// Its file name without `.wasm`.
    name: &'static str,
    /// The engine, for messages.
    engine: &'static str,
    /// The flag that names another.
    flag: &'static str,
}

const GATEKEEPER: FirstParty = FirstParty {
    name: "gatekeeper",
    engine: "Gatekeeper",
    flag: "--gatekeeper-plugin",
};
const KYVERNO: FirstParty = FirstParty {
    name: "kyverno",
    engine: "Kyverno",
    flag: "--kyverno-plugin",
};

#[async_trait::async_trait]
impl suite::PolicyLoader for CliLoader {
    async fn load(&self, reference: &str) -> Result<Plugin, String> {
        if let Some((_, plugin, places)) = self.missing.iter().find(|(r, ..)| r == reference) {
            let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
            return Err(format!(
                "the {engine} plugin was not found (looked for {looked}): pass \
                 {flag} REF, set KILN_PLUGIN_PATH to a directory holding \
                 {name}.wasm, or build it (scripts/build-plugins {name})",
                engine = plugin.engine,
                looked = looked.join(", "),
                flag = plugin.flag,
                name = plugin.name,
            ));
        }
        self.loader
            .load(reference, World::Policy)
            .await
            .map_err(|e| format!("plugin {reference}: {e:#}"))
    }
}

impl CliLoader {
    /// The first-party plugin a suite format runs with: the one given, else
    /// the first found where [`super::load::first_party_places`] looks; when
    /// none is, a reference standing for it that fails to load listing those
    /// places (an error only if a suite needs it).
    fn first_party(&mut self, plugin: FirstParty, given: Option<&str>) -> String {
        if let Some(given) = given {
            return given.to_owned();
        }
        let places = super::load::first_party_places(plugin.name);
        if let Some(found) = places.iter().find(|place| place.is_file()) {
            return found.display().to_string();
        }
        let reference = format!("{}.wasm (not found)", plugin.name);
        self.missing.push((reference.clone(), plugin, places));
        reference
    }
}

async fn test(args: &TestArgs) -> anyhow::Result<u8> {
    let mut loader = CliLoader {
        loader: super::load::Loader::new(
            args.host.host()?,
            args.registry.fetcher()?,
            args.trust_policy.as_ref(),
            args.insecure_skip_verify,
        )?,
        missing: Vec::new(),
    };
    let options = suite::Options {
        gatekeeper_plugin: loader.first_party(GATEKEEPER, args.gatekeeper_plugin.as_deref()),
        kyverno_plugin: loader.first_party(KYVERNO, args.kyverno_plugin.as_deref()),
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
                    // A rule result that was not the one expected, or a
                    // pass that says why it passes (a Kyverno exclusion).
                    (Status::Fail | Status::Pass, Some(reason)) => {
                        let _ = writeln!(out, "\n      {reason}");
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
                            let message = match &o.reason {
                                // A rule result that was not the one expected.
                                Some(reason) => reason.clone(),
                                None => format!("{} assertion(s) failed", o.failures.len()),
                            };
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
