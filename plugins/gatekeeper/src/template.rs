//! ConstraintTemplates: the constraint kind they define and the program
//! the settings' engine evaluates: their Rego, compiled once into a regorus
//! engine (Rego v0, as the Gatekeeper library writes it, with the
//! template's `libs`), or their `K8sNativeValidation` CEL ([`crate::cel`]).

use std::num::NonZeroU32;
use std::time::Duration;

use serde_json::Value;

use crate::cel::CelProgram;
use crate::settings::Engine;
use crate::yaml::{Document, line_of_block};

/// The only target Gatekeeper's admission templates name.
pub const ADMISSION_TARGET: &str = "admission.k8s.gatekeeper.sh";

/// How long one evaluation of a template's `violation` rule (one object,
/// one constraint) may run before regorus stops it; the host's deadline on
/// the whole review is the backstop where the sandbox has no clock.
pub const EVALUATION_TIME_LIMIT: Duration = Duration::from_secs(2);

/// How many interpreter steps regorus takes between two looks at the clock.
pub const TIMER_CHECK_INTERVAL: u32 = 1_000;

/// A template that cannot be used; names the file and, when known, the line.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}{}: ConstraintTemplate `{name}`: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct TemplateError {
    /// The template's file.
    pub file: String,
    /// 1-based line in that file.
    pub line: Option<usize>,
    /// `metadata.name`, or `?` when missing.
    pub name: String,
    /// What is wrong (for Rego, regorus's message with its `--> file:line:col`).
    pub message: String,
}

/// One Rego module of a template: its text and where it is in its file.
#[derive(Debug, Clone)]
struct Module {
    rego: String,
    /// 1-based line of the module's first line in the file, when found.
    line: Option<usize>,
    /// Where it is inside the template, e.g. `spec.targets[0].libs[1]`.
    field: String,
}

/// A compiled template.
#[derive(Clone)]
pub struct Template {
    /// `metadata.name`.
    pub name: String,
    /// `spec.crd.spec.names.kind`: the kind of its constraints.
    pub kind: String,
    /// The file it came from.
    pub file: String,
    /// Whether the template carries a `K8sNativeValidation` (CEL) engine.
    pub has_cel: bool,
    /// What evaluates it.
    pub program: Program,
}

/// The program of a template, for the engine the settings chose.
#[derive(Clone)]
pub enum Program {
    /// Rego.
    Rego {
        /// The engine with the template's modules (no data, no input).
        engine: Box<regorus::Engine>,
        /// `data.<package>.violation`.
        rule: String,
    },
    /// `K8sNativeValidation`.
    Cel(Box<CelProgram>),
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Template")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("file", &self.file)
            .field(
                "program",
                &match &self.program {
                    Program::Rego { rule, .. } => rule.as_str(),
                    Program::Cel(_) => "K8sNativeValidation",
                },
            )
            .finish_non_exhaustive()
    }
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(value, |v, k| v.get(k))
        .and_then(Value::as_str)
}

