//! Go's regular expressions (`regexp`, RE2 syntax with Go's Perl flags),
//! as Sprig's `regex*` functions run them in Helm.
//!
//! A pattern is read by a parser that follows Go's `regexp/syntax`: it
//! accepts exactly what Go accepts (a `-` after a class escape and a `{`
//! that starts no repetition are literals, `\Q…\E` quotes, `(?P<n>…)` and
//! `(?<n>…)` name groups, Unicode classes such as `\pL` and `\p{Greek}`)
//! and refuses what Go refuses with Go's message (`invalid nested
//! repetition operator: `a**``, `invalid escape sequence: `\1``, counts
//! past 1,000…). What it reads is written in the
//! syntax of the `regex` crate, every part spelled out so that the two
//! engines agree on it: literals as `\x{…}`, Go's ASCII `\d`, `\s`, `\w`
//! and `\b` as ASCII sets, groups without names (Go allows names `regex`
//! does not, and repeats them), repetitions over a group. Both engines
//! match leftmost-first, case-fold alike and run in linear time.
//!
//! Known differences: the characters in a Unicode class are those of the
//! `regex` crate's Unicode version (16), Go's are Unicode 15's; `regex`'s
//! own size limit (32 MiB compiled) can refuse a pattern Go would compile,
//! with Go's `expression too large`; groups nest at most 250 deep (Go:
//! 1,000), refused with Go's `expression nests too deeply`.

/// Go's limit on a repetition count (`{n}`, `{n,m}`), and on their
/// product along nested repetitions.
const MAX_REPEAT: u64 = 1000;
/// The deepest nesting of groups read (Go's limit is a parse tree 1,000
/// high; the engine's 250, and no chart nests a pattern so deep).
const MAX_DEPTH: usize = 250;
/// The longest pattern read, in bytes (Go's own limits, on the compiled
/// program, refuse far shorter ones in practice).
const MAX_PATTERN: usize = 1 << 20;
/// The most Unicode classes (`\pL`) in one pattern: each is thousands of
/// ranges to the engine (Go's limit, on all classes' runes together,
/// allows about 12,000 `\pL`).
const MAX_UNICODE_CLASSES: usize = 4096;
/// The compiled size the engine may use for one pattern.
const SIZE_LIMIT: usize = 32 << 20;

/// A compiled Go pattern: the engine's regex and the names Go gives its
/// groups (by group number; 0 is the whole match).
#[derive(Debug, Clone)]
pub struct GoRegex {
    re: regex::Regex,
    /// Go's group names, each with its groups in order (a name may be
    /// given to several).
    by_name: std::collections::HashMap<String, Vec<usize>>,
}

/// A pattern as the engine reads it, with its group names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// The pattern in the `regex` crate's syntax.
    pub pattern: String,
    /// Go's name of each group, by number (index 0: the whole match).
    pub names: Vec<Option<String>>,
}

impl GoRegex {
    /// Compiles `pattern` as Go's `regexp.Compile` does; the error is Go's
    /// (`error parsing regexp: …`).
    pub fn new(pattern: &str) -> Result<GoRegex, String> {
        let t = translate(pattern).map_err(|e| format!("error parsing regexp: {e}"))?;
        let re = regex::RegexBuilder::new(&t.pattern)
            .size_limit(SIZE_LIMIT)
            .nest_limit(u32::try_from(4 * MAX_DEPTH).unwrap_or(u32::MAX))
            .build()
            .map_err(|_| format!("error parsing regexp: expression too large: `{pattern}`"))?;
        let mut by_name: std::collections::HashMap<String, Vec<usize>> = Default::default();
        for (group, name) in t.names.iter().enumerate() {
            if let Some(name) = name {
                by_name.entry(name.clone()).or_default().push(group);
            }
        }
        Ok(GoRegex { re, by_name })
    }

    /// The engine's regex (the same matches as Go's).
    pub fn regex(&self) -> &regex::Regex {
        &self.re
    }

    /// Go's `Regexp.Expand` of `template` for one match: `$1`, `${1}`,
    /// `$name`, `${name}` (a name is the longest run of letters, digits
    /// and `_`: `$1x` is the group named `1x`), `$$`; an unknown group is
    /// empty, a malformed `$` is itself.
    pub fn expand(&self, out: &mut String, template: &str, caps: &regex::Captures<'_>) {
        let mut rest = template;
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            if let Some(after) = rest.strip_prefix("$$") {
                out.push('$');
                rest = after;
                continue;
            }
            let Some((name, after)) = extract_name(rest) else {
                out.push('$');
                rest = &rest[1..];
                continue;
            };
            rest = after;
            let found = match group_number(name) {
                Some(n) => caps.get(n),
                // The first group of that name that took part in the match.
                None => self
                    .by_name
                    .get(name)
                    .and_then(|groups| groups.iter().find_map(|&g| caps.get(g))),
            };
            if let Some(m) = found {
                out.push_str(m.as_str());
            }
        }
        out.push_str(rest);
    }
}

/// A name that is Go's group number: decimal digits without a leading
/// zero, under 100,000,000 (else a name, as Go's `extract` reads it).
fn group_number(name: &str) -> Option<usize> {
    let digits = name.bytes().all(|b| b.is_ascii_digit());
    if !digits || (name.len() > 1 && name.starts_with('0')) || name.len() > 8 {
        return None;
    }
    name.parse().ok()
}

