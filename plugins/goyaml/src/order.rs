//! go-yaml v2's order of mapping keys, and the merge sort that applies it.

/// go-yaml v2's key order: letters after everything else, runs of digits
/// compared as numbers (`a2` before `a10`).
pub(crate) fn key_less(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        // Equal bytes compare equal: the first difference decides.
        let (a, b) = (a.as_bytes(), b.as_bytes());
        less(a, b, kiln_bytes::common_prefix(a, b))
    } else {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        less(&a, &b, 0)
    }
}

/// [`key_less`] of `a` and `b`, whose first `equal` items are equal.
fn less<T: Copy + Into<char> + PartialEq>(a: &[T], b: &[T], equal: usize) -> bool {
    let c = |x: T| -> char { x.into() };
    for i in equal..a.len().min(b.len()) {
        if a[i] == b[i] {
            continue;
        }
        let (ai_char, bi_char) = (c(a[i]), c(b[i]));
        let (al, bl) = (ai_char.is_alphabetic(), bi_char.is_alphabetic());
        if al && bl {
            return ai_char < bi_char;
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ai_char == '0' || bi_char == '0' {
            let mut j = i;
            while j > 0 && c(a[j - 1]).is_ascii_digit() {
                j -= 1;
                if c(a[j]) != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < a.len() && c(a[ai]).is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(c(a[ai]) as i64 - '0' as i64);
            ai += 1;
        }
        let mut bi = i;
        while bi < b.len() && c(b[bi]).is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(c(b[bi]) as i64 - '0' as i64);
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ai_char < bi_char;
    }
    a.len() < b.len()
}

/// Sorts `items` by their keys with [`key_less`], exactly as go-yaml's
/// order came out of the top-down merge sort this crate always used: the
/// order is not guaranteed total, so the result depends on the algorithm,
/// which must stay the same (split at half, take from the right only when
/// its head is less). `scratch` is reused across calls; never panics.
pub(crate) fn sort_by_key<T: Copy>(
    items: &mut [T],
    key: impl Fn(&T) -> &str + Copy,
    scratch: &mut Vec<T>,
) {
    if items.len() < 2 {
        return;
    }
    let middle = items.len() / 2;
    let (left, right) = items.split_at_mut(middle);
    sort_by_key(left, key, scratch);
    sort_by_key(right, key, scratch);
    scratch.clear();
    let (mut l, mut r) = (0, 0);
    while let (Some(a), Some(b)) = (left.get(l), right.get(r)) {
        if key_less(key(b), key(a)) {
            scratch.push(*b);
            r += 1;
        } else {
            scratch.push(*a);
            l += 1;
        }
    }
    scratch.extend_from_slice(left.get(l..).unwrap_or_default());
    scratch.extend_from_slice(right.get(r..).unwrap_or_default());
    for (slot, item) in items.iter_mut().zip(scratch.iter()) {
        *slot = *item;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starting the comparison after the common prefix is the comparison
    /// from the start, digit runs across the prefix's end included (the
    /// leading-zero rule looks back into the prefix).
    #[test]
    fn key_less_from_the_common_prefix_is_key_less_from_the_start() {
        let parts = [
            "", "a", "b", "0", "00", "007", "07", "7", "9", "10", "x", "-", ".", "Z", "é",
        ];
        let mut keys = Vec::new();
        for p in parts {
            for q in parts {
                for r in ["", "0", "1", "a"] {
                    keys.push(format!("{p}{q}{r}"));
                    keys.push(format!("key-{p}{q}{r}-{q}"));
                }
            }
        }
        for a in &keys {
            for b in &keys {
                let from_start = if a.is_ascii() && b.is_ascii() {
                    less(a.as_bytes(), b.as_bytes(), 0)
                } else {
                    let a: Vec<char> = a.chars().collect();
                    let b: Vec<char> = b.chars().collect();
                    less(&a, &b, 0)
                };
                assert_eq!(key_less(a, b), from_start, "{a:?} {b:?}");
            }
        }
    }
}
