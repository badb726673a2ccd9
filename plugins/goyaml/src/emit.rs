//! The emitter: walks a [`Tree`] and writes go-yaml v2's block style into
//! one buffer (map keys in go-yaml's order, sequences not indented under
//! their key, long scalars folded at spaces past column 80).

use std::fmt::Write as _;

use crate::number::go_format_g;
use crate::order::sort_by_key;
use crate::style::{Style, full_style, is_break, printable, quick_style};
use crate::tree::{Node, Tree};
use crate::{INDENT, WIDTH};

/// `tree` as one YAML document (ending with a newline); the tree's error
/// if one of its nodes cannot be printed.
pub(crate) fn document<T: Tree>(tree: &T) -> Result<String, T::Error> {
    let mut emitter = Emitter::default();
    tree.with_node(0, |node| emitter.root(node))??;
    // A literal block ends with its own line break.
    if emitter.column > 0 || emitter.out.is_empty() {
        emitter.out.push('\n');
    }
    Ok(emitter.out)
}

/// The text written so far, and where the current line stands.
#[derive(Default)]
struct Emitter {
    out: String,
    /// Characters on the current line.
    column: usize,
}

/// A mapping's entries, collected to be sorted.
type Entries<'a, T> = Vec<(&'a str, &'a T)>;

impl Emitter {
    fn push(&mut self, c: char) {
        self.out.push(c);
        if c == '\n' {
            self.column = 0;
        } else {
            self.column += 1;
        }
    }

    /// Writes `s` as [`Emitter::push`] would, character by character.
    fn push_str(&mut self, s: &str) {
        self.out.push_str(s);
        for &b in s.as_bytes() {
            if b == b'\n' {
                self.column = 0;
            } else if b & 0xc0 != 0x80 {
                // The first byte of a character (not a continuation).
                self.column += 1;
            }
        }
    }

