//! One-line flow collections for the fast reader: `[a, 'b', "c"]`,
//! `{k: v, n: {}}`, nested, of plain and quoted scalars.
//!
//! Not sure of (`None`): a collection not closed on its line, empty
//! entries and trailing commas, plain scalars holding `:` or `#`,
//! explicit keys, `key:value` without a space, duplicate keys, and
//! nesting deeper than the fast reader's limit.

use super::{MAX_DEPTH, double_quoted, plain_start, single_quoted};
use crate::value::{Map, Value};
use crate::yaml11::resolve::{non_finite, plain_key, resolve};

/// The flow collection `s` starts with (`[` or `{`) at nesting `depth`,
/// and the byte offset just past it.
pub(super) fn collection(s: &str, depth: usize) -> Option<(Value, usize)> {
    let mut flow = Flow { s, at: 0 };
    let value = flow.node(depth)?;
    Some((value, flow.at))
}

/// A cursor in one line.
struct Flow<'a> {
    s: &'a str,
    at: usize,
}

impl Flow<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    /// A node: a collection or a scalar.
    fn node(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'[' => self.sequence(depth),
            b'{' => self.mapping(depth),
            b'"' | b'\'' => self.quoted().map(Value::str),
            _ => {
                let text = self.plain()?;
                // An infinity is the event reader's to refuse.
                if non_finite(text).is_some() {
                    return None;
                }
                Some(resolve(text))
            }
        }
    }

    /// A quoted scalar's text.
    fn quoted(&mut self) -> Option<String> {
        let rest = self.s.get(self.at..)?;
        let (text, end) = if rest.starts_with('"') {
            double_quoted(rest)?
        } else {
            single_quoted(rest)?
        };
        self.at += end;
        Some(text.into_owned())
    }

    /// A plain scalar's text (trailing spaces dropped), up to a flow
    /// indicator; `None` at `:` or `#`, or when nothing may start here.
    fn plain(&mut self) -> Option<&str> {
        let rest = self.s.get(self.at..)?;
        if !plain_start(rest) {
            return None;
        }
        let b = rest.as_bytes();
        let mut end = 0;
        while let Some(c) = b.get(end) {
            match c {
                b',' | b'[' | b']' | b'{' | b'}' => break,
                b':' | b'#' => return None,
                _ => end += 1,
            }
        }
        self.at += end;
        Some(rest.get(..end)?.trim_end_matches(' '))
    }

    /// After an entry: `,` and the next entry, or the closing `close`.
    /// `Some(true)` when another entry follows.
    fn next_entry(&mut self, close: u8) -> Option<bool> {
        self.skip_spaces();
        match self.peek()? {
            b',' => {
                self.at += 1;
                self.skip_spaces();
                match self.peek()? {
                    b',' | b']' | b'}' => None,
                    _ => Some(true),
                }
            }
            c if c == close => {
                self.at += 1;
                Some(false)
            }
            _ => None,
        }
    }

    fn sequence(&mut self, depth: usize) -> Option<Value> {
        self.at += 1;
        self.skip_spaces();
        let mut items = Vec::new();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(Value::list(items));
        }
        loop {
            items.push(self.node(depth + 1)?);
            if !self.next_entry(b']')? {
                return Some(Value::list(items));
            }
        }
    }

    fn mapping(&mut self, depth: usize) -> Option<Value> {
        self.at += 1;
        self.skip_spaces();
        let mut map = Map::new();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(Value::map(map));
        }
        loop {
            let key = self.key()?;
            let value = self.node(depth + 1)?;
            if map.insert(key, value).is_some() {
                return None;
            }
            if !self.next_entry(b'}')? {
                return Some(Value::map(map));
            }
        }
    }

    /// A key and its `: ` (the cursor then at the value).
    fn key(&mut self) -> Option<String> {
        let start = self.at;
        let key = match self.peek()? {
            b'"' | b'\'' => self.quoted()?,
            _ => {
                let rest = self.s.get(self.at..)?;
                if !plain_start(rest) {
                    return None;
                }
                let end = rest.find(": ")?;
                let text = rest.get(..end)?;
                let bad = |c: char| matches!(c, ',' | '[' | ']' | '{' | '}' | ':' | '#');
                if text.ends_with(' ') || text.contains(bad) || text == "<<" {
                    return None;
                }
                self.at += end;
                plain_key(text)
            }
        };
        // Long simple keys are the event reader's to judge, as in blocks.
        if self.at - start <= super::MAX_KEY_LEN && self.s.get(self.at..)?.starts_with(": ") {
            self.at += 2;
            self.skip_spaces();
            Some(key)
        } else {
            None
        }
    }
}
