//! Kyverno's JMESPath functions beside the standard ones, each as
//! Kyverno's documentation describes it (examples as unit tests below).
//! Regular expressions use the `regex` crate (RE2 syntax, linear time:
//! a hostile pattern cannot make a review slow).

use jmespath::functions::Function;
use jmespath::{Context, ErrorReason, JmespathError, Rcvar, Runtime, Variable};
use serde_json::{Value, json};

type Args<'a> = &'a [Rcvar];

/// Patterns longer than this are refused (compile time and memory).
const MAX_PATTERN: usize = 4096;

/// The longest string a function may return: `replace_all('x', '', 'y…')`
/// nested in itself grows geometrically otherwise.
const MAX_OUTPUT: usize = 1 << 20;

fn capped(text: String) -> Result<Value, String> {
    if text.len() > MAX_OUTPUT {
        return Err(format!(
            "the result is {} bytes, over the limit of {MAX_OUTPUT}",
            text.len()
        ));
    }
    Ok(json!(text))
}

fn error(ctx: &Context<'_>, message: String) -> JmespathError {
    JmespathError::from_ctx(ctx, ErrorReason::Parse(message))
}

fn json_of(arg: &Rcvar) -> Value {
    serde_json::to_value(&**arg).unwrap_or(Value::Null)
}

fn var(value: Value) -> Result<Rcvar, String> {
    Variable::try_from(value)
        .map(Rcvar::new)
        .map_err(|e| e.to_string())
}

/// A function of JSON values with a fixed number of arguments.
fn register(
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

fn text(value: &Value, what: &str) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("{what} must be a string, not {other}")),
    }
}

fn regex(pattern: &str) -> Result<regex::Regex, String> {
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

fn number(value: &Value, what: &str) -> Result<f64, String> {
    match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{what} is not a number")),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{what} {s:?} is not a number")),
        other => Err(format!("{what} must be a number, not {other}")),
    }
}

