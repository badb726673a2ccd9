//! The emitter as it was before [`crate::emit`] walked any [`crate::Tree`]:
//! a frozen copy, kept only as the oracle of differential tests (this
//! crate's and the helm plugin's, through the `reference` feature). Do not
//! change it: it is what the fast emitter must match byte for byte.

#![allow(dead_code)]

use std::cmp::Ordering;

use serde_json::{Map, Value};

/// Lines are folded at a space once they are longer than this (go-yaml's
/// `best_width`).
const WIDTH: usize = 80;
/// Indentation step (go-yaml's `best_indent`).
const INDENT: usize = 2;

/// The objects as one YAML stream, as `kustomize build` prints them.
pub fn stream(objects: &[Value]) -> String {
    let mut out = String::new();
    for (index, object) in objects.iter().enumerate() {
        if index > 0 {
            out.push_str("---\n");
        }
        out.push_str(&document(object));
    }
    out
}

/// One value as a YAML document (ending with a newline).
pub fn document(value: &Value) -> String {
    let mut emitter = Emitter::default();
    match value {
        Value::Object(map) if !map.is_empty() => emitter.map(map, 0, false),
        Value::Array(list) if !list.is_empty() => emitter.seq(list, 0, false),
        other => emitter.scalar(other, INDENT, false),
    }
    // A literal block ends with its own line break.
    if emitter.column > 0 || emitter.out.is_empty() {
        emitter.out.push('\n');
    }
    emitter.out
}

#[derive(Default)]
struct Emitter {
    out: String,
    /// Characters on the current line.
    column: usize,
}

impl Emitter {
    fn push(&mut self, c: char) {
        self.out.push(c);
        if c == '\n' {
            self.column = 0;
        } else {
            self.column += 1;
        }
    }

    fn push_str(&mut self, s: &str) {
        for c in s.chars() {
            self.push(c);
        }
    }

    /// Starts a new line at `indent` (go-yaml's `write_indent`).
    fn indent(&mut self, indent: usize) {
        if self.column > 0 {
            self.push('\n');
        }
        while self.column < indent {
            self.push(' ');
        }
    }

    /// A block mapping at `indent`; `inline`: its first key goes on the
    /// current line (after a sequence's `- `).
    fn map(&mut self, map: &Map<String, Value>, indent: usize, inline: bool) {
        let mut keys: Vec<&String> = map.keys().collect();
        sort_keys(&mut keys);
        for (index, key) in keys.into_iter().enumerate() {
            if index > 0 || !inline {
                self.indent(indent);
            }
            self.string(key, indent + INDENT, true);
            self.push(':');
            match &map[key] {
                Value::Object(child) if !child.is_empty() => {
                    self.map(child, indent + INDENT, false);
                }
                // Sequences are not indented under their key.
                Value::Array(child) if !child.is_empty() => self.seq(child, indent, false),
                value => {
                    self.push(' ');
                    self.scalar(value, indent + INDENT, false);
                }
            }
        }
    }

    /// A block sequence at `indent`.
    fn seq(&mut self, list: &[Value], indent: usize, inline: bool) {
        for (index, item) in list.iter().enumerate() {
            if index > 0 || !inline {
                self.indent(indent);
            }
            self.push_str("- ");
            match item {
                Value::Object(child) if !child.is_empty() => self.map(child, indent + INDENT, true),
                Value::Array(child) if !child.is_empty() => self.seq(child, indent + INDENT, true),
                value => self.scalar(value, indent + INDENT, false),
            }
        }
    }

    /// A scalar (or an empty collection, in flow style); `indent` is where
    /// continuation lines start.
    fn scalar(&mut self, value: &Value, indent: usize, key: bool) {
        match value {
            Value::Null => self.push_str("null"),
            Value::Bool(b) => self.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => self.push_str(&number(n)),
            Value::String(s) => self.string(s, indent, key),
            Value::Array(_) => self.push_str("[]"),
            Value::Object(_) => self.push_str("{}"),
        }
    }