/// Go's `extract`: the group name after a `$` (`$name` or `${name}`) and
/// the text after it; None when malformed.
fn extract_name(s: &str) -> Option<(&str, &str)> {
    let s = s.strip_prefix('$')?;
    let (braced, body) = match s.strip_prefix('{') {
        Some(b) => (true, b),
        None => (false, s),
    };
    // Go's letters and decimal digits (`unicode.IsLetter`, `IsDigit`).
    static NAME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[\p{L}\p{Nd}_]*").expect("a valid pattern")
    });
    let end = NAME.find(body).map_or(0, |m| m.end());
    if end == 0 {
        return None;
    }
    let name = &body[..end];
    if braced {
        let after = body[end..].strip_prefix('}')?;
        Some((name, after))
    } else {
        Some((name, &body[end..]))
    }
}

/// A parse failure: Go's code and the part of the pattern it names.
fn error(code: &str, expr: &str) -> String {
    format!("{code}: `{expr}`")
}

/// `pattern`, in Go's syntax, in the syntax of the `regex` crate; Go's
/// error (without its `error parsing regexp: ` prefix) where Go refuses it.
pub fn translate(pattern: &str) -> Result<Translation, String> {
    if pattern.len() > MAX_PATTERN {
        return Err(error("expression too large", pattern));
    }
    let mut p = Parser {
        s: pattern,
        pos: 0,
        out: String::with_capacity(pattern.len() * 2),
        names: vec![None],
        posix_end: posix_ends(pattern),
        ungreedy: false,
        unicode_classes: 0,
    };
    p.sequence(0)?;
    if p.pos < pattern.len() {
        // Only a `)` stops the top level.
        return Err(error("unexpected )", pattern));
    }
    Ok(Translation {
        pattern: p.out,
        names: p.names,
    })
}

/// For each byte offset, where the next `:]` starts (`usize::MAX`: none),
/// so that every `[:` finds its end in constant time (Go searches the rest
/// of the pattern each time).
fn posix_ends(s: &str) -> Vec<usize> {
    let b = s.as_bytes();
    let mut ends = vec![usize::MAX; b.len() + 1];
    for i in (0..b.len()).rev() {
        ends[i] = if b[i] == b':' && b.get(i + 1) == Some(&b']') {
            i
        } else {
            ends[i + 1]
        };
    }
    ends
}

/// The item last written in a sequence: where its text starts, and the
/// product of the counted repetitions inside it (Go's `repeatIsValid`).
#[derive(Clone, Copy)]
struct Item {
    start: usize,
    product: u64,
    /// Repetitions applied to it: their `(?:` openings, written once when
    /// the item is done (one insertion, whatever their number: a pattern
    /// such as `a(?i)*(?i)*…` stays linear).
    wraps: usize,
}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
    out: String,
    names: Vec<Option<String>>,
    posix_end: Vec<usize>,
    /// Whether `U` is in force where the output ends.
    ungreedy: bool,
    /// Unicode classes read so far ([`MAX_UNICODE_CLASSES`]).
    unicode_classes: usize,
}

/// Flags of bare flag groups (`(?i)`, `(?-s)`) not written yet: each
/// flag's last setting (`i`, `m`, `s`, `U`), so that any run of them is
/// written as one group.
#[derive(Default)]
struct PendingFlags([Option<bool>; 4]);

impl PendingFlags {
    const NAMES: [char; 4] = ['i', 'm', 's', 'U'];

    /// Adds `flags` (`im-sU`).
    fn merge(&mut self, flags: &str) {
        let (on, off) = flags.split_once('-').unwrap_or((flags, ""));
        for (slot, name) in self.0.iter_mut().zip(Self::NAMES) {
            if on.contains(name) {
                *slot = Some(true);
            } else if off.contains(name) {
                *slot = Some(false);
            }
        }
    }

    /// The `U` setting, if one is pending.
    fn ungreedy(&self) -> Option<bool> {
        self.0[3]
    }

