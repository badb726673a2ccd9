//! # `kiln-bytes`: byte strings eight bytes a step
//!
//! Byte-string primitives written for the sandbox: inside WebAssembly,
//! `[u8]` equality, ordering and `memcmp` go to wasi-libc's byte-at-a-time
//! loop, and `memchr` four bytes a step; these compare and scan a 64-bit
//! word per step, in safe Rust (whole words read with `from_le_bytes`).

#![forbid(unsafe_code)]

/// The eight bytes of `b` at `at` as one word.
#[inline]
fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The four bytes of `b` at `at` as one word.
#[inline]
fn half(b: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Whether `a` and `b` hold the same bytes.
#[inline]
pub fn eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        // Whole words, then the last word (overlapping the one before).
        let mut at = 0;
        while at + 8 <= n {
            if word(a, at) != word(b, at) {
                return false;
            }
            at += 8;
        }
        return word(a, n - 8) == word(b, n - 8);
    }
    if n >= 4 {
        return half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// Words of eight bytes `b` each.
#[inline]
const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// A mask whose lowest set bit is the high bit of the first byte of `w`
/// below `n` (`n` ≤ 128), zero when there is none (exact for the first
/// such byte: bytes below it borrow nothing; bytes above may be flagged
/// wrongly).
#[inline]
const fn below_mask(w: u64, n: u8) -> u64 {
    w.wrapping_sub(splat(n)) & !w & splat(0x80)
}

/// Whether a byte of `w` is below `n` (`n` ≤ 128).
#[inline]
const fn any_below(w: u64, n: u8) -> bool {
    below_mask(w, n) != 0
}

/// Whether a byte of `w` is `b`.
#[inline]
const fn any_eq(w: u64, b: u8) -> bool {
    any_below(w ^ splat(b), 1)
}

/// The high bit of each byte of `x` that is zero, exactly (no borrows:
/// the high bit tests the low seven bits' sum, then the byte's own).
#[inline]
const fn zero_bytes(x: u64) -> u64 {
    !(((x & splat(0x7f)).wrapping_add(splat(0x7f))) | x) & splat(0x80)
}

/// The high bit of each byte of `w` that is `b`, exactly.
#[inline]
const fn eq_bytes(w: u64, b: u8) -> u64 {
    zero_bytes(w ^ splat(b))
}

/// The high bit of each byte of `w` below `n` (`n` ≤ 128), exactly: with
/// every high bit set first, no byte borrows from the next.
#[inline]
const fn lt_bytes(w: u64, n: u8) -> u64 {
    !((w | splat(0x80)).wrapping_sub(splat(n))) & !w & splat(0x80)
}

/// Whether a byte of `w` is at least 0x7f (DEL, or not ASCII).
#[inline]
const fn any_high(w: u64) -> bool {
    (w.wrapping_add(splat(1)) | w) & splat(0x80) != 0
}

/// Whether every byte of `text` is printable ASCII (`' '..='~'`), a tab or
/// a line feed.
#[inline]
pub fn printable_ascii(text: &[u8]) -> bool {
    let ok = |b: &u8| matches!(b, b'\t' | b'\n' | b' '..=b'~');
    let mut at = 0;
    while at + 8 <= text.len() {
        let w = word(text, at);
        // Control bytes other than tab and line feed, exactly per byte (a
        // line feed is in most words of a YAML text).
        let control = lt_bytes(w, 0x20) & !eq_bytes(w, b'\n') & !eq_bytes(w, b'\t');
        if any_high(w) || control != 0 {
            return false;
        }
        at += 8;
    }
    text[at..].iter().all(ok)
}

/// Whether `text` holds byte `b`.
#[inline]
pub fn contains(text: &[u8], b: u8) -> bool {
    contains_any(text, [b])
}

/// Whether `text` holds one of the bytes of `set`.
#[inline]
pub fn contains_any<const N: usize>(text: &[u8], set: [u8; N]) -> bool {
    let mut at = 0;
    while at + 8 <= text.len() {
        let w = word(text, at);
        if set.iter().any(|&b| any_eq(w, b)) {
            return true;
        }
        at += 8;
    }
    text[at..].iter().any(|b| set.contains(b))
}

/// Longest needle [`find`] searches by its first byte; longer ones go to
/// the standard library's two-way search.
const SHORT_NEEDLE: usize = 16;

/// The offset of the first occurrence of `needle` in `haystack`. A short
/// needle's candidate positions are found by its first byte, eight bytes a
/// step, and each costs at most [`SHORT_NEEDLE`] bytes of comparison (the
/// search stays linear); a longer needle takes the standard library's
/// two-way search, linear for any needle.
#[inline]
pub fn find(haystack: &str, needle: &str) -> Option<usize> {
    if needle.len() > SHORT_NEEDLE {
        return haystack.find(needle);
    }
    let (haystack, needle) = (haystack.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = needle.split_first() else {
        return Some(0);
    };
    let mut at = 0;
    while at + needle.len() <= haystack.len() {
        let i = at + position(&haystack[at..haystack.len() - rest.len()], first)?;
        if eq(&haystack[i + 1..i + needle.len()], rest) {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

/// The offset of the first `b` in `text`.
#[inline]
pub fn position(text: &[u8], b: u8) -> Option<usize> {
    let mut at = 0;
    while at + 8 <= text.len() {
        let zero = below_mask(word(text, at) ^ splat(b), 1);
        if zero != 0 {
            return Some(at + (zero.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    text[at..].iter().position(|&x| x == b).map(|i| at + i)
}

/// The offset of the first byte of `text` that is one of `set`.
#[inline]
pub fn position_any<const N: usize>(text: &[u8], set: [u8; N]) -> Option<usize> {
    let mut at = 0;
    while at + 8 <= text.len() {
        let w = word(text, at);
        // Each mask is exact up to its first match: the lowest bit of
        // their union is the first byte of the set.
        let found = set
            .iter()
            .fold(0, |found, &b| found | below_mask(w ^ splat(b), 1));
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    text[at..]
        .iter()
        .position(|b| set.contains(b))
        .map(|i| at + i)
}

/// How many bytes at the start of `text` are `b`.
#[inline]
pub fn leading(text: &[u8], b: u8) -> usize {
    let mut at = 0;
    while at + 8 <= text.len() {
        let other = word(text, at) ^ splat(b);
        if other != 0 {
            // Little-endian: the lowest set bit is in the first other byte.
            return at + (other.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + text[at..].iter().take_while(|&&x| x == b).count()
}

/// `text.split('\n')`, its breaks found eight bytes a step.
#[inline]
pub fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match position(current.as_bytes(), b'\n') {
            Some(i) => {
                rest = Some(&current[i + 1..]);
                Some(&current[..i])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// The offset of the last `b` in `text`.
#[inline]
pub fn rposition(text: &[u8], b: u8) -> Option<usize> {
    let mut end = text.len();
    while end >= 8 {
        let w = word(text, end - 8) ^ splat(b);
        // A zero byte of `w` is a `b`. Unlike the first match, the last is
        // not exact in `below_mask` (a borrow may flag the byte above a
        // match): the word is searched bytewise once it holds one.
        if below_mask(w, 1) != 0 {
            return text[end - 8..end]
                .iter()
                .rposition(|&x| x == b)
                .map(|i| end - 8 + i);
        }
        end -= 8;
    }
    text[..end].iter().rposition(|&x| x == b)
}

/// How many bytes of `text` are `b`.
#[inline]
pub fn count(text: &[u8], b: u8) -> usize {
    let mut n = 0;
    let mut at = 0;
    while at + 8 <= text.len() {
        let w = word(text, at) ^ splat(b);
        // Exact per byte: each byte of `w` is zero exactly when it was `b`
        // (no borrows: the high bit tests the low seven bits' sum).
        let low = (w & splat(0x7f)).wrapping_add(splat(0x7f));
        let nonzero = (low | w) & splat(0x80);
        n += 8 - nonzero.count_ones() as usize;
        at += 8;
    }
    n + text[at..].iter().filter(|&&x| x == b).count()
}

/// Whether every byte of `text` is below 0x7f (ASCII without DEL).
#[inline]
pub fn below_del(text: &[u8]) -> bool {
    let mut at = 0;
    while at + 8 <= text.len() {
        if any_high(word(text, at)) {
            return false;
        }
        at += 8;
    }
    text[at..].iter().all(|&b| b < 0x7f)
}

/// Appends `text` to `out` as a JSON string, escaped exactly as
/// serde_json escapes it (`"`, `\`, and control bytes; `\u00xx` with
/// lowercase digits where no short escape exists).
#[inline]
pub fn write_json_str(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut rest = text.as_bytes();
    while let Some(i) = json_escape_at(rest) {
        out.extend_from_slice(&rest[..i]);
        let b = rest[i];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// Whether every byte of `text` is printable ASCII (`' '..='~'`) and none
/// is one of `excluded`.
#[inline]
pub fn printable_ascii_without<const N: usize>(text: &[u8], excluded: [u8; N]) -> bool {
    let ok = |b: &u8| matches!(b, b' '..=b'~') && !excluded.contains(b);
    let mut at = 0;
    while at + 8 <= text.len() {
        let w = word(text, at);
        if any_high(w) || any_below(w, 0x20) || excluded.iter().any(|&b| any_eq(w, b)) {
            return false;
        }
        at += 8;
    }
    text[at..].iter().all(ok)
}

/// How many leading bytes `a` and `b` have in common.
#[inline]
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + 8 <= n {
        let diff = word(a, at) ^ word(b, at);
        if diff != 0 {
            // Little-endian: the lowest set bit is in the first differing byte.
            return at + (diff.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// `a` against `b` in byte order (as `[u8]`'s `Ord`), from their first
/// difference.
#[inline]
pub fn cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let p = common_prefix(a, b);
    match (a.get(p), b.get(p)) {
        (Some(x), Some(y)) => x.cmp(y),
        _ => a.len().cmp(&b.len()),
    }
}

/// The offset of the first byte of `text` that JSON escapes in a string
/// (`"`, `\`, a control byte), if any.
#[inline]
pub fn json_escape_at(text: &[u8]) -> Option<usize> {
    let special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
    let mut at = 0;
    while at + 8 <= text.len() {
        let w = word(text, at);
        if any_eq(w, b'"') || any_eq(w, b'\\') || any_below(w, 0x20) {
            break;
        }
        at += 8;
    }
    text[at..].iter().position(|&b| special(b)).map(|i| at + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts of every length up to 40 around each interesting byte.
    fn texts() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for len in 0..40usize {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            out.push(base.clone());
            // Two unusual bytes side by side (a carry or borrow out of one
            // byte of a word must not hide or fake the next).
            for at in 0..len.saturating_sub(1) {
                for (x, y) in [
                    (0xff, 0x7e),
                    (0x00, 0x3a),
                    (0x7f, 0x20),
                    (0x1f, 0x23),
                    (0x22, 0x5c),
                ] {
                    let mut t = base.clone();
                    t[at] = x;
                    t[at + 1] = y;
                    out.push(t);
                }
            }
            for at in 0..len {
                for b in [
                    0u8, 1, 9, 10, 13, 0x1f, b' ', b'"', b'\\', b'~', 0x7f, 0x80, 0xc3, 0xff,
                ] {
                    let mut t = base.clone();
                    t[at] = b;
                    out.push(t);
                }
            }
        }
        out
    }

    #[test]
    fn eq_is_slice_equality() {
        let texts = texts();
        for a in texts.iter().step_by(7) {
            for b in texts.iter().step_by(5) {
                assert_eq!(eq(a, b), a == b, "{a:?} {b:?}");
            }
            assert!(eq(a, a));
        }
    }

    #[test]
    fn printable_ascii_is_the_bytewise_rule() {
        for t in texts() {
            let want = t.iter().all(|b| matches!(b, b'\t' | b'\n' | b' '..=b'~'));
            assert_eq!(printable_ascii(&t), want, "{t:?}");
        }
    }

    #[test]
    fn contains_and_below_del_are_the_bytewise_rules() {
        for t in texts() {
            for b in [0u8, b'"', 0xf4, b'a'] {
                assert_eq!(contains(&t, b), t.contains(&b), "{t:?} {b}");
            }
            assert_eq!(below_del(&t), t.iter().all(|&b| b < 0x7f), "{t:?}");
            let set = [b'<', b'>', b'&', b'\\'];
            assert_eq!(
                contains_any(&t, set),
                t.iter().any(|b| set.contains(b)),
                "{t:?}"
            );
        }
    }

    #[test]
    fn printable_ascii_without_is_the_bytewise_rule() {
        for t in texts() {
            let want = t
                .iter()
                .all(|b| matches!(b, b' '..=b'~') && *b != b'"' && *b != b'~');
            assert_eq!(printable_ascii_without(&t, [b'"', b'~']), want, "{t:?}");
            let want = t
                .iter()
                .all(|b| matches!(b, b' '..=b'~') && *b != b':' && *b != b'#');
            assert_eq!(printable_ascii_without(&t, [b':', b'#']), want, "{t:?}");
        }
    }

    #[test]
    fn position_and_position_any_find_the_first_byte_of_the_set() {
        for t in texts() {
            for b in [0u8, b':', b'#', 0xff, b'a'] {
                assert_eq!(position(&t, b), t.iter().position(|&x| x == b), "{t:?} {b}");
            }
            for set in [[b':', b'#', b'\n', b'\t'], [0, 0x7f, 0xff, b' ']] {
                let want = t.iter().position(|b| set.contains(b));
                assert_eq!(position_any(&t, set), want, "{t:?} {set:?}");
            }
        }
    }

    #[test]
    fn leading_counts_the_run_at_the_start() {
        for t in texts() {
            for n in [0, 1, 7, 8, 9, 17] {
                let mut s = vec![b' '; n];
                s.extend_from_slice(&t);
                let want = s.iter().take_while(|&&b| b == b' ').count();
                assert_eq!(leading(&s, b' '), want, "{s:?}");
            }
        }
    }

    #[test]
    fn cmp_is_slice_order() {
        let texts = texts();
        for a in texts.iter().step_by(3) {
            for b in texts.iter().step_by(11) {
                assert_eq!(cmp(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn split_lines_is_str_split() {
        for t in texts() {
            let t: String = t
                .iter()
                .map(|&b| if b < 0x80 { b as char } else { 'é' })
                .collect();
            for text in [t.clone(), format!("{t}\n"), format!("\n{t}\n\n{t}")] {
                let want: Vec<&str> = text.split('\n').collect();
                assert_eq!(split_lines(&text).collect::<Vec<_>>(), want, "{text:?}");
            }
        }
    }

    #[test]
    fn rposition_and_count_are_the_bytewise_rules() {
        for t in texts() {
            for b in [0u8, b'\n', b':', 0x80, 0xff, b'a'] {
                assert_eq!(
                    rposition(&t, b),
                    t.iter().rposition(|&x| x == b),
                    "{t:?} {b}"
                );
                assert_eq!(
                    count(&t, b),
                    t.iter().filter(|&&x| x == b).count(),
                    "{t:?} {b}"
                );
            }
            let lines: Vec<u8> = t
                .iter()
                .map(|&x| if x % 3 == 0 { b'\n' } else { x })
                .collect();
            assert_eq!(
                count(&lines, b'\n'),
                lines.iter().filter(|&&x| x == b'\n').count()
            );
            assert_eq!(
                rposition(&lines, b'\n'),
                lines.iter().rposition(|&x| x == b'\n')
            );
        }
    }

    #[test]
    fn common_prefix_is_the_bytewise_count() {
        let texts = texts();
        for a in texts.iter().step_by(3) {
            for b in texts.iter().step_by(11) {
                let want = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                assert_eq!(common_prefix(a, b), want, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn find_is_the_substring_search() {
        let texts: Vec<String> = texts()
            .into_iter()
            .map(|t| String::from_utf8_lossy(&t).into_owned())
            .collect();
        let needles = [
            "",
            "a",
            "{{",
            "\n---",
            "<no value>",
            "abcdefghij",
            "\"\\",
            "abcdefghijklmnopq",
            "bcdefghijklmnopqrs",
            "ab",
            "\n",
            "\0:",
            "\x7f ",
            "\n-",
            " \"",
            "\n\n",
        ];
        for t in &texts {
            for n in needles {
                assert_eq!(find(t, n), t.find(n), "{t:?} {n:?}");
            }
            let long = format!("{t}\n---x{t}");
            assert_eq!(find(&long, "\n---"), long.find("\n---"));
        }
    }

    /// A long needle made of the haystack's own byte (every position a
    /// candidate): found, or not, as the standard search finds it.
    #[test]
    fn find_of_a_long_needle_is_the_standard_search() {
        let haystack = "a".repeat(100_000);
        let needle = format!("{}b", "a".repeat(5_000));
        assert_eq!(find(&haystack, &needle), None);
        assert_eq!(find(&format!("{haystack}b"), &needle), Some(95_000));
    }

    #[test]
    fn write_json_str_is_serde_jsons_escaping() {
        let mut all: Vec<String> = texts()
            .into_iter()
            .map(|t| String::from_utf8_lossy(&t).into_owned())
            .collect();
        all.push((0u8..0x80).map(char::from).collect());
        all.push("é\u{2028}\u{feff}🎉\"\\".into());
        for t in all {
            let mut ours = Vec::new();
            write_json_str(&mut ours, &t);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&t).unwrap()
            );
        }
    }

    #[test]
    fn json_escape_at_finds_the_first_special_byte() {
        for t in texts() {
            let want = t.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
            assert_eq!(json_escape_at(&t), want, "{t:?}");
        }
    }
}