    fn string(&mut self, s: &str, indent: usize, key: bool) {
        match style(s, key) {
            Style::Plain => self.plain(s, indent, !key),
            Style::Single => self.single_quoted(s, indent, !key),
            Style::Double => self.double_quoted(s, indent, !key),
            Style::Literal => self.literal(s, indent),
        }
    }

    /// Whether a space at char `index` of `chars` becomes a line break.
    fn folds(&self, chars: &[char], index: usize, breaks: bool, after_space: bool) -> bool {
        breaks && !after_space && self.column > WIDTH && chars.get(index + 1) != Some(&' ')
    }

    fn plain(&mut self, s: &str, indent: usize, breaks: bool) {
        let chars: Vec<char> = s.chars().collect();
        let mut after_space = false;
        for (index, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if self.folds(&chars, index, breaks, after_space) {
                    self.indent(indent);
                } else {
                    self.push(c);
                }
                after_space = true;
            } else {
                self.push(c);
                after_space = false;
            }
        }
    }

    fn single_quoted(&mut self, s: &str, indent: usize, breaks: bool) {
        let chars: Vec<char> = s.chars().collect();
        self.push('\'');
        let mut after_space = false;
        for (index, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if index > 0
                    && index + 1 < chars.len()
                    && self.folds(&chars, index, breaks, after_space)
                {
                    self.indent(indent);
                } else {
                    self.push(c);
                }
                after_space = true;
            } else {
                self.push(c);
                if c == '\'' {
                    self.push('\'');
                }
                after_space = false;
            }
        }
        self.push('\'');
    }

    fn double_quoted(&mut self, s: &str, indent: usize, breaks: bool) {
        let chars: Vec<char> = s.chars().collect();
        self.push('"');
        let mut after_space = false;
        for (index, &c) in chars.iter().enumerate() {
            if !printable(c) || c == '\u{feff}' || is_break(c) || c == '"' || c == '\\' {
                self.push('\\');
                match c {
                    '\0' => self.push('0'),
                    '\u{7}' => self.push('a'),
                    '\u{8}' => self.push('b'),
                    '\t' => self.push('t'),
                    '\n' => self.push('n'),
                    '\u{b}' => self.push('v'),
                    '\u{c}' => self.push('f'),
                    '\r' => self.push('r'),
                    '\u{1b}' => self.push('e'),
                    '"' => self.push('"'),
                    '\\' => self.push('\\'),
                    '\u{85}' => self.push('N'),
                    '\u{a0}' => self.push('_'),
                    '\u{2028}' => self.push('L'),
                    '\u{2029}' => self.push('P'),
                    c if (c as u32) <= 0xff => self.push_str(&format!("x{:02X}", c as u32)),
                    c if (c as u32) <= 0xffff => self.push_str(&format!("u{:04X}", c as u32)),
                    c => self.push_str(&format!("U{:08X}", c as u32)),
                }
                after_space = false;
            } else if c == ' ' {
                if index > 0
                    && index + 1 < chars.len()
                    && breaks
                    && !after_space
                    && self.column > WIDTH
                {
                    self.indent(indent);
                    if chars.get(index + 1) == Some(&' ') {
                        self.push('\\');
                    }
                } else {
                    self.push(c);
                }
                after_space = true;
            } else {
                self.push(c);
                after_space = false;
            }
        }
        self.push('"');
    }

    fn literal(&mut self, s: &str, indent: usize) {
        self.push('|');
        let first = s.chars().next();
        if first.is_some_and(|c| c == ' ' || is_break(c)) {
            self.push_str(&INDENT.to_string());
        }
        let mut tail = s.chars().rev();
        let chomp = match (tail.next(), tail.next()) {
            (Some(last), _) if !is_break(last) => "-",
            (Some(_), None) => "+",
            (Some(_), Some(before)) if is_break(before) => "+",
            (Some(_), Some(_)) => "",
            (None, _) => "-",
        };
        self.push_str(chomp);
        self.push('\n');
        let mut at_break = true;
        for c in s.chars() {
            if is_break(c) {
                // go-yaml writes `\n` as a line break and any other break
                // character as itself.
                self.push(c);
                self.column = 0;
                at_break = true;
            } else {
                if at_break {
                    self.indent(indent);
                    at_break = false;
                }
                self.push(c);
            }
        }
    }
}