    /// The flags as one group (empty when none), cleared.
    fn take(&mut self) -> String {
        let mut on = String::new();
        let mut off = String::new();
        for (slot, name) in self.0.iter_mut().zip(Self::NAMES) {
            match slot.take() {
                Some(true) => on.push(name),
                Some(false) => off.push(name),
                None => {}
            }
        }
        match (on.is_empty(), off.is_empty()) {
            (true, true) => String::new(),
            (_, true) => format!("(?{on})"),
            _ => format!("(?{on}-{off})"),
        }
    }
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    /// An alternation up to a `)` or the end: its largest repetition
    /// product.
    fn sequence(&mut self, depth: usize) -> Result<u64, String> {
        if depth > MAX_DEPTH {
            return Err(error("expression nests too deeply", self.s));
        }
        let mut last: Option<Item> = None;
        // Where the repetition just read starts (Go's `lastRepeat`).
        let mut last_repeat: Option<usize> = None;
        // A bare flag group (`(?i)`) is written before the next item, so
        // that a repetition right after it applies to the item before it.
        let mut pending_flags = PendingFlags::default();
        let mut product = 0u64;
        while let Some(c) = self.peek() {
            let at = self.pos;
            let mut repeat_here = None;
            match c {
                ')' => break,
                '|' => {
                    self.pos += 1;
                    self.finish(last);
                    // Go's flags hold across `|` to the group's end.
                    self.emit_flags(&mut pending_flags);
                    self.out.push('|');
                    product = product.max(last.map_or(0, |i| i.product));
                    last = None;
                }
                '*' | '+' | '?' | '{' => {
                    let Some((min, max, end)) = self.repeat_at(c) else {
                        // A `{` that starts no repetition is a literal.
                        self.pos += 1;
                        self.item(&mut last, &mut product, &mut pending_flags, |p| {
                            p.literal('{');
                            Ok(0)
                        })?;
                        last_repeat = None;
                        continue;
                    };
                    let op_text = &self.s[at..end];
                    if c == '{'
                        && (min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min))
                    {
                        return Err(error("invalid repeat count", op_text));
                    }
                    self.pos = end;
                    let lazy = self.peek() == Some('?');
                    if lazy {
                        self.pos += 1;
                    }
                    let full = &self.s[at..self.pos];
                    if let Some(prev) = last_repeat {
                        return Err(error(
                            "invalid nested repetition operator",
                            &self.s[prev..self.pos],
                        ));
                    }
                    let Some(item) = last.as_mut() else {
                        return Err(error("missing argument to repetition operator", full));
                    };
                    let counted = c == '{';
                    if counted {
                        let m = max.unwrap_or(min);
                        item.product = if m == 0 {
                            0
                        } else {
                            item.product.max(1).saturating_mul(m)
                        };
                    }
                    if counted
                        && (min >= 2 || max.is_some_and(|m| m >= 2))
                        && item.product > MAX_REPEAT
                    {
                        return Err(error("invalid repeat count", full));
                    }
                    item.wraps += 1;
                    self.out.push(')');
                    self.out.push_str(&match (c, max) {
                        ('*' | '+' | '?', _) => c.to_string(),
                        (_, Some(m)) if m == min => format!("{{{min}}}"),
                        (_, Some(m)) => format!("{{{min},{m}}}"),
                        (_, None) => format!("{{{min},}}"),
                    });
                    // Go takes the greediness from the flags in force at
                    // the operator, pending ones included; the engine
                    // from those written so far.
                    let ungreedy_go = pending_flags.ungreedy().unwrap_or(self.ungreedy);
                    if lazy ^ (ungreedy_go != self.ungreedy) {
                        self.out.push('?');
                    }
                    repeat_here = Some(at);
                }
                '(' => {
                    if self.peek_at(1) == Some('?') && !self.named_group_ahead() {
                        match self.flags()? {
                            Flags::Bare(f) => pending_flags.merge(&f),
                            Flags::Group(f) => {
                                self.item(&mut last, &mut product, &mut pending_flags, |p| {
                                    p.out.push_str(&format!("(?{f}:"));
                                    p.group_with(depth, &f)
                                })?;
                            }
                        }
                    } else {
                        let name = self.capture_name()?;
                        self.names.push(name);
                        self.item(&mut last, &mut product, &mut pending_flags, |p| {
                            p.out.push('(');
                            p.group_with(depth, "")
                        })?;
                    }
                }
                '^' | '$' | '.' => {
                    self.pos += 1;
                    self.item(&mut last, &mut product, &mut pending_flags, |p| {
                        p.out.push(c);
                        Ok(0)
                    })?;
                }
                '[' => {
                    self.item(&mut last, &mut product, &mut pending_flags, |p| {
                        p.class()?;
                        Ok(0)
                    })?;
                }
                '\\' => {
                    if self.peek_at(1) == Some('Q') {
                        self.pos += 2;
                        let rest = self.rest();
                        let (quoted, skip) = match rest.find("\\E") {
                            Some(i) => (&rest[..i], i + 2),
                            None => (rest, rest.len()),
                        };
                        let quoted = quoted.to_owned();
                        self.pos += skip;
                        for q in quoted.chars() {
                            self.item(&mut last, &mut product, &mut pending_flags, |p| {
                                p.literal(q);
                                Ok(0)
                            })?;
                        }
                    } else {
                        self.item(&mut last, &mut product, &mut pending_flags, |p| {
                            p.escape()?;
                            Ok(0)
                        })?;
                    }
                }
                other => {
                    self.pos += other.len_utf8();
                    self.item(&mut last, &mut product, &mut pending_flags, |p| {
                        p.literal(other);
                        Ok(0)
                    })?;
                }
            }
            last_repeat = repeat_here;
        }
        self.finish(last);
        Ok(product.max(last.map_or(0, |i| i.product)))
    }

    /// Writes the openings of the repetitions applied to the last item.
    fn finish(&mut self, last: Option<Item>) {
        if let Some(item) = last
            && item.wraps > 0
        {
            self.out.insert_str(item.start, &"(?:".repeat(item.wraps));
        }
    }

    /// Writes one item (after any pending flags) and makes it the last.
    fn item(
        &mut self,
        last: &mut Option<Item>,
        before: &mut u64,
        pending_flags: &mut PendingFlags,
        write: impl FnOnce(&mut Self) -> Result<u64, String>,
    ) -> Result<(), String> {
        self.finish(*last);
        self.emit_flags(pending_flags);
        *before = (*before).max(last.map_or(0, |i| i.product));
        let start = self.out.len();
        let product = write(self)?;
        *last = Some(Item {
            start,
            product,
            wraps: 0,
        });
        Ok(())
    }

    /// Writes the flags of bare flag groups read since the last item.
    fn emit_flags(&mut self, pending: &mut PendingFlags) {
        if let Some(u) = pending.ungreedy() {
            self.ungreedy = u;
        }
        self.out.push_str(&pending.take());
    }

    /// [`Parser::group`] with the group's flags (`iU-s`) in force inside
    /// it, and the flags outside restored after it.
    fn group_with(&mut self, depth: usize, flags: &str) -> Result<u64, String> {
        let saved = self.ungreedy;
        let (on, off) = flags.split_once('-').unwrap_or((flags, ""));
        if on.contains('U') {
            self.ungreedy = true;
        } else if off.contains('U') {
            self.ungreedy = false;
        }
        let product = self.group(depth);
        self.ungreedy = saved;
        product
    }

    /// The body of a group just opened (its opening already written), up
    /// to and with its `)`.
    fn group(&mut self, depth: usize) -> Result<u64, String> {
        let product = self.sequence(depth + 1)?;
        if self.peek() != Some(')') {
            return Err(error("missing closing )", self.s));
        }
        self.pos += 1;
        self.out.push(')');
        Ok(product)
    }

    /// Whether `(?P<` or `(?<` starts here (a named group).
    fn named_group_ahead(&self) -> bool {
        let r = self.rest().as_bytes();
        (r.len() > 4 && r[2] == b'P' && r[3] == b'<') || (r.len() > 3 && r[2] == b'<')
    }

    /// Reads `(` or `(?P<name>`/`(?<name>`: the group's name.
    fn capture_name(&mut self) -> Result<Option<String>, String> {
        if !self.named_group_ahead() || self.peek_at(1) != Some('?') {
            self.pos += 1;
            return Ok(None);
        }
        let rest = self.rest();
        let name_start = if rest.as_bytes()[2] == b'P' { 4 } else { 3 };
        let Some(end) = rest.find('>') else {
            return Err(error("invalid named capture", rest));
        };
        let name = &rest[name_start..end];
        if name.is_empty() || !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()) {
            return Err(error("invalid named capture", &rest[..=end]));
        }
        let name = name.to_owned();
        self.pos += end + 1;
        Ok(Some(name))
    }

    /// Reads `(?flags)` or `(?flags:` as Go's `parsePerlFlags` does.
    fn flags(&mut self) -> Result<Flags, String> {
        let start = self.pos;
        self.pos += 2;
        // Each flag's last setting (Go applies them in order; the engine
        // refuses a flag written twice).
        let mut set: Vec<(char, bool)> = Vec::new();
        let mut negated = false;
        let mut saw_flag = false;
        while let Some(c) = self.peek() {
            self.pos += c.len_utf8();
            match c {
                'i' | 'm' | 's' | 'U' => {
                    set.retain(|(f, _)| *f != c);
                    set.push((c, !negated));
                    saw_flag = true;
                }
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' if !negated || saw_flag => {
                    let on: String = set.iter().filter(|(_, on)| *on).map(|(f, _)| *f).collect();
                    let off: String = set.iter().filter(|(_, on)| !*on).map(|(f, _)| *f).collect();
                    let text = if off.is_empty() {
                        on
                    } else {
                        format!("{on}-{off}")
                    };
                    return Ok(if c == ':' {
                        Flags::Group(text)
                    } else {
                        Flags::Bare(text)
                    });
                }
                _ => break,
            }
        }
        Err(error(
            "invalid or unsupported Perl syntax",
            &self.s[start..self.pos],
        ))
    }

    /// A repetition operator at the current position: its counts and
    /// where it ends (before a `?`); None for a `{` that is a literal.
    fn repeat_at(&self, c: char) -> Option<(u64, Option<u64>, usize)> {
        let end = self.pos + 1;
        match c {
            '*' => Some((0, None, end)),
            '+' => Some((1, None, end)),
            '?' => Some((0, Some(1), end)),
            _ => {
                let r = &self.s[end..];
                let (min, r) = go_int(r)?;
                let (max, r) = match r.strip_prefix(',') {
                    None => (Some(min), r),
                    Some(r) if r.starts_with('}') => (None, r),
                    Some(r) => {
                        let (max, r) = go_int(r)?;
                        (Some(max), r)
                    }
                };
                let r = r.strip_prefix('}')?;
                Some((min, max, self.s.len() - r.len()))
            }
        }
    }

    /// Writes `c` as a literal.
    fn literal(&mut self, c: char) {
        push_char(&mut self.out, c);
    }

    /// An escape outside a class: an assertion, a class or one character.
    fn escape(&mut self) -> Result<(), String> {
        let start = self.pos;
        match self.peek_at(1) {
            Some('A') => self.out.push_str("\\A"),
            Some('z') => self.out.push_str("\\z"),
            // Go's word boundary is ASCII.
            Some('b') => self.out.push_str("(?-u:\\b)"),
            Some('B') => self.out.push_str("(?-u:\\B)"),
            Some('C') => return Err(error("invalid escape sequence", &self.s[start..start + 2])),
            Some('p' | 'P') => {
                let class = self.unicode_class()?;
                self.out.push('[');
                self.out.push_str(&class);
                self.out.push(']');
                return Ok(());
            }
            Some(c) if perl_class(c).is_some() => {
                self.out.push('[');
                self.out.push_str(perl_class(c).unwrap_or_default());
                self.out.push(']');
            }
            _ => {
                let c = self.escaped_char()?;
                push_char(&mut self.out, c);
                return Ok(());
            }
        }
        self.pos += 2;
        Ok(())
    }

    /// A single-character escape (Go's `parseEscape`).
    fn escaped_char(&mut self) -> Result<char, String> {
        let start = self.pos;
        self.pos += 1;
        let Some(c) = self.peek() else {
            return Err(error("trailing backslash at end of expression", ""));
        };
        self.pos += c.len_utf8();
        let invalid = |p: &Self| error("invalid escape sequence", &p.s[start..p.pos]);
        let octal = |c: Option<char>| c.is_some_and(|c| ('0'..='7').contains(&c));
        match c {
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok(c),
            '1'..='7' if !octal(self.peek()) => Err(invalid(self)),
            '0'..='7' => {
                let mut r = c as u32 - '0' as u32;
                for _ in 1..3 {
                    match self.peek() {
                        Some(d) if octal(Some(d)) => {
                            r = r * 8 + (d as u32 - '0' as u32);
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                Ok(char::from_u32(r).unwrap_or('\0'))
            }
            'x' => {
                let Some(first) = self.peek() else {
                    return Err(invalid(self));
                };
                self.pos += first.len_utf8();
                if first == '{' {
                    let mut r: u32 = 0;
                    let mut digits = 0;
                    loop {
                        let Some(d) = self.peek() else {
                            return Err(invalid(self));
                        };
                        self.pos += d.len_utf8();
                        if d == '}' {
                            break;
                        }
                        let Some(v) = d.to_digit(16) else {
                            return Err(invalid(self));
                        };
                        r = r * 16 + v;
                        if r > 0x10FFFF {
                            return Err(invalid(self));
                        }
                        digits += 1;
                    }
                    if digits == 0 {
                        return Err(invalid(self));
                    }
                    // A surrogate: Go's literal that no UTF-8 text holds.
                    return Ok(char::from_u32(r).unwrap_or(SURROGATE));
                }
                let Some(second) = self.peek() else {
                    return Err(invalid(self));
                };
                self.pos += second.len_utf8();
                match (first.to_digit(16), second.to_digit(16)) {
                    (Some(x), Some(y)) => Ok(char::from_u32(x * 16 + y).unwrap_or('\0')),
                    _ => Err(invalid(self)),
                }
            }
            'a' => Ok('\x07'),
            'f' => Ok('\x0C'),
            'n' => Ok('\n'),
            'r' => Ok('\r'),
            't' => Ok('\t'),
            'v' => Ok('\x0B'),
            _ => Err(invalid(self)),
        }
    }

    /// `\pL`, `\p{Greek}`, `\PL`, `\p{^Greek}` at the current position:
    /// the items of a class in the engine's syntax.
    fn unicode_class(&mut self) -> Result<String, String> {
        let start = self.pos;
        let mut negated = self.peek_at(1) == Some('P');
        self.pos += 2;
        let Some(c) = self.peek() else {
            // `\p` at the end: a class without a name.
            return Err(error(
                "invalid character class range",
                &self.s[start..self.pos],
            ));
        };
        let name = if c == '{' {
            let rest = &self.s[start..];
            let Some(end) = rest.find('}') else {
                return Err(error("invalid character class range", rest));
            };
            self.pos = start + end + 1;
            &self.s[start + 3..start + end]
        } else {
            self.pos += c.len_utf8();
            &self.s[start + 2..self.pos]
        };
        let seq = &self.s[start..self.pos];
        let name = match name.strip_prefix('^') {
            Some(n) => {
                negated = !negated;
                n
            }
            None => name,
        };
        let Some((class, table_negated)) = unicode_table(name) else {
            return Err(error("invalid character class range", seq));
        };
        if table_negated {
            negated = !negated;
        }
        self.unicode_classes += 1;
        if self.unicode_classes > MAX_UNICODE_CLASSES {
            return Err(error("expression too large", self.s));
        }
        Ok(if negated {
            format!("[^{class}]")
        } else {
            class
        })
    }

    /// A bracketed class, `[...]` (Go's `parseClass`).
    fn class(&mut self) -> Result<(), String> {
        let whole = self.pos;
        self.pos += 1;
        let mut out = String::from("[");
        if self.peek() == Some('^') {
            self.pos += 1;
            out.push('^');
        }
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err(error("missing closing ]", &self.s[whole..]));
            };
            if c == ']' && !first {
                break;
            }
            first = false;
            let here = self.pos;
            // POSIX `[:alpha:]`.
            if self.rest().starts_with("[:") && self.rest().len() > 2 {
                let end = self.posix_end.get(here + 2).copied().unwrap_or(usize::MAX);
                if end != usize::MAX {
                    let name = &self.s[here..end + 2];
                    let bare = &name[2..name.len() - 2];
                    if !POSIX.contains(&bare.strip_prefix('^').unwrap_or(bare)) {
                        return Err(error("invalid character class range", name));
                    }
                    out.push_str(name);
                    self.pos = end + 2;
                    continue;
                }
            }
            if c == '\\' {
                match self.peek_at(1) {
                    Some('p' | 'P') => {
                        let class = self.unicode_class()?;
                        out.push_str(&class);
                        continue;
                    }
                    Some(e) if perl_class(e).is_some() => {
                        out.push_str(perl_class(e).unwrap_or_default());
                        self.pos += 2;
                        continue;
                    }
                    _ => {}
                }
            }
            let lo = self.class_char(whole)?;
            let mut hi = lo;
            let r = self.rest().as_bytes();
            if r.len() >= 2 && r[0] == b'-' && r[1] != b']' {
                self.pos += 1;
                hi = self.class_char(whole)?;
                if hi < lo {
                    return Err(error(
                        "invalid character class range",
                        &self.s[here..self.pos],
                    ));
                }
            }
            push_char(&mut out, lo);
            if hi != lo {
                out.push('-');
                push_char(&mut out, hi);
            }
        }
        self.pos += 1;
        out.push(']');
        self.out.push_str(&out);
        Ok(())
    }

    /// One character in a class (Go's `parseClassChar`).
    fn class_char(&mut self, whole: usize) -> Result<char, String> {
        match self.peek() {
            None => Err(error("missing closing ]", &self.s[whole..])),
            Some('\\') => self.escaped_char(),
            Some(c) => {
                self.pos += c.len_utf8();
                Ok(c)
            }
        }
    }
}

