//! A fast reader for the YAML a chart renders, exact or silent.
//!
//! Rendered documents are nearly always block mappings and sequences of
//! one-line scalars. Reading them through `serde_yaml` (libyaml's events,
//! a `serde_yaml::Value`, then a `serde_json::Value`) costs a few dozen
//! allocations per scalar; this reader builds the `serde_json::Value`
//! straight from the text, one pass, one allocation per string.
//!
//! It is exact or silent: [`read`] gives the value that
//! `serde_yaml::from_str::<serde_yaml::Value>` of the printed text (the
//! document and a newline), converted as [`super::to_json`] converts it,
//! gives, or `None` whenever it is not certain of that — any YAML feature
//! outside the subset below, any odd byte, any shape libyaml might reject.
//! The caller then takes the `serde_yaml` path, so errors and rare shapes
//! keep their exact behaviour.
//!
//! The subset: block mappings whose keys are one-line plain or quoted
//! strings; block sequences (also at their key's indentation, and compact
//! `- - a`, `- a: b`); one-line plain scalars resolved as `serde_yaml`
//! resolves them (null, booleans, integers, floats, else a string); one-line
//! single- and double-quoted scalars; literal and folded block scalars
//! without an indentation indicator (read as libyaml's scanner reads them);
//! one-line flow sequences and mappings of such scalars; comments and blank
//! lines. Not in it, so `None`: anchors, aliases, tags, `?` keys, merge
//! keys, keys that are not strings, duplicate keys, multi-line plain or
//! quoted scalars, tabs outside block scalars' text, carriage returns and
//! other line breaks, byte order marks, directives and document markers,
//! nesting deeper than [`MAX_DEPTH`].

use serde_json::{Map, Value};

/// Collections nested deeper than this are left to `serde_yaml` (its
/// recursion limit, 128, then decides).
const MAX_DEPTH: usize = 100;

/// Implicit keys longer than this (in bytes) are left to libyaml, which
/// refuses simple keys longer than 1024 characters.
const MAX_KEY_BYTES: usize = 1000;

/// What [`read`] gives of a document.
#[derive(Debug)]
pub struct Read {
    /// The document as JSON text, as `serde_json::Value::to_string` writes
    /// the value (keys sorted, no spaces).
    pub json: String,
    /// Its `kind`, when it is a mapping with one.
    pub kind: Option<Value>,
    /// Its `metadata.annotations["helm.sh/hook"]`, when `metadata` and its
    /// `annotations` are mappings and hold one.
    pub hook: Option<Value>,
}

/// `doc` (a rendered document, without the newline `helm template` prints
/// after it) as `serde_yaml` reads the printed text into a
/// `serde_yaml::Value`, converted to JSON as [`super::to_json`] converts
/// it and written as JSON text, without building the value; `None` when
/// this reader is not certain to give exactly that.
pub fn read(doc: &str) -> Option<Read> {
    if !printable(doc) {
        return None;
    }
    let mut reader = Reader {
        text: doc.as_bytes(),
        src: doc,
        pos: 0,
        depth: 0,
        next: None,
        out: Vec::with_capacity(doc.len() + doc.len() / 4),
        entries: Vec::new(),
        scratch: Vec::new(),
        kind: None,
        hook: None,
    };
    reader.advance()?;
    let Some(indent) = reader.next else {
        // Only comments and blank lines: no document, read as null.
        return Some(Read {
            json: "null".to_owned(),
            kind: None,
            hook: None,
        });
    };
    reader.block_node(indent, Watch::Root)?;
    if reader.next.is_some() {
        return None;
    }
    Some(Read {
        // Written from `&str`s and serde_json's output only.
        json: String::from_utf8(reader.out).ok()?,
        kind: reader.kind,
        hook: reader.hook,
    })
}

/// Which of the values the sort reads a collection may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// The document: its `kind`, its `metadata`.
    Root,
    /// `metadata`: its `annotations`.
    Metadata,
    /// `metadata.annotations`: its `helm.sh/hook`.
    Annotations,
    /// Nothing the sort reads.
    Nothing,
}