fn num(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

/// Registers Kyverno's functions on `runtime`.
pub fn register_all(runtime: &mut Runtime) {
    // `a[].b.keys(@)` where some `b` is null: JMESPath's subexpression stops
    // at the null (go-jmespath, Kyverno's engine, does), the jmespath crate
    // calls the function with it. A null argument gives null here, so that
    // the projection drops it as Kyverno's does.
    register(runtime, "keys", 1, |a| match &a[0] {
        Value::Null => Ok(Value::Null),
        Value::Object(map) => Ok(json!(map.keys().collect::<Vec<_>>())),
        other => Err(format!("argument must be an object, not {other}")),
    });
    register(runtime, "values", 1, |a| match &a[0] {
        Value::Null => Ok(Value::Null),
        Value::Object(map) => Ok(json!(map.values().collect::<Vec<_>>())),
        other => Err(format!("argument must be an object, not {other}")),
    });
    register(runtime, "to_upper", 1, |a| {
        Ok(json!(text(&a[0], "argument")?.to_uppercase()))
    });
    register(runtime, "to_lower", 1, |a| {
        Ok(json!(text(&a[0], "argument")?.to_lowercase()))
    });
    register(runtime, "trim", 2, |a| {
        let cut: Vec<char> = text(&a[1], "cutset")?.chars().collect();
        Ok(json!(text(&a[0], "argument")?.trim_matches(cut.as_slice())))
    });
    register(runtime, "trim_prefix", 2, |a| {
        let s = text(&a[0], "argument")?;
        let p = text(&a[1], "prefix")?;
        Ok(json!(s.strip_prefix(p.as_str()).unwrap_or(&s)))
    });
    register(runtime, "split", 2, |a| {
        let s = text(&a[0], "argument")?;
        let sep = text(&a[1], "separator")?;
        if sep.is_empty() {
            return Ok(json!(s.chars().map(String::from).collect::<Vec<_>>()));
        }
        Ok(json!(s.split(sep.as_str()).collect::<Vec<_>>()))
    });
    register(runtime, "replace", 4, |a| {
        let s = text(&a[0], "argument")?;
        let old = text(&a[1], "old")?;
        let new = text(&a[2], "new")?;
        let n = number(&a[3], "count")?;
        capped(if n < 0.0 {
            s.replace(&old, &new)
        } else {
            s.replacen(&old, &new, n as usize)
        })
    });
    register(runtime, "replace_all", 3, |a| {
        capped(text(&a[0], "argument")?.replace(&text(&a[1], "old")?, &text(&a[2], "new")?))
    });
    register(runtime, "equal_fold", 2, |a| {
        Ok(json!(
            text(&a[0], "argument")?.to_lowercase() == text(&a[1], "argument")?.to_lowercase()
        ))
    });
    register(runtime, "truncate", 2, |a| {
        let s = text(&a[0], "argument")?;
        let n = number(&a[1], "length")?.max(0.0) as usize;
        Ok(json!(s.chars().take(n).collect::<String>()))
    });
    register(runtime, "regex_match", 2, |a| {
        Ok(json!(
            regex(&text(&a[0], "pattern")?)?.is_match(&text(&a[1], "argument")?)
        ))
    });
    register(runtime, "regex_replace_all", 3, |a| {
        let re = regex(&text(&a[0], "pattern")?)?;
        let s = text(&a[1], "argument")?;
        capped(
            re.replace_all(&s, text(&a[2], "replacement")?.as_str())
                .into_owned(),
        )
    });
    register(runtime, "regex_replace_all_literal", 3, |a| {
        let re = regex(&text(&a[0], "pattern")?)?;
        let s = text(&a[1], "argument")?;
        capped(
            re.replace_all(&s, regex::NoExpand(&text(&a[2], "replacement")?))
                .into_owned(),
        )
    });
    register(runtime, "pattern_match", 2, |a| {
        Ok(json!(crate::wildcard::matches(
            &text(&a[0], "pattern")?,
            &text(&a[1], "argument")?
        )))
    });
    register(runtime, "label_match", 2, |a| {
        let (Value::Object(wanted), Value::Object(have)) = (&a[0], &a[1]) else {
            return Err("both arguments must be maps".into());
        };
        Ok(json!(wanted.iter().all(|(k, v)| have.get(k) == Some(v))))
    });
    register(runtime, "add", 2, |a| {
        Ok(num(number(&a[0], "first")? + number(&a[1], "second")?))
    });
    register(runtime, "subtract", 2, |a| {
        Ok(num(number(&a[0], "first")? - number(&a[1], "second")?))
    });
    register(runtime, "multiply", 2, |a| {
        Ok(num(number(&a[0], "first")? * number(&a[1], "second")?))
    });
    register(runtime, "divide", 2, |a| {
        let d = number(&a[1], "divisor")?;
        if d == 0.0 {
            return Err("division by zero".into());
        }
        Ok(json!(number(&a[0], "dividend")? / d))
    });
    register(runtime, "modulo", 2, |a| {
        let d = number(&a[1], "divisor")? as i64;
        let n = number(&a[0], "dividend")? as i64;
        n.checked_rem(d)
            .map(|r| json!(r))
            .ok_or_else(|| format!("{n} modulo {d} is undefined"))
    });
    register(runtime, "round", 2, |a| {
        let scale = 10f64.powi(number(&a[1], "digits")? as i32);
        Ok(num((number(&a[0], "argument")? * scale).round() / scale))
    });
    register(runtime, "base64_decode", 1, |a| {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text(&a[0], "argument")?)
            .map_err(|e| e.to_string())?;
        Ok(json!(String::from_utf8_lossy(&bytes)))
    });
    register(runtime, "base64_encode", 1, |a| {
        use base64::Engine as _;
        Ok(json!(
            base64::engine::general_purpose::STANDARD.encode(text(&a[0], "argument")?)
        ))
    });
    register(runtime, "parse_json", 1, |a| {
        let s = text(&a[0], "argument")?;
        if s.len() > 1 << 20 {
            return Err("document over 1 MiB".into());
        }
        serde_json::from_str(&s).map_err(|e| e.to_string())
    });
    register(runtime, "parse_yaml", 1, |a| {
        let s = text(&a[0], "argument")?;
        if s.len() > 1 << 20 {
            return Err("document over 1 MiB".into());
        }
        // Aliases expanded within the budget for the text's length: a
        // billion laughs is refused before it grows.
        kiln_yaml_limits::check(&s, &kiln_yaml_limits::YamlLimits::default())
            .map_err(|e| e.to_string())?;
        serde_yaml::from_str::<Value>(&s).map_err(|e| e.to_string())
    });
    register(runtime, "semver_compare", 2, |a| {
        let version = text(&a[0], "version")?;
        let constraint = text(&a[1], "constraint")?;
        Ok(json!(semver_holds(&version, &constraint)?))
    });
}

/// A blang/semver range: `>1.0.0 <2.0.0 || 3.x`-like, with `=`, `!=`, `>`,
/// `>=`, `<`, `<=` and a bare version.
fn semver_holds(version: &str, constraint: &str) -> Result<bool, String> {
    let parse = |v: &str| -> Result<(u64, u64, u64), String> {
        let v = v.trim().trim_start_matches('v');
        let core = v.split(['-', '+']).next().unwrap_or(v);
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() != 3 {
            return Err(format!("{v:?} is not a semantic version"));
        }
        let n = |p: &str| {
            p.parse::<u64>()
                .map_err(|_| format!("{v:?} is not a semantic version"))
        };
        Ok((n(parts[0])?, n(parts[1])?, n(parts[2])?))
    };
    let have = parse(version)?;
    for alternative in constraint.split("||") {
        let mut all = true;
        for part in alternative.split_whitespace() {
            let (op, rest) = ["!=", ">=", "<=", "=", ">", "<"]
                .iter()
                .find_map(|op| part.strip_prefix(op).map(|rest| (*op, rest)))
                .unwrap_or(("=", part));
            let want = parse(rest)?;
            let ok = match op {
                "=" => have == want,
                "!=" => have != want,
                ">" => have > want,
                ">=" => have >= want,
                "<" => have < want,
                _ => have <= want,
            };
            all &= ok;
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
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
        assert!(query("modulo(`-9223372036854775808`, `-1`)", &data).is_err());
    }
}