/// What a `(?` group holds.
enum Flags {
    /// `(?flags)`: flags for the rest of the group.
    Bare(String),
    /// `(?flags:`: a group.
    Group(String),
}

/// Stands for a surrogate (`\x{D800}`), which no text holds: a
/// noncharacter, which no chart's text holds either.
const SURROGATE: char = '\u{FFFF}';

/// Go's POSIX class names.
const POSIX: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// Go's Perl classes (ASCII), as class items.
fn perl_class(c: char) -> Option<&'static str> {
    Some(match c {
        'd' => "0-9",
        'D' => "[^0-9]",
        's' => "\\t\\n\\x{C}\\r ",
        'S' => "[^\\t\\n\\x{C}\\r ]",
        'w' => "0-9A-Za-z_",
        'W' => "[^0-9A-Za-z_]",
        _ => return None,
    })
}

/// A character in the engine's syntax: letters and digits as they are,
/// anything else as `\x{…}`.
fn push_char(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
}

/// Go's `go_int` of a repetition count: digits without a leading zero;
/// a count of 100,000,000 or more is past any limit.
fn go_int(s: &str) -> Option<(u64, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || (digits >= 2 && s.starts_with('0')) {
        return None;
    }
    let n = s[..digits]
        .parse::<u64>()
        .unwrap_or(u64::MAX)
        .min(u64::MAX / 2);
    Some((n, &s[digits..]))
}

