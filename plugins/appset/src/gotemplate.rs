//! `goTemplate: true`: each string is a Go `text/template`, run with the
//! parameter set as dot, on the helm plugin's engine with Argo CD's
//! function set ([`kiln_helm::funcs::exists_in_argo`]: Sprig without
//! `env`, `expandenv` and `getHostByName`, plus `normalize`, `slugify`,
//! `toYaml`, `fromYaml` and `fromYamlArray`; none of Helm's own).
//!
//! A request's templates share one budget of steps and output
//! ([`Budget`]), and each call nests at most
//! [`kiln_helm::exec::Limits::DEFAULT_DEPTH`] deep.

use std::collections::HashMap;
use std::rc::Rc;

use kiln_helm::exec::{Limits, Runtime};
use kiln_helm::parse::Trees;
use kiln_helm::value::Value;

/// Steps and output bytes left to a request's templates.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Template steps left.
    pub steps: u64,
    /// Output bytes left.
    pub output: usize,
}

impl Default for Budget {
    /// The helm plugin's defaults for one render: 50 million steps and
    /// 64 MiB of output.
    fn default() -> Self {
        Budget {
            steps: Limits::DEFAULT_STEPS,
            output: Limits::DEFAULT_OUTPUT,
        }
    }
}

/// `goTemplateOptions`, as Go's `Template.Option` reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// `missingkey=error`: a map key that is not there is an error, not
    /// `<no value>`.
    pub missing_key_error: bool,
}

impl Options {
    /// Reads `goTemplateOptions`; an option Go does not know is an error,
    /// as `Option` panics on one.
    pub fn parse(options: &[String]) -> Result<Options, String> {
        let mut out = Options::default();
        for option in options {
            match option.as_str() {
                "missingkey=error" => out.missing_key_error = true,
                "missingkey=default" | "missingkey=invalid" | "missingkey=zero" => {
                    out.missing_key_error = false;
                }
                other => {
                    return Err(format!(
                        "goTemplateOptions: unrecognized option {other:?} (Go knows missingkey=default, invalid, zero and error)"
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// Parsed templates, by text, and the request's budget.
pub struct Engine {
    options: Options,
    parsed: HashMap<String, Rc<Trees>>,
    budget: Budget,
}

/// The name Argo CD gives every template (`template.New("")`).
const NAME: &str = "";

impl Engine {
    /// An engine with `options` and `budget`.
    pub fn new(options: Options, budget: Budget) -> Self {
        Engine {
            options,
            parsed: HashMap::new(),
            budget,
        }
    }

    /// `text` run with `dot`, as Argo CD words its errors.
    pub fn render(&mut self, text: &str, dot: &Value) -> Result<String, String> {
        let trees = match self.parsed.get(text) {
            Some(trees) => trees.clone(),
            None => {
                let mut trees = Trees::new();
                kiln_helm::parse::parse(NAME, text, &mut trees, &kiln_helm::funcs::exists_in_argo)
                    .map_err(|e| format!("failed to parse template {text}: {e}"))?;
                let trees = Rc::new(trees);
                self.parsed.insert(text.to_owned(), trees.clone());
                trees
            }
        };
        let limits = Limits {
            max_steps: self.budget.steps,
            max_output: self.budget.output,
            ..Limits::default()
        };
        let mut runtime = Runtime::new((*trees).clone(), limits);
        runtime.missing_key_error = self.options.missing_key_error;
        let result = runtime.execute(NAME, dot.clone());
        self.budget.steps = self.budget.steps.saturating_sub(runtime.steps);
        self.budget.output = self.budget.output.saturating_sub(runtime.output);
        result.map_err(|e| format!("failed to execute go template {text}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dot() -> Value {
        kiln_helm::convert::from_json(&json!({
            "name": "web", "path": {"basename": "Web_App", "segments": ["apps", "web"]},
            "values": {"replicas": 3}
        }))
    }

    #[test]
    fn go_templates_render_with_sprig_and_argo_s_functions() {
        let mut engine = Engine::new(Options::default(), Budget::default());
        let r = |engine: &mut Engine, text: &str| engine.render(text, &dot());
        assert_eq!(r(&mut engine, "{{ .name | upper }}").unwrap(), "WEB");
        assert_eq!(
            r(&mut engine, "{{ index .path.segments 0 }}").unwrap(),
            "apps"
        );
        assert_eq!(
            r(&mut engine, "{{ .path.basename | normalize }}").unwrap(),
            "web-app"
        );
        assert_eq!(r(&mut engine, "{{ .values.replicas }}").unwrap(), "3");
        // A missing key prints Go's `<no value>` by default.
        assert_eq!(r(&mut engine, "{{ .nope }}").unwrap(), "<no value>");
        // Helm's own functions are not Argo's.
        let error = r(&mut engine, "{{ include \"x\" . }}").unwrap_err();
        assert!(
            error.contains("function \"include\" not defined"),
            "{error}"
        );
        let error = r(&mut engine, "{{ required \"x\" .name }}").unwrap_err();
        assert!(
            error.contains("function \"required\" not defined"),
            "{error}"
        );
    }

    #[test]
    fn missingkey_error_refuses_a_typo() {
        let options = Options::parse(&["missingkey=error".to_owned()]).unwrap();
        let mut engine = Engine::new(options, Budget::default());
        let error = engine.render("{{ .nmae }}", &dot()).unwrap_err();
        assert_eq!(
            error,
            "failed to execute go template {{ .nmae }}: template: :1:3: executing \"\" at <.nmae>: map has no entry for key \"nmae\""
        );
        assert!(Options::parse(&["missingkey=maybe".to_owned()]).is_err());
    }

    #[test]
    fn attack_a_template_that_loops_exhausts_the_request_s_budget() {
        let budget = Budget {
            steps: 100_000,
            output: 1 << 20,
        };
        let mut engine = Engine::new(Options::default(), budget);
        let error = engine
            .render("{{ range until 1000000 }}x{{ end }}", &dot())
            .unwrap_err();
        assert!(error.contains("limit"), "{error}");
        // What is left is shared: the next template has nothing either.
        assert!(
            engine
                .render("{{ range until 10 }}x{{ end }}", &dot())
                .is_err()
        );
        let mut engine = Engine::new(
            Options::default(),
            Budget {
                steps: 10_000_000,
                output: 1000,
            },
        );
        let error = engine
            .render("{{ repeat 5000 \"x\" }}", &dot())
            .unwrap_err();
        assert!(error.contains("over the output budget"), "{error}");
    }
}
