//! Sprig's `camelcase`, `snakecase` and `kebabcase`, with the word rules of
//! the Go library Sprig calls (huandu/xstrings v1.5): words are runs of
//! upper-case letters (`HTTPServer` is `HTTP` + `Server`), letters, numbers,
//! punctuation or connectors (`-`, `_`, white space).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    Invalid,
    Number,
    Upper,
    Alphabet,
    Connector,
    Punct,
    Other,
}

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || c.is_whitespace()
}

/// A letter that is not a CJK ideograph.
fn is_alphabet(c: char) -> bool {
    c.is_alphabetic() && !matches!(c as u32, 0x4E00..=0x9FCC | 0x3400..=0x4D85 | 0x20000..=0x2B81D)
}

/// Go's `unicode.IsPunct`: ASCII exactly, the common punctuation blocks
/// beyond it.
fn is_punct(c: char) -> bool {
    match c {
        '!' | '"' | '#' | '%' | '&' | '\'' | '(' | ')' | '*' | ',' | '-' | '.' | '/' | ':'
        | ';' | '?' | '@' | '[' | '\\' | ']' | '_' | '{' | '}' => true,
        c if c.is_ascii() => false,
        c => matches!(c as u32,
            0xA1 | 0xA7 | 0xAB | 0xB6 | 0xB7 | 0xBB | 0xBF | 0x2010..=0x2027 | 0x2030..=0x205E
            | 0x3001..=0x3003 | 0x3008..=0x3011 | 0xFF01..=0xFF03 | 0xFF05..=0xFF0A),
    }
}

fn is_number(c: char) -> bool {
    c.is_numeric()
}

/// The next word of `s`: its type, its text, the rest.
fn next_word(s: &str) -> (Word, &str, &str) {
    let mut chars = s.char_indices().peekable();
    let Some((_, first)) = chars.next() else {
        return (Word::Invalid, "", "");
    };
    let run = |pred: &dyn Fn(char) -> bool| -> usize {
        s.char_indices()
            .skip(1)
            .find(|&(_, c)| !pred(c))
            .map_or(s.len(), |(i, _)| i)
    };
    let end = if is_connector(first) {
        (Word::Connector, run(&is_connector))
    } else if is_punct(first) {
        (Word::Punct, run(&is_punct))
    } else if first.is_uppercase() {
        let second = s[first.len_utf8()..].chars().next();
        match second {
            Some(c) if c.is_uppercase() => {
                // "HTTPServer": "HTTP", then "Server".
                let upper_end = run(&|c: char| c.is_uppercase());
                let next = s[upper_end..].chars().next();
                match next {
                    Some(n) if is_alphabet(n) => {
                        let last = s[..upper_end].chars().next_back().map_or(0, char::len_utf8);
                        (Word::Upper, upper_end - last)
                    }
                    _ => (Word::Upper, upper_end),
                }
            }
            Some(c) if is_alphabet(c) => (
                Word::Upper,
                run(&|c: char| is_alphabet(c) && !c.is_uppercase())
                    .max(first.len_utf8() + c.len_utf8()),
            ),
            _ => (Word::Upper, first.len_utf8()),
        }
    } else if is_alphabet(first) {
        (
            Word::Alphabet,
            run(&|c: char| is_alphabet(c) && !c.is_uppercase()),
        )
    } else if is_number(first) {
        (Word::Number, run(&is_number))
    } else {
        (
            Word::Other,
            run(&|c: char| !(is_connector(c) || is_alphabet(c) || is_number(c) || is_punct(c))),
        )
    };
    let (kind, end) = end;
    (kind, &s[..end], &s[end..])
}

fn to_lower(out: &mut String, kind: Word, word: &str, connector: char) {
    if kind != Word::Upper && kind != Word::Connector {
        out.push_str(word);
        return;
    }
    for c in word.chars() {
        if is_connector(c) {
            out.push(connector);
        } else if c.is_uppercase() {
            out.push(crate::funcs::go_lower_rune(c));
        } else {
            out.push(c);
        }
    }
}