/// Go's canonical form of a Unicode class name: `_`, `-` and spaces
/// dropped, the first letter upper case, the others lower case.
fn canonical(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars().filter(|c| !matches!(c, '_' | '-' | ' ')) {
        if out.is_empty() {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Go's general categories, and their aliases (canonical forms).
const CATEGORIES: &[(&str, &str)] = &[
    ("C", "C"),
    ("Cc", "Cc"),
    ("Cf", "Cf"),
    ("Cn", "Cn"),
    ("Co", "Co"),
    ("Cs", "Cs"),
    ("L", "L"),
    ("Ll", "Ll"),
    ("Lm", "Lm"),
    ("Lo", "Lo"),
    ("Lt", "Lt"),
    ("Lu", "Lu"),
    ("M", "M"),
    ("Mc", "Mc"),
    ("Me", "Me"),
    ("Mn", "Mn"),
    ("N", "N"),
    ("Nd", "Nd"),
    ("Nl", "Nl"),
    ("No", "No"),
    ("P", "P"),
    ("Pc", "Pc"),
    ("Pd", "Pd"),
    ("Pe", "Pe"),
    ("Pf", "Pf"),
    ("Pi", "Pi"),
    ("Po", "Po"),
    ("Ps", "Ps"),
    ("S", "S"),
    ("Sc", "Sc"),
    ("Sk", "Sk"),
    ("Sm", "Sm"),
    ("So", "So"),
    ("Z", "Z"),
    ("Zl", "Zl"),
    ("Zp", "Zp"),
    ("Zs", "Zs"),
    ("Lc", "LC"),
    ("Casedletter", "LC"),
    ("Closepunctuation", "Pe"),
    ("Combiningmark", "M"),
    ("Connectorpunctuation", "Pc"),
    ("Control", "Cc"),
    ("Cntrl", "Cc"),
    ("Currencysymbol", "Sc"),
    ("Dashpunctuation", "Pd"),
    ("Decimalnumber", "Nd"),
    ("Digit", "Nd"),
    ("Enclosingmark", "Me"),
    ("Finalpunctuation", "Pf"),
    ("Format", "Cf"),
    ("Initialpunctuation", "Pi"),
    ("Letter", "L"),
    ("Letternumber", "Nl"),
    ("Lineseparator", "Zl"),
    ("Lowercaseletter", "Ll"),
    ("Mark", "M"),
    ("Mathsymbol", "Sm"),
    ("Modifierletter", "Lm"),
    ("Modifiersymbol", "Sk"),
    ("Nonspacingmark", "Mn"),
    ("Number", "N"),
    ("Openpunctuation", "Ps"),
    ("Other", "C"),
    ("Otherletter", "Lo"),
    ("Othernumber", "No"),
    ("Otherpunctuation", "Po"),
    ("Othersymbol", "So"),
    ("Paragraphseparator", "Zp"),
    ("Privateuse", "Co"),
    ("Punct", "P"),
    ("Punctuation", "P"),
    ("Separator", "Z"),
    ("Spaceseparator", "Zs"),
    ("Spacingmark", "Mc"),
    ("Surrogate", "Cs"),
    ("Symbol", "S"),
    ("Titlecaseletter", "Lt"),
    ("Unassigned", "Cn"),
    ("Uppercaseletter", "Lu"),
];

/// The scripts Go finds by name: a name is canonical (`Greek`, `greek`)
/// and Go's table keys are not (`Old_Italic`, `SignWriting`), so only the
/// single-word scripts of Unicode 15 are found (Go's `unicode.Scripts`).
const GO_SCRIPTS: &[&str] = &[
    "Adlam",
    "Ahom",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Carian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dogra",
    "Duployan",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gurmukhi",
    "Han",
    "Hangul",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Inherited",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kharoshthi",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Medefaidrin",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nandinagari",
    "Newa",
    "Nko",
    "Nushu",
    "Ogham",
    "Oriya",
    "Osage",
    "Osmanya",
    "Palmyrene",
    "Phoenician",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "Sinhala",
    "Sogdian",
    "Soyombo",
    "Sundanese",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Yezidi",
    "Yi",
];

/// The class items for Go's Unicode class `name`, and whether Go inverts
/// the table (`Assigned`); None for a name Go does not know.
fn unicode_table(name: &str) -> Option<(String, bool)> {
    let name = canonical(name);
    match name.as_str() {
        "Any" => return Some(("\\x{0}-\\x{10FFFF}".into(), false)),
        "Assigned" => return Some(("\\p{gc=Cn}".into(), true)),
        "Ascii" => return Some(("\\x{0}-\\x{7F}".into(), false)),
        _ => {}
    }
    if let Some((_, "Cs")) = CATEGORIES.iter().find(|(n, _)| *n == name) {
        // Surrogates: no text holds one (the engine has no such class).
        return Some(("[\\x{0}&&\\x{1}]".into(), false));
    }
    if let Some((_, gc)) = CATEGORIES.iter().find(|(n, _)| *n == name) {
        return Some((format!("\\p{{gc={gc}}}"), false));
    }
    GO_SCRIPTS
        .contains(&name.as_str())
        .then(|| (format!("\\p{{sc={name}}}"), false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        GoRegex::new(pattern).unwrap().regex().is_match(text)
    }

    fn refusal(pattern: &str) -> String {
        translate(pattern).unwrap_err()
    }

    #[test]
    fn what_go_reads_as_literals_is_read_as_literals() {
        assert!(matches(r"^[\w-\.]+$", "my-group.name"));
        assert!(!matches(r"^[\w-\.]+$", "a/b"));
        assert!(matches(r"\$(?:__(?:env|file|vault))?{[^}]+}", "${HOME}"));
        assert!(matches(r"^a{$", "a{"));
        assert!(matches(r"^a{x}$", "a{x}"));
        assert!(matches(r"^a{1,x}$", "a{1,x}"));
        assert!(matches(r"^a{,3}$", "a{,3}"));
        assert!(matches(r"^\Q.*+\E$", ".*+"));
        assert!(matches(r"^\Q[a]", "[a]"));
        assert!(matches(r"^[]a]+$", "]a]"));
        assert!(matches(r"^[^]a]$", "b"));
        assert!(matches(r"^[[:alpha:]-]+$", "ab-c"));
        assert!(matches(r"^[a&&b]+$", "&&"));
        assert!(matches(r"^[a[]+$", "a[["));
        assert!(matches(r"^\<\>$", "<>"));
    }

    #[test]
    fn go_classes_are_ascii_and_unicode_classes_are_unicode() {
        assert!(!matches(r"^\w$", "é"));
        assert!(!matches(r"\d", "٣"));
        assert!(matches(r"^\pL+$", "héllo"));
        assert!(matches(r"^\p{Greek}+$", "Σσς"));
        assert!(!matches(r"^\P{Greek}$", "Σ"));
        assert!(matches(r"^\p{^Greek}$", "a"));
        assert!(matches(r"^(?i)σ+$", "Σσς"));
        assert!(matches(r"(?i)k", "\u{212A}"));
        // Go's \b is ASCII: é is not a word character.
        assert!(matches(r"a\b", "aé"));
    }

    #[test]
    fn repetitions_groups_and_flags_are_kept() {
        assert!(matches(r"^a{2}$", "aa"));
        assert!(matches(r"^a{2,}$", "aaa"));
        assert!(matches(r"^a{1,3}$", "aaa"));
        assert!(matches(r"^[a-c-]+$", "b-c"));
        assert!(matches(r"^ab*$", "abbb"));
        assert!(!matches(r"^ab*$", "abab"));
        // A flag group does not take the repetition: `a` repeats.
        assert!(matches(r"^a(?i)*b$", "aaaB"));
        // Flag groups in a row all hold (`U` makes `{2,3}?` greedy).
        assert_eq!(
            GoRegex::new("(?U)(?i)a{2,3}?")
                .unwrap()
                .regex()
                .find("AAA")
                .unwrap()
                .len(),
            3
        );
        assert!(matches(r"^(?P<x>a)(?P<x>b)(?<1y>c)$", "abc"));
        assert_eq!(
            translate("(?P<x>a)(b)(?<y>c)").unwrap().names,
            vec![None, Some("x".into()), None, Some("y".into())]
        );
    }

    #[test]
    fn what_go_refuses_is_refused_in_gos_words() {
        assert_eq!(refusal("a**"), "invalid nested repetition operator: `**`");
        assert_eq!(refusal("a*?+"), "invalid nested repetition operator: `*?+`");
        assert_eq!(
            refusal("x{2}{3}"),
            "invalid nested repetition operator: `{2}{3}`"
        );
        assert_eq!(refusal("*"), "missing argument to repetition operator: `*`");
        assert_eq!(
            refusal("(+?)"),
            "missing argument to repetition operator: `+?`"
        );
        assert_eq!(
            refusal("a|*"),
            "missing argument to repetition operator: `*`"
        );
        assert_eq!(refusal(r"\1"), "invalid escape sequence: `\\1`");
        assert_eq!(refusal(r"\Z"), "invalid escape sequence: `\\Z`");
        assert_eq!(refusal(r"\C"), "invalid escape sequence: `\\C`");
        assert_eq!(refusal(r"[\b]"), "invalid escape sequence: `\\b`");
        assert_eq!(
            refusal(r"a\"),
            "trailing backslash at end of expression: ``"
        );
        assert_eq!(
            refusal("(?x)a"),
            "invalid or unsupported Perl syntax: `(?x`"
        );
        assert_eq!(
            refusal("(?i-)a"),
            "invalid or unsupported Perl syntax: `(?i-)`"
        );
        assert_eq!(refusal("(?P<>a)"), "invalid named capture: `(?P<>`");
        assert_eq!(refusal("(?<n"), "invalid named capture: `(?<n`");
        assert_eq!(refusal("(a"), "missing closing ): `(a`");
        assert_eq!(refusal("a)"), "unexpected ): `a)`");
        assert_eq!(refusal("[a"), "missing closing ]: `[a`");
        assert_eq!(refusal("[z-a]"), "invalid character class range: `z-a`");
        assert_eq!(
            refusal("[[:nope:]]"),
            "invalid character class range: `[:nope:]`"
        );
        assert_eq!(
            refusal(r"\p{Nope}"),
            "invalid character class range: `\\p{Nope}`"
        );
        // Go's table keys with an underscore are never found (names are
        // canonicalized first), nor are script codes.
        assert_eq!(
            refusal(r"\p{Old_Italic}"),
            "invalid character class range: `\\p{Old_Italic}`"
        );
        assert_eq!(
            refusal(r"\p{Grek}"),
            "invalid character class range: `\\p{Grek}`"
        );
        assert!(translate(r"\p{greek}\p{lu}\p{Cased_Letter}\p{cntrl}").is_ok());
        // Every name Go finds is one the engine has.
        for (name, _) in CATEGORIES {
            assert!(GoRegex::new(&format!(r"\p{{{name}}}")).is_ok(), "{name}");
        }
        for name in GO_SCRIPTS {
            assert!(GoRegex::new(&format!(r"\p{{{name}}}")).is_ok(), "{name}");
        }
        assert!(GoRegex::new(r"\p{Any}\p{Assigned}\p{ASCII}").is_ok());
        // Flags across `|`, and the greediness of a repetition after a
        // flag group.
        assert!(matches("^(?:x(?i)|admin)$", "ADMIN"));
        assert_eq!(
            GoRegex::new("a(?U)*")
                .unwrap()
                .regex()
                .find("aaa")
                .unwrap()
                .as_str(),
            ""
        );
        assert_eq!(
            GoRegex::new("(?U)a(?-U)*")
                .unwrap()
                .regex()
                .find("aaa")
                .unwrap()
                .as_str(),
            "aaa"
        );
        assert_eq!(refusal("a{3,1}"), "invalid repeat count: `{3,1}`");
        assert_eq!(refusal("a{1001}"), "invalid repeat count: `{1001}`");
        assert_eq!(refusal("a{2,1001}"), "invalid repeat count: `{2,1001}`");
        assert_eq!(refusal("(a{100}){11}"), "invalid repeat count: `{11}`");
        assert!(translate("a{1000}").is_ok());
        assert!(translate("(a{1000}){0}").is_ok());
        assert!(translate("^*$+").is_ok());
    }

    #[test]
    fn expand_follows_go() {
        let re = GoRegex::new("(?P<word>a+)(b)?").unwrap();
        let text = "aab";
        let caps = re.regex().captures(text).unwrap();
        let mut out = String::new();
        re.expand(&mut out, "<$1|${2}|$word|${word}x|$2x|$$|$ |${x|$9>", &caps);
        assert_eq!(out, "<aa|b|aa|aax||$|$ |${x|>");
        // Go's numbers: no leading zero (`$01` names a group), at most 8
        // digits; a name is letters and decimal digits only.
        let mut out = String::new();
        re.expand(&mut out, "[$01|$0|$1²|$123456789]", &caps);
        assert_eq!(out, "[|aab|aa²|]");
        // A name given twice: the first group of it that matched.
        let re = GoRegex::new("(?P<n>x)|(?P<n>y)").unwrap();
        let caps = re.regex().captures("y").unwrap();
        let mut out = String::new();
        re.expand(&mut out, "${n}", &caps);
        assert_eq!(out, "y");
    }

    #[test]
    fn hostile_patterns_are_answered_in_linear_time() {
        // Unclosed POSIX brackets: each `[:` used to look for a `:]` to
        // the end of the pattern (quadratic: 25 s for 90 KB).
        let pattern = format!("[{}a]", "[:".repeat(30_000));
        assert!(GoRegex::new(&pattern).unwrap().regex().is_match(":"));
        // ... and one that ends in `:]` is a (bad) class name, as in Go.
        let pattern = format!("[{}]", "[:".repeat(30_000));
        assert!(
            translate(&pattern)
                .unwrap_err()
                .starts_with("invalid character class range: `[:[:")
        );
        // Repetitions stacked on one item through flag groups (Go takes
        // them): written in one pass.
        let stacked = format!("a{}", "(?i)*".repeat(50_000));
        let translated = translate(&stacked).unwrap().pattern;
        assert!(
            translated.starts_with(&"(?:".repeat(50_000)),
            "{}",
            &translated[..40]
        );
        assert!(translated.len() < 20 * stacked.len());
        // Flag groups in a run are written as one.
        let flags = format!("{}a", "(?i)(?-i)".repeat(100_000));
        assert_eq!(translate(&flags).unwrap().pattern, "(?-i)a");
        // Too long, or too many Unicode classes, for the engine.
        assert!(
            translate(&"a".repeat(MAX_PATTERN + 1))
                .unwrap_err()
                .starts_with("expression too large")
        );
        let classes = format!("[{}]", r"\pL".repeat(MAX_UNICODE_CLASSES + 1));
        assert!(
            translate(&classes)
                .unwrap_err()
                .starts_with("expression too large")
        );
        // Nesting past Go's limit.
        let fine = format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert!(GoRegex::new(&fine).unwrap().regex().is_match("a"));
        let deep = format!(
            "{}a{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(
            translate(&deep).unwrap_err(),
            format!("expression nests too deeply: `{deep}`")
        );
        // Too large for the engine: refused, not built.
        assert!(GoRegex::new(r"\pL{1000}\pL{1000}\pL{1000}\pL{1000}").is_err());
    }
}
