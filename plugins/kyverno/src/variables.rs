//! Variables: `{{ EXPRESSION }}` in a policy's strings, JMESPath over the
//! review's context (`request.object`, `request.operation`, `element`, …).
//! A string that is one variable becomes the value itself (any JSON type);
//! a variable inside text is written into it. `\{{` is a literal `{{`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The JMESPath runtime: the standard functions (Kyverno's own are added
/// as the engine grows).
fn runtime() -> &'static jmespath::Runtime {
    static RUNTIME: OnceLock<jmespath::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let mut runtime = jmespath::Runtime::new();
        runtime.register_builtin_functions();
        crate::functions::register_all(&mut runtime);
        runtime
    })
}

/// How many compiled expressions a review keeps (each variable of each
/// rule is searched on every object), and the longest one kept: a variable
/// holding another one's value (`{{ f('{{ a }}') }}`) differs per object,
/// and such expressions must not fill the guest's memory.
const MAX_CACHED: usize = 2048;
const MAX_CACHED_EXPRESSION: usize = 256;

/// `expression` compiled, from the review's cache when it was before.
fn compiled(expression: &str) -> Result<jmespath::Expression<'static>, String> {
    thread_local! {
        static CACHE: RefCell<HashMap<String, Result<jmespath::Expression<'static>, String>>> =
            RefCell::new(HashMap::new());
    }
    if let Some(found) = CACHE.with(|cache| cache.borrow().get(expression).cloned()) {
        return found;
    }
    let result = runtime().compile(expression).map_err(|e| e.to_string());
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() < MAX_CACHED && expression.len() <= MAX_CACHED_EXPRESSION {
            cache.insert(expression.to_owned(), result.clone());
        }
    });
    result
}

/// The longest JMESPath expression read, in bytes.
pub const MAX_EXPRESSION: usize = 8 << 10;

/// The most operators that nest (`!`, `(`, `[`, `{`) one expression may
/// hold: the jmespath crate's parser recurses on each, without a bound of
/// its own.
pub const MAX_NESTING_OPERATORS: usize = 256;

/// Evaluates one JMESPath expression over `context`; a plain path to a
/// field that is not there is an error.
pub fn query(expression: &str, context: &Value) -> Result<Value, String> {
    let value = search(expression, context)?;
    // A plain path to a field that is not there is Kyverno's "Unknown key"
    // error, not a null a condition could read as "not in the list": a
    // policy that reads a field an object omits never passes by it.
    if value.is_null() && is_plain_path(expression) {
        return Err(format!(
            "variable {{{{{}}}}}: not found (the object has no such field; write `{} || ''` for a default)",
            expression.trim(),
            expression.trim()
        ));
    }
    Ok(value)
}

/// Evaluates one JMESPath expression over `context`, a missing field
/// being null (a `foreach` list that is not there has no elements).
pub fn search(expression: &str, context: &Value) -> Result<Value, String> {
    if expression.len() > MAX_EXPRESSION {
        return Err(format!(
            "variable of {} bytes, over the limit of {MAX_EXPRESSION}",
            expression.len()
        ));
    }
    let nesting = expression
        .bytes()
        .filter(|b| matches!(b, b'!' | b'(' | b'[' | b'{'))
        .count();
    if nesting > MAX_NESTING_OPERATORS {
        return Err(format!(
            "variable {{{{{}…}}}} nests {nesting} operators, over the limit of {MAX_NESTING_OPERATORS}",
            expression.chars().take(40).collect::<String>()
        ));
    }
    if let Some(found) = field_path(expression.trim(), context) {
        let value = found.cloned().unwrap_or(Value::Null);
        crate::budget::charge(crate::budget::weight(&value, crate::budget::MAX_STEPS) + 1)?;
        return Ok(value);
    }
    let compiled = compiled(expression.trim())
        .map_err(|e| format!("invalid variable {{{{{expression}}}}}: {e}"))?;
    // The context is copied into JMESPath's values for each search:
    // charged to the rule.
    crate::budget::charge(crate::budget::weight(context, crate::budget::MAX_STEPS) + 1)?;
    let found = compiled
        .search(context)
        .map_err(|e| format!("variable {{{{{expression}}}}}: {e}"))?;
    let value =
        serde_json::to_value(&*found).map_err(|e| format!("variable {{{{{expression}}}}}: {e}"))?;
    // So is what it made (a projection can multiply its input).
    crate::budget::charge(crate::budget::weight(&value, crate::budget::MAX_STEPS))?;
    Ok(value)
}

/// `a.b.c` read directly, as JMESPath reads it (a field of a non-object
/// is null), without copying the context into JMESPath's values: `None`
/// when the expression is anything but identifiers joined by dots, else
/// `Some(None)` for null.
fn field_path<'v>(expression: &str, context: &'v Value) -> Option<Option<&'v Value>> {
    let identifier = |part: &str| {
        let mut chars = part.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if expression.is_empty() || !expression.split('.').all(identifier) {
        return None;
    }
    let mut here = Some(context);
    for part in expression.split('.') {
        here = here
            .and_then(|value| value.as_object())
            .and_then(|map| map.get(part));
    }
    Some(here)
}