impl Watch {
    /// What the value of `key` in a mapping watched as `self` may hold.
    fn child(self, key: &str) -> Watch {
        match (self, key) {
            (Watch::Root, "metadata") => Watch::Metadata,
            (Watch::Metadata, "annotations") => Watch::Annotations,
            _ => Watch::Nothing,
        }
    }

    /// Whether the value of `key` in a mapping watched as `self` is the
    /// kind (`Some(true)`) or the hook (`Some(false)`).
    fn captures(self, key: &str) -> Option<bool> {
        match (self, key) {
            (Watch::Root, "kind") => Some(true),
            (Watch::Annotations, "helm.sh/hook") => Some(false),
            _ => None,
        }
    }
}

/// One entry of a block mapping being written: its key and where its
/// `"key":value` text is in the output.
struct Entry<'a> {
    key: std::borrow::Cow<'a, str>,
    start: usize,
    end: usize,
}

/// Whether every character is one libyaml reads without complaint and
/// without a line break other than `\n` (no `\r`, NEL, LS, PS), and no byte
/// order mark.
fn printable(doc: &str) -> bool {
    if kiln_bytes::printable_ascii(doc.as_bytes()) {
        return true;
    }
    doc.chars().all(|c| match c {
        '\t' | '\n' | ' '..='~' => true,
        '\u{a0}'..='\u{d7ff}' => !matches!(c, '\u{2028}' | '\u{2029}'),
        '\u{e000}'..='\u{fffd}' => c != '\u{feff}',
        '\u{10000}'.. => true,
        _ => false,
    })
}

/// How a block scalar ends (its chomping indicator).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Chomp {
    /// `-`: no final line break.
    Strip,
    /// None: one final line break.
    Clip,
    /// `+`: every final line break.
    Keep,
}

/// A cursor over the printed text: the document and, at `text.len()`, the
/// newline `helm template` prints after it (see [`Reader::at`]).
struct Reader<'a> {
    text: &'a [u8],
    src: &'a str,
    /// Byte offset; `text.len() + 1` is the end of the printed text.
    pos: usize,
    /// Collections open around `pos`.
    depth: usize,
    /// The indentation of the content line `pos` is on (`pos` at its first
    /// character) after [`Reader::advance`]; None at the end.
    next: Option<usize>,
    /// The JSON written so far.
    out: Vec<u8>,
    /// The entries of the block mappings being read, outermost first (one
    /// buffer for all: no allocation per mapping).
    entries: Vec<Entry<'a>>,
    /// Where a mapping's entries are copied to be written again in key
    /// order.
    scratch: Vec<u8>,
    /// The document's `kind`, once read.
    kind: Option<Value>,
    /// Its hook annotation, once read.
    hook: Option<Value>,
}

impl<'a> Reader<'a> {
    /// The byte at `i` of the printed text: the document's, then the
    /// printed newline, then 0 past the end.
    fn at(&self, i: usize) -> u8 {
        match i.cmp(&self.text.len()) {
            std::cmp::Ordering::Less => self.text[i],
            std::cmp::Ordering::Equal => b'\n',
            std::cmp::Ordering::Greater => 0,
        }
    }

    /// The offset of the line break ending the line `i` is on.
    fn line_end(&self, i: usize) -> usize {
        self.text
            .get(i..)
            .and_then(|rest| kiln_bytes::position(rest, b'\n'))
            .map_or(self.text.len(), |n| i + n)
    }

    /// How many spaces start at `i` (the printed newline and the end are
    /// not spaces).
    fn spaces_at(&self, i: usize) -> usize {
        self.text
            .get(i..)
            .map_or(0, |rest| kiln_bytes::leading(rest, b' '))
    }

    /// The offset of the first of `set` at or after `i`, or the end of the
    /// document (where the printed newline stands).
    fn next_of<const N: usize>(&self, i: usize, set: [u8; N]) -> usize {
        self.text
            .get(i..)
            .and_then(|rest| kiln_bytes::position_any(rest, set))
            .map_or(self.text.len(), |n| i + n)
    }

    fn skip_spaces(&mut self) -> usize {
        let n = self.spaces_at(self.pos);
        self.pos += n;
        n
    }

