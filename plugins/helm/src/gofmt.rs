//! Go's `fmt.Sprintf` for template values: verbs `%v %s %d %q %x %X %o %b
//! %c %t %f %F %e %E %g %G %T %%`, flags `- + # 0 space`, width and
//! precision, and Go's `%!verb(type=value)` for mismatches.

use std::fmt::Write as _;

use crate::value::{Value, format_float_g};

#[derive(Default, Clone, Copy)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    zero: bool,
    space: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// `fmt.Sprintf(format, args...)`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut next = 0usize;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                '0' => spec.zero = true,
                ' ' => spec.space = true,
                _ => break,
            }
            chars.next();
        }
        spec.width = number(&mut chars, args, &mut next);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.prec = Some(number(&mut chars, args, &mut next).unwrap_or(0));
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(next) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        next += 1;
        let body = format_one(verb, arg, spec);
        out.push_str(&pad(&body, spec, numeric(arg, verb)));
    }
    if next < args.len() {
        out.push_str("%!(EXTRA ");
        for (i, a) in args[next..].iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}={}", a.type_name(), a.to_go_string());
        }
        out.push(')');
    }
    out
}

fn number(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    args: &[Value],
    next: &mut usize,
) -> Option<usize> {
    if chars.peek() == Some(&'*') {
        chars.next();
        let v = args.get(*next).and_then(Value::as_int);
        *next += 1;
        return v.map(|v| v.max(0) as usize);
    }
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        chars.next();
        n = Some(
            n.unwrap_or(0)
                .saturating_mul(10)
                .saturating_add(d as usize)
                .min(1 << 20),
        );
    }
    n
}

fn numeric(v: &Value, verb: char) -> bool {
    matches!(v, Value::Int(_) | Value::Int64(_) | Value::Float(_)) && verb != 'T'
}

fn pad(body: &str, spec: Spec, numeric: bool) -> String {
    let Some(width) = spec.width else {
        return body.to_owned();
    };
    let len = body.chars().count();
    if len >= width {
        return body.to_owned();
    }
    let fill = width - len;
    if spec.minus {
        format!("{body}{}", " ".repeat(fill))
    } else if spec.zero && numeric {
        let (sign, digits) = match body.strip_prefix(['-', '+']) {
            Some(rest) => (&body[..1], rest),
            None => ("", body),
        };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else if spec.zero {
        format!("{}{body}", "0".repeat(fill))
    } else {
        format!("{}{body}", " ".repeat(fill))
    }
}

fn bad(verb: char, v: &Value) -> String {
    match v {
        Value::Nil => format!("%!{verb}(<nil>)"),
        other => format!("%!{verb}({}={})", other.type_name(), other.to_go_string()),
    }
}

/// Each of `items` formatted with `verb` (no width), joined by spaces: a
/// slice's or struct's elements as Go's `fmt` prints them.
fn each(verb: char, items: &[Value], spec: Spec) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|x| {
            format_one(
                verb,
                x,
                Spec {
                    width: None,
                    ..spec
                },
            )
        })
        .collect();
    parts.join(" ")
}

