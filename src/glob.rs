//! Kiln's one glob dialect: a `*` matches any run of characters, `/`
//! included, and a `?` one character (not one byte), as in Argo CD's
//! patterns (gobwas/glob without separators) for `sourceRepos`,
//! destinations and plugin names.
//!
//! Two flavours of the same matcher: [`Glob::new`] reads Argo CD's
//! patterns (`*`, `?`, `[abc]`, `[a-z]`, `[!a-z]`, `{a,b}`, `\` escapes);
//! [`Glob::wildcard`] only `*` and `?`, everything else literal (the trust
//! policy's references and names, OpenSSH host patterns). Both compile to
//! one anchored regular expression (the `regex` crate: linear-time
//! matching, a bounded program), so a hostile pattern costs neither time
//! nor memory.

use std::fmt;

/// The largest compiled pattern, in bytes of the regex program: far above
/// any real pattern, small enough that a hostile one costs little.
const PROGRAM_LIMIT: usize = 256 * 1024;

/// A pattern that is not a valid glob.
#[derive(Debug, thiserror::Error)]
#[error("glob {pattern:?}: {reason}")]
pub struct GlobError {
    /// The pattern.
    pub pattern: String,
    /// Why.
    pub reason: String,
}

/// A compiled pattern.
#[derive(Clone)]
pub struct Glob {
    pattern: String,
    regex: regex::Regex,
    /// Texts are compared in ASCII lower case (the pattern was lowered).
    ascii_case_insensitive: bool,
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Glob").field(&self.pattern).finish()
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pattern)
    }
}

impl Glob {
    /// An Argo CD pattern: `*` (any run, `/` included), `?`, classes,
    /// alternatives and `\` escapes. A run of stars is one star (gobwas's
    /// `**` without separators).
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        Self::build(pattern, Dialect::ArgoCd, false)
    }

    /// A pattern whose only special characters are `*` (any run, `/`
    /// included) and `?` (one character).
    pub fn wildcard(pattern: &str) -> Result<Self, GlobError> {
        Self::build(pattern, Dialect::Wildcards, false)
    }

    /// [`Glob::wildcard`], ignoring ASCII case (host names).
    pub fn wildcard_ignoring_case(pattern: &str) -> Result<Self, GlobError> {
        Self::build(pattern, Dialect::Wildcards, true)
    }

    fn build(
        pattern: &str,
        dialect: Dialect,
        ascii_case_insensitive: bool,
    ) -> Result<Self, GlobError> {
        let fail = |reason: String| GlobError {
            pattern: pattern.to_owned(),
            reason,
        };
        let text = if ascii_case_insensitive {
            pattern.to_ascii_lowercase()
        } else {
            pattern.to_owned()
        };
        let mut translation = Translation {
            chars: text.chars().peekable(),
            regex: String::from("(?s)^"),
            dialect,
        };
        translation
            .sequence(false)
            .map_err(|r| fail(r.to_owned()))?;
        translation.regex.push('$');
        let regex = regex::RegexBuilder::new(&translation.regex)
            .size_limit(PROGRAM_LIMIT)
            .build()
            .map_err(|e| fail(e.to_string()))?;
        Ok(Self {
            pattern: pattern.to_owned(),
            regex,
            ascii_case_insensitive,
        })
    }

    /// Whether the whole of `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        if self.ascii_case_insensitive {
            self.regex.is_match(&text.to_ascii_lowercase())
        } else {
            self.regex.is_match(text)
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }
}

/// Whether `text` matches the Argo CD pattern `pattern`; a pattern that
/// is not a valid glob matches only itself.
pub fn matches(pattern: &str, text: &str) -> bool {
    pattern == text || Glob::new(pattern).is_ok_and(|glob| glob.is_match(text))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    ArgoCd,
    Wildcards,
}

/// A pattern read once, left to right, into a regular expression.
struct Translation<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    regex: String,
    dialect: Dialect,
}

