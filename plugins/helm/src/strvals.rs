//! `--set` / `--set-string` expressions (Helm's strvals syntax):
//! `a.b=c,d[0].e=f,list={x,y}`, backslash escapes, typed values (`true`,
//! `false`, `null`, integers as int64) unless forced to strings.

use crate::value::{Map, Value};

/// Largest list index `--set` may create (Helm's limit).
pub const MAX_INDEX: usize = 65536;
/// Deepest key nesting (Helm's limit).
pub const MAX_NESTING: usize = 30;

/// A `--set` expression that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed parsing --set data: {0}")]
pub struct SetError(pub String);

/// Go's `strconv.ParseInt(s, 0, 64)`.
pub fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, b) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let lower = b.to_ascii_lowercase();
    let v = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(&h.replace('_', ""), 16).ok()?
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(&o.replace('_', ""), 8).ok()?
    } else if let Some(x) = lower.strip_prefix("0b") {
        i64::from_str_radix(&x.replace('_', ""), 2).ok()?
    } else if lower.len() > 1 && lower.starts_with('0') {
        i64::from_str_radix(&lower[1..], 8).ok()?
    } else if !lower.is_empty() && lower.bytes().all(|c| c.is_ascii_digit()) {
        lower.parse().ok()?
    } else {
        return None;
    };
    Some(if neg { -v } else { v })
}

fn typed(raw: &str, string: bool) -> Value {
    if string {
        return Value::str(raw);
    }
    match raw.to_ascii_lowercase().as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Nil,
        _ => {}
    }
    if raw == "0" {
        return Value::Int64(0);
    }
    let digits = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    if !raw.starts_with('0')
        && !digits.is_empty()
        && digits.bytes().all(|c| c.is_ascii_digit())
        && let Ok(i) = raw.parse::<i64>()
    {
        return Value::Int64(i);
    }
    Value::str(raw)
}

enum Seg {
    Key(String),
    Index(usize),
}

/// Applies one expression to `values`.
pub fn apply(expr: &str, values: &mut Map, string: bool) -> Result<(), SetError> {
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // Key path.
        let mut segs = Vec::new();
        let mut cur = String::new();
        let mut has_eq = false;
        while i < chars.len() {
            match chars[i] {
                '\\' if i + 1 < chars.len() => {
                    cur.push(chars[i + 1]);
                    i += 2;
                    continue;
                }
                '.' => {
                    segs.push(Seg::Key(std::mem::take(&mut cur)));
                    if segs.len() > MAX_NESTING {
                        return Err(SetError(format!(
                            "value name nested level is greater than maximum supported nested level of {MAX_NESTING}"
                        )));
                    }
                }
                '[' => {
                    if !cur.is_empty() {
                        segs.push(Seg::Key(std::mem::take(&mut cur)));
                    }
                    let end = chars[i..].iter().position(|&c| c == ']').map(|p| p + i);
                    let Some(end) = end else {
                        return Err(SetError(format!(
                            "key {:?} has no value",
                            String::from_iter(&chars[..])
                        )));
                    };
                    let idx: String = chars[i + 1..end].iter().collect();
                    let n: i64 = idx.parse().map_err(|_| {
                        SetError(format!(
                            "error parsing index: strconv.Atoi: parsing {idx:?}: invalid syntax"
                        ))
                    })?;
                    if n < 0 {
                        return Err(SetError(format!("negative {n} index not allowed")));
                    }
                    if n as usize > MAX_INDEX {
                        return Err(SetError(format!(
                            "index of {n} is greater than maximum supported index of {MAX_INDEX}"
                        )));
                    }
                    segs.push(Seg::Index(n as usize));
                    i = end + 1;
                    if i < chars.len() && chars[i] == '.' {
                        i += 1;
                    }
                    continue;
                }
                '=' => {
                    has_eq = true;
                    i += 1;
                    break;
                }
                ',' => {
                    return Err(SetError(format!(
                        "key {cur:?} has no value (cannot end with ,)"
                    )));
                }
                c => cur.push(c),
            }
            i += 1;
        }
        if !cur.is_empty() || segs.is_empty() {
            segs.push(Seg::Key(cur));
        }
        if !has_eq {
            let name = match segs.last() {
                Some(Seg::Key(k)) => k.clone(),
                _ => String::new(),
            };
            return Err(SetError(format!("key {name:?} has no value")));
        }
        // Value.
        let value = if i < chars.len() && chars[i] == '{' {
            i += 1;
            let mut items = Vec::new();
            let mut item = String::new();
            let mut closed = false;
            while i < chars.len() {
                match chars[i] {
                    '\\' if i + 1 < chars.len() => {
                        item.push(chars[i + 1]);
                        i += 1;
                    }
                    ',' => items.push(typed(&std::mem::take(&mut item), string)),
                    '}' => {
                        items.push(typed(&std::mem::take(&mut item), string));
                        closed = true;
                        i += 1;
                        break;
                    }
                    c => item.push(c),
                }
                i += 1;
            }
            if !closed {
                return Err(SetError("list must terminate with '}'".into()));
            }
            if i < chars.len() && chars[i] == ',' {
                i += 1;
            }
            Value::list(items)
        } else {
            let mut raw = String::new();
            while i < chars.len() {
                match chars[i] {
                    '\\' if i + 1 < chars.len() => {
                        raw.push(chars[i + 1]);
                        i += 1;
                    }
                    ',' => {
                        i += 1;
                        break;
                    }
                    c => raw.push(c),
                }
                i += 1;
            }
            typed(&raw, string)
        };
        set_path(values, &segs, value);
    }
    Ok(())
}

fn set_path(map: &mut Map, segs: &[Seg], value: Value) {
    let Some(Seg::Key(k)) = segs.first() else {
        return;
    };
    if segs.len() == 1 {
        map.insert(k.clone(), value);
        return;
    }
    let existing = map.remove(k).unwrap_or_default();
    map.insert(k.clone(), set_in(existing, &segs[1..], value));
}

fn set_in(cur: Value, segs: &[Seg], value: Value) -> Value {
    let Some(seg) = segs.first() else {
        return value;
    };
    match seg {
        Seg::Key(_) => {
            let mut m = match cur {
                Value::Map(m) => m.borrow().clone(),
                _ => Map::new(),
            };
            set_path(&mut m, segs, value);
            Value::map(m)
        }
        Seg::Index(n) => {
            let mut l = match cur {
                Value::List(l) => (*l).clone(),
                _ => Vec::new(),
            };
            if l.len() <= *n {
                l.resize(*n + 1, Value::Nil);
            }
            let old = std::mem::take(&mut l[*n]);
            l[*n] = set_in(old, &segs[1..], value);
            Value::list(l)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::to_json;

    fn run(exprs: &[&str]) -> String {
        let mut m = Map::new();
        for e in exprs {
            apply(e, &mut m, false).unwrap();
        }
        to_json(&Value::map(m))
    }

    // Expected JSON from Helm's strvals.Parse (v4.2.3).
    #[test]
    fn set_syntax_as_helm() {
        assert_eq!(run(&["a.b=1,c=true"]), r#"{"a":{"b":1},"c":true}"#);
        assert_eq!(run(&["l={x,y,3}"]), r#"{"l":["x","y",3]}"#);
        assert_eq!(run(&["a[1].b=x"]), r#"{"a":[null,{"b":"x"}]}"#);
        assert_eq!(run(&[r"a\.b=c\,d"]), r#"{"a.b":"c,d"}"#);
        assert_eq!(
            run(&["v=017", "w=", "n=null"]),
            r#"{"n":null,"v":"017","w":""}"#
        );
    }
}
