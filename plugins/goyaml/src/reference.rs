//! The emitter as it was before [`crate::emit`] walked any [`crate::Tree`]:
//! a frozen copy, kept only as the oracle of differential tests (this
//! crate's and the helm plugin's, through the `reference` feature). Do not
//! change it: it is what the fast emitter must match byte for byte.

#![allow(dead_code)]

use std::cmp::Ordering;

use serde_json::{Map, Value};

// The parts the rewrite left as they were, shared with the live emitter
// (go-yaml's full style analysis, without the live one-pass shortcut;
// scalar resolution; `%g`; key order): the reference keeps its own emitter
// walk, number printing and key sort, the rewritten parts the differential
// tests check.
use crate::number::go_format_g;
use crate::order::key_less;
use crate::style::{Style, full_style as style, is_break, printable};

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

/// A JSON number as go-yaml prints it after the JSON round trip: integers
/// in decimal, other numbers in Go's shortest `%g` form.
fn number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    go_format_g(f)
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