    /// From a line start, past blank and comment lines to the next content
    /// line: `pos` at its first character, `next` its indentation.
    fn advance(&mut self) -> Option<()> {
        loop {
            if self.pos > self.text.len() {
                self.next = None;
                return Some(());
            }
            let start = self.pos;
            let i = start + self.spaces_at(start);
            match self.at(i) {
                b'\n' => self.pos = i + 1,
                b'#' => self.pos = self.line_end(i) + 1,
                b'\t' => return None,
                _ => {
                    let line = &self.text[start..];
                    if i == start
                        && (line.starts_with(b"---")
                            || line.starts_with(b"...")
                            || line.starts_with(b"%"))
                    {
                        return None;
                    }
                    self.pos = i;
                    self.next = Some(i - start);
                    return Some(());
                }
            }
        }
    }

    /// After a node's last character on its line: spaces, then the line's
    /// end or a comment, then [`Reader::advance`].
    fn finish_line(&mut self) -> Option<()> {
        let spaces = self.skip_spaces();
        match self.at(self.pos) {
            b'\n' => {}
            b'#' if spaces > 0 || self.at(self.pos.wrapping_sub(1)) == b' ' => {
                self.pos = self.line_end(self.pos);
            }
            _ => return None,
        }
        self.pos += 1;
        self.advance()
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// Whether `i` starts a block sequence entry (`-` and a space or the
    /// line's end).
    fn is_entry(&self, i: usize) -> bool {
        self.at(i) == b'-' && matches!(self.at(i + 1), b' ' | b'\n')
    }

    /// The block collection starting at `pos`, at column `col`, written.
    fn block_node(&mut self, col: usize, watch: Watch) -> Option<()> {
        self.enter()?;
        if self.is_entry(self.pos) {
            self.sequence(col)?;
        } else {
            self.mapping(col, watch)?;
        }
        self.depth -= 1;
        Some(())
    }

    /// A block mapping whose keys are at column `col`, written with its
    /// keys sorted (as a `serde_json::Map` orders them).
    fn mapping(&mut self, col: usize, watch: Watch) -> Option<()> {
        let open = self.out.len();
        self.out.push(b'{');
        let first = self.entries.len();
        loop {
            let key = self.key()?;
            if self.entries.len() > first {
                self.out.push(b',');
            }
            let start = self.out.len();
            write_str(&mut self.out, &key);
            self.out.push(b':');
            let value = self.out.len();
            self.mapping_value(col, watch.child(&key))?;
            if let Some(is_kind) = watch.captures(&key) {
                let captured = serde_json::from_slice(&self.out[value..]).ok()?;
                *(if is_kind {
                    &mut self.kind
                } else {
                    &mut self.hook
                }) = Some(captured);
            }
            self.entries.push(Entry {
                key,
                start,
                end: self.out.len(),
            });
            match self.next {
                Some(i) if i == col => {}
                Some(i) if i > col => return None,
                _ => break,
            }
        }
        self.out.push(b'}');
        let sorted = sort_entries(
            &mut self.out,
            &mut self.scratch,
            open,
            &mut self.entries[first..],
        );
        self.entries.truncate(first);
        sorted
    }

    /// A key and its `:` (followed by a space or the line's end).
    fn key(&mut self) -> Option<std::borrow::Cow<'a, str>> {
        let start = self.pos;
        let key = match self.at(start) {
            b'"' | b'\'' => {
                let key = self.quoted()?;
                self.skip_spaces();
                std::borrow::Cow::Owned(key)
            }
            _ => {
                let end = self.plain_key_end(start)?;
                let src: &'a str = self.src;
                let key = src.get(start..end)?.trim_end_matches(' ');
                if !resolves_to_string(key) || key == "<<" {
                    return None;
                }
                self.pos = end;
                std::borrow::Cow::Borrowed(key)
            }
        };
        if self.pos - start > MAX_KEY_BYTES
            || self.at(self.pos) != b':'
            || !matches!(self.at(self.pos + 1), b' ' | b'\n')
        {
            return None;
        }
        self.pos += 1;
        Some(key)
    }

