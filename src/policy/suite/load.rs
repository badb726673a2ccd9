//! Finding suite files (as `gator verify` does) and parsing the three
//! formats (Kyverno's is parsed in [`super::kyverno`]).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{
    Assertion, Case, Expected, Format, GATOR_GROUP, GATOR_KIND, KILN_API_VERSION, KILN_KIND,
    KYVERNO_GROUP, KYVERNO_KIND, Limits, ObjectSelector, Options, PolicySpec, Suite, Test,
};
use crate::plugin::Severity;
use crate::policy::Mode;

/// A suite that cannot be read; the message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuiteError {
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is larger than [`Limits::max_file_size`].
    #[error("{}: {size} bytes, more than the limit of {max} (--max-file-size)", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// Not YAML, or YAML of the wrong shape.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong (with its line when known).
        message: String,
    },
    /// A file given by name that holds no suite.
    #[error(
        "{}: not a test suite (expected apiVersion {KILN_API_VERSION} kind {KILN_KIND}, {GATOR_GROUP}/v1alpha1 kind {GATOR_KIND}, or {KYVERNO_GROUP}/v1alpha1 kind {KYVERNO_KIND})",
        path.display()
    )]
    NotASuite {
        /// The file.
        path: PathBuf,
    },
    /// More of something than the limits allow.
    #[error("{what}: more than the limit of {max} ({flag})")]
    TooMany {
        /// What was counted, naming where.
        what: String,
        /// The limit.
        max: usize,
        /// The flag that raises it.
        flag: &'static str,
    },
}

/// Reads at most `max` bytes of `path` as UTF-8 text.
pub(super) fn read_bounded(path: &Path, max: u64) -> Result<String, SuiteError> {
    let io = |source| SuiteError::Io {
        path: path.to_owned(),
        source,
    };
    // Checked before opening: opening a FIFO would wait for a writer.
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(SuiteError::Invalid {
            path: path.to_owned(),
            message: "not a regular file".into(),
        });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > max {
        return Err(SuiteError::TooLarge {
            path: path.to_owned(),
            size,
            max,
        });
    }
    let mut bytes = Vec::new();
    // A file growing while read is still cut at the limit.
    file.take(max + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(SuiteError::TooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
            max,
        });
    }
    String::from_utf8(bytes).map_err(|_| SuiteError::Invalid {
        path: path.to_owned(),
        message: "not UTF-8 text".into(),
    })
}

/// The YAML documents of a text, alias expansion bounded.
pub(super) fn documents(path: &Path, text: &str) -> Result<Vec<Value>, SuiteError> {
    let invalid = |message: String| SuiteError::Invalid {
        path: path.to_owned(),
        message,
    };
    crate::manifest::check_yaml(text).map_err(|e| invalid(e.to_string()))?;
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| invalid(yaml_message(&e)))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

fn yaml_message(e: &serde_yaml::Error) -> String {
    let text = e.to_string();
    let text = text.split(" at line ").next().unwrap_or(&text).to_owned();
    match e.location() {
        Some(l) => format!("line {}: invalid YAML: {text}", l.line()),
        None => format!("invalid YAML: {text}"),
    }
}

/// A suite file [`discover`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The root of the source view its policies read.
    pub root: PathBuf,
    /// The file.
    pub file: PathBuf,
    /// Whether the command line named it (rather than a directory).
    pub named: bool,
}

/// The format of a document, if it is a suite.
fn format_of(document: &Value) -> Option<Format> {
    let api_version = document.get("apiVersion").and_then(Value::as_str)?;
    let kind = document.get("kind").and_then(Value::as_str)?;
    if kind == KILN_KIND && api_version == KILN_API_VERSION {
        Some(Format::Kiln)
    } else if kind == GATOR_KIND && api_version.split('/').next() == Some(GATOR_GROUP) {
        Some(Format::Gatekeeper)
    } else if kind == KYVERNO_KIND && api_version.split('/').next() == Some(KYVERNO_GROUP) {
        Some(Format::Kyverno)
    } else {
        None
    }
}

