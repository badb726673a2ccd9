//! Kyverno's wildcards: `*` any run of characters, `?` one character, every
//! other character itself (no escapes, no classes).

/// Whether `text` matches `pattern`, in at most |pattern|·|text| steps
/// (a two-pointer backtrack to the last `*`: never exponential, whatever
/// the policy says).
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and where in the text it started matching.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) && p[pi] != '*' {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((star_p, star_t)) = star {
            pi = star_p + 1;
            ti = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Whether `text` holds a wildcard character.
pub fn contains_wildcard(text: &str) -> bool {
    text.contains(['*', '?'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_kyverno_s() {
        assert!(matches("*", ""));
        assert!(matches("*:*", "nginx:1.27"));
        assert!(!matches("*:*", "nginx"));
        assert!(matches("!*", "!x"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("*latest", "nginx:latest"));
        assert!(matches("ab*cd*", "abxxcdyy"));
        assert!(!matches("ab*cd", "abxxcdyy"));
        assert!(matches("??*", "ab"));
        assert!(!matches("??*", "a"));
        // Polynomial, not exponential, on a hostile pattern.
        let hostile = "*a".repeat(200) + "b";
        assert!(!matches(&hostile, &"a".repeat(5000)));
    }
}