    /// Where the plain key starting at `start` ends (its `:`), if it is one.
    fn plain_key_end(&self, start: usize) -> Option<usize> {
        if !self.plain_start(start, false) {
            return None;
        }
        let mut i = start + 1;
        loop {
            // Only these bytes end a key or refuse it; the end of the
            // document is the printed newline.
            i = self.next_of(i, [b':', b'#', b'\n', b'\t']);
            match self.at(i) {
                b':' if matches!(self.at(i + 1), b' ' | b'\n') => return Some(i),
                b'#' if self.at(i - 1) == b' ' => return None,
                b'\n' | b'\t' | 0 => return None,
                _ => i += 1,
            }
        }
    }

    /// Whether the rest of the line, from `pos`, is a key and its `:`.
    fn is_key(&self) -> bool {
        let start = self.pos;
        let close = match self.at(start) {
            b'"' => {
                let mut i = start + 1;
                loop {
                    match self.at(i) {
                        b'"' => break i,
                        b'\\' if self.at(i + 1) != b'\n' => i += 2,
                        b'\n' | 0 => return false,
                        _ => i += 1,
                    }
                }
            }
            b'\'' => {
                let mut i = start + 1;
                loop {
                    match self.at(i) {
                        b'\'' if self.at(i + 1) == b'\'' => i += 2,
                        b'\'' => break i,
                        b'\n' | 0 => return false,
                        _ => i += 1,
                    }
                }
            }
            _ => return self.plain_key_end(start).is_some(),
        };
        let mut i = close + 1;
        while self.at(i) == b' ' {
            i += 1;
        }
        self.at(i) == b':' && matches!(self.at(i + 1), b' ' | b'\n')
    }

    /// The value after a block mapping's `:`, its keys at column `col`,
    /// written.
    fn mapping_value(&mut self, col: usize, watch: Watch) -> Option<()> {
        self.skip_spaces();
        match self.at(self.pos) {
            b'\n' | b'#' => {
                self.finish_line()?;
                match self.next {
                    Some(i) if i > col => self.block_node(i, watch),
                    Some(i) if i == col && self.is_entry(self.pos) => {
                        // A sequence at its key's indentation.
                        self.enter()?;
                        self.sequence(col)?;
                        self.depth -= 1;
                        Some(())
                    }
                    _ => {
                        self.out.extend_from_slice(b"null");
                        Some(())
                    }
                }
            }
            _ => self.inline_value(col, watch),
        }
    }

    /// A block sequence whose entries are at column `col`, written.
    fn sequence(&mut self, col: usize) -> Option<()> {
        self.out.push(b'[');
        let mut first = true;
        loop {
            if !first {
                self.out.push(b',');
            }
            first = false;
            // Past the `-`.
            self.pos += 1;
            let column = col + 1 + self.skip_spaces();
            match self.at(self.pos) {
                b'\n' | b'#' => {
                    self.finish_line()?;
                    match self.next {
                        Some(i) if i > col => self.block_node(i, Watch::Nothing)?,
                        _ => self.out.extend_from_slice(b"null"),
                    }
                }
                _ if self.is_entry(self.pos) || self.is_key() => {
                    self.block_node(column, Watch::Nothing)?;
                }
                _ => self.inline_value(col, Watch::Nothing)?,
            }
            match self.next {
                Some(i) if i == col && self.is_entry(self.pos) => {}
                Some(i) if i > col => return None,
                _ => {
                    self.out.push(b']');
                    return Some(());
                }
            }
        }
    }

    /// A value on the line of its key or entry, inside the block
    /// collection at column `col`, written; then on to the next content
    /// line. A flow mapping `watch`ed for the sort gives it what it holds.
    fn inline_value(&mut self, col: usize, watch: Watch) -> Option<()> {
        match self.at(self.pos) {
            b'|' | b'>' => {
                let text = self.block_scalar(col)?;
                write_str(&mut self.out, &text);
                return Some(());
            }
            b'[' | b'{' => {
                let value = self.flow_node()?;
                let hook = match watch {
                    Watch::Metadata => value.get("annotations").and_then(|a| a.get("helm.sh/hook")),
                    Watch::Annotations => value.get("helm.sh/hook"),
                    Watch::Root | Watch::Nothing => None,
                };
                if hook.is_some() {
                    self.hook = hook.cloned();
                }
                serde_json::to_writer(&mut self.out, &value).ok()?;
            }
            b'"' | b'\'' => {
                let text = self.quoted()?;
                write_str(&mut self.out, &text);
            }
            _ => {
                let start = self.pos;
                let end = self.plain_end(start)?;
                let text = self.src.get(start..end)?.trim_end_matches(' ');
                self.pos = start + text.len();
                write_plain(&mut self.out, text)?;
            }
        }
        self.finish_line()
    }