/// How a string is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// go-yaml v2's choice: the encoder asks for a literal block (multi-line),
/// plain (reads back as the same string) or double quotes; the emitter then
/// falls back to single or double quotes where the text does not allow
/// the style asked for.
fn style(s: &str, key: bool) -> Style {
    let wanted = if s.contains('\n') {
        Style::Literal
    } else if resolves_to_string(s) && !base60_float(s) {
        Style::Plain
    } else {
        Style::Double
    };
    let allowed = analyze(s);
    match wanted {
        Style::Literal if !allowed.block || key => Style::Double,
        Style::Plain if !allowed.plain => {
            if allowed.single {
                Style::Single
            } else {
                Style::Double
            }
        }
        other => other,
    }
}

/// What go-yaml's `analyze_scalar` allows for a text (block context).
struct Allowed {
    plain: bool,
    single: bool,
    block: bool,
}

fn printable(c: char) -> bool {
    let c = c as u32;
    c == 0x0a
        || (0x20..=0x7e).contains(&c)
        || (0xa0..=0xd7ff).contains(&c)
        || ((0xe000..=0xfffd).contains(&c) && c != 0xfeff)
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn analyze(s: &str) -> Allowed {
    if s.is_empty() {
        return Allowed {
            plain: true,
            single: true,
            block: false,
        };
    }
    let chars: Vec<char> = s.chars().collect();
    let mut indicators = s.starts_with("---") || s.starts_with("...");
    let (mut leading_space, mut leading_break) = (false, false);
    let (mut trailing_space, mut trailing_break) = (false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let (mut line_breaks, mut special) = (false, false);
    let mut preceded_by_whitespace = true;
    for (i, &c) in chars.iter().enumerate() {
        let last = i + 1 == chars.len();
        let followed_by_whitespace = chars.get(i + 1).is_none_or(|&n| is_blank(n));
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => indicators = true,
                '?' | ':' | '-' if followed_by_whitespace => indicators = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_whitespace => indicators = true,
                '#' if preceded_by_whitespace => indicators = true,
                _ => {}
            }
        }
        if !printable(c) {
            special = true;
        }
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            line_breaks = true;
            leading_break |= i == 0;
            trailing_break |= last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blank(c) || is_break(c);
    }
    let mut allowed = Allowed {
        plain: true,
        single: true,
        block: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        allowed.plain = false;
    }
    if trailing_space {
        allowed.block = false;
    }
    if break_space {
        allowed.plain = false;
        allowed.single = false;
    }
    if space_break || special {
        allowed.plain = false;
        allowed.single = false;
        allowed.block = false;
    }
    if line_breaks || indicators {
        allowed.plain = false;
    }
    allowed
}

/// Whether go-yaml v2 reads the plain text back as a string (and not as a
/// YAML 1.1 bool, null, number or timestamp).
fn resolves_to_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no",
        "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null",
        "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF",
    ];
    if SPECIAL.contains(&s) {
        return false;
    }
    match s.as_bytes()[0] {
        b'.' => !go_parse_float(s),
        b'+' | b'-' | b'0'..=b'9' => {
            if timestamp_rfc3339(s).is_some() {
                return false;
            }
            let plain = s.replace('_', "");
            !(go_parse_int(&plain) || go_yaml_float(&plain) || binary_int(&plain))
        }
        _ => true,
    }
}

/// `strconv.ParseInt(s, 0, 64)` or `ParseUint` would succeed (the range is
/// not checked: an out-of-range number still is not a string).
fn go_parse_int(s: &str) -> bool {
    go_int_parts(s).is_some_and(|(_, digits, radix)| {
        u128::from_str_radix(&digits, radix).is_ok_and(|n| n <= u64::MAX as u128)
    })
}