    /// Writes an ASCII text without line breaks (a number, an escape).
    fn push_display(&mut self, value: impl std::fmt::Display) {
        let before = self.out.len();
        // Writing to a String cannot fail.
        let _ = write!(self.out, "{value}");
        self.column += self.out.len() - before;
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

    /// The document's root node.
    fn root<T: Tree>(&mut self, node: Node<'_, T>) -> Result<(), T::Error> {
        match node {
            Node::Map(entries) => {
                let entries: Entries<'_, T> = entries.collect();
                if entries.is_empty() {
                    self.push_str("{}");
                } else {
                    self.map(entries, 0, false, 0)?;
                }
            }
            Node::List(items) if !items.is_empty() => self.seq(items, 0, false, 0)?,
            other => self.scalar(other, INDENT, false),
        }
        Ok(())
    }

    /// A block mapping at `indent`, `depth` levels below the root;
    /// `inline`: its first key goes on the current line (after a
    /// sequence's `- `).
    fn map<T: Tree>(
        &mut self,
        mut entries: Entries<'_, T>,
        indent: usize,
        inline: bool,
        depth: usize,
    ) -> Result<(), T::Error> {
        let mut scratch = Vec::with_capacity(entries.len());
        sort_by_key(&mut entries, |entry| entry.0, &mut scratch);
        for (index, (key, value)) in entries.into_iter().enumerate() {
            if index > 0 || !inline {
                self.indent(indent);
            }
            self.string(key, indent + INDENT, true);
            self.push(':');
            value.with_node(depth + 1, |node| match node {
                Node::Map(children) => {
                    let children: Entries<'_, T> = children.collect();
                    if children.is_empty() {
                        self.push_str(" {}");
                        Ok(())
                    } else {
                        self.map(children, indent + INDENT, false, depth + 1)
                    }
                }
                // Sequences are not indented under their key.
                Node::List(items) if !items.is_empty() => self.seq(items, indent, false, depth + 1),
                other => {
                    self.push(' ');
                    self.scalar(other, indent + INDENT, false);
                    Ok(())
                }
            })??;
        }
        Ok(())
    }

    /// A block sequence at `indent`, `depth` levels below the root.
    fn seq<T: Tree>(
        &mut self,
        items: &[T],
        indent: usize,
        inline: bool,
        depth: usize,
    ) -> Result<(), T::Error> {
        for (index, item) in items.iter().enumerate() {
            if index > 0 || !inline {
                self.indent(indent);
            }
            self.push_str("- ");
            item.with_node(depth + 1, |node| match node {
                Node::Map(children) => {
                    let children: Entries<'_, T> = children.collect();
                    if children.is_empty() {
                        self.push_str("{}");
                        Ok(())
                    } else {
                        self.map(children, indent + INDENT, true, depth + 1)
                    }
                }
                Node::List(items) if !items.is_empty() => {
                    self.seq(items, indent + INDENT, true, depth + 1)
                }
                other => {
                    self.scalar(other, indent + INDENT, false);
                    Ok(())
                }
            })??;
        }
        Ok(())
    }

    /// A scalar (or an empty collection, in flow style); `indent` is where
    /// continuation lines start.
    fn scalar<T>(&mut self, node: Node<'_, T>, indent: usize, key: bool) {
        match node {
            Node::Null => self.push_str("null"),
            Node::Bool(b) => self.push_str(if b { "true" } else { "false" }),
            Node::Int(i) => self.push_display(i),
            Node::Uint(u) => self.push_display(u),
            Node::Float(f) => self.push_str(&go_format_g(f)),
            Node::Str(s) => self.string(s, indent, key),
            Node::List(_) => self.push_str("[]"),
            Node::Map(_) => self.push_str("{}"),
        }
    }

    fn string(&mut self, s: &str, indent: usize, key: bool) {
        let style = match quick_style(s) {
            // Printable ASCII on one line, written as it is (see `plain`):
            // one column a byte.
            Some(Style::Plain)
                if key || self.column + s.len() <= WIDTH + 1 || !s.as_bytes().contains(&b' ') =>
            {
                self.out.push_str(s);
                self.column += s.len();
                return;
            }
            Some(style) => style,
            None => full_style(s, key),
        };
        match style {
            Style::Plain => self.plain(s, indent, !key),
            Style::Single => self.single_quoted(s, indent, !key),
            Style::Double => self.double_quoted(s, indent, !key),
            Style::Literal => self.literal(s, indent),
        }
    }

    /// Whether a space becomes a line break, given the character after it.
    fn folds(&self, next: Option<&char>, breaks: bool, after_space: bool) -> bool {
        breaks && !after_space && self.column > WIDTH && next != Some(&' ')
    }

    fn plain(&mut self, s: &str, indent: usize, breaks: bool) {
        // A space folds only past column 80: a text that ends before it
        // (bytes count at least its characters) is written as it is.
        if !breaks || self.column + s.len() <= WIDTH + 1 || !s.contains(' ') {
            self.push_str(s);
            return;
        }
        let mut chars = s.chars().peekable();
        let mut after_space = false;
        while let Some(c) = chars.next() {
            if c == ' ' {
                if self.folds(chars.peek(), breaks, after_space) {
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
        let bytes = s.as_bytes();
        // Without a quote, and ending before a space could fold (past
        // column 80; bytes count at least their characters), the text is
        // written as it is.
        if !kiln_bytes::contains(bytes, b'\'')
            && (!breaks || self.column + 1 + s.len() <= WIDTH || !kiln_bytes::contains(bytes, b' '))
        {
            self.push('\'');
            self.push_str(s);
            self.push('\'');
            return;
        }
        self.push('\'');
        let mut chars = s.chars().peekable();
        let mut first = true;
        let mut after_space = false;
        while let Some(c) = chars.next() {
            if c == ' ' {
                let next = chars.peek();
                if !first && next.is_some() && self.folds(next, breaks, after_space) {
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
            first = false;
        }
        self.push('\'');
    }

    fn double_quoted(&mut self, s: &str, indent: usize, breaks: bool) {
        // Printable ASCII that needs no escape, ending before a space could
        // fold: written as it is.
        if kiln_bytes::printable_ascii_without(s.as_bytes(), [b'"', b'\\'])
            && (!breaks
                || self.column + 1 + s.len() <= WIDTH
                || !kiln_bytes::contains(s.as_bytes(), b' '))
        {
            self.out.reserve(s.len() + 2);
            self.out.push('"');
            self.out.push_str(s);
            self.out.push('"');
            self.column += s.len() + 2;
            return;
        }
        self.push('"');
        let mut chars = s.chars().peekable();
        let mut first = true;
        let mut after_space = false;
        while let Some(c) = chars.next() {
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
                    c if (c as u32) <= 0xff => self.push_display(format_args!("x{:02X}", c as u32)),
                    c if (c as u32) <= 0xffff => {
                        self.push_display(format_args!("u{:04X}", c as u32));
                    }
                    c => self.push_display(format_args!("U{:08X}", c as u32)),
                }
                after_space = false;
            } else if c == ' ' {
                let next = chars.peek();
                if !first && next.is_some() && breaks && !after_space && self.column > WIDTH {
                    let space_follows = next == Some(&' ');
                    self.indent(indent);
                    if space_follows {
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
            first = false;
        }
        self.push('"');
    }

    fn literal(&mut self, s: &str, indent: usize) {
        self.push('|');
        let first = s.chars().next();
        if first.is_some_and(|c| c == ' ' || is_break(c)) {
            self.push_display(INDENT);
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
