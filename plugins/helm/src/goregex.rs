//! Go's regular-expression syntax (RE2, as Go's `regexp` parses it with
//! its Perl flags) written in the syntax of the engine the plugin runs
//! (`regex-lite`). The two engines match alike (leftmost-first; Go's `\d`,
//! `\s`, `\w` are ASCII, as regex-lite's), but their parsers differ where
//! Go is lenient. A chart written for Helm relies on Go's reading:
//!
//! - a `-` right after a class escape in a bracket is a literal
//!   (`[\w-\.]`): Go's parser takes a range only from a single character;
//! - a `{` that starts no repetition (`{`, `{a}`, `{1,x}`) is a literal;
//! - `\Q…\E` quotes its text (up to `\E`, or the end);
//! - a repetition count above 1,000 is refused (`invalid repeat count`).
//!
//! Anything else passes through unchanged, for the engine's parser to
//! read (and refuse where Go refuses too).

/// Go's limit on a repetition count (`{n}`, `{n,m}`).
const MAX_REPEAT: u32 = 1000;

/// `pattern`, in Go's syntax, as the engine's syntax says it; Go's error
/// (without its `error parsing regexp: ` prefix) where Go refuses what the
/// engine would take.
pub fn translate(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    // Where the last `:]` starts: a `[:` after it closes no POSIX class,
    // found without scanning the rest of the pattern again (one pass).
    let last_posix_end = (1..chars.len())
        .rev()
        .find(|&j| chars[j - 1] == ':' && chars[j] == ']')
        .map_or(0, |j| j - 1);
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    // Inside a bracket: whether the item just read was a class escape
    // (`\w`, `\pL`, `[:alpha:]`), after which `-` is a literal.
    let mut class: Option<bool> = None;
    while i < chars.len() {
        let c = chars[i];
        match (c, class) {
            ('\\', _) if chars.get(i + 1) == Some(&'Q') && class.is_none() => {
                i += 2;
                while i < chars.len() && !(chars[i] == '\\' && chars.get(i + 1) == Some(&'E')) {
                    push_literal(&mut out, chars[i]);
                    i += 1;
                }
                i += 2;
                continue;
            }
            ('\\', _) => {
                let escape = escape_len(&chars, i);
                out.extend(&chars[i..i + escape]);
                if class.is_some() {
                    class = Some(is_class_escape(chars.get(i + 1).copied()));
                }
                i += escape;
                continue;
            }
            ('[', None) => {
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                // A `]` first is a literal.
                if chars.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
                class = Some(false);
                continue;
            }
            ('[', Some(_)) if chars.get(i + 1) == Some(&':') => {
                // A POSIX class, `[:alpha:]`: a class, not a character.
                let end = (i + 2 <= last_posix_end)
                    .then(|| {
                        (i + 2..chars.len().saturating_sub(1))
                            .find(|&j| chars[j] == ':' && chars[j + 1] == ']')
                    })
                    .flatten();
                match end {
                    Some(end) => {
                        out.extend(&chars[i..end + 2]);
                        i = end + 2;
                        class = Some(true);
                    }
                    None => {
                        out.push_str("\\[");
                        i += 1;
                        class = Some(false);
                    }
                }
                continue;
            }
            ('[', Some(_)) => {
                // A literal `[` inside a bracket (regex-lite reads a nested
                // class there).
                out.push_str("\\[");
                class = Some(false);
            }
            (']', Some(_)) => {
                out.push(']');
                class = None;
            }
            ('-', Some(true)) if chars.get(i + 1) != Some(&']') => {
                out.push_str("\\-");
                class = Some(false);
            }
            ('&' | '~', Some(_)) => {
                // regex-lite reads `&&` and `~~` as set operations; Go does
                // not have them.
                out.push('\\');
                out.push(c);
                class = Some(false);
            }
            (_, Some(_)) => {
                out.push(c);
                class = Some(false);
            }
            ('{', None) => match repeat(&chars, i) {
                Some((end, min, max)) => {
                    if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT) {
                        let text: String = chars[i..end].iter().collect();
                        return Err(format!("invalid repeat count: `{text}`"));
                    }
                    out.extend(&chars[i..end]);
                    i = end;
                    continue;
                }
                None => out.push_str("\\{"),
            },
            ('}', None) => out.push_str("\\}"),
            _ => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

/// Writes `c` so that it matches itself.
fn push_literal(out: &mut String, c: char) {
    if "\\.+*?()|[]{}^$#&-~".contains(c) {
        out.push('\\');
    }
    out.push(c);
}

/// How many characters the escape at `i` (a `\`) spans: `\pL`, `\p{Greek}`,
/// `\x{10FFFF}`, `\x41`, or a backslash and one character.
fn escape_len(chars: &[char], i: usize) -> usize {
    let braced = |from: usize| {
        (from..chars.len())
            .find(|&j| chars[j] == '}')
            .map_or(chars.len() - i, |j| j + 1 - i)
    };
    match chars.get(i + 1) {
        None => 1,
        Some('p' | 'P') if chars.get(i + 2) == Some(&'{') => braced(i + 3),
        Some('p' | 'P') if chars.get(i + 2).is_some() => 3,
        Some('x') if chars.get(i + 2) == Some(&'{') => braced(i + 3),
        Some('x') => (chars.len() - i).min(4),
        Some(_) => 2,
    }
}

/// Whether `\c` is a class escape (a set, not one character).
fn is_class_escape(c: Option<char>) -> bool {
    matches!(c, Some('d' | 'D' | 's' | 'S' | 'w' | 'W' | 'p' | 'P'))
}

/// The repetition `{n}`, `{n,}` or `{n,m}` at `i`, as Go's `parseRepeat`
/// reads it: where it ends, its minimum and maximum; None when the `{`
/// starts none (then it is a literal).
fn repeat(chars: &[char], i: usize) -> Option<(usize, u32, Option<u32>)> {
    let number = |mut j: usize| -> Option<(usize, u32)> {
        let start = j;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        if j == start {
            return None;
        }
        let text: String = chars[start..j].iter().collect();
        // Go refuses a count past 1,000 (and any it cannot parse).
        Some((j, text.parse().unwrap_or(u32::MAX)))
    };
    let (j, min) = number(i + 1)?;
    match chars.get(j) {
        Some('}') => Some((j + 1, min, Some(min))),
        Some(',') if chars.get(j + 1) == Some(&'}') => Some((j + 2, min, None)),
        Some(',') => {
            let (k, max) = number(j + 1)?;
            (chars.get(k) == Some(&'}')).then_some((k + 1, min, Some(max)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        regex_lite::Regex::new(&translate(pattern).unwrap())
            .unwrap()
            .is_match(text)
    }

    #[test]
    fn what_go_reads_as_literals_is_read_as_literals() {
        assert!(matches(r"^[\w-\.]+$", "my-group.name"));
        assert!(!matches(r"^[\w-\.]+$", "a/b"));
        assert!(matches(r"\$(?:__(?:env|file|vault))?{[^}]+}", "${HOME}"));
        assert!(matches(r"^a{$", "a{"));
        assert!(matches(r"^a{x}$", "a{x}"));
        assert!(matches(r"^a{1,x}$", "a{1,x}"));
        assert!(matches(r"^\Q.*+\E$", ".*+"));
        assert!(matches(r"^\Q[a]", "[a]"));
        assert!(matches(r"^[]a]+$", "]a]"));
        assert!(matches(r"^[^]a]$", "b"));
        assert!(matches(r"^[[:alpha:]-]+$", "ab-c"));
        assert!(matches(r"^[a&&b]+$", "&&"));
        assert!(matches(r"^[a[]+$", "a[["));
    }

    #[test]
    fn repetitions_and_ranges_are_kept() {
        assert!(matches(r"^a{2}$", "aa"));
        assert!(matches(r"^a{2,}$", "aaa"));
        assert!(matches(r"^a{1,3}$", "aaa"));
        assert!(matches(r"^[a-c-]+$", "b-c"));
        assert_eq!(translate(r"\p{Greek}-").unwrap(), r"\p{Greek}-");
        assert!(matches(r"^a{,3}$", "a{,3}"));
        assert_eq!(translate(r"\x{41}-").unwrap(), r"\x{41}-");
    }

    #[test]
    fn a_chart_s_pattern_is_read_in_one_pass_whatever_it_holds() {
        // Unclosed POSIX brackets: each `[:` used to look for a `:]` to
        // the end of the pattern (quadratic: 25 s for 90 KB).
        let pattern = "[[:".repeat(30_000);
        let translated = translate(&pattern).unwrap();
        assert_eq!(translated, format!("[\\[:{}", "\\[\\[:".repeat(29_999)));
        // A nested repetition is the engine's to refuse (its size limit).
        let nested = translate("(a{1000}){1000}").unwrap();
        assert!(regex_lite::Regex::new(&nested).is_err());
    }

    #[test]
    fn counts_past_a_thousand_are_refused_as_go_refuses_them() {
        assert_eq!(
            translate("a{1001}").unwrap_err(),
            "invalid repeat count: `{1001}`"
        );
        assert_eq!(
            translate("a{2,1001}").unwrap_err(),
            "invalid repeat count: `{2,1001}`"
        );
        assert!(translate("a{1000}").is_ok());
    }
}