    /// Whether a plain scalar may start at `i` (libyaml's rule, narrowed:
    /// no `?` or `:` starts; in flow, no `-` before an indicator).
    fn plain_start(&self, i: usize, flow: bool) -> bool {
        match self.at(i) {
            b'-' => match self.at(i + 1) {
                b' ' | b'\n' | b'\t' | 0 => false,
                b',' | b'[' | b']' | b'{' | b'}' => !flow,
                _ => true,
            },
            b'?' | b':' | b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|'
            | b'>' | b'\'' | b'"' | b'%' | b'@' | b'`' | b' ' | b'\t' | b'\n' | 0 => false,
            _ => true,
        }
    }

    /// Where the one-line plain scalar starting at `start` (a value, in
    /// block context) ends: the line's end or a comment.
    fn plain_end(&self, start: usize) -> Option<usize> {
        if !self.plain_start(start, false) {
            return None;
        }
        let mut i = start + 1;
        loop {
            // Only these bytes end the scalar or refuse it; the end of the
            // document is the printed newline.
            i = self.next_of(i, [b':', b'#', b'\n', b'\t']);
            match self.at(i) {
                // `a: b: c` is refused by libyaml.
                b':' if matches!(self.at(i + 1), b' ' | b'\n') => return None,
                b'#' if self.at(i - 1) == b' ' => return Some(i),
                b'\n' => return Some(i),
                b'\t' | 0 => return None,
                _ => i += 1,
            }
        }
    }

    /// A one-line quoted scalar starting at `pos`; `pos` after it.
    fn quoted(&mut self) -> Option<String> {
        let quote = self.at(self.pos);
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            let b = self.at(self.pos);
            match b {
                b'\n' | b'\t' | 0 => return None,
                b'\'' if quote == b'\'' => {
                    out.push_str(self.src.get(run..self.pos)?);
                    if self.at(self.pos + 1) == b'\'' {
                        out.push('\'');
                        self.pos += 2;
                        run = self.pos;
                    } else {
                        self.pos += 1;
                        return Some(out);
                    }
                }
                b'"' if quote == b'"' => {
                    out.push_str(self.src.get(run..self.pos)?);
                    self.pos += 1;
                    return Some(out);
                }
                b'\\' if quote == b'"' => {
                    out.push_str(self.src.get(run..self.pos)?);
                    self.pos += 1;
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                _ => self.pos += 1,
            }
        }
    }

    /// The escape after a `\` in a double-quoted scalar, as libyaml reads it.
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let c = match self.at(self.pos) {
            b'0' => '\0',
            b'a' => '\x07',
            b'b' => '\x08',
            b't' => '\t',
            b'n' => '\n',
            b'v' => '\x0b',
            b'f' => '\x0c',
            b'r' => '\r',
            b'e' => '\x1b',
            b' ' => ' ',
            b'"' => '"',
            b'/' => '/',
            b'\\' => '\\',
            b'N' => '\u{85}',
            b'_' => '\u{a0}',
            b'L' => '\u{2028}',
            b'P' => '\u{2029}',
            b'x' | b'u' | b'U' => {
                let len = match self.at(self.pos) {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let digits = self.text.get(self.pos + 1..self.pos + 1 + len)?;
                if !digits.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                let code = u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
                self.pos += len;
                char::from_u32(code)?
            }
            _ => return None,
        };
        self.pos += 1;
        out.push(c);
        Some(())
    }