/// An integer as Go's `strconv.ParseInt(s, 0, 64)` reads it: an optional
/// sign, then `0x`, `0o`, `0b`, a leading `0` (octal) or decimal. Returns
/// whether it is negative, its digits (lower case) and their radix; the
/// range is the caller's to check.
pub fn go_int_parts(s: &str) -> Option<(bool, String, u32)> {
    let negative = s.starts_with('-');
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = unsigned.to_ascii_lowercase();
    let (digits, radix) = if let Some(hex) = lower.strip_prefix("0x") {
        (hex, 16)
    } else if let Some(octal) = lower.strip_prefix("0o") {
        (octal, 8)
    } else if let Some(binary) = lower.strip_prefix("0b") {
        (binary, 2)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (&lower[1..], 8)
    } else {
        (lower.as_str(), 10)
    };
    (!digits.is_empty() && digits.chars().all(|c| c.is_digit(radix)))
        .then(|| (negative, digits.to_owned(), radix))
}

/// `-0b101` and `0b101` (go-yaml's extra binary rule).
fn binary_int(s: &str) -> bool {
    let digits = s
        .strip_prefix("0b")
        .or_else(|| s.strip_prefix("-0b"))
        .unwrap_or_default();
    !digits.is_empty() && digits.chars().all(|c| c == '0' || c == '1')
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// [`yaml_float`] and `strconv.ParseFloat(s, 64)` succeeds: Go refuses a
/// number that overflows to an infinity (`1e400` is a string), and accepts
/// one that underflows to zero (`1e-400` is a float).
fn go_yaml_float(s: &str) -> bool {
    yaml_float(s) && go_parse_float(s)
}

/// `strconv.ParseFloat(s, 64)` would succeed (for the texts go-yaml hands
/// it: starting with `.`, or matching [`yaml_float`]).
fn go_parse_float(s: &str) -> bool {
    s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// go-yaml's `isBase60Float`: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn base60_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (s, frac) = match s.split_once('.') {
        Some((s, frac)) => (s, Some(frac)),
        None => (s, None),
    };
    if frac.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit() || b == b'_')) {
        return false;
    }
    let mut parts = s.split(':');
    let head = parts.next().unwrap_or_default();
    if !head.starts_with(|c: char| c.is_ascii_digit())
        || !head.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return false;
    }
    let mut sexagesimal = 0;
    for part in parts {
        let b = part.as_bytes();
        let ok = match b {
            [d] => d.is_ascii_digit(),
            [a, d] => (b'0'..=b'5').contains(a) && d.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
        sexagesimal += 1;
    }
    sexagesimal > 0
}