impl Translation<'_> {
    /// Reads up to the end of the pattern, or (inside `{...}`) up to the
    /// `,` or `}` that ends this alternative, which is left unread.
    fn sequence(&mut self, in_alternative: bool) -> Result<(), &'static str> {
        let mut after_star = false;
        while let Some(&c) = self.chars.peek() {
            let argo = self.dialect == Dialect::ArgoCd;
            if in_alternative && matches!(c, ',' | '}') {
                return Ok(());
            }
            self.chars.next();
            match c {
                '*' if after_star => {}
                '*' => self.regex.push_str(".*"),
                '?' => self.regex.push('.'),
                '\\' if argo => {
                    let escaped = self.chars.next().ok_or("a trailing `\\` escapes nothing")?;
                    self.literal(escaped);
                }
                '[' if argo => self.class()?,
                '{' if argo => self.alternatives()?,
                c => self.literal(c),
            }
            after_star = c == '*';
        }
        if in_alternative {
            return Err("unclosed `{`");
        }
        Ok(())
    }

    fn literal(&mut self, c: char) {
        self.regex
            .push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
    }

    /// `[abc]`, `[a-z]`, `[!a-z]`, after the `[`.
    fn class(&mut self) -> Result<(), &'static str> {
        self.regex.push('[');
        if self.chars.next_if_eq(&'!').is_some() {
            self.regex.push('^');
        }
        let mut empty = true;
        loop {
            let c = match self.chars.next().ok_or("unclosed `[`")? {
                ']' if !empty => break,
                ']' => return Err("an empty class `[]`"),
                '\\' => self.chars.next().ok_or("unclosed `[`")?,
                c => c,
            };
            empty = false;
            self.literal(c);
            if self.chars.peek() == Some(&'-') {
                let mut ahead = self.chars.clone();
                ahead.next();
                if let Some(end) = ahead.next().filter(|&e| e != ']') {
                    if end < c {
                        return Err("a class range whose end comes before its start");
                    }
                    self.chars = ahead;
                    self.regex.push('-');
                    self.literal(end);
                }
            }
        }
        self.regex.push(']');
        Ok(())
    }

    /// `{a,b,...}`, after the `{`: each alternative a pattern of its own.
    fn alternatives(&mut self) -> Result<(), &'static str> {
        self.regex.push_str("(?:");
        loop {
            self.sequence(true)?;
            match self.chars.next() {
                Some(',') => self.regex.push('|'),
                Some('}') => break,
                _ => return Err("unclosed `{`"),
            }
        }
        self.regex.push(')');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_crosses_slashes_as_in_argo_cd() {
        let glob = Glob::new("https://github.com/team/*").unwrap();
        assert!(glob.is_match("https://github.com/team/app"));
        assert!(glob.is_match("https://github.com/team/nested/app"));
        assert!(!glob.is_match("https://github.com/other/app"));
        assert!(Glob::new("*").unwrap().is_match("a/b/c"));
        assert!(Glob::new("team-?").unwrap().is_match("team-a"));
        assert!(!Glob::new("team-?").unwrap().is_match("team-ab"));
    }

    #[test]
    fn argo_cd_patterns_have_classes_and_alternatives() {
        assert!(matches("apps{-prod,-staging}", "apps-staging"));
        assert!(!matches("apps{-prod,-staging}", "apps"));
        // An empty alternative is one, as in gobwas's grammar.
        assert!(matches("apps{,-staging}", "apps"));
        assert!(matches("apps{,-staging}", "apps-staging"));
        assert!(matches("{a*,b{c,d}}-x", "bd-x"));
        assert!(!matches("{a*,b{c,d}}-x", "be-x"));
        assert!(matches("ns-[a-c-]", "ns--"));
        assert!(matches("ns-[a-c]", "ns-b"));
        assert!(!matches("ns-[!a-c]", "ns-b"));
        assert!(matches("literal\\*", "literal*"));
        assert!(!matches("literal\\*", "literally"));
    }

    #[test]
    fn a_run_of_stars_is_one_star() {
        // globset's `a/**/b` would match `a/b`; Argo CD's does not.
        assert!(!matches("team/**/app", "team/app"));
        assert!(matches("team/**/app", "team/x/y/app"));
        assert!(!Glob::wildcard("team/**/app").unwrap().is_match("team/app"));
        assert!(Glob::wildcard("**").unwrap().is_match("a/b"));
        assert!(Glob::wildcard("a***b").unwrap().is_match("a/x/b"));
        // An escaped star stays literal and does not join a run.
        assert!(matches("a\\**", "a*/x"));
        assert!(!matches("a\\**", "ab"));
    }

    #[test]
    fn a_question_mark_is_one_character_not_one_byte() {
        assert!(Glob::wildcard("plugin-?").unwrap().is_match("plugin-é"));
        assert!(!Glob::wildcard("plugin-?").unwrap().is_match("plugin-éé"));
        assert!(matches("team-?", "team-é"));
        assert!(
            Glob::wildcard_ignoring_case("?.example.com")
                .unwrap()
                .is_match("É.example.com")
        );
    }

    #[test]
    fn an_invalid_pattern_matches_only_itself() {
        for bad in ["ns-[", "ns-[]", "ns-[z-a]", "apps{a,b", "trailing\\"] {
            let error = Glob::new(bad).unwrap_err();
            assert!(
                error.to_string().contains(bad.trim_end_matches('\\')),
                "{error}"
            );
        }
        assert!(matches("ns-[", "ns-["));
        assert!(!matches("ns-[", "ns-a"));
    }

    #[test]
    fn a_hostile_pattern_is_refused_or_cheap() {
        // Deep nesting and huge alternations: refused by the program limit
        // or matched in linear time, never exponential.
        let deep = format!("{}x{}", "{a,".repeat(300), "}".repeat(300));
        let _ = Glob::new(&deep);
        let stars = "*a".repeat(5_000);
        if let Ok(glob) = Glob::new(&stars) {
            assert!(!glob.is_match(&"a".repeat(4_000)));
        }
        let wide = format!("{{{}}}", vec!["[a-z]?*"; 20_000].join(","));
        assert!(
            Glob::new(&wide).is_err(),
            "a pattern over the program limit is refused"
        );
    }

    #[test]
    fn wildcards_leave_every_other_character_literal() {
        let glob = Glob::wildcard("oci://registry.example.com/[team]/{a,b}*").unwrap();
        assert!(glob.is_match("oci://registry.example.com/[team]/{a,b}/kustomize"));
        assert!(!glob.is_match("oci://registry.example.com/t/a"));
        assert!(
            Glob::wildcard("back\\slash?")
                .unwrap()
                .is_match("back\\slashX")
        );
        let hosts = Glob::wildcard_ignoring_case("*.Example.COM").unwrap();
        assert!(hosts.is_match("git.example.com"));
        assert!(
            !Glob::wildcard("*.Example.COM")
                .unwrap()
                .is_match("git.example.com")
        );
    }
}
