//! Kiln's one glob dialect, on `globset`: a `*` matches any run of
//! characters, `/` included, as in Argo CD's patterns (gobwas/glob without
//! separators) for `sourceRepos`, destinations and plugin names.
//!
//! Two flavours of the same matcher: [`Glob::new`] reads Argo CD's
//! patterns (`*`, `?`, `[abc]`, `[!a-z]`, `{a,b}`, `\` escapes);
//! [`Glob::wildcard`] only `*` and `?`, everything else literal (the trust
//! policy's references and names, OpenSSH host patterns).

use std::fmt;

/// A pattern that is not a valid glob.
#[derive(Debug, thiserror::Error)]
#[error("glob {pattern:?}: {source}")]
pub struct GlobError {
    /// The pattern.
    pub pattern: String,
    /// Why.
    #[source]
    pub source: globset::Error,
}

/// A compiled pattern.
#[derive(Clone)]
pub struct Glob {
    pattern: String,
    matcher: globset::GlobMatcher,
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
    /// alternatives and `\` escapes.
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        Self::build(pattern, pattern, false)
    }

    /// A pattern whose only special characters are `*` (any run, `/`
    /// included) and `?` (one character).
    pub fn wildcard(pattern: &str) -> Result<Self, GlobError> {
        Self::build(pattern, &escape_all_but_wildcards(pattern), false)
    }

    /// [`Glob::wildcard`], ignoring ASCII case (host names).
    pub fn wildcard_ignoring_case(pattern: &str) -> Result<Self, GlobError> {
        Self::build(pattern, &escape_all_but_wildcards(pattern), true)
    }

    fn build(pattern: &str, glob: &str, case_insensitive: bool) -> Result<Self, GlobError> {
        let matcher = globset::GlobBuilder::new(glob)
            .literal_separator(false)
            .backslash_escape(true)
            .empty_alternates(true)
            .case_insensitive(case_insensitive)
            .build()
            .map_err(|source| GlobError {
                pattern: pattern.to_owned(),
                source,
            })?
            .compile_matcher();
        Ok(Self {
            pattern: pattern.to_owned(),
            matcher,
        })
    }

    /// Whether the whole of `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        self.matcher.is_match(text)
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

/// `pattern` with every glob metacharacter but `*` and `?` escaped.
fn escape_all_but_wildcards(pattern: &str) -> String {
    let mut glob = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if matches!(c, '[' | ']' | '{' | '}' | '\\' | '!' | ',') {
            glob.push('\\');
        }
        glob.push(c);
    }
    glob
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
        assert!(matches("apps{,-staging}", "apps-staging"));
        assert!(matches("apps{,-staging}", "apps"));
        assert!(matches("ns-[a-c]", "ns-b"));
        assert!(!matches("ns-[!a-c]", "ns-b"));
        assert!(matches("literal\\*", "literal*"));
        assert!(!matches("literal\\*", "literally"));
    }

    #[test]
    fn an_invalid_pattern_matches_only_itself() {
        assert!(Glob::new("ns-[").is_err());
        assert!(matches("ns-[", "ns-["));
        assert!(!matches("ns-[", "ns-a"));
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
