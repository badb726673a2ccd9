//! Kyverno's JMESPath functions beside the standard ones, each as
//! Kyverno's engine computes it (`pkg/engine/jmespath`), with the examples
//! of Kyverno's documentation as unit tests, by family:
//! [`strings`], [`arithmetic`] (numbers, quantities and durations),
//! [`time`] (Go's times and durations, shared with the helm plugin),
//! [`collections`] and [`encoding`] (JSON, YAML, base64, hashes, semver).
//!
//! What a review before apply cannot do is an error naming the function:
//! `random` (a verdict may not depend on chance), `is_external_url` on a
//! host name (no DNS), `time_now` without the review's time (the `now`
//! setting; `kiln policy test` gives it).

mod arithmetic;
mod collections;
mod encoding;
mod strings;
pub mod time;
mod x509;

use jmespath::functions::Function;
use jmespath::{Context, ErrorReason, JmespathError, Rcvar, Runtime, Variable};
use serde_json::{Value, json};

type Args<'a> = &'a [Rcvar];

/// Patterns longer than this are refused (compile time and memory).
pub(super) const MAX_PATTERN: usize = 4096;

/// The longest string a function may return: `replace_all('x', '', 'y…')`
/// nested in itself grows geometrically otherwise.
pub(super) const MAX_OUTPUT: usize = 1 << 20;

pub(super) fn capped(text: String) -> Result<Value, String> {
    if text.len() > MAX_OUTPUT {
        return Err(format!(
            "the result is {} bytes, over the limit of {MAX_OUTPUT}",
            text.len()
        ));
    }
    Ok(json!(text))
}

pub(super) fn error(ctx: &Context<'_>, message: String) -> JmespathError {
    JmespathError::from_ctx(ctx, ErrorReason::Parse(message))
}

pub(super) fn json_of(arg: &Rcvar) -> Value {
    serde_json::to_value(&**arg).unwrap_or(Value::Null)
}

pub(super) fn var(value: Value) -> Result<Rcvar, String> {
    Variable::try_from(value)
        .map(Rcvar::new)
        .map_err(|e| e.to_string())
}

/// A function of JSON values with a fixed number of arguments.
pub(super) fn define(
    runtime: &mut Runtime,
    name: &'static str,
    arity: usize,
    f: fn(&[Value]) -> Result<Value, String>,
) {
    let function = move |args: Args<'_>, ctx: &mut Context<'_>| -> Result<Rcvar, JmespathError> {
        if args.len() != arity {
            return Err(error(
                ctx,
                format!("{name}() takes {arity} arguments, {} given", args.len()),
            ));
        }
        let values: Vec<Value> = args.iter().map(json_of).collect();
        let out = f(&values).map_err(|e| error(ctx, format!("{name}(): {e}")))?;
        var(out).map_err(|e| error(ctx, format!("{name}(): {e}")))
    };
    let boxed: Box<dyn Function> = Box::new(function);
    runtime.register_function(name, boxed);
}

pub(super) fn text(value: &Value, what: &str) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("{what} must be a string, not {other}")),
    }
}

pub(super) fn regex(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > MAX_PATTERN {
        return Err(format!(
            "pattern is {} bytes, over the limit of {MAX_PATTERN}",
            pattern.len()
        ));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| e.to_string())
}

pub(super) fn number(value: &Value, what: &str) -> Result<f64, String> {
    match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{what} is not a number")),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{what} {s:?} is not a number")),
        other => Err(format!("{what} must be a number, not {other}")),
    }
}

pub(super) fn num(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

/// A string argument, as Kyverno's `validateArg` requires one (`index`
/// counts from 1, as its messages do).
pub(super) fn string_arg(value: &Value, index: usize) -> Result<&str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("argument #{index} is not of type string"))
}

/// Registers Kyverno's functions on `runtime`.
pub fn register_all(runtime: &mut Runtime) {
    collections::register(runtime);
    strings::register(runtime);
    arithmetic::register(runtime);
    encoding::register(runtime);
    time::register(runtime);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::variables::query;

    #[test]
    fn kyverno_functions_do_what_the_documentation_says() {
        let data = json!({"s": "Hello", "a": {"x": "1"}, "d": "2400h"});
        assert_eq!(query("to_upper(s)", &data).unwrap(), json!("HELLO"));
        assert_eq!(query("to_lower(s)", &data).unwrap(), json!("hello"));
        assert_eq!(
            query("split('a,b', ',')", &data).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            query("regex_match('^[0-9]+h$', d)", &data).unwrap(),
            json!(true)
        );
        assert_eq!(
            query("regex_replace_all('h.*', d, '')", &data).unwrap(),
            json!("2400")
        );
        assert_eq!(
            query("to_number(regex_replace_all('h.*', d, ''))", &data).unwrap(),
            json!(2400)
        );
        assert_eq!(
            query("regex_replace_all('([a-z]+)', 'ab12', '${1}x')", &data).unwrap(),
            json!("abx12")
        );
        assert_eq!(
            query("pattern_match('He*', s)", &data).unwrap(),
            json!(true)
        );
        assert_eq!(
            query("label_match(`{\"x\": \"1\"}`, a)", &data).unwrap(),
            json!(true)
        );
        assert_eq!(query("divide(`10`, `4`)", &data).unwrap(), json!(2.5));
        assert_eq!(query("truncate(s, `2`)", &data).unwrap(), json!("He"));
        assert_eq!(query("base64_decode('aGk=')", &data).unwrap(), json!("hi"));
        assert_eq!(
            query("semver_compare('1.2.3', '>1.0.0 <2.0.0')", &data).unwrap(),
            json!(true)
        );
        assert_eq!(
            query("semver_compare('2.0.0', '>1.0.0 <2.0.0')", &data).unwrap(),
            json!(false)
        );
        assert_eq!(
            query("parse_json('{\"a\": [1]}').a", &data).unwrap(),
            json!([1])
        );
        assert_eq!(query("trim('  x  ', ' ')", &data).unwrap(), json!("x"));
        assert!(query("regex_match('(', s)", &data).is_err());
        assert!(query("divide(`1`, `0`)", &data).is_err());
        // Output that would grow geometrically is refused.
        let mut grow = "'xxxxxxxxxxxxxxxx'".to_owned();
        for _ in 0..6 {
            grow = format!("replace_all({grow}, 'x', 'xxxxxxxxxx')");
        }
        assert!(query(&grow, &data).is_err());
    }
}