impl Template {
    /// Reads and compiles the template of one document of `file` (whose
    /// whole text is `text`) for `engine`: `rego` compiles its Rego, `cel`
    /// its `K8sNativeValidation` source, `auto` the latter when it has one.
    pub fn compile(
        doc: &Document,
        file: &str,
        text: &str,
        engine: Engine,
    ) -> Result<Template, TemplateError> {
        let name = str_at(&doc.value, &["metadata", "name"])
            .unwrap_or("?")
            .to_owned();
        let error = |line: Option<usize>, message: String| TemplateError {
            file: file.to_owned(),
            line: line.or(Some(doc.line)),
            name: name.clone(),
            message,
        };
        let kind = str_at(&doc.value, &["spec", "crd", "spec", "names", "kind"])
            .filter(|k| !k.is_empty())
            .ok_or_else(|| error(None, "spec.crd.spec.names.kind is missing".into()))?
            .to_owned();
        if name != kind.to_lowercase() {
            return Err(error(
                None,
                format!(
                    "metadata.name must be the lowercase of spec.crd.spec.names.kind `{kind}` (as Gatekeeper requires)"
                ),
            ));
        }
        let targets = doc
            .value
            .pointer("/spec/targets")
            .and_then(Value::as_array)
            .ok_or_else(|| error(None, "spec.targets is missing".into()))?;
        let mut modules = Vec::new();
        let mut cel_source: Option<(String, Value)> = None;
        let mut seen_target = false;
        for (t, target) in targets.iter().enumerate() {
            let target_name = target.get("target").and_then(Value::as_str).unwrap_or("");
            if target_name != ADMISSION_TARGET {
                return Err(error(
                    None,
                    format!("spec.targets[{t}].target `{target_name}` is not `{ADMISSION_TARGET}`"),
                ));
            }
            seen_target = true;
            let field = format!("spec.targets[{t}]");
            if let Some(source) = target.get("rego") {
                collect(source, target.get("libs"), &field, doc, text, &mut modules)
                    .map_err(|m| error(None, m))?;
            }
            for (c, code) in target
                .get("code")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let field = format!("{field}.code[{c}]");
                match code.get("engine").and_then(Value::as_str) {
                    Some("Rego") => {
                        let source = code.get("source").unwrap_or(&Value::Null);
                        let Some(rego) = source.get("rego") else {
                            return Err(error(None, format!("{field}.source.rego is missing")));
                        };
                        collect(
                            rego,
                            source.get("libs"),
                            &format!("{field}.source"),
                            doc,
                            text,
                            &mut modules,
                        )
                        .map_err(|m| error(None, m))?;
                    }
                    Some("K8sNativeValidation") => {
                        if cel_source.is_some() {
                            return Err(error(
                                None,
                                format!(
                                    "{field}: a second K8sNativeValidation source (one per template)"
                                ),
                            ));
                        }
                        let source = code.get("source").cloned().unwrap_or(Value::Null);
                        cel_source = Some((format!("{field}.source"), source));
                    }
                    other => {
                        return Err(error(
                            None,
                            format!(
                                "{field}.engine {other:?} is neither `Rego` nor `K8sNativeValidation`"
                            ),
                        ));
                    }
                }
            }
        }
        if !seen_target {
            return Err(error(None, "spec.targets is empty".into()));
        }
        let has_cel = cel_source.is_some();
        let use_cel = match engine {
            Engine::Rego => false,
            Engine::Cel => true,
            Engine::Auto => has_cel,
        };
        if use_cel {
            let Some((field, source)) = cel_source else {
                return Err(error(
                    None,
                    "no K8sNativeValidation engine (code[].engine: K8sNativeValidation): the `cel` engine cannot evaluate it (use engine `rego` or `auto`)".into(),
                ));
            };
            let line = line_of_field(text, doc.line, &field);
            let program = CelProgram::compile(&source, &field).map_err(|m| error(line, m))?;
            return Ok(Template {
                name,
                kind,
                file: file.to_owned(),
                has_cel,
                program: Program::Cel(Box::new(program)),
            });
        }
        if modules.is_empty() {
            return Err(error(
                None,
                "no Rego engine (spec.targets[].rego or code[].engine: Rego): the `rego` engine cannot evaluate it".into(),
            ));
        }
        let mut engine = regorus::Engine::new();
        engine.set_rego_v0(true);
        engine.set_execution_timer_config(regorus::utils::limits::ExecutionTimerConfig {
            limit: EVALUATION_TIME_LIMIT,
            check_interval: NonZeroU32::new(TIMER_CHECK_INTERVAL).unwrap_or(NonZeroU32::MIN),
        });
        let mut package = None;
        for (index, module) in modules.iter().enumerate() {
            // Blank lines before the module make regorus's line numbers the
            // file's line numbers.
            let padded = "\n".repeat(module.line.unwrap_or(1).saturating_sub(1))
                + &crate::compat::rewrite(&module.rego);
            let pkg = engine
                .add_policy(file.to_owned(), padded)
                .map_err(|e| error(module.line, format!("{}: {e}", module.field)))?;
            if index == 0 {
                package = Some(pkg);
            } else if !pkg.starts_with("data.lib.") {
                return Err(error(
                    module.line,
                    format!(
                        "{}: a lib's package must be under `lib.` (is `{pkg}`)",
                        module.field
                    ),
                ));
            }
        }
        let package = package.unwrap_or_default();
        let rule = format!("{package}.violation");
        // A template without a `violation` rule would allow everything.
        if !has_rule(&modules[0].rego) {
            return Err(error(
                modules[0].line,
                format!("no `violation` rule in `{package}`"),
            ));
        }
        Ok(Template {
            name,
            kind,
            file: file.to_owned(),
            has_cel,
            program: Program::Rego {
                engine: Box::new(engine),
                rule,
            },
        })
    }
}

/// The line of the `K8sNativeValidation` source in the file: the first
/// `engine: K8sNativeValidation` line at or after the document's start.
fn line_of_field(text: &str, doc_line: usize, _field: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(doc_line.saturating_sub(1))
        .find(|(_, l)| l.contains("K8sNativeValidation"))
        .map(|(i, _)| i + 1)
}

/// Whether a module defines `violation` (a rule head at the start of a line).
fn has_rule(rego: &str) -> bool {
    rego.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("violation[")
            || l.starts_with("violation ")
            || l.starts_with("violation contains")
    })
}

fn collect(
    rego: &Value,
    libs: Option<&Value>,
    field: &str,
    doc: &Document,
    text: &str,
    out: &mut Vec<Module>,
) -> Result<(), String> {
    let Some(rego) = rego.as_str() else {
        return Err(format!("{field}.rego is not a string"));
    };
    if !out.is_empty() {
        return Err(format!("{field}: a second Rego source (one per template)"));
    }
    out.push(Module {
        rego: rego.to_owned(),
        line: line_of_block(text, rego, doc.line),
        field: format!("{field}.rego"),
    });
    for (l, lib) in libs
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(lib) = lib.as_str() else {
            return Err(format!("{field}.libs[{l}] is not a string"));
        };
        out.push(Module {
            rego: lib.to_owned(),
            line: line_of_block(text, lib, doc.line),
            field: format!("{field}.libs[{l}]"),
        });
    }
    Ok(())
}