fn format_one(verb: char, v: &Value, spec: Spec) -> String {
    if verb == 'T' {
        return v.type_name().to_owned();
    }
    match v {
        Value::List(items) | Value::Strings(items) if verb != 'v' => {
            return format!("[{}]", each(verb, items, spec));
        }
        Value::Map(m) if verb != 'v' => {
            let parts: Vec<String> = m
                .borrow()
                .iter()
                .map(|(k, x)| {
                    format!(
                        "{}:{}",
                        format_one(verb, &Value::str(k), spec),
                        format_one(verb, x, spec)
                    )
                })
                .collect();
            return format!("map[{}]", parts.join(" "));
        }
        _ => {}
    }
    match (verb, v) {
        ('v', Value::Nil) => "<nil>".into(),
        ('v', Value::Float(f)) => float(*f, 'g', spec.prec, spec),
        ('v', Value::Int(i) | Value::Int64(i)) => int(*i, 10, spec),
        ('v', Value::Str(s)) => truncate(s, spec.prec),
        ('v', other) => other.to_go_string(),
        ('s', Value::Str(s)) => truncate(s, spec.prec),
        // A time.Time is a fmt.Stringer.
        ('s', Value::Time(t)) => truncate(&t.go_string(), spec.prec),
        ('q', Value::Time(t)) => quote(&t.go_string()),
        // The integer kinds as integers, every one a fmt.Stringer.
        ('d' | 'x' | 'X' | 'o' | 'b' | 'c' | 'U', Value::Go(o)) if o.as_int().is_some() => {
            format_one(verb, &Value::Int64(o.as_int().unwrap_or_default()), spec)
        }
        ('s', Value::Go(o)) => truncate(&o.go_string(), spec.prec),
        // A version's struct, field by field (Go's `&{1 2 3 ...}`) for
        // the verbs a Stringer does not answer.
        (verb, Value::Go(o)) if !matches!(verb, 'v' | 'q') => {
            let crate::goobj::GoObject::Semver {
                version,
                original,
                pointer,
            } = &**o
            else {
                return bad(verb, v);
            };
            let fields = [
                Value::Int64(version.major as i64),
                Value::Int64(version.minor as i64),
                Value::Int64(version.patch as i64),
                Value::str(&version.pre),
                Value::str(&version.build),
                Value::str(original),
            ];
            let fields = each(verb, &fields, spec);
            format!("{}{{{fields}}}", if *pointer { "&" } else { "" })
        }
        ('q', Value::Go(o)) => quote(&o.go_string()),
        ('s' | 'q', Value::Bytes(b)) => {
            let text = crate::gostr::from_bytes(b);
            if verb == 'q' {
                quote(&text)
            } else {
                truncate(&text, spec.prec)
            }
        }
        ('q', Value::Str(s)) => {
            if spec.sharp && !s.contains('`') {
                format!("`{s}`")
            } else {
                quote(s)
            }
        }
        ('q', Value::Int(i) | Value::Int64(i)) => {
            let c = u32::try_from(*i)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{fffd}');
            let q = quote(&c.to_string());
            format!("'{}'", &q[1..q.len() - 1].replace("\\\"", "\""))
        }
        ('x' | 'X', Value::Str(s)) => {
            let mut h = String::new();
            for &b in crate::gostr::to_bytes(s).iter() {
                let _ = if verb == 'x' {
                    write!(h, "{b:02x}")
                } else {
                    write!(h, "{b:02X}")
                };
            }
            h
        }
        ('d', Value::Int(i) | Value::Int64(i)) => int(*i, 10, spec),
        ('x', Value::Int(i) | Value::Int64(i)) => int(*i, 16, spec),
        ('X', Value::Int(i) | Value::Int64(i)) => int(*i, 16, spec).to_uppercase(),
        ('o', Value::Int(i) | Value::Int64(i)) => int(*i, 8, spec),
        ('b', Value::Int(i) | Value::Int64(i)) => int(*i, 2, spec),
        ('c', Value::Int(i) | Value::Int64(i)) => u32::try_from(*i)
            .ok()
            .and_then(char::from_u32)
            .unwrap_or('\u{fffd}')
            .to_string(),
        ('t', Value::Bool(b)) => b.to_string(),
        ('e' | 'E' | 'f' | 'F' | 'g' | 'G', Value::Float(f)) => float(*f, verb, spec.prec, spec),
        _ => bad(verb, v),
    }
}

fn truncate(s: &str, prec: Option<usize>) -> String {
    match prec {
        Some(p) => s.chars().take(p).collect(),
        None => s.to_owned(),
    }
}

