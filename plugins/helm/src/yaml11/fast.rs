//! A fast reader for the YAML that charts feed `fromYaml` and keep in
//! values files: block mappings and sequences of one-line scalars.
//!
//! It reads the text line by line, without an event stream, and gives
//! exactly the [`Value`] the event reader gives, or `None` ("not sure")
//! on anything outside the shapes it knows, so that the event reader reads
//! that text as before (with its errors and their messages). It knows:
//!
//! - block mappings (`key: value`, `key:` with a nested block or nothing)
//!   and block sequences (`- item`, `- key: value` compact mappings, a
//!   sequence at its key's indentation);
//! - keys and values that are one-line plain scalars (resolved as
//!   [`super::resolve`] does), single-quoted or double-quoted scalars
//!   (with the escapes `\\ \" \/ \n \t`), and one-line flow collections
//!   of those ([`flow`]);
//! - values that are quoted scalars over several lines, as `toYaml` folds
//!   long strings (their continuation lines indented past the entry's,
//!   double-quoted ones without escapes);
//! - comments, blank lines and trailing spaces.
//!
//! It is not sure about (among others): tabs, carriage returns, bytes
//! outside printable ASCII (so a byte order mark), documents markers and
//! directives, anchors, aliases, tags, merge keys, explicit keys, block
//! and multi-line plain scalars, multi-line flow collections, odd indentation,
//! duplicate keys, long keys and nesting deeper than [`MAX_DEPTH`].

mod flow;

use std::borrow::Cow;

use super::resolve::{plain_key, resolve};
use crate::value::{Map, Value};

/// Deepest nesting of collections read here (the event reader allows 255).
const MAX_DEPTH: usize = 64;

/// Longest key read here: the event reader looks for a simple key's `:`
/// within 1024 characters.
const MAX_KEY_LEN: usize = 1000;

/// The first document of `text`, or `None` when not sure.
pub fn read(text: &str) -> Option<Value> {
    let mut reader = Reader {
        text,
        lines: content_lines(text)?,
        at: 0,
    };
    let Some(first) = reader.peek() else {
        return Some(Value::Nil);
    };
    let value = if is_entry(first.body) {
        reader.node(0)?
    } else {
        match split_entry(first.body)? {
            Entry::Key(..) => reader.node(0)?,
            Entry::Scalar => {
                reader.at += 1;
                inline(first.body, 0)?
            }
        }
    };
    (reader.at == reader.lines.len()).then_some(value)
}

/// A line with content (not blank, not only a comment).
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    /// Leading spaces.
    indent: usize,
    /// The rest of the line (not empty, not starting with a space).
    body: &'a str,
}

/// The lines of `text` with content, or `None` if a byte or a line is
/// one the reader is not sure of.
fn content_lines(text: &str) -> Option<Vec<Line<'_>>> {
    // Printable ASCII and line feeds: no tab.
    if !kiln_bytes::printable_ascii(text.as_bytes()) || kiln_bytes::contains(text.as_bytes(), b'\t')
    {
        return None;
    }
    let mut lines = Vec::new();
    for raw in kiln_bytes::split_lines(text) {
        let body = &raw[kiln_bytes::leading(raw.as_bytes(), b' ')..];
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indent = raw.len() - body.len();
        let marker = body.starts_with("---") || body.starts_with("...") || body.starts_with('%');
        if indent == 0 && marker {
            return None;
        }
        lines.push(Line { indent, body });
    }
    Some(lines)
}

/// Whether a line's body is a block sequence entry (`- ...` or `-`).
fn is_entry(body: &str) -> bool {
    body == "-" || body.starts_with("- ")
}

/// A line's body read as a mapping entry or not.
enum Entry<'a> {
    /// `key:` and the text after the colon (empty or starting with a
    /// space).
    Key(String, &'a str),
    /// Not a mapping entry: a scalar or a flow collection (still to check).
    Scalar,
}