    /// A literal (`|`) or folded (`>`) block scalar whose header is at
    /// `pos`, inside the block collection at column `col`: libyaml's
    /// `yaml_parser_scan_block_scalar`, line by line; then on to the next
    /// content line.
    fn block_scalar(&mut self, col: usize) -> Option<String> {
        let literal = self.at(self.pos) == b'|';
        self.pos += 1;
        let chomp = match self.at(self.pos) {
            b'+' => Chomp::Keep,
            b'-' => Chomp::Strip,
            _ => Chomp::Clip,
        };
        if chomp != Chomp::Clip {
            self.pos += 1;
        }
        let spaces = self.skip_spaces();
        match self.at(self.pos) {
            b'\n' => {}
            b'#' if spaces > 0 => self.pos = self.line_end(self.pos),
            _ => return None,
        }
        self.pos += 1;

        let mut indent = 0;
        let mut out = String::new();
        let mut leading_break = false;
        let mut leading_blank = false;
        let mut trailing_breaks = 0;
        let mut line_start = self.pos;
        let mut column = self.breaks(&mut indent, &mut trailing_breaks, col, &mut line_start)?;
        while column == indent && self.pos <= self.text.len() {
            let trailing_blank = matches!(self.at(self.pos), b' ' | b'\t');
            if !literal && leading_break && !leading_blank && !trailing_blank {
                if trailing_breaks == 0 {
                    out.push(' ');
                }
            } else if leading_break {
                out.push('\n');
            }
            push_breaks(&mut out, trailing_breaks);
            trailing_breaks = 0;
            leading_blank = trailing_blank;
            let end = self.line_end(self.pos);
            out.push_str(self.src.get(self.pos..end)?);
            leading_break = true;
            self.pos = end + 1;
            line_start = self.pos;
            column = self.breaks(&mut indent, &mut trailing_breaks, col, &mut line_start)?;
        }
        if chomp != Chomp::Strip && leading_break {
            out.push('\n');
        }
        if chomp == Chomp::Keep {
            push_breaks(&mut out, trailing_breaks);
        }
        self.pos = line_start;
        self.advance()?;
        Some(out)
    }

    /// libyaml's `yaml_parser_scan_block_scalar_breaks`: the indentation and
    /// the empty lines before a block scalar's next line (`pos` at a line
    /// start), the indentation detected on the first call. Returns the
    /// column reached; `line_start` is the start of the line it is on.
    fn breaks(
        &mut self,
        indent: &mut usize,
        breaks: &mut usize,
        col: usize,
        line_start: &mut usize,
    ) -> Option<usize> {
        let mut max_indent = 0;
        let mut column;
        loop {
            *line_start = self.pos;
            column = 0;
            while (*indent == 0 || column < *indent) && self.at(self.pos) == b' ' {
                self.pos += 1;
                column += 1;
            }
            max_indent = max_indent.max(column);
            if (*indent == 0 || column < *indent) && self.at(self.pos) == b'\t' {
                return None;
            }
            if self.at(self.pos) != b'\n' {
                break;
            }
            self.pos += 1;
            *breaks += 1;
        }
        if *indent == 0 {
            *indent = max_indent.max(col + 1);
        }
        Some(column)
    }

    /// A one-line flow sequence or mapping at `pos`; `pos` after it.
    fn flow_node(&mut self) -> Option<Value> {
        self.enter()?;
        let open = self.at(self.pos);
        self.pos += 1;
        let value = if open == b'[' {
            let mut items = Vec::new();
            loop {
                self.skip_spaces();
                if self.at(self.pos) == b']' {
                    break;
                }
                items.push(self.flow_item()?);
                self.skip_spaces();
                match self.at(self.pos) {
                    b',' => self.pos += 1,
                    b']' => break,
                    _ => return None,
                }
            }
            Value::Array(items)
        } else {
            let mut map = Map::new();
            loop {
                self.skip_spaces();
                if self.at(self.pos) == b'}' {
                    break;
                }
                let start = self.pos;
                let key = self.flow_key()?;
                self.skip_spaces();
                // libyaml's simple-key limit holds in flow mappings too.
                if self.pos - start > MAX_KEY_BYTES
                    || self.at(self.pos) != b':'
                    || self.at(self.pos + 1) != b' '
                {
                    return None;
                }
                self.pos += 1;
                self.skip_spaces();
                if matches!(self.at(self.pos), b',' | b'}') {
                    return None;
                }
                let value = self.flow_item()?;
                if map.insert(key, value).is_some() {
                    return None;
                }
                self.skip_spaces();
                match self.at(self.pos) {
                    b',' => self.pos += 1,
                    b'}' => break,
                    _ => return None,
                }
            }
            Value::Object(map)
        };
        self.pos += 1;
        self.depth -= 1;
        Some(value)
    }

