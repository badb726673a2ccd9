//! Go strings are bytes; ours are UTF-8. A chart's file that is not UTF-8
//! (a keystore, an image) reaches templates as a Go string holding its
//! bytes as they are, and Helm keeps them: `b64enc`, `sha256sum` and `len`
//! see the raw bytes, `quote` escapes them (`"\xff"`), `toJson`/`toYaml`
//! replace each by U+FFFD, and a raw byte printed into a manifest makes
//! Helm's YAML parser refuse it.
//!
//! Here such a byte travels inside the `str` as one character of a
//! private range ([`RAW_BASE`]` + byte`), so that concatenation, slicing,
//! `replace`, `indent` and printing carry it along as Go does; the
//! functions above turn the text back into bytes ([`to_bytes`]) or into
//! Go's lossy UTF-8 ([`lossy`]). A character of that range that was really
//! in the file is carried as its four bytes, so every byte string
//! round-trips exactly.

use std::borrow::Cow;

/// The first character of the private range: byte `b` is `RAW_BASE + b`
/// (U+10FF00..=U+10FFFF, the end of Supplementary Private Use Area-B).
pub const RAW_BASE: u32 = 0x10_FF00;

fn raw(b: u8) -> char {
    char::from_u32(RAW_BASE + u32::from(b)).unwrap_or('\u{fffd}')
}

/// The byte a character carries, if it is one of the private range.
pub fn raw_byte(c: char) -> Option<u8> {
    (c as u32)
        .checked_sub(RAW_BASE)
        .and_then(|b| u8::try_from(b).ok())
}

/// Go's `string(bytes)`: every byte kept.
pub fn from_bytes(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) if !has_raw(text) => Cow::Borrowed(text),
        _ => Cow::Owned(decode(bytes, true)),
    }
}

/// Go's decoding of bytes as runes, each invalid byte one U+FFFD (or, with
/// `keep`, one private character carrying it).
fn decode(mut bytes: &[u8], keep: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    let bad = |b: u8| if keep { raw(b) } else { '\u{fffd}' };
    while !bytes.is_empty() {
        let (valid, rest) = match std::str::from_utf8(bytes) {
            Ok(text) => (text, &bytes[bytes.len()..]),
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                (std::str::from_utf8(valid).unwrap_or_default(), rest)
            }
        };
        for c in valid.chars() {
            if keep && raw_byte(c).is_some() {
                let mut buf = [0; 4];
                out.extend(c.encode_utf8(&mut buf).bytes().map(raw));
            } else {
                out.push(c);
            }
        }
        // Go steps over one byte of an invalid sequence at a time.
        if let Some((&b, rest)) = rest.split_first() {
            out.push(bad(b));
            bytes = rest;
        } else {
            bytes = rest;
        }
    }
    out
}

/// Whether `text` carries raw bytes.
pub fn has_raw(text: &str) -> bool {
    // Every character of the range is encoded starting with byte 0xF4: a
    // byte search rules most texts out without decoding them.
    kiln_bytes::contains(text.as_bytes(), 0xf4) && text.chars().any(|c| raw_byte(c).is_some())
}

/// The bytes of the Go string `text` stands for.
pub fn to_bytes(text: &str) -> Cow<'_, [u8]> {
    if !has_raw(text) {
        return Cow::Borrowed(text.as_bytes());
    }
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match raw_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    Cow::Owned(out)
}

/// The Go string `text` as Go's UTF-8 consumers (`encoding/json`,
/// `strings.ToUpper`, `range`) see it: each invalid byte one U+FFFD. The
/// result is plain text (for writers of YAML, say), not a Go string: use
/// [`lossy`] for a string templates go on with.
pub fn natural(text: &str) -> Cow<'_, str> {
    if !has_raw(text) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(decode(&to_bytes(text), false))
}

/// [`natural`], as a Go string again (what `upper` returns).
pub fn lossy(text: &str) -> Cow<'_, str> {
    match natural(text) {
        Cow::Borrowed(text) => Cow::Borrowed(text),
        Cow::Owned(text) => Cow::Owned(from_bytes(text.as_bytes()).into_owned()),
    }
}

