//! `.helmignore`: the files of a chart Helm leaves out, by Helm's rules
//! (`pkg/ignore`): one pattern a line, `#` comments, `!` negation, a
//! trailing `/` for directories only, a pattern with a `/` matched against
//! the path from the chart's root (a leading `/` anchors it), any other
//! against the file's name; `*`, `?` and `[...]` as Go's `filepath.Match`.
//! Hidden files under `templates/` are always left out (Helm's default).

use crate::files::glob_match;

#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    negate: bool,
    dir_only: bool,
    full_path: bool,
}

/// The rules of one chart.
#[derive(Debug, Clone, Default)]
pub struct Rules(Vec<Rule>);

impl Rules {
    /// Helm's default rule alone (`templates/.?*`).
    pub fn defaults() -> Rules {
        Rules::parse("templates/.?*")
    }

    /// No rule: a packaged chart's files are all loaded (`helm package`
    /// applied `.helmignore` when it made the archive).
    pub fn none() -> Rules {
        Rules(Vec::new())
    }

    /// The rules of a `.helmignore` text, after Helm's default rule.
    pub fn parse(text: &str) -> Rules {
        let mut rules = Vec::new();
        for line in std::iter::once("templates/.?*").chain(text.lines()) {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.contains("**") {
                continue;
            }
            let (negate, rest) = match line.strip_prefix('!') {
                Some(r) => (true, r),
                None => (false, line),
            };
            let (dir_only, rest) = match rest.strip_suffix('/') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            let anchored = rest.strip_prefix('/');
            let pattern = anchored.unwrap_or(rest).to_owned();
            rules.push(Rule {
                full_path: anchored.is_some() || pattern.contains('/'),
                pattern,
                negate,
                dir_only,
            });
        }
        Rules(rules)
    }

    /// Whether `path` (relative to the chart's root) is left out.
    pub fn ignored(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." {
            return false;
        }
        let base = path.rsplit('/').next().unwrap_or(path);
        for rule in &self.0 {
            let subject = if rule.full_path { path } else { base };
            let hit = glob_match(rule.pattern.as_bytes(), subject.as_bytes());
            if rule.negate {
                if rule.dir_only && !is_dir {
                    return true;
                }
                if !hit {
                    return true;
                }
                continue;
            }
            if rule.dir_only && !is_dir {
                continue;
            }
            if hit {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::Rules;

    #[test]
    fn rules_as_helm() {
        let r = Rules::parse("# comment\n*.bak\nsecret/\n/top.txt\ndocs/*.md\n");
        assert!(r.ignored("a.bak", false));
        assert!(r.ignored("sub/a.bak", false));
        assert!(r.ignored("secret", true));
        assert!(!r.ignored("secret", false));
        assert!(r.ignored("top.txt", false));
        assert!(r.ignored("docs/x.md", false));
        assert!(!r.ignored("docs/sub/x.md", false));
        assert!(r.ignored("templates/.hidden", false));
        assert!(!r.ignored("templates/cm.yaml", false));
    }
}