/// Splits `body` at its mapping colon; `None` when not sure.
fn split_entry(body: &str) -> Option<Entry<'_>> {
    let quoted = match body.as_bytes().first()? {
        b'"' => Some(double_quoted(body)?),
        b'\'' => Some(single_quoted(body)?),
        b'{' | b'[' => return Some(Entry::Scalar),
        _ => None,
    };
    if let Some((key, end)) = quoted {
        let rest = body.get(end..)?;
        return match rest.strip_prefix(':') {
            Some(after) if after.is_empty() || after.starts_with(' ') => {
                (end <= MAX_KEY_LEN).then(|| Entry::Key(key.into_owned(), after))
            }
            Some(_) => None,
            None => Some(Entry::Scalar),
        };
    }
    if !plain_start(body) {
        return None;
    }
    let b = body.as_bytes();
    for (i, c) in b.iter().enumerate() {
        match c {
            b':' if b.get(i + 1).is_none_or(|n| *n == b' ') => {
                let key = body.get(..i)?;
                if key.ends_with(' ') || key == "<<" || i > MAX_KEY_LEN {
                    return None;
                }
                return Some(Entry::Key(plain_key(key), body.get(i + 1..)?));
            }
            b'#' if i > 0 && b[i - 1] == b' ' => return Some(Entry::Scalar),
            _ => {}
        }
    }
    Some(Entry::Scalar)
}

/// Whether a plain scalar may start `s` here: letters, digits, a few safe
/// punctuation marks, and `-` before a letter, a digit or one of `.-_/`
/// (`-1`, `-.5`, `--flag`).
fn plain_start(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphanumeric() => true,
        Some(b'.' | b'/' | b'_' | b'~' | b'+' | b'$' | b'(' | b')' | b'=' | b';' | b'<' | b'^') => {
            true
        }
        Some(b'-') => b
            .get(1)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b'/')),
        _ => false,
    }
}