/// Calls `each` with every rune of the Go string `text` as Go decodes it:
/// `Ok(char)`, or `Err(byte)` for each byte that is not UTF-8.
pub fn for_each_rune(text: &str, mut each: impl FnMut(Result<char, u8>)) {
    if !has_raw(text) {
        text.chars().for_each(|c| each(Ok(c)));
        return;
    }
    let bytes = to_bytes(text);
    let mut rest: &[u8] = &bytes;
    while !rest.is_empty() {
        let valid = match std::str::from_utf8(rest) {
            Ok(valid) => valid,
            Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
        };
        valid.chars().for_each(|c| each(Ok(c)));
        rest = &rest[valid.len()..];
        if let Some((&b, after)) = rest.split_first() {
            each(Err(b));
            rest = after;
        }
    }
}

/// What Go's YAML reader (`yaml.v2`, behind `sigs.k8s.io/yaml`) says of
/// the first byte sequence of `bytes` that is not UTF-8, if any.
pub fn yaml_encoding_error(bytes: &[u8]) -> Option<&'static str> {
    let mut i = 0;
    while i < bytes.len() {
        let lead = bytes[i];
        let width = match lead {
            0x00..=0x7f => 1,
            _ if lead & 0xe0 == 0xc0 => 2,
            _ if lead & 0xf0 == 0xe0 => 3,
            _ if lead & 0xf8 == 0xf0 => 4,
            _ => return Some("invalid leading UTF-8 octet"),
        };
        if i + width > bytes.len() {
            return Some("incomplete UTF-8 octet sequence");
        }
        let mut value = u32::from(match width {
            1 => lead & 0x7f,
            2 => lead & 0x1f,
            3 => lead & 0x0f,
            _ => lead & 0x07,
        });
        for &next in &bytes[i + 1..i + width] {
            if next & 0xc0 != 0x80 {
                return Some("invalid trailing UTF-8 octet");
            }
            value = (value << 6) | u32::from(next & 0x3f);
        }
        let shortest = match value {
            0..=0x7f => 1,
            0x80..=0x7ff => 2,
            0x800..=0xffff => 3,
            _ => 4,
        };
        if shortest != width {
            return Some("invalid length of a UTF-8 sequence");
        }
        if (0xd800..=0xdfff).contains(&value) || value > 0x10_ffff {
            return Some("invalid Unicode character");
        }
        i += width;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_decode_as_go_does() {
        let bytes = b"ab\xff\x00c\xe2\x82d\xc3";
        let text = from_bytes(bytes);
        assert_eq!(to_bytes(&text).as_ref(), bytes);
        assert!(has_raw(&text));
        // Go: one U+FFFD per byte of a broken sequence (Rust's lossy
        // decoding would give one for `e2 82`).
        assert_eq!(natural(&text), "ab\u{fffd}\0c\u{fffd}\u{fffd}d\u{fffd}");
        assert_eq!(lossy(&text), natural(&text));
        // A character of the private range really in the file survives.
        let odd = "x\u{10ff41}y".as_bytes();
        let text = from_bytes(odd);
        assert_eq!(to_bytes(&text).as_ref(), odd);
        assert_eq!(natural(&text), "x\u{10ff41}y");
        assert_eq!(lossy(&text), text, "carried as its bytes again");
        let mut runes = Vec::new();
        for_each_rune(&from_bytes(b"a\xffb"), |r| runes.push(r));
        assert_eq!(runes, vec![Ok('a'), Err(0xff), Ok('b')]);
        assert!(matches!(from_bytes(b"plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn encoding_errors_as_go_yaml_words_them() {
        assert_eq!(yaml_encoding_error("ok é €".as_bytes()), None);
        assert_eq!(
            yaml_encoding_error(b"a: \xff"),
            Some("invalid leading UTF-8 octet")
        );
        assert_eq!(
            yaml_encoding_error(b"a: \xc3x"),
            Some("invalid trailing UTF-8 octet")
        );
        assert_eq!(
            yaml_encoding_error(b"a: \xe2\x82"),
            Some("incomplete UTF-8 octet sequence")
        );
    }
}