    /// A flow collection's entry: a flow collection or a one-line scalar.
    fn flow_item(&mut self) -> Option<Value> {
        match self.at(self.pos) {
            b'[' | b'{' => self.flow_node(),
            b'"' | b'\'' => self.quoted().map(Value::String),
            _ => {
                let text = self.flow_plain(false)?;
                resolve(text)
            }
        }
    }

    /// A flow mapping's key: a quoted or plain string.
    fn flow_key(&mut self) -> Option<String> {
        match self.at(self.pos) {
            b'"' | b'\'' => self.quoted(),
            _ => {
                let key = self.flow_plain(true)?;
                (resolves_to_string(key) && key != "<<").then(|| key.to_owned())
            }
        }
    }

    /// A plain scalar in a flow collection (a key when `key`, ended by
    /// `: `); `pos` after its last non-space character.
    fn flow_plain(&mut self, key: bool) -> Option<&str> {
        let start = self.pos;
        if !self.plain_start(start, true) {
            return None;
        }
        let mut i = start + 1;
        loop {
            match self.at(i) {
                b',' | b'[' | b']' | b'{' | b'}' => break,
                b':' if key && self.at(i + 1) == b' ' => break,
                b':' | b'#' | b'?' | b'\n' | b'\t' | 0 => return None,
                _ => i += 1,
            }
        }
        let text = self.src.get(start..i)?.trim_end_matches(' ');
        self.pos = start + text.len();
        Some(text)
    }
}

/// Writes `text` as a JSON string, escaped as serde_json escapes it.
fn write_str(out: &mut Vec<u8>, text: &str) {
    kiln_bytes::write_json_str(out, text);
}

/// Writes the plain scalar `text` resolved ([`resolve_scalar`]) as JSON.
fn write_plain(out: &mut Vec<u8>, text: &str) -> Option<()> {
    match resolve_scalar(text)? {
        Scalar::Null => out.extend_from_slice(b"null"),
        Scalar::Bool(true) => out.extend_from_slice(b"true"),
        Scalar::Bool(false) => out.extend_from_slice(b"false"),
        Scalar::Str => write_str(out, text),
        Scalar::Int(n) => serde_json::to_writer(&mut *out, &n).ok()?,
        // serde_json reads a NaN or an infinity as null.
        Scalar::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => serde_json::to_writer(&mut *out, &n).ok()?,
            None => out.extend_from_slice(b"null"),
        },
    }
    Some(())
}

/// The mapping written from `open` (its `{`) to the end of `out`, its
/// `entries` in the order read, rewritten with its keys in byte order (a
/// `serde_json::Map`'s order); None on a duplicate key (serde_yaml's error
/// to give).
fn sort_entries(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    open: usize,
    entries: &mut [Entry<'_>],
) -> Option<()> {
    // Keys compared word-wise (`str`'s order is `memcmp`, a byte at a
    // time inside WebAssembly).
    let order = |a: &Entry<'_>, b: &Entry<'_>| kiln_bytes::cmp(a.key.as_bytes(), b.key.as_bytes());
    if entries.windows(2).all(|w| order(&w[0], &w[1]).is_lt()) {
        return Some(());
    }
    entries.sort_unstable_by(order);
    if entries.windows(2).any(|w| order(&w[0], &w[1]).is_eq()) {
        return None;
    }
    scratch.clear();
    scratch.extend_from_slice(&out[open + 1..]);
    out.truncate(open + 1);
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&scratch[entry.start - open - 1..entry.end - open - 1]);
    }
    out.push(b'}');
    Some(())
}

