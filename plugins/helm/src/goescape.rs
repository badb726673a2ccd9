//! The escapers of Go's `text/template` builtins `html`, `js` and
//! `urlquery` (`template.HTMLEscapeString`, `template.JSEscapeString`,
//! `url.QueryEscape`), byte for byte.

use crate::gostr;

/// `template.HTMLEscapeString`: `"'&<>` as entities, NUL as U+FFFD.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `template.JSEscapeString`: quotes, backslash, `<>&=` and control
/// characters as escapes (`\u00XX`, upper-case hex); other runes as they
/// are when printable, else `\uXXXX`. Bytes that are not UTF-8 stay.
pub fn js(text: &str) -> String {
    let bytes = gostr::to_bytes(text);
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            match b {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\'' => out.extend_from_slice(b"\\'"),
                b'"' => out.extend_from_slice(b"\\\""),
                b'<' => out.extend_from_slice(b"\\u003C"),
                b'>' => out.extend_from_slice(b"\\u003E"),
                b'&' => out.extend_from_slice(b"\\u0026"),
                b'=' => out.extend_from_slice(b"\\u003D"),
                b if b < b' ' => out.extend_from_slice(format!("\\u00{b:02X}").as_bytes()),
                b => out.push(b),
            }
            i += 1;
            continue;
        }
        let rest = &bytes[i..];
        let len = utf8_len(rest);
        match std::str::from_utf8(&rest[..len])
            .ok()
            .and_then(|s| s.chars().next())
        {
            Some(c) if !is_print(c) => {
                out.extend_from_slice(format!("\\u{:04X}", c as u32).as_bytes())
            }
            // Printable, or a byte that is not UTF-8 (Go's U+FFFD is
            // printable: the byte is copied).
            _ => out.extend_from_slice(&rest[..len]),
        }
        i += len;
    }
    gostr::from_bytes(&out).into_owned()
}

/// The length of the UTF-8 sequence at the start of `b` (1 when invalid).
fn utf8_len(b: &[u8]) -> usize {
    let want = match b[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return 1,
    };
    if b.len() >= want && std::str::from_utf8(&b[..want]).is_ok() {
        want
    } else {
        1
    }
}

/// Go's `unicode.IsPrint` for runes outside ASCII: letters, marks,
/// numbers, punctuation, symbols and U+0020 — not other spaces, controls,
/// format characters, separators or unassigned code points. Approximated
/// with the categories Rust exposes: control and whitespace runes and the
/// format/separator runes Go lists are not printable.
fn is_print(c: char) -> bool {
    !(c.is_control()
        || c.is_whitespace()
        || matches!(c as u32,
            0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2 | 0x180e
            | 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x2064 | 0x2066..=0x206f
            | 0xfeff | 0xfff9..=0xfffb | 0xfffe..=0xffff | 0xe000..=0xf8ff
            | 0xf0000..=0xffffd | 0x100000..=0x10fffd
            | 0xe0001 | 0xe0020..=0xe007f | 0x1bca0..=0x1bca3 | 0x1d173..=0x1d17a
            | 0x110bd | 0x110cd | 0x13430..=0x1343f | 0xd800..=0xdfff))
}

/// `url.QueryEscape`: unreserved bytes kept, space as `+`, every other byte
/// `%XX` (upper-case hex).
pub fn query(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in gostr::to_bytes(text).iter() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_go_does() {
        assert_eq!(
            html("a <b> & 'c' \"d\" \0"),
            "a &lt;b&gt; &amp; &#39;c&#39; &#34;d&#34; \u{FFFD}"
        );
        assert_eq!(
            js("</script>a\\b\u{2028}`x`é\n="),
            "\\u003C/script\\u003Ea\\\\b\\u2028`x`é\\u000A\\u003D"
        );
        assert_eq!(query("a <b>é\n x"), "a+%3Cb%3E%C3%A9%0A+x");
    }
}
