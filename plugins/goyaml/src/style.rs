//! The style of a string scalar, as go-yaml v2 chooses it: plain when a
//! YAML 1.1 reader reads the text back as that string and the emitter
//! allows it, else single or double quotes, or a literal block for
//! multi-line text.
//!
//! The emitter first tries [`quick_style`], one pass over the bytes without
//! allocating, which decides for the common case (printable ASCII that is
//! not number-like); any other text takes the full analysis
//! ([`full_style`]), which is go-yaml's algorithm spelled out.

use crate::resolve::{base60_float, resolves_to_string};

/// The words go-yaml v2 resolves to a bool, a null or a special float.
fn special_word(s: &str) -> bool {
    // Every word is at most five bytes and starts with one of these.
    match s.as_bytes().first() {
        None => return true,
        Some(
            b'y' | b'Y' | b't' | b'T' | b'o' | b'O' | b'n' | b'N' | b'f' | b'F' | b'~' | b'.'
            | b'+' | b'-',
        ) => {}
        Some(_) => return false,
    }
    s.len() <= 5
        && matches!(
            s,
            "y" | "Y"
                | "yes"
                | "Yes"
                | "YES"
                | "true"
                | "True"
                | "TRUE"
                | "on"
                | "On"
                | "ON"
                | "n"
                | "N"
                | "no"
                | "No"
                | "NO"
                | "false"
                | "False"
                | "FALSE"
                | "off"
                | "Off"
                | "OFF"
                | ""
                | "~"
                | "null"
                | "Null"
                | "NULL"
                | ".nan"
                | ".NaN"
                | ".NAN"
                | ".inf"
                | ".Inf"
                | ".INF"
                | "+.inf"
                | "+.Inf"
                | "+.INF"
                | "-.inf"
                | "-.Inf"
                | "-.INF"
        )
}

/// Whether byte `b` can be part of a text that go-yaml reads as a number,
/// a timestamp or a sexagesimal number (digits, signs, `.`, `_`, `:`, the
/// space and `T`/`t`/`Z` of timestamps, hex digits, `e`/`E`, the radix
/// letters `x`/`o`/`b`).
const fn numeric_byte(b: u8) -> bool {
    matches!(
        b,
        b'0'..=b'9'
            | b'+'
            | b'-'
            | b'.'
            | b'_'
            | b':'
            | b' '
            | b'a'..=b'f'
            | b'A'..=b'F'
            | b'x'
            | b'X'
            | b'o'
            | b'O'
            | b't'
            | b'T'
            | b'Z'
    )
}

/// A byte of printable ASCII (`' '..='~'`).
const PRINTABLE: u8 = 1;
/// A byte [`numeric_byte`] accepts.
const NUMERIC: u8 = 2;

/// [`PRINTABLE`] and [`NUMERIC`] of every byte, looked up in one step.
const CLASSES: [u8; 256] = {
    let mut table = [0; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        if byte >= b' ' && byte <= b'~' {
            table[b] = PRINTABLE | if numeric_byte(byte) { NUMERIC } else { 0 };
        }
        b += 1;
    }
    table
};

/// go-yaml's indicators that cannot start a plain scalar.
fn first_indicator(b: u8) -> bool {
    matches!(
        b,
        b'#' | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    )
}

/// The style of a non-empty text of printable ASCII (`' '..='~'`: no tab,
/// no line break, nothing to escape) that does not look like a number, in
/// one pass; None for any other text (the caller runs [`full_style`]).
///
/// For such a text go-yaml's analysis reduces to: no line breaks, nothing
/// special, so single quotes are always allowed and a literal block is
/// never asked for; plain is allowed unless it has a leading or trailing
/// space or an indicator. A text whose first byte cannot start a number,
/// or that holds a byte no number, timestamp or sexagesimal number holds,
/// resolves to a string unless it is one of the special words.
pub(crate) fn quick_style(s: &str) -> Option<Style> {
    let bytes = s.as_bytes();
    let &first = bytes.first()?;
    // The most common text: it cannot start a number, and without `:` or
    // `#` only its first byte can be an indicator (`-` and `.`, which start
    // `---` and `...`, start numbers too).
    if !matches!(first, b'0'..=b'9' | b'+' | b'-' | b'.')
        && kiln_bytes::printable_ascii_without(bytes, [b':', b'#'])
    {
        let indicator =
            first_indicator(first) || (first == b'?' && bytes.get(1).is_none_or(|&n| n == b' '));
        return Some(if special_word(s) {
            Style::Double
        } else if indicator || first == b' ' || bytes.last() == Some(&b' ') {
            Style::Single
        } else {
            Style::Plain
        });
    }
    let followed_by_space = |i: usize| bytes.get(i + 1).is_none_or(|&n| n == b' ');
    let mut indicators = first_indicator(first)
        || (matches!(first, b'?' | b':' | b'-') && followed_by_space(0))
        || bytes.starts_with(b"---")
        || bytes.starts_with(b"...");
    // The classes every byte has.
    let mut common = PRINTABLE | NUMERIC;
    let mut previous = b'\n';
    for (i, &b) in bytes.iter().enumerate() {
        let class = CLASSES[usize::from(b)];
        if class & PRINTABLE == 0 {
            return None;
        }
        common &= class;
        if i > 0 {
            indicators |= (b == b':' && followed_by_space(i)) || (b == b'#' && previous == b' ');
        }
        previous = b;
    }
    let numeric = common & NUMERIC != 0;
    if special_word(s) {
        return Some(Style::Double);
    }
    if matches!(first, b'0'..=b'9' | b'+' | b'-' | b'.') && numeric {
        return None;
    }
    if indicators || first == b' ' || bytes.last() == Some(&b' ') {
        Some(Style::Single)
    } else {
        Some(Style::Plain)
    }
}

/// How a string is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// go-yaml v2's choice: the encoder asks for a literal block (multi-line),
/// plain (reads back as the same string) or double quotes; the emitter then
/// falls back to single or double quotes where the text does not allow
/// the style asked for.
pub(crate) fn full_style(s: &str, key: bool) -> Style {
    let wanted = if kiln_bytes::contains(s.as_bytes(), b'\n') {
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

pub(crate) fn printable(c: char) -> bool {
    let c = c as u32;
    c == 0x0a
        || (0x20..=0x7e).contains(&c)
        || (0xa0..=0xd7ff).contains(&c)
        || ((0xe000..=0xfffd).contains(&c) && c != 0xfeff)
}

pub(crate) fn is_break(c: char) -> bool {
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