/// `a.b."c-d".e`: identifiers and quoted names joined by dots, nothing
/// else (no functions, projections, defaults or literals).
fn is_plain_path(expression: &str) -> bool {
    let expression = expression.trim();
    !expression.is_empty()
        && expression.split('.').all(|part| {
            let part = part.trim();
            (!part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                || (part.len() >= 2 && part.starts_with('"') && part.ends_with('"'))
        })
}

/// Where the variables of a string are: `(start, end)` byte ranges of
/// each `{{ … }}` not preceded by a backslash, braces inside allowed one
/// level deep (`{{ {a: b} }}`).
fn spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'{' && bytes[i + 1] == b'{' && (i == 0 || bytes[i - 1] != b'\\') {
            let mut j = i + 2;
            let mut depth = 0;
            let mut end = None;
            while j < bytes.len() {
                match bytes[j] {
                    b'{' if depth == 0 => depth = 1,
                    b'{' => break,
                    b'}' if depth == 1 => depth = 0,
                    b'}' if j + 1 < bytes.len() && bytes[j + 1] == b'}' => {
                        end = Some(j + 2);
                        break;
                    }
                    b'}' => break,
                    _ => {}
                }
                j += 1;
            }
            if let Some(end) = end {
                found.push((i, end));
                i = end;
                continue;
            }
        }
        i += 1;
    }
    found
}

/// Whether `text` holds a variable.
pub fn has_variables(text: &str) -> bool {
    !spans(text).is_empty()
}

/// `text` with its variables replaced. `{{@}}` (the current value, in
/// patterns) is left for the pattern to read.
pub fn substitute_str(text: &str, context: &Value) -> Result<Value, String> {
    // Inner variables first (`{{ f('{{ a }}') }}`): each pass replaces the
    // innermost ones, as Kyverno does, up to a bounded depth.
    let mut text = std::borrow::Cow::Borrowed(text);
    for _ in 0..MAX_NESTING {
        match substitute_once(&text, context)? {
            Value::String(next) if next != *text && has_variables(&next) => text = next.into(),
            // Escaped braces become literal only at the end.
            Value::String(last) => return Ok(Value::String(last.replace("\\{{", "{{"))),
            other => return Ok(other),
        }
    }
    Err(format!(
        "variables nested more than {MAX_NESTING} deep in {text:?}"
    ))
}

/// `{{@}}` (the value at the pattern's own path) is not read yet: refused,
/// never left in a pattern as text an object could carry.
const AT_UNSUPPORTED: &str = "the variable {{@}} is not supported yet by the kyverno plugin";

/// How deep variables may nest in one string.
const MAX_NESTING: usize = 8;

fn substitute_once(text: &str, context: &Value) -> Result<Value, String> {
    let found = spans(text);
    if found.is_empty() {
        return Ok(Value::String(text.to_owned()));
    }
    if found.len() == 1 && found[0] == (0, text.len()) {
        let expression = &text[2..text.len() - 2];
        if expression.trim() == "@" {
            return Err(AT_UNSUPPORTED.into());
        }
        return query(expression, context);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end) in found {
        out.push_str(&text[last..start]);
        let expression = &text[start + 2..end - 2];
        if expression.trim() == "@" {
            return Err(AT_UNSUPPORTED.into());
        } else {
            match query(expression, context)? {
                Value::String(s) => out.push_str(&s),
                Value::Null => out.push_str("null"),
                other => out.push_str(&other.to_string()),
            }
        }
        last = end;
    }
    out.push_str(&text[last..]);
    Ok(Value::String(out))
}

/// Every string of `value` (keys included) with its variables replaced.
pub fn substitute(value: &Value, context: &Value) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => substitute_str(text, context)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute(item, context))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                let key = match substitute_str(key, context)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, substitute(item, context)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn field_paths_read_directly_as_jmespath_reads_them() {
        let context = json!({"a": {"b": {"c": [1, 2], "n": null, "s": "x"}, "_u9": true}, "k": 3});
        for expression in [
            "a", "a.b", "a.b.c", "a.b.n", "a.b.s", "a.b.s.t", "a._u9", "k.x", "zzz", "a.zzz.b",
        ] {
            let direct = field_path(expression, &context).expect(expression).cloned();
            let by_jmespath = compiled(expression).unwrap().search(&context).unwrap();
            let by_jmespath = serde_json::to_value(&*by_jmespath).unwrap();
            assert_eq!(direct.unwrap_or(Value::Null), by_jmespath, "{expression}");
        }
        // Anything else goes to JMESPath.
        for expression in [
            "a.b.c[0]", "a.\"b\"", "9a", "a..b", "a | b", "", "a.b || k", "a-b",
        ] {
            assert!(field_path(expression, &context).is_none(), "{expression}");
        }
    }

    #[test]
    fn variables_are_replaced_as_kyverno_replaces_them() {
        let context = json!({"request": {"object": {"metadata": {"name": "web", "labels": {"app": "x"}}}, "operation": "CREATE"}});
        assert_eq!(
            substitute_str("{{ request.operation }}", &context).unwrap(),
            json!("CREATE")
        );
        assert_eq!(
            substitute_str("{{request.object.metadata.labels}}", &context).unwrap(),
            json!({"app": "x"})
        );
        assert_eq!(
            substitute_str(
                "pod {{ request.object.metadata.name }} is {{request.operation}}",
                &context
            )
            .unwrap(),
            json!("pod web is CREATE")
        );
        assert_eq!(
            substitute_str("\\{{ literal }}", &context).unwrap(),
            json!("{{ literal }}")
        );
        assert_eq!(
            substitute_str("{{ request.object.missing || 'none' }}", &context).unwrap(),
            json!("none")
        );
        assert!(substitute_str("{{@}}", &context).is_err());
        assert!(query(&"!".repeat(100_000), &context).is_err());
        assert!(query(&format!("{}a", "!".repeat(300)), &context).is_err());
        assert!(substitute_str("{{ request.( }}", &context).is_err());
        assert_eq!(
            substitute_str("{{ {n: request.operation} }}", &context).unwrap(),
            json!({"n": "CREATE"})
        );
    }
}