/// `snakecase` (`_`) and `kebabcase` (`-`).
pub fn to_lower_case(s: &str, connector: char) -> String {
    if s.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(s.len() + 8);
    let (mut kind, mut word, mut rest) = next_word(s);
    while !rest.is_empty() {
        if kind != Word::Connector {
            to_lower(&mut out, kind, word, connector);
        }
        let prev = kind;
        let last = word;
        (kind, word, rest) = next_word(rest);
        match prev {
            Word::Number => {
                while kind == Word::Alphabet || kind == Word::Number {
                    to_lower(&mut out, kind, word, connector);
                    (kind, word, rest) = next_word(rest);
                }
                if !matches!(kind, Word::Invalid | Word::Punct | Word::Connector) {
                    out.push(connector);
                }
            }
            Word::Connector => to_lower(&mut out, prev, last, connector),
            Word::Punct => {}
            _ => {
                if kind != Word::Number {
                    if kind != Word::Connector && kind != Word::Punct {
                        out.push(connector);
                    }
                    continue;
                }
                if rest.is_empty() {
                    continue;
                }
                let number = word;
                (kind, word, rest) = next_word(rest);
                // A number followed by no letters belongs to the word
                // before it ("Bld4Floor" is "bld4_floor").
                if kind != Word::Alphabet {
                    to_lower(&mut out, Word::Number, number, connector);
                    if kind != Word::Connector && kind != Word::Punct {
                        out.push(connector);
                    }
                    continue;
                }
                // Letters after a number: the number starts a word
                // ("HTTP2xx" is "http_2xx").
                out.push(connector);
                to_lower(&mut out, Word::Number, number, connector);
                while kind == Word::Alphabet || kind == Word::Number {
                    to_lower(&mut out, kind, word, connector);
                    (kind, word, rest) = next_word(rest);
                }
                if !matches!(kind, Word::Invalid | Word::Connector | Word::Punct) {
                    out.push(connector);
                }
            }
        }
    }
    to_lower(&mut out, kind, word, connector);
    out
}

/// `camelcase`: connectors dropped, the letter after one upper-cased,
/// leading connectors and every connector after the first of a run kept.
pub fn to_camel_case(s: &str) -> String {
    let mut chars = s.chars();
    let mut out = String::with_capacity(s.len());
    let mut r0 = None;
    for c in chars.by_ref() {
        if !is_connector(c) {
            r0 = Some(crate::funcs::go_upper_rune(c));
            break;
        }
        out.push(c);
    }
    let Some(mut r0) = r0 else {
        return out;
    };
    for c in chars {
        let r1 = r0;
        r0 = c;
        if is_connector(r0) && is_connector(r1) {
            out.push(r1);
            continue;
        }
        if is_connector(r1) {
            r0 = crate::funcs::go_upper_rune(r0);
        } else {
            out.push(r1);
        }
    }
    out.push(r0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_xstrings_documents_them() {
        for (input, want) in [
            ("FirstName", "first_name"),
            ("HTTPServer", "http_server"),
            ("NoHTTPS", "no_https"),
            ("GO_PATH", "go_path"),
            ("GO PATH", "go_path"),
            ("GO-PATH", "go_path"),
            ("http2xx", "http_2xx"),
            ("HTTP20xOK", "http_20x_ok"),
            ("Duration2m3s", "duration_2m3s"),
            ("Bld4Floor3rd", "bld4_floor_3rd"),
        ] {
            assert_eq!(to_lower_case(input, '_'), want, "{input}");
        }
        for (input, want) in [
            ("some_words", "SomeWords"),
            ("http_server", "HttpServer"),
            ("no_https", "NoHttps"),
            ("_complex__case_", "_Complex_Case_"),
            ("some words", "SomeWords"),
        ] {
            assert_eq!(to_camel_case(input), want, "{input}");
        }
    }
}