fn push_breaks(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push('\n');
    }
}

/// Whether a plain scalar is read as a string (not null, a boolean or a
/// number).
fn resolves_to_string(text: &str) -> bool {
    matches!(resolve_scalar(text), Some(Scalar::Str))
}

/// A plain scalar's value, as serde_yaml resolves it and `to_json`
/// converts it; None for an integer beyond 64 bits (serde_yaml's own
/// business).
fn resolve(text: &str) -> Option<Value> {
    Some(match resolve_scalar(text)? {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(n) => Value::Number(n),
        // serde_json reads a NaN or an infinity as null.
        Scalar::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        Scalar::Str => Value::String(text.to_owned()),
    })
}

/// What a plain scalar resolves to.
enum Scalar {
    Null,
    Bool(bool),
    Int(serde_json::Number),
    Float(f64),
    Str,
}

/// A plain scalar of a rendered manifest as Helm's install reads it
/// ([`crate::yaml11::resolve_output`]: go-yaml v2, YAML 1.1, integers
/// exact) and Go's JSON encoder writes it (an integral float is an
/// integer); None for an integer only 128 bits hold, which the sort's
/// reader (serde_yaml) refuses: that path gives its error.
fn resolve_scalar(v: &str) -> Option<Scalar> {
    use crate::value::Value as V;
    let wide = |unsigned: bool| {
        if unsigned {
            yaml_int::unsigned(v, u64::from_str_radix).is_none()
                && yaml_int::unsigned(v, u128::from_str_radix).is_some()
        } else {
            yaml_int::negative(v, i64::from_str_radix).is_none()
                && yaml_int::negative(v, i128::from_str_radix).is_some()
        }
    };
    if wide(true) || wide(false) {
        return None;
    }
    Some(match crate::yaml11::resolve_output(v) {
        V::Nil => Scalar::Null,
        V::Bool(b) => Scalar::Bool(b),
        V::Int64(i) => Scalar::Int(i.into()),
        V::Float(f) => match crate::convert::json_at(&V::Float(f), 0, false)? {
            Value::Number(n) if n.is_f64() => Scalar::Float(f),
            Value::Number(n) => Scalar::Int(n),
            _ => return None,
        },
        _ => Scalar::Str,
    })
}

/// serde_yaml 0.9's number parsing (`de.rs`), as written there.
mod yaml_int {
    use std::num::ParseIntError;

    /// `parse_unsigned_int`.
    pub fn unsigned<T>(
        scalar: &str,
        from_str_radix: fn(&str, u32) -> Result<T, ParseIntError>,
    ) -> Option<T> {
        let unpositive = scalar.strip_prefix('+').unwrap_or(scalar);
        for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
            if let Some(rest) = unpositive.strip_prefix(prefix) {
                if rest.starts_with(['+', '-']) {
                    return None;
                }
                if let Ok(int) = from_str_radix(rest, radix) {
                    return Some(int);
                }
            }
        }
        if unpositive.starts_with(['+', '-']) {
            return None;
        }
        if digits_but_not_number(scalar) {
            return None;
        }
        from_str_radix(unpositive, 10).ok()
    }

    /// `parse_negative_int`.
    pub fn negative<T>(
        scalar: &str,
        from_str_radix: fn(&str, u32) -> Result<T, ParseIntError>,
    ) -> Option<T> {
        for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
            if let Some(rest) = scalar.strip_prefix(prefix) {
                let negative = format!("-{rest}");
                if let Ok(int) = from_str_radix(&negative, radix) {
                    return Some(int);
                }
            }
        }
        if digits_but_not_number(scalar) {
            return None;
        }
        from_str_radix(scalar, 10).ok()
    }

    /// `digits_but_not_number`: leading zeros and digits are a string.
    pub fn digits_but_not_number(scalar: &str) -> bool {
        let scalar = scalar.strip_prefix(['-', '+']).unwrap_or(scalar);
        scalar.len() > 1
            && scalar.starts_with('0')
            && scalar[1..].bytes().all(|b| b.is_ascii_digit())
    }
}

#[cfg(test)]
mod tests;
