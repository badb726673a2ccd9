//! Rego v0 as OPA reads it, where regorus reads it differently: two
//! line-preserving rewrites of a template's Rego before regorus parses it
//! (line numbers in errors stay the file's).
//!
//! - A rule with several bodies (`head { … } { … }`, OPA v0's "or"):
//!   regorus refuses the second body ("else cannot be used with set
//!   rules"). The line `} {` becomes `} head {`: the same rule again.
//! - A line that opens with `(` after a complete expression: OPA ends the
//!   expression at the newline, regorus reads a call
//!   (`input.parameters.x` then `(a - b) >= …` became "could not find
//!   function input.parameters.x"). The line gets a leading `;`.

/// Applies both rewrites.
pub fn rewrite(rego: &str) -> String {
    let mut out = Vec::new();
    let mut depth: i64 = 0;
    let mut head: Option<String> = None;
    let mut previous = String::new();
    for line in rego.lines() {
        let code = strip_comment(line);
        let trimmed = code.trim();
        let mut text = line.to_owned();
        if depth == 1 && trimmed == "} {" {
            if let Some(head) = &head {
                let indent = &line[..line.len() - line.trim_start().len()];
                text = format!("{indent}}} {head} {{");
            }
        } else if depth > 0
            && trimmed.starts_with('(')
            && previous.chars().last().is_some_and(|c| {
                c.is_alphanumeric() || c == '_' || c == ']' || c == ')' || c == '"'
            })
        {
            let indent = &line[..line.len() - line.trim_start().len()];
            text = format!("{indent};{}", line.trim_start());
        }
        if depth == 0 && trimmed.ends_with('{') {
            head = Some(trimmed.trim_end_matches('{').trim_end().to_owned());
        }
        depth += braces(code);
        if !trimmed.is_empty() {
            previous = trimmed.to_owned();
        }
        out.push(text);
    }
    let mut joined = out.join("\n");
    if rego.ends_with('\n') {
        joined.push('\n');
    }
    joined
}

/// The line without its `#` comment (a `#` inside a string is kept).
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            '`' if !in_string => return line, // raw strings: leave the line alone
            '#' if !in_string => return &line[..i],
            _ => {}
        }
    }
    line
}

/// `{` minus `}` outside strings.
fn braces(code: &str) -> i64 {
    let mut in_string = false;
    let mut escaped = false;
    let mut n = 0;
    for c in code.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            '{' if !in_string => n += 1,
            '}' if !in_string => n -= 1,
            _ => {}
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(rego: &str, input: &str) -> regorus::Value {
        let mut engine = regorus::Engine::new();
        engine.set_rego_v0(true);
        engine.add_policy("t.rego".into(), rewrite(rego)).unwrap();
        engine.set_input(regorus::Value::from_json_str(input).unwrap());
        engine.eval_rule("data.t.violation".into()).unwrap()
    }

    #[test]
    fn several_bodies_are_several_rules() {
        let rego = "package t\n\nviolation[{\"msg\": msg}] {\n  input.a\n  msg := \"a\"\n} {\n  input.b # {\n  msg := \"b\"\n}\n";
        assert_eq!(rewrite(rego).lines().count(), rego.lines().count());
        assert_eq!(eval(rego, r#"{"b": true}"#).to_string(), r#"[{"msg":"b"}]"#);
        assert_eq!(eval(rego, r#"{"a": true}"#).to_string(), r#"[{"msg":"a"}]"#);
    }

    #[test]
    fn a_parenthesised_line_is_a_new_expression() {
        let rego = "package t\n\nviolation[{\"msg\": \"x\"}] {\n  input.min\n  (input.max - input.low) >= input.min\n}\n";
        assert_eq!(
            eval(rego, r#"{"min": 2, "max": 5, "low": 1}"#).to_string(),
            r#"[{"msg":"x"}]"#
        );
        assert_eq!(
            eval(rego, r#"{"min": 5, "max": 5, "low": 1}"#).to_string(),
            "[]"
        );
        // A call spread over lines is left alone.
        let call = "package t\n\nviolation[{\"msg\": m}] {\n  m := concat(\"\",\n    [\"a\", (\"b\")])\n}\n";
        assert_eq!(rewrite(call), call);
    }
}
