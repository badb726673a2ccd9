//! Pod Security Admission's ways of writing lists and values in its
//! messages, so that findings carry its exact wording.

use std::fmt::Write as _;

/// `singular` for one item, `plural` otherwise.
pub fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// `"a", "b"`: each item in double quotes (not escaped), comma-separated;
/// empty for no items.
pub fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut out = String::from("\"");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str("\", \"");
        }
        out.push_str(item.as_ref());
    }
    out.push('"');
    out
}

/// A string quoted as Go's `%q` (`strconv.Quote`) quotes it: escapes for
/// `"`, `\`, the C escapes and other control characters; printable
/// characters as they are.
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || c == '\u{feff}' => {
                let code = c as u32;
                if code <= 0xffff {
                    let _ = write!(out, "\\u{code:04x}");
                } else {
                    let _ = write!(out, "\\U{code:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Cuts `text` to at most `max` bytes at a character boundary; returns how
/// many bytes were cut, if any.
pub fn cut_at(text: &mut String, max: usize) -> Option<usize> {
    if text.len() <= max {
        return None;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    Some(cut)
}

/// Sorted, deduplicated copy of `items` (Go's `sets.String.List()`).
pub fn sorted_set<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Vec<String> {
    let set: std::collections::BTreeSet<String> =
        items.into_iter().map(|s| s.as_ref().to_owned()).collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_quotes_read_as_psa_writes_them() {
        assert_eq!(join_quote(&["a", "b"]), r#""a", "b""#);
        assert_eq!(join_quote::<&str>(&[]), "");
        assert_eq!(pluralize("container", "containers", 2), "containers");
        assert_eq!(go_quote("unconfined"), r#""unconfined""#);
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), r#""a\"b\\c\n\x01é""#);
    }
}