/// The suite files `target` names, as `gator verify` selects them, with
/// the root of the source view their policies read:
///
/// - a file: that suite (an error if it holds none);
/// - a directory: the suites among the `.yaml`/`.yml` files directly in it
///   (a file whose top-level `kind` is `Suite`, `PolicySuite` or `Test`);
/// - `DIR/...`: the suites in DIR and every directory below it.
///
/// Files are in name order, each with the root of its source view.
pub fn discover(target: &str, limits: &Limits) -> Result<Vec<Found>, SuiteError> {
    let (path, recursive) = match target.strip_suffix("...") {
        Some(dir) => (PathBuf::from(if dir.is_empty() { "." } else { dir }), true),
        None => (PathBuf::from(target), false),
    };
    let meta = std::fs::metadata(&path).map_err(|source| SuiteError::Io {
        path: path.clone(),
        source,
    })?;
    if !meta.is_dir() {
        if recursive {
            return Err(SuiteError::Invalid {
                path,
                message: "`...` only follows a directory".into(),
            });
        }
        let text = read_bounded(&path, limits.max_file_size)?;
        let docs = documents(&path, &text)?;
        if docs.first().and_then(format_of).is_none() {
            return Err(SuiteError::NotASuite { path });
        }
        let root = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_owned();
        return Ok(vec![Found {
            root,
            file: path,
            named: true,
        }]);
    }
    let mut files = Vec::new();
    let mut seen = 0usize;
    walk(&path, recursive, 0, limits, &mut seen, &mut files)?;
    let mut suites = Vec::new();
    for file in files {
        if candidate(&file, limits.max_file_size)? {
            if suites.len() >= limits.max_suites {
                return Err(SuiteError::TooMany {
                    what: format!("suite files under {}", path.display()),
                    max: limits.max_suites,
                    flag: "--max-suites",
                });
            }
            suites.push(Found {
                root: path.clone(),
                file,
                named: false,
            });
        }
    }
    Ok(suites)
}

/// Whether a file found while walking is a suite: a top-level `kind:
/// Suite`, `kind: PolicySuite` or `kind: Test` line (which [`load`] then
/// checks against the `apiVersion`). Other files (templates, objects,
/// anything else in the tree) are neither parsed nor refused; a suite
/// larger than the limit is refused by name.
fn candidate(path: &Path, max: u64) -> Result<bool, SuiteError> {
    let io = |source| SuiteError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut head = Vec::new();
    file.take(max + 1).read_to_end(&mut head).map_err(io)?;
    let is_suite = String::from_utf8_lossy(&head).lines().any(|line| {
        let value = line
            .strip_prefix("kind:")
            .map(|v| v.trim().trim_matches(['"', '\'']));
        value == Some(GATOR_KIND) || value == Some(KILN_KIND) || value == Some(KYVERNO_KIND)
    });
    if is_suite && head.len() as u64 > max {
        let size = std::fs::metadata(path).map_err(io)?.len();
        return Err(SuiteError::TooLarge {
            path: path.to_owned(),
            size,
            max,
        });
    }
    Ok(is_suite)
}

fn walk(
    dir: &Path,
    recursive: bool,
    depth: usize,
    limits: &Limits,
    seen: &mut usize,
    out: &mut Vec<PathBuf>,
) -> Result<(), SuiteError> {
    let io = |source| SuiteError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut entries: Vec<(PathBuf, std::fs::FileType)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        entries.push((entry.path(), entry.file_type().map_err(io)?));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, kind) in entries {
        if kind.is_dir() {
            if recursive {
                if depth + 1 > limits.max_depth {
                    return Err(SuiteError::TooMany {
                        what: format!("directory depth at {}", path.display()),
                        max: limits.max_depth,
                        flag: "--max-depth",
                    });
                }
                walk(&path, recursive, depth + 1, limits, seen, out)?;
            }
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            *seen += 1;
            if *seen > limits.max_files {
                return Err(SuiteError::TooMany {
                    what: format!("YAML files under {}", dir.display()),
                    max: limits.max_files,
                    flag: "--max-files",
                });
            }
            out.push(path);
        }
    }
    Ok(())
}

/// `violations`: `yes`, `no`, a count (gator also takes `true`/`false`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawViolations {
    Number(i64),
    Bool(bool),
    Text(String),
}

