//! The trust policy file: which signers each plugin needs.
//!
//! ```yaml
//! # trust.yaml
//! trustedRoot: trusted_root.json      # optional; default: Sigstore public-good root
//! rules:                              # the first rule matching a plugin applies
//!   - plugins: ["values", "oci://ghcr.io/acme/*"]   # globs over name or reference
//!     anyOf:                          # or allOf
//!       - key: keys/release.pub       # relative to this file
//!       - keyless:
//!           identity: https://github.com/acme/plugins/.github/workflows/release.yml@refs/heads/main
//!           issuer: https://token.actions.githubusercontent.com
//!       - keyless:
//!           identityRegex: https://github.com/acme/.*
//!           issuer: https://token.actions.githubusercontent.com
//!     minSigners: 1                   # distinct signers needed (anyOf only)
//!   - plugins: ["dev-*"]
//!     insecure: true                  # no verification: development only, always warned about
//! ```
//!
//! A plugin no rule matches is refused: every plugin must verify unless a
//! rule explicitly says `insecure: true`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Identity, Keyless, PublicKey, Requirement, Signer};

/// A trust policy file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trust policy {}: {message}", file.display())]
pub struct PolicyError {
    file: PathBuf,
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    trusted_root: Option<PathBuf>,
    rules: Vec<RuleSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleSpec {
    plugins: Vec<String>,
    #[serde(default)]
    any_of: Vec<SignerSpec>,
    #[serde(default)]
    all_of: Vec<SignerSpec>,
    min_signers: Option<usize>,
    #[serde(default)]
    insecure: bool,
}

/// `{key: FILE}` or `{keyless: {...}}` (a struct, not an enum: serde_yaml
/// reads enums from YAML tags).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SignerSpec {
    key: Option<String>,
    keyless: Option<KeylessSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KeylessSpec {
    identity: Option<String>,
    identity_regex: Option<String>,
    issuer: String,
}

/// A parsed trust policy.
#[derive(Debug, Clone)]
pub struct TrustPolicy {
    /// The trusted root for bundles, if the policy names one.
    pub trusted_root: Option<PathBuf>,
    rules: Vec<(Vec<regex::Regex>, Requirement)>,
}

impl TrustPolicy {
    /// Reads a policy file; key paths are relative to it.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let fail = |message: String| PolicyError {
            file: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let file: File = serde_yaml::from_str(&text).map_err(|e| fail(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut rules = Vec::new();
        for (index, rule) in file.rules.into_iter().enumerate() {
            let at = |m: String| fail(format!("rules[{index}]: {m}"));
            if rule.plugins.is_empty() {
                return Err(at("`plugins` lists no plugin globs".into()));
            }
            let (specs, all) = match (rule.any_of.is_empty(), rule.all_of.is_empty()) {
                (false, true) => (rule.any_of, false),
                (true, false) => (rule.all_of, true),
                (true, true) if rule.insecure => (Vec::new(), false),
                (true, true) => {
                    return Err(at(
                        "needs `anyOf` or `allOf` signers (or `insecure: true`)".into()
                    ));
                }
                (false, false) => return Err(at("`anyOf` and `allOf` exclude each other".into())),
            };
            let mut signers = Vec::new();
            for spec in specs {
                signers.push(signer(spec, base).map_err(&at)?);
            }
            let min_signers = match (all, rule.min_signers) {
                (true, Some(_)) => return Err(at("`minSigners` applies to `anyOf` only".into())),
                (true, None) => signers.len(),
                (false, Some(n)) if n == 0 || n > signers.len() => {
                    return Err(at(format!(
                        "`minSigners: {n}` must be between 1 and {}",
                        signers.len()
                    )));
                }
                (false, n) => n.unwrap_or(1),
            };
            let globs = rule
                .plugins
                .iter()
                .map(|g| glob(g))
                .collect::<Result<_, _>>()
                .map_err(&at)?;
            rules.push((
                globs,
                Requirement {
                    signers,
                    min_signers,
                    insecure: rule.insecure,
                },
            ));
        }
        Ok(TrustPolicy {
            trusted_root: file.trusted_root.map(|p| base.join(p)),
            rules,
        })
    }

    /// The requirement for a plugin, by its name or reference: the first
    /// rule with a glob matching either.
    pub fn requirement(&self, name: &str, reference: &str) -> Option<&Requirement> {
        self.rule(name, reference).map(|(_, r)| r)
    }

    /// Like [`requirement`](Self::requirement), with the rule's index (what
    /// a cache of verification results keys on besides the digest).
    pub fn rule(&self, name: &str, reference: &str) -> Option<(usize, &Requirement)> {
        self.rules
            .iter()
            .enumerate()
            .find(|(_, (globs, _))| {
                globs
                    .iter()
                    .any(|g| g.is_match(name) || g.is_match(reference))
            })
            .map(|(index, (_, r))| (index, r))
    }
}

fn signer(spec: SignerSpec, base: &Path) -> Result<Signer, String> {
    match (spec.key, spec.keyless) {
        (Some(file), None) => {
            let path = base.join(&file);
            let pem = std::fs::read_to_string(&path)
                .map_err(|e| format!("key {}: {e}", path.display()))?;
            PublicKey::from_pem(&pem)
                .map(Signer::Key)
                .map_err(|e| format!("key {}: {e}", path.display()))
        }
        (None, Some(k)) => {
            let identity = match (k.identity, k.identity_regex) {
                (Some(exact), None) => Identity::Exact(exact),
                (None, Some(pattern)) => {
                    Identity::regex(&pattern).map_err(|e| format!("identityRegex: {e}"))?
                }
                _ => {
                    return Err(
                        "keyless signers need exactly one of `identity` and `identityRegex`".into(),
                    );
                }
            };
            Ok(Signer::Keyless(Keyless {
                identity,
                issuer: k.issuer,
            }))
        }
        _ => Err("a signer is either `key: FILE` or `keyless: {...}`".into()),
    }
}

/// `*` matches anything (including `/`), `?` one character.
fn glob(pattern: &str) -> Result<regex::Regex, String> {
    let mut re = String::from("^");
    for c in pattern.chars() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    regex::Regex::new(&re).map_err(|e| format!("glob `{pattern}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::PrivateKey;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn rules_match_by_name_or_reference_first_wins() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a.pub",
            PrivateKey::generate().public_key().to_pem(),
        );
        write(
            dir.path(),
            "b.pub",
            PrivateKey::generate().public_key().to_pem(),
        );
        let policy = write(
            dir.path(),
            "trust.yaml",
            "rules:\n- plugins: [dev-*]\n  insecure: true\n\
             - plugins: ['oci://ghcr.io/acme/*']\n  allOf: [{key: a.pub}, {key: b.pub}]\n\
             - plugins: ['*']\n  anyOf:\n  - key: a.pub\n  - keyless: {identityRegex: 'https://github.com/acme/.*', issuer: https://token.actions.githubusercontent.com}\n",
        );
        let policy = TrustPolicy::load(&policy).unwrap();
        assert!(
            policy
                .requirement("dev-thing", "file:///x")
                .unwrap()
                .insecure
        );
        let acme = policy
            .requirement("values", "oci://ghcr.io/acme/values:1")
            .unwrap();
        assert_eq!((acme.signers.len(), acme.min_signers), (2, 2));
        let any = policy.requirement("values", "file:///values.wasm").unwrap();
        assert_eq!((any.signers.len(), any.min_signers), (2, 1));
    }

    #[test]
    fn mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("rules:\n- plugins: [x]\n", "needs `anyOf` or `allOf`"),
            (
                "rules:\n- plugins: [x]\n  anyOf: [{key: missing.pub}]\n",
                "key ",
            ),
            (
                "rules:\n- plugins: [x]\n  anyOf: [{keyless: {issuer: i}}]\n",
                "exactly one of `identity`",
            ),
            (
                "rules:\n- plugins: [x]\n  anyOf: [{keyless: {identity: a, issuer: i}}]\n  minSigners: 2\n",
                "between 1 and 1",
            ),
            ("rules:\n- plugins: [x]\n  insecure: yes-please\n", "rules"),
            ("rulez: []\n", "unknown field"),
        ];
        for (text, expected) in cases {
            let path = write(dir.path(), "p.yaml", text);
            let err = TrustPolicy::load(&path).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("trust policy "), "{err}");
        }
    }
}