/// A value written on its key's (or its dash's) line at nesting `depth`:
/// a scalar or a flow collection, then nothing but spaces and a comment.
fn inline(v: &str, depth: usize) -> Option<Value> {
    match v.as_bytes().first()? {
        b'"' => {
            let (s, end) = double_quoted(v)?;
            trailing_ok(v.get(end..)?).then(|| Value::str(s))
        }
        b'\'' => {
            let (s, end) = single_quoted(v)?;
            trailing_ok(v.get(end..)?).then(|| Value::str(s))
        }
        b'{' | b'[' => {
            let (value, end) = flow::collection(v, depth)?;
            trailing_ok(v.get(end..)?).then_some(value)
        }
        _ => {
            if !plain_start(v) {
                return None;
            }
            let b = v.as_bytes();
            let mut end = b.len();
            for (i, c) in b.iter().enumerate() {
                match c {
                    b':' if b.get(i + 1).is_none_or(|n| *n == b' ') => return None,
                    b'#' if i > 0 && b[i - 1] == b' ' => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            let text = v.get(..end)?.trim_end_matches(' ');
            // An infinity is the event reader's to refuse.
            if super::resolve::non_finite(text).is_some() {
                return None;
            }
            Some(resolve(text))
        }
    }
}

/// Whether `v` starts a quoted scalar that does not close on its line.
fn opens_multi_line_quote(v: &str) -> bool {
    match v.as_bytes().first() {
        Some(b'\'') => single_quoted(v).is_none(),
        Some(b'"') => {
            // Closed on the line unless no unescaped quote follows.
            let b = v.as_bytes();
            let mut i = 1;
            while let Some(c) = b.get(i) {
                match c {
                    b'"' => return false,
                    b'\\' => i += 2,
                    _ => i += 1,
                }
            }
            true
        }
        _ => false,
    }
}

/// Whether what follows a scalar on its line is only spaces and perhaps a
/// comment (after at least one space).
fn trailing_ok(rest: &str) -> bool {
    let trimmed = rest.trim_start_matches(' ');
    trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < rest.len())
}

/// The double-quoted scalar that `s` starts with, and the byte offset just
/// past its closing quote; `None` when it does not end on this line or
/// has an escape other than `\\ \" \/ \n \t`.
fn double_quoted(s: &str) -> Option<(Cow<'_, str>, usize)> {
    let b = s.as_bytes();
    let mut owned: Option<String> = None;
    let mut from = 1;
    let mut i = 1;
    while let Some(c) = b.get(i) {
        match c {
            b'"' => {
                let tail = s.get(from..i)?;
                let text = match owned {
                    Some(mut o) => {
                        o.push_str(tail);
                        Cow::Owned(o)
                    }
                    None => Cow::Borrowed(tail),
                };
                return Some((text, i + 1));
            }
            b'\\' => {
                let unescaped = match b.get(i + 1)? {
                    b'\\' => '\\',
                    b'"' => '"',
                    b'/' => '/',
                    b'n' => '\n',
                    b't' => '\t',
                    _ => return None,
                };
                let o = owned.get_or_insert_with(String::new);
                o.push_str(s.get(from..i)?);
                o.push(unescaped);
                i += 2;
                from = i;
            }
            _ => i += 1,
        }
    }
    None
}

/// The single-quoted scalar that `s` starts with (`''` is a quote), and
/// the byte offset just past its closing quote; `None` when it does not
/// end on this line.
fn single_quoted(s: &str) -> Option<(Cow<'_, str>, usize)> {
    let b = s.as_bytes();
    let mut owned: Option<String> = None;
    let mut from = 1;
    let mut i = 1;
    while let Some(c) = b.get(i) {
        if *c == b'\'' {
            if b.get(i + 1) == Some(&b'\'') {
                let o = owned.get_or_insert_with(String::new);
                o.push_str(s.get(from..=i)?);
                i += 2;
                from = i;
                continue;
            }
            let tail = s.get(from..i)?;
            let text = match owned {
                Some(mut o) => {
                    o.push_str(tail);
                    Cow::Owned(o)
                }
                None => Cow::Borrowed(tail),
            };
            return Some((text, i + 1));
        }
        i += 1;
    }
    None
}

/// The reader's place in the content lines.
struct Reader<'a> {
    /// The whole text (a quoted scalar may span lines, comments and blank
    /// lines included).
    text: &'a str,
    lines: Vec<Line<'a>>,
    at: usize,
}