/// The fields gator's assertions and Kiln's share.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GatorAssertion {
    #[serde(default)]
    violations: Option<RawViolations>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct GatorSuite {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    tests: Vec<GatorTest>,
    #[serde(default)]
    skip: bool,
}

#[derive(Debug, Deserialize)]
struct GatorTest {
    #[serde(default)]
    name: String,
    #[serde(default)]
    template: String,
    #[serde(default)]
    constraint: String,
    #[serde(default)]
    expansion: Option<String>,
    #[serde(default)]
    cases: Vec<GatorCase>,
    #[serde(default)]
    skip: bool,
}

#[derive(Debug, Deserialize)]
struct GatorCase {
    #[serde(default)]
    name: String,
    #[serde(default)]
    object: String,
    #[serde(default)]
    assertions: Vec<GatorAssertion>,
    #[serde(default)]
    inventory: Vec<String>,
    #[serde(default)]
    skip: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KilnSuite {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    metadata: Meta,
    /// Policies of every test that names none.
    #[serde(default)]
    policies: Vec<KilnPolicy>,
    tests: Vec<KilnTest>,
    #[serde(default)]
    skip: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KilnPolicy {
    plugin: String,
    #[serde(default)]
    settings: BTreeMap<String, SettingValue>,
    #[serde(default)]
    mode: Option<Mode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum SettingValue {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KilnTest {
    name: String,
    #[serde(default)]
    policies: Vec<KilnPolicy>,
    cases: Vec<KilnCase>,
    #[serde(default)]
    skip: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KilnCase {
    name: String,
    objects: Vec<String>,
    #[serde(default)]
    namespace: String,
    assertions: Vec<KilnAssertion>,
    #[serde(default)]
    skip: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KilnAssertion {
    #[serde(default)]
    violations: Option<RawViolations>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    object: Option<ObjectSelector>,
}

/// Parses the suite `file` (found by [`discover`] under `root`).
pub fn load(root: &Path, file: &Path, options: &Options) -> Result<Suite, SuiteError> {
    let invalid = |message: String| SuiteError::Invalid {
        path: file.to_owned(),
        message,
    };
    let text = read_bounded(file, options.limits.max_file_size)?;
    let docs = documents(file, &text)?;
    let [document] = &docs[..] else {
        return Err(invalid(format!(
            "{} YAML documents; a suite file holds one",
            docs.len()
        )));
    };
    let format = format_of(document).ok_or_else(|| SuiteError::NotASuite {
        path: file.to_owned(),
    })?;
    let suite_dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Kyverno tests sit in `.kyverno-test/` beside the policy they test and
    // name it as `../policy.yaml`: their source view reaches one level up
    // when the suite's own directory was given.
    let root = match format {
        Format::Kyverno => super::kyverno::view_root(root, suite_dir),
        _ => root.to_owned(),
    };
    let root = root.as_path();
    let dir = relative(root, suite_dir).map_err(invalid)?;
    let fallback_name = suite_dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "suite".into());
    let mut suite = Suite {
        file: file.to_owned(),
        name: fallback_name,
        format,
        root: root.to_owned(),
        dir,
        skip: false,
        tests: Vec::new(),
    };
    match format {
        Format::Gatekeeper => {
            let parsed: GatorSuite =
                serde_json::from_value(document.clone()).map_err(|e| invalid(e.to_string()))?;
            if let Some(name) = parsed.metadata.name {
                suite.name = name;
            }
            suite.skip = parsed.skip;
            for (t, test) in parsed.tests.into_iter().enumerate() {
                suite
                    .tests
                    .push(gator_test(t, test, suite_dir, options).map_err(&invalid)?);
            }
        }
        Format::Kiln => {
            let parsed: KilnSuite =
                serde_json::from_value(document.clone()).map_err(|e| invalid(e.to_string()))?;
            if let Some(name) = parsed.metadata.name {
                suite.name = name;
            }
            suite.skip = parsed.skip;
            for test in parsed.tests {
                suite
                    .tests
                    .push(kiln_test(test, &parsed.policies, suite_dir).map_err(&invalid)?);
            }
        }
        Format::Kyverno => {
            let (name, test) =
                super::kyverno::test(document.clone(), suite_dir, &suite.dir, options)
                    .map_err(&invalid)?;
            if let Some(name) = name {
                suite.name = name;
            }
            suite.tests.push(test);
        }
    }
    // Object files are read by the host: only under the root the suites
    // were found in (a suite cannot read the host's other files).
    for test in &mut suite.tests {
        for object in &mut test.objects {
            *object = confined(root, object).map_err(&invalid)?;
        }
        for case in &mut test.cases {
            for object in &mut case.objects {
                *object = confined(root, object).map_err(&invalid)?;
            }
        }
    }
    let cases: usize = suite.tests.iter().map(|t| t.cases.len()).sum();
    if cases > options.limits.max_cases {
        return Err(SuiteError::TooMany {
            what: format!("cases in {}", file.display()),
            max: options.limits.max_cases,
            flag: "--max-cases",
        });
    }
    Ok(suite)
}

/// `path` resolved (links followed) if it is under `root`.
pub(super) fn confined(root: &Path, path: &Path) -> Result<PathBuf, String> {
    let root = root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root.display()))?;
    // A file that is not there is the case's own error when it is read
    // (a skipped case may name one).
    let Ok(resolved) = path.canonicalize() else {
        return Ok(path.to_owned());
    };
    if resolved.starts_with(&root) {
        Ok(resolved)
    } else {
        Err(format!(
            "{} is outside {}, where the suites were found",
            path.display(),
            root.display()
        ))
    }
}

/// `dir` relative to `root`, as the policies' Application path.
fn relative(root: &Path, dir: &Path) -> Result<String, String> {
    let canonical = |p: &Path| {
        p.canonicalize()
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let (root, dir) = (canonical(root)?, canonical(dir)?);
    let rel = dir
        .strip_prefix(&root)
        .map_err(|_| format!("{} is not under {}", dir.display(), root.display()))?;
    rel.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{} is not UTF-8", rel.display()))
}

fn gator_test(
    index: usize,
    test: GatorTest,
    suite_dir: &Path,
    options: &Options,
) -> Result<Test, String> {
    let name = if test.name.is_empty() {
        format!("tests[{index}]")
    } else {
        test.name
    };
    if test.expansion.is_some() {
        return Err(format!(
            "test {name}: `expansion` (ExpansionTemplates) is not supported"
        ));
    }
    if test.template.is_empty() || test.constraint.is_empty() {
        return Err(format!(
            "test {name}: `template` and `constraint` are required"
        ));
    }
    let prefixes = constraint_names(&suite_dir.join(&test.constraint), &options.limits)
        .into_iter()
        .map(|n| format!("[{n}] "))
        .collect();
    let policy = PolicySpec {
        plugin: options.gatekeeper_plugin.clone(),
        settings: vec![
            ("template".into(), test.template.clone()),
            ("constraint".into(), test.constraint.clone()),
        ],
        mode: Mode::Enforce,
        message_prefixes: prefixes,
    };
    let mut cases = Vec::new();
    for (c, case) in test.cases.into_iter().enumerate() {
        let case_name = if case.name.is_empty() {
            format!("cases[{c}]")
        } else {
            case.name
        };
        let at = |m: String| format!("test {name}, case {case_name}: {m}");
        if case.object.is_empty() {
            return Err(at("`object` is required".into()));
        }
        if case.assertions.is_empty() && !case.skip {
            return Err(at("a case needs at least one assertion".into()));
        }
        let assertions = case
            .assertions
            .into_iter()
            .map(|a| assertion(a.violations, a.message, None, None, None))
            .collect::<Result<_, _>>()
            .map_err(at)?;
        cases.push(Case {
            name: case_name,
            objects: vec![suite_dir.join(&case.object)],
            single_object: true,
            settings: case
                .inventory
                .into_iter()
                .map(|i| ("inventory".into(), i))
                .collect(),
            namespace: String::new(),
            skip: case.skip,
            assertions,
            rule: None,
        });
    }
    Ok(Test {
        name,
        policies: vec![policy],
        objects: Vec::new(),
        skip: test.skip,
        cases,
    })
}

/// The names of the constraints in `file`; none when it cannot be read
/// (the policy then says why, naming the file).
fn constraint_names(file: &Path, limits: &Limits) -> Vec<String> {
    let Ok(text) = read_bounded(file, limits.max_file_size) else {
        return Vec::new();
    };
    documents(file, &text)
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

fn kiln_test(test: KilnTest, defaults: &[KilnPolicy], suite_dir: &Path) -> Result<Test, String> {
    let name = test.name;
    let policies = if test.policies.is_empty() {
        defaults
    } else {
        &test.policies
    };
    if policies.is_empty() {
        return Err(format!(
            "test {name}: no policies (give `policies` in the test or the suite)"
        ));
    }
    let policies = policies
        .iter()
        .map(|p| PolicySpec {
            plugin: plugin_reference(&p.plugin, suite_dir),
            settings: p
                .settings
                .iter()
                .flat_map(|(k, v)| match v {
                    SettingValue::One(one) => vec![(k.clone(), one.clone())],
                    SettingValue::Many(many) => {
                        many.iter().map(|one| (k.clone(), one.clone())).collect()
                    }
                })
                .collect(),
            mode: p.mode.unwrap_or_default(),
            message_prefixes: Vec::new(),
        })
        .collect();
    let mut cases = Vec::new();
    for case in test.cases {
        let at = |m: String| format!("test {name}, case {}: {m}", case.name);
        if case.objects.is_empty() {
            return Err(at("`objects` names no file".into()));
        }
        if case.assertions.is_empty() && !case.skip {
            return Err(at("a case needs at least one assertion".into()));
        }
        let assertions = case
            .assertions
            .into_iter()
            .map(|a| {
                let severity = a
                    .severity
                    .as_deref()
                    .map(|s| match s {
                        "error" => Ok(Severity::Error),
                        "warning" => Ok(Severity::Warning),
                        "info" => Ok(Severity::Info),
                        other => Err(format!("severity `{other}` is not error, warning or info")),
                    })
                    .transpose()?;
                assertion(a.violations, a.message, a.policy, severity, a.object)
            })
            .collect::<Result<_, _>>()
            .map_err(at)?;
        cases.push(Case {
            name: case.name.clone(),
            objects: case.objects.iter().map(|o| suite_dir.join(o)).collect(),
            single_object: false,
            settings: Vec::new(),
            namespace: case.namespace,
            skip: case.skip,
            assertions,
            rule: None,
        });
    }
    Ok(Test {
        name,
        policies,
        objects: Vec::new(),
        skip: test.skip,
        cases,
    })
}

/// A local plugin path is relative to the suite's directory; a URL stays.
fn plugin_reference(reference: &str, suite_dir: &Path) -> String {
    if reference.contains("://") || Path::new(reference).is_absolute() {
        reference.to_owned()
    } else {
        suite_dir.join(reference).display().to_string()
    }
}

fn assertion(
    violations: Option<RawViolations>,
    message: Option<String>,
    policy: Option<String>,
    severity: Option<Severity>,
    object: Option<ObjectSelector>,
) -> Result<Assertion, String> {
    let violations = match violations {
        None => Expected::Yes,
        Some(RawViolations::Bool(true)) => Expected::Yes,
        Some(RawViolations::Bool(false)) => Expected::No,
        Some(RawViolations::Text(t)) if t == "yes" => Expected::Yes,
        Some(RawViolations::Text(t)) if t == "no" => Expected::No,
        Some(RawViolations::Text(t)) => match t.parse::<u64>() {
            Ok(n) => Expected::Exactly(n),
            Err(_) => {
                return Err(format!(
                    "violations `{t}` is not yes, no or a number of violations"
                ));
            }
        },
        Some(RawViolations::Number(n)) => match u64::try_from(n) {
            Ok(n) => Expected::Exactly(n),
            Err(_) => return Err(format!("violations {n} is negative")),
        },
    };
    let message = message
        .map(|m| {
            regex::RegexBuilder::new(&m)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("message {m:?} is not a regular expression: {e}"))
        })
        .transpose()?;
    Ok(Assertion {
        violations,
        message,
        policy,
        severity,
        object,
    })
}