fn int(i: i64, base: u32, spec: Spec) -> String {
    let mag = i.unsigned_abs();
    let digits = match base {
        16 => format!("{mag:x}"),
        8 => format!("{mag:o}"),
        2 => format!("{mag:b}"),
        _ => mag.to_string(),
    };
    let digits = match spec.prec {
        Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
        _ => digits,
    };
    let prefix = if spec.sharp {
        match base {
            16 => "0x",
            8 => "0",
            2 => "0b",
            _ => "",
        }
    } else {
        ""
    };
    let sign = if i < 0 {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    format!("{sign}{prefix}{digits}")
}

/// Go's exponent form: `e+06`.
fn go_exponent(rust: &str, upper: bool) -> String {
    let (m, e) = rust.split_once('e').unwrap_or((rust, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!(
        "{m}{}{}{:02}",
        if upper { 'E' } else { 'e' },
        if e < 0 { '-' } else { '+' },
        e.abs()
    )
}

fn float(f: f64, verb: char, prec: Option<usize>, spec: Spec) -> String {
    let body = if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 {
            "+Inf".to_owned()
        } else {
            "-Inf".to_owned()
        }
    } else {
        match verb {
            'f' | 'F' => format!("{:.*}", prec.unwrap_or(6), f),
            'e' | 'E' => go_exponent(&format!("{:.*e}", prec.unwrap_or(6), f), verb == 'E'),
            _ => match prec {
                None => format_float_g(f),
                Some(p) => {
                    let p = p.max(1);
                    let e = format!("{:.*e}", p - 1, f);
                    let exp: i32 = e.split_once('e').map_or(0, |(_, x)| x.parse().unwrap_or(0));
                    if exp < -4 || exp >= p as i32 {
                        let (m, _) = e.split_once('e').unwrap_or((&e, ""));
                        let m = if m.contains('.') {
                            m.trim_end_matches('0').trim_end_matches('.')
                        } else {
                            m
                        };
                        go_exponent(&format!("{m}e{exp}"), verb == 'G')
                    } else {
                        let s = format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, f);
                        if s.contains('.') {
                            s.trim_end_matches('0').trim_end_matches('.').to_owned()
                        } else {
                            s
                        }
                    }
                }
            },
        }
    };
    if f >= 0.0 && !f.is_nan() && !body.starts_with('+') {
        if spec.plus {
            return format!("+{body}");
        }
        if spec.space {
            return format!(" {body}");
        }
    }
    body
}

/// Private use characters, which Go's `strconv.IsPrint` says are not
/// printable.
fn private_use(c: char) -> bool {
    matches!(c as u32, 0xe000..=0xf8ff | 0xf_0000..=0xf_fffd | 0x10_0000..=0x10_fffd)
}

/// Go's `strconv.Quote`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    crate::gostr::for_each_rune(s, |rune| {
        let c = match rune {
            Ok(c) => c,
            Err(b) => {
                // A byte that is not UTF-8, as strconv.Quote writes it.
                let _ = write!(out, "\\x{b:02x}");
                return;
            }
        };
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            '\u{fffd}' => out.push('\u{fffd}'),
            c if c.is_control()
                || private_use(c)
                || (c as u32 >= 0x80 && c.is_whitespace() && c != '\u{a0}' && c != '\u{3000}') =>
            {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    });
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Map;

    // Expected strings from Go's fmt.Sprintf.
    #[test]
    fn verbs_as_go() {
        let s = |f: &str, a: Vec<Value>| sprintf(f, &a);
        assert_eq!(s("%d-%s", vec![Value::Int(5), Value::str("x")]), "5-x");
        assert_eq!(
            s(
                "%05d|%-4s|%4s",
                vec![Value::Int(-42), Value::str("a"), Value::str("b")]
            ),
            "-0042|a   |   b"
        );
        assert_eq!(s("%q", vec![Value::str("a\"b\n")]), "\"a\\\"b\\n\"");
        assert_eq!(
            s("%x %X", vec![Value::Int(255), Value::str("hi")]),
            "ff 6869"
        );
        assert_eq!(
            s(
                "%.2f %e %g",
                vec![
                    Value::Float(1.23456),
                    Value::Float(1000000.0),
                    Value::Float(1e21)
                ]
            ),
            "1.23 1.000000e+06 1e+21"
        );
        assert_eq!(s("%d", vec![Value::str("x")]), "%!d(string=x)");
        assert_eq!(s("%s", vec![Value::Int(3)]), "%!s(int=3)");
        assert_eq!(s("%d %d", vec![Value::Int(3)]), "3 %!d(MISSING)");
        assert_eq!(
            s("%d", vec![Value::Int(3), Value::str("a")]),
            "3%!(EXTRA string=a)"
        );
        assert_eq!(s("%v", vec![Value::Float(1000000.0)]), "1e+06");
        assert_eq!(
            s("%t %v", vec![Value::Bool(true), Value::Nil]),
            "true <nil>"
        );
        let mut m = Map::new();
        m.insert("a".into(), Value::Float(1.0));
        assert_eq!(s("%v", vec![Value::map(m)]), "map[a:1]");
        assert_eq!(
            s(
                "%s",
                vec![Value::list(vec![Value::str("a"), Value::str("b")])]
            ),
            "[a b]"
        );
        assert_eq!(
            s("%5.1f|%T", vec![Value::Float(2.25), Value::Float(1.0)]),
            "  2.2|float64"
        );
        assert_eq!(s("%c%%", vec![Value::Int(65)]), "A%");
    }
}