impl<'a> Reader<'a> {
    /// The next content line, not consumed.
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.at).copied()
    }

    /// The block collection starting at the next line (which exists).
    fn node(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let line = self.peek()?;
        if is_entry(line.body) {
            return self.sequence(line.indent, depth);
        }
        match split_entry(line.body)? {
            Entry::Key(key, after) => {
                self.at += 1;
                self.mapping(line.indent, key, after, depth)
            }
            Entry::Scalar => None,
        }
    }

    /// The block mapping at `indent` whose first entry (already consumed)
    /// is `key` with `after` its colon.
    fn mapping(
        &mut self,
        indent: usize,
        key: String,
        after: &'a str,
        depth: usize,
    ) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut map = Map::new();
        let mut entry = Some((key, after));
        while let Some((key, after)) = entry.take() {
            let value = self.value_after(indent, after, depth)?;
            if map.insert(key, value).is_some() {
                return None;
            }
            let Some(line) = self.peek() else { break };
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return None;
            }
            match split_entry(line.body)? {
                Entry::Key(key, after) => {
                    self.at += 1;
                    entry = Some((key, after));
                }
                Entry::Scalar => return None,
            }
        }
        Some(Value::map(map))
    }

    /// The value of a mapping entry at `indent` whose colon is followed by
    /// `after`: inline, or the block below it, or nothing (nil).
    fn value_after(&mut self, indent: usize, after: &'a str, depth: usize) -> Option<Value> {
        let v = after.trim_start_matches(' ');
        if !(v.is_empty() || v.starts_with('#')) {
            if opens_multi_line_quote(v) {
                return self.multi_line_quoted(v, indent);
            }
            return inline(v, depth + 1);
        }
        match self.peek() {
            Some(line) if line.indent > indent => self.node(depth + 1),
            Some(line) if line.indent == indent && is_entry(line.body) => {
                self.sequence(indent, depth + 1)
            }
            _ => Some(Value::Nil),
        }
    }

    /// A quoted scalar `v` (a slice of the text) that does not close on its
    /// line, the value of an entry of the block collection at `indent`:
    /// folded as libyaml folds it (each line's leading and trailing spaces
    /// dropped; one line break is a space, each further one a line break);
    /// past its line, the content lines it covers. Not sure (`None`) of a
    /// continuation line not indented past `indent`, of any escape in a
    /// double-quoted one, or of anything after it but a comment.
    fn multi_line_quoted(&mut self, v: &'a str, indent: usize) -> Option<Value> {
        let quote = v.as_bytes()[0];
        let start = (v.as_ptr() as usize).checked_sub(self.text.as_ptr() as usize)? + 1;
        if self.text.get(start - 1..start - 1 + v.len()) != Some(v) {
            return None;
        }
        let rest = self.text.get(start..)?;
        let end = if quote == b'\'' {
            let mut i = 0;
            loop {
                i += rest.get(i..)?.find('\'')?;
                if rest.as_bytes().get(i + 1) == Some(&b'\'') {
                    i += 2;
                } else {
                    break i;
                }
            }
        } else {
            let i = rest.find('"')?;
            if rest[..i].contains('\\') {
                return None;
            }
            i
        };
        let raw = &rest[..end];
        let mut lines = raw.split('\n');
        let mut out = lines.next()?.trim_end_matches(' ').to_owned();
        let mut blank = 0;
        let mut lines = lines.peekable();
        while let Some(line) = lines.next() {
            let body = line.trim_start_matches(' ');
            let last = lines.peek().is_none();
            // The closing quote's line is held to the rule even when the
            // quote starts it.
            if (!body.is_empty() || last) && line.len() - body.len() <= indent {
                return None;
            }
            let body = if last {
                body
            } else {
                body.trim_end_matches(' ')
            };
            if body.is_empty() && !last {
                blank += 1;
                continue;
            }
            if blank == 0 {
                out.push(' ');
            }
            for _ in 0..blank {
                out.push('\n');
            }
            blank = 0;
            out.push_str(body);
        }
        if quote == b'\'' {
            out = out.replace("''", "'");
        }
        // After the closing quote: nothing but a comment on its line.
        let after = start + end + 1;
        let line_end = self.text[after..]
            .find('\n')
            .map_or(self.text.len(), |n| after + n);
        if !trailing_ok(&self.text[after..line_end]) {
            return None;
        }
        // The content lines the scalar covers are read.
        while let Some(line) = self.peek() {
            let offset = line.body.as_ptr() as usize - self.text.as_ptr() as usize;
            if offset >= line_end {
                break;
            }
            self.at += 1;
        }
        Some(Value::str(out))
    }

    /// The block sequence whose entries are the next lines at `indent`.
    fn sequence(&mut self, indent: usize, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent || (line.indent == indent && !is_entry(line.body)) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            self.at += 1;
            let after = line.body.get(1..)?;
            let v = after.trim_start_matches(' ');
            let item = if v.is_empty() || v.starts_with('#') {
                match self.peek() {
                    Some(next) if next.indent > indent => self.node(depth + 1)?,
                    _ => Value::Nil,
                }
            } else if is_entry(v) {
                return None;
            } else if opens_multi_line_quote(v) {
                self.multi_line_quoted(v, indent)?
            } else {
                match split_entry(v)? {
                    Entry::Key(key, after) => {
                        let column = indent + line.body.len() - v.len();
                        self.mapping(column, key, after, depth + 1)?
                    }
                    Entry::Scalar => inline(v, depth + 1)?,
                }
            };
            items.push(item);
        }
        Some(Value::list(items))
    }
}