/// A go-yaml timestamp (`2006-1-2`, `2006-1-2 15:4:5.999999999`,
/// `2006-1-2T15:4:5.999999999Z07:00`, or with a lower-case `t`) as Go's
/// `time.Time` marshals it to JSON (RFC 3339, fraction without trailing
/// zeros, `Z` for UTC).
pub fn timestamp_rfc3339(s: &str) -> Option<String> {
    fn number(s: &str, min: usize, max: usize) -> Option<u32> {
        (s.len() >= min && s.len() <= max && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    }
    let (date, time) = match s.find([' ', 'T', 't']) {
        Some(i) => (&s[..i], Some((&s[i..i + 1], &s[i + 1..]))),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let (year, month, day) = (number(y, 4, 4)?, number(m, 1, 2)?, number(d, 1, 2)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day == 0 || day > days {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    let Some((separator, time)) = time else {
        return Some(format!("{date}T00:00:00Z"));
    };
    let (clock, zone) = if separator == " " {
        (time, "Z".to_owned())
    } else {
        let i = time.find(['Z', '+', '-'])?;
        let zone = &time[i..];
        let zone = if zone == "Z" {
            "Z".to_owned()
        } else {
            let (h, m) = zone[1..].split_once(':')?;
            let (h, m) = (number(h, 2, 2)?, number(m, 2, 2)?);
            if h >= 24 || m >= 60 {
                return None;
            }
            if h == 0 && m == 0 {
                "Z".to_owned()
            } else {
                format!("{}{h:02}:{m:02}", &zone[..1])
            }
        };
        (&time[..i], zone)
    };
    let (clock, frac) = match clock.split_once('.') {
        Some((clock, frac)) => (clock, Some(frac)),
        None => (clock, None),
    };
    let frac = match frac {
        Some(f) => {
            number(f, 1, 9)?;
            let f = f.trim_end_matches('0');
            if f.is_empty() {
                String::new()
            } else {
                format!(".{f}")
            }
        }
        None => String::new(),
    };
    let mut fields = clock.split(':');
    let (Some(h), Some(mi), Some(se), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return None;
    };
    let (h, mi, se) = (number(h, 1, 2)?, number(mi, 1, 2)?, number(se, 1, 2)?);
    if h >= 24 || mi >= 60 || se >= 60 {
        return None;
    }
    Some(format!("{date}T{h:02}:{mi:02}:{se:02}{frac}{zone}"))
}

/// A JSON number as go-yaml prints it after the JSON round trip: integers
/// in decimal, other numbers in Go's shortest `%g` form.
fn number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    go_format_g(f)
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`.
fn go_format_g(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest digits that read back exactly, as
    // Go's shortest formatting does.
    let scientific = format!("{:e}", f.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    // Go's shortest `%g` switches to an exponent below 1e-4 and from 1e6.
    if !(-4..6).contains(&exponent) {
        let mut out = String::from(sign);
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e_sign = if exponent < 0 { '-' } else { '+' };
        out.push_str(&format!("e{e_sign}{:02}", exponent.abs()));
        out
    } else if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        }
    }
}

/// go-yaml v2's key order: letters after everything else, runs of digits
/// compared as numbers (`a2` before `a10`).
fn key_less(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        less(a.as_bytes(), b.as_bytes())
    } else {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        less(&a, &b)
    }
}

fn less<T: Copy + Into<char> + PartialEq>(a: &[T], b: &[T]) -> bool {
    let c = |x: T| -> char { x.into() };
    for i in 0..a.len().min(b.len()) {
        if a[i] == b[i] {
            continue;
        }
        let (ai_char, bi_char) = (c(a[i]), c(b[i]));
        let (al, bl) = (ai_char.is_alphabetic(), bi_char.is_alphabetic());
        if al && bl {
            return ai_char < bi_char;
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ai_char == '0' || bi_char == '0' {
            let mut j = i;
            while j > 0 && c(a[j - 1]).is_ascii_digit() {
                j -= 1;
                if c(a[j]) != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < a.len() && c(a[ai]).is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(c(a[ai]) as i64 - '0' as i64);
            ai += 1;
        }
        let mut bi = i;
        while bi < b.len() && c(b[bi]).is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(c(b[bi]) as i64 - '0' as i64);
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ai_char < bi_char;
    }
    a.len() < b.len()
}

/// Sorts keys with [`key_less`] (a merge sort: the order is go-yaml's, not
/// guaranteed total, and must never panic).
fn sort_keys(keys: &mut Vec<&String>) {
    if keys.len() < 2 {
        return;
    }
    let right = keys.split_off(keys.len() / 2);
    let mut left = std::mem::take(keys);
    let mut right = right;
    sort_keys(&mut left);
    sort_keys(&mut right);
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    while let (Some(a), Some(b)) = (l.peek(), r.peek()) {
        let ordering = if key_less(b, a) {
            Ordering::Greater
        } else {
            Ordering::Less
        };
        match ordering {
            Ordering::Greater => keys.extend(r.next()),
            _ => keys.extend(l.next()),
        }
    }
    keys.extend(l);
    keys.extend(r);
}
