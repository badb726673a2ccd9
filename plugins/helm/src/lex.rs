//! Go `text/template`'s lexer: text and actions (`{{ }}`, with `{{-`/`-}}`
//! trimming and `/* */` comments) cut into items.

use std::borrow::Cow;

use crate::parse::ParseError;

/// One lexical item, borrowing from the template's text.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok<'a> {
    /// Plain text between actions.
    Text(&'a str),
    /// `{{`.
    Left,
    /// `}}`.
    Right,
    /// Run of spaces inside an action (it separates arguments).
    Space,
    /// `.name` (one field; chains are consecutive fields).
    Field(&'a str),
    /// `$name` (`$` alone included).
    Variable(&'a str),
    /// A function name or keyword.
    Ident(&'a str),
    /// A quoted string, unquoted (borrowed unless it had escapes).
    Str(Cow<'a, str>),
    /// A number or character constant, as written.
    Number(Cow<'a, str>),
    /// `true` / `false`.
    Bool(bool),
    /// `nil`.
    Nil,
    /// `.` alone.
    Dot,
    /// `|`.
    Pipe,
    /// `(`.
    LParen,
    /// `)`.
    RParen,
    /// `:=`.
    Declare,
    /// `=`.
    Assign,
    /// `,`.
    Comma,
    /// End of input.
    Eof,
}

/// An item and the line it starts on (1-based) and its byte offset.
#[derive(Debug, Clone)]
pub struct Item<'a> {
    /// The item.
    pub tok: Tok<'a>,
    /// Line number.
    pub line: usize,
    /// Byte offset in the template text.
    pub pos: usize,
}

/// How many line breaks `text` holds (counted eight bytes a step).
fn newlines(text: &str) -> usize {
    kiln_bytes::count(text.as_bytes(), b'\n')
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Cuts `text` (template `name`) into items.
pub fn lex<'a>(name: &str, text: &'a str) -> Result<Vec<Item<'a>>, ParseError> {
    let mut lx = Lexer {
        name,
        src: text,
        pos: 0,
        line: 1,
        items: Vec::new(),
    };
    lx.run()?;
    Ok(lx.items)
}

struct Lexer<'n, 'a> {
    name: &'n str,
    src: &'a str,
    pos: usize,
    line: usize,
    items: Vec<Item<'a>>,
}

impl<'a> Lexer<'_, 'a> {
    fn err(&self, line: usize, msg: impl Into<String>) -> ParseError {
        ParseError::new(self.name, line, msg)
    }

    fn emit(&mut self, tok: Tok<'a>, line: usize, pos: usize) {
        self.items.push(Item { tok, line, pos });
    }

    fn run(&mut self) -> Result<(), ParseError> {
        let bytes = self.src.as_bytes();
        loop {
            let start = self.pos;
            let line = self.line;
            let Some(rel) = kiln_bytes::find(&self.src[self.pos..], "{{") else {
                if start < self.src.len() {
                    self.emit(Tok::Text(&self.src[start..]), line, start);
                }
                self.line += newlines(&self.src[start..]);
                self.emit(Tok::Eof, self.line, self.src.len());
                return Ok(());
            };
            let delim = self.pos + rel;
            let trim_left = bytes.get(delim + 2) == Some(&b'-')
                && bytes.get(delim + 3).is_some_and(|&c| is_space(c));
            let mut text = &self.src[start..delim];
            self.line += newlines(text);
            if trim_left {
                text = text.trim_end_matches([' ', '\t', '\r', '\n']);
            }
            if !text.is_empty() {
                self.emit(Tok::Text(text), line, start);
            }
            self.pos = delim + 2;
            if trim_left {
                self.pos += 2;
            }
            // A comment: the whole action.
            let after = self.src[self.pos..].trim_start_matches([' ', '\t', '\r', '\n']);
            if after.starts_with("/*") {
                let skipped = self.src.len() - self.pos - after.len();
                if trim_left || skipped == 0 {
                    let cstart = self.pos + skipped;
                    let Some(end) = kiln_bytes::find(&self.src[cstart..], "*/") else {
                        return Err(self.err(self.line, "unclosed comment"));
                    };
                    let cend = cstart + end + 2;
                    self.line += newlines(&self.src[self.pos..cend]);
                    self.pos = cend;
                    let rest = &self.src[self.pos..];
                    let (trim_right, len) = if rest.starts_with(" -}}")
                        || rest.starts_with("\t-}}")
                        || rest.starts_with("\n-}}")
                        || rest.starts_with("\r-}}")
                    {
                        (true, 4)
                    } else if rest.starts_with("}}") {
                        (false, 2)
                    } else {
                        return Err(self.err(self.line, "comment ends before closing delimiter"));
                    };
                    self.line += newlines(&rest[..len]);
                    self.pos += len;
                    if trim_right {
                        self.trim_following();
                    }
                    continue;
                }
            }
            self.emit(Tok::Left, self.line, delim);
            self.inside()?;
        }
    }

    /// Skips the whitespace after a `-}}`.
    fn trim_following(&mut self) {
        let rest = &self.src[self.pos..];
        let trimmed = rest.trim_start_matches([' ', '\t', '\r', '\n']);
        self.line += newlines(&rest[..rest.len() - trimmed.len()]);
        self.pos += rest.len() - trimmed.len();
    }

    /// Lexes inside an action up to and including its `}}`.
    fn inside(&mut self) -> Result<(), ParseError> {
        let mut parens = 0i32;
        loop {
            let rest = &self.src[self.pos..];
            let line = self.line;
            let pos = self.pos;
            if rest.is_empty() {
                return Err(self.err(line, "unclosed action"));
            }
            // Right delimiter, possibly trimming.
            if let Some(after) = rest.strip_prefix("}}") {
                let _ = after;
                if parens > 0 {
                    return Err(self.err(line, "unclosed left paren"));
                }
                self.pos += 2;
                self.emit(Tok::Right, line, pos);
                return Ok(());
            }
            let c = rest.chars().next().unwrap_or(' ');
            if is_space(c as u8) && c.is_ascii() {
                let n = rest.len() - rest.trim_start_matches([' ', '\t', '\r', '\n']).len();
                let spaces = &rest[..n];
                // ` -}}`
                if rest[n..].starts_with("-}}") {
                    self.line += newlines(spaces);
                    if parens > 0 {
                        return Err(self.err(line, "unclosed left paren"));
                    }
                    self.pos += n + 3;
                    self.emit(Tok::Right, self.line, pos);
                    self.trim_following();
                    return Ok(());
                }
                if spaces.contains('\n') && !rest[n..].starts_with("}}") {
                    // Go allows newlines inside actions since 1.16.
                }
                self.line += newlines(spaces);
                self.pos += n;
                self.emit(Tok::Space, line, pos);
                continue;
            }
            match c {
                '|' => {
                    self.pos += 1;
                    self.emit(Tok::Pipe, line, pos);
                }
                '(' => {
                    parens += 1;
                    self.pos += 1;
                    self.emit(Tok::LParen, line, pos);
                }
                ')' => {
                    parens -= 1;
                    if parens < 0 {
                        return Err(self.err(line, "unexpected right paren"));
                    }
                    self.pos += 1;
                    self.emit(Tok::RParen, line, pos);
                }
                ',' => {
                    self.pos += 1;
                    self.emit(Tok::Comma, line, pos);
                }
                ':' => {
                    if rest.starts_with(":=") {
                        self.pos += 2;
                        self.emit(Tok::Declare, line, pos);
                    } else {
                        return Err(self.err(line, "expected :="));
                    }
                }
                '=' => {
                    self.pos += 1;
                    self.emit(Tok::Assign, line, pos);
                }
                '"' => {
                    let (s, len) = self.quoted(rest, line)?;
                    self.pos += len;
                    self.emit(Tok::Str(s), line, pos);
                }
                '`' => {
                    let Some(end) = rest[1..].find('`') else {
                        return Err(self.err(line, "unterminated raw quoted string"));
                    };
                    let s = &rest[1..1 + end];
                    self.line += newlines(s);
                    self.pos += end + 2;
                    self.emit(Tok::Str(Cow::Borrowed(s)), line, pos);
                }
                '\'' => {
                    let (s, len) = self.char_const(rest, line)?;
                    self.pos += len;
                    self.emit(Tok::Number(Cow::Owned(s)), line, pos);
                }
                '$' => {
                    let n = 1 + rest[1..]
                        .char_indices()
                        .find(|&(_, c)| !is_alnum(c))
                        .map_or(rest.len() - 1, |(i, _)| i);
                    self.pos += n;
                    self.emit(Tok::Variable(&rest[..n]), line, pos);
                }
                '.' => {
                    let next = rest[1..].chars().next();
                    if next.is_some_and(|c| c.is_ascii_digit()) {
                        let n = number_len(rest);
                        self.pos += n;
                        self.emit(Tok::Number(Cow::Borrowed(&rest[..n])), line, pos);
                    } else if next.is_some_and(is_alnum) {
                        let n = 1 + rest[1..]
                            .char_indices()
                            .find(|&(_, c)| !is_alnum(c))
                            .map_or(rest.len() - 1, |(i, _)| i);
                        self.pos += n;
                        self.emit(Tok::Field(&rest[1..n]), line, pos);
                    } else {
                        self.pos += 1;
                        self.emit(Tok::Dot, line, pos);
                    }
                }
                '+' | '-' | '0'..='9' => {
                    let n = number_len(rest);
                    if n == 0 || (n == 1 && !c.is_ascii_digit()) {
                        return Err(self.err(line, format!("unexpected {c:?} in command")));
                    }
                    self.pos += n;
                    self.emit(Tok::Number(Cow::Borrowed(&rest[..n])), line, pos);
                }
                c if is_alnum(c) => {
                    let n = rest
                        .char_indices()
                        .find(|&(_, c)| !is_alnum(c))
                        .map_or(rest.len(), |(i, _)| i);
                    let word = &rest[..n];
                    self.pos += n;
                    let tok = match word {
                        "true" => Tok::Bool(true),
                        "false" => Tok::Bool(false),
                        "nil" => Tok::Nil,
                        _ => Tok::Ident(word),
                    };
                    self.emit(tok, line, pos);
                }
                other => {
                    return Err(
                        self.err(line, format!("unrecognized character in action: {other:?}"))
                    );
                }
            }
        }
    }

    fn quoted(&mut self, rest: &'a str, line: usize) -> Result<(Cow<'a, str>, usize), ParseError> {
        // Without escapes, the text between the quotes.
        if let Some(i) = rest[1..].find(['"', '\\', '\n'])
            && rest.as_bytes()[1 + i] == b'"'
        {
            return Ok((Cow::Borrowed(&rest[1..1 + i]), i + 2));
        }
        let mut out = String::new();
        let mut chars = rest.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((Cow::Owned(out), i + 1)),
                '\n' => return Err(self.err(line, "unterminated quoted string")),
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'a' => out.push('\x07'),
                        'b' => out.push('\x08'),
                        'f' => out.push('\x0c'),
                        'v' => out.push('\x0b'),
                        '\\' => out.push('\\'),
                        '"' => out.push('"'),
                        '\'' => out.push('\''),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex: String =
                                (0..n).filter_map(|_| chars.next().map(|x| x.1)).collect();
                            let v = u32::from_str_radix(&hex, 16)
                                .map_err(|_| self.err(line, "invalid syntax"))?;
                            match char::from_u32(v) {
                                Some(ch) => out.push(ch),
                                None => return Err(self.err(line, "invalid syntax")),
                            }
                        }
                        '0'..='7' => {
                            let mut v = e.to_digit(8).unwrap_or(0);
                            for _ in 0..2 {
                                let d = chars.next().and_then(|x| x.1.to_digit(8));
                                v = v * 8 + d.ok_or_else(|| self.err(line, "invalid syntax"))?;
                            }
                            out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(self.err(line, "invalid syntax")),
                    }
                }
                c => out.push(c),
            }
        }
        Err(self.err(line, "unterminated quoted string"))
    }

    fn char_const(&mut self, rest: &str, line: usize) -> Result<(String, usize), ParseError> {
        let mut chars = rest.char_indices().skip(1);
        let value = match chars.next() {
            Some((_, '\\')) => match chars.next() {
                Some((_, 'n')) => '\n',
                Some((_, 't')) => '\t',
                Some((_, '\\')) => '\\',
                Some((_, '\'')) => '\'',
                Some((_, 'r')) => '\r',
                Some((_, '0')) => '\0',
                _ => return Err(self.err(line, "unterminated character constant")),
            },
            Some((_, c)) => c,
            None => return Err(self.err(line, "unterminated character constant")),
        };
        match chars.next() {
            Some((i, '\'')) => Ok(((value as u32).to_string(), i + 1)),
            _ => Err(self.err(line, "unterminated character constant")),
        }
    }
}

/// The length of the number at the start of `s` (Go's `scanNumber`, loosely).
fn number_len(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let mut hex = false;
    if i + 1 < b.len()
        && b[i] == b'0'
        && matches!(b[i + 1], b'x' | b'X' | b'o' | b'O' | b'b' | b'B')
    {
        hex = matches!(b[i + 1], b'x' | b'X');
        i += 2;
    }
    while i < b.len() {
        let c = b[i];
        let ok = c.is_ascii_digit()
            || c == b'_'
            || c == b'.'
            || (hex && c.is_ascii_hexdigit())
            || (!hex && (c == b'e' || c == b'E'))
            || (hex && (c == b'p' || c == b'P'));
        if ok {
            i += 1;
            if matches!(c, b'e' | b'E' | b'p' | b'P')
                && i < b.len()
                && (b[i] == b'+' || b[i] == b'-')
            {
                i += 1;
            }
        } else {
            break;
        }
    }
    // Go: a number followed by an alphanumeric is a bad number.
    if i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
    }
    i
}
