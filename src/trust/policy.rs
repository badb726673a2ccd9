//! The trust policy file: which signers each plugin needs.
//!
//! ```yaml
//! # trust.yaml
//! trustedRoot: trusted_root.json      # optional; default: Sigstore public-good root
//! rules:                              # the first rule matching a plugin applies
//!   - references:                     # globs over where the plugin comes from
//!       - oci://ghcr.io/acme/*        #   oci://REGISTRY/REPOSITORY (no tag, no digest)
//!       - https://plugins.acme.com/*  #   the URL (no pin)
//!       - file:///opt/kiln/plugins/*  #   the canonical absolute path
//!     anyOf:                          # or allOf
//!       - key: keys/release.pub       # relative to this file
//!       - keyless:
//!           identity: https://github.com/acme/plugins/.github/workflows/release.yml@refs/heads/main
//!           issuer: https://token.actions.githubusercontent.com
//!       - keyless:
//!           identityRegex: https://github.com/acme/.*
//!           issuer: https://token.actions.githubusercontent.com
//!     minSigners: 1                   # distinct signers needed (anyOf only)
//!   - names: ["dev-*"]                # globs over catalog names an operator gave
//!     insecure: true                  # no verification: development only, always warned about
//! ```
//!
//! A plugin no rule matches is refused: every plugin must verify unless a
//! rule explicitly says `insecure: true`. A name is never taken from a
//! reference (`oci://anyone/dev-x` is not "dev-x"): `names` match only
//! catalog names given explicitly ([`PluginSubject::catalog`]); a plugin
//! given by reference alone is matched by `references`.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Identity, Keyless, PublicKey, Requirement, Signer};
use crate::artifact::PluginRef;
use crate::glob::Glob;

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
    /// Removed: it matched names taken from any reference. Read only to
    /// say so.
    plugins: Option<serde_yaml::Value>,
    #[serde(default)]
    references: Vec<String>,
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    any_of: Vec<SignerSpec>,
    #[serde(default)]
    all_of: Vec<SignerSpec>,
    min_signers: Option<usize>,
    #[serde(default)]
    insecure: bool,
}

/// A signer: `{key: …}` (a PEM public key inline, or a file path) or
/// `{keyless: {...}}` (a struct, not an enum: serde_yaml reads enums from
/// YAML tags).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignerSpec {
    /// A cosign-compatible ECDSA P-256 public key: PEM text, or the path of
    /// a PEM file (relative to the trust policy file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A keyless (Sigstore certificate) identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyless: Option<KeylessSpec>,
}

/// A keyless identity: the certificate's SAN (exactly, or by an anchored
/// regex) and the OIDC issuer that vouched for it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeylessSpec {
    /// The exact identity (an email or URI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// A regex the whole identity must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_regex: Option<String>,
    /// The OIDC issuer, e.g. `https://token.actions.githubusercontent.com`.
    pub issuer: String,
}

/// Who must have signed a plugin: `anyOf` (with `minSigners`, default 1)
/// or `allOf`, or `insecure: true` to skip verification (development only,
/// reported as a warning wherever it is used). The same vocabulary as a
/// trust policy rule; the controller's `Plugin` resources carry one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerificationSpec {
    /// Signers of which `minSigners` distinct ones must have signed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<SignerSpec>,
    /// Signers that must all have signed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub all_of: Vec<SignerSpec>,
    /// How many distinct `anyOf` signers are needed (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_signers: Option<usize>,
    /// Skip verification (development only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

impl VerificationSpec {
    /// The requirement this spec describes; key paths are relative to
    /// `base`. Errors name the field.
    pub fn requirement(&self, base: &Path) -> Result<Requirement, String> {
        let (specs, all) = match (self.any_of.is_empty(), self.all_of.is_empty()) {
            (false, true) => (&self.any_of, false),
            (true, false) => (&self.all_of, true),
            (true, true) if self.insecure => (&self.any_of, false),
            (true, true) => {
                return Err("needs `anyOf` or `allOf` signers (or `insecure: true`)".into());
            }
            (false, false) => return Err("`anyOf` and `allOf` exclude each other".into()),
        };
        let field = if all { "allOf" } else { "anyOf" };
        let mut signers = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            signers.push(signer(spec, base).map_err(|e| format!("{field}[{index}]: {e}"))?);
        }
        let min_signers = match (all, self.min_signers) {
            (true, Some(_)) => return Err("`minSigners` applies to `anyOf` only".into()),
            (true, None) => signers.len(),
            (false, Some(n)) if n == 0 || n > signers.len() => {
                return Err(format!(
                    "`minSigners: {n}` must be between 1 and {}",
                    signers.len()
                ));
            }
            (false, n) => n.unwrap_or(1),
        };
        Ok(Requirement {
            signers,
            min_signers,
            insecure: self.insecure,
        })
    }
}

/// What a trust policy matches a plugin on: where it comes from and, only
/// if an operator gave one explicitly, its catalog name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSubject {
    location: String,
    catalog_name: Option<String>,
}

impl PluginSubject {
    /// A plugin known by its reference alone (`kiln render --plugin REF`):
    /// only rules' `references` can match it.
    pub fn reference(reference: &PluginRef) -> Self {
        PluginSubject {
            location: reference.location(),
            catalog_name: None,
        }
    }

    /// A plugin an operator listed under `name` in a catalog: rules'
    /// `names` match the name, `references` the reference.
    pub fn catalog(name: &str, reference: &PluginRef) -> Self {
        PluginSubject {
            location: reference.location(),
            catalog_name: Some(name.to_owned()),
        }
    }

    /// Where it comes from ([`PluginRef::location`]).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The catalog name, if one was given.
    pub fn catalog_name(&self) -> Option<&str> {
        self.catalog_name.as_deref()
    }
}

impl std::fmt::Display for PluginSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.catalog_name {
            Some(name) => write!(f, "{name} ({})", self.location),
            None => f.write_str(&self.location),
        }
    }
}

/// One rule: what it matches, what it requires.
#[derive(Debug, Clone)]
struct Rule {
    references: Vec<Glob>,
    names: Vec<Glob>,
    requirement: Requirement,
}

impl Rule {
    fn matches(&self, subject: &PluginSubject) -> bool {
        self.references
            .iter()
            .any(|g| g.is_match(&subject.location))
            || subject
                .catalog_name
                .as_deref()
                .is_some_and(|name| self.names.iter().any(|g| g.is_match(name)))
    }
}

/// A parsed trust policy.
#[derive(Debug, Clone)]
pub struct TrustPolicy {
    /// The trusted root for bundles, if the policy names one.
    pub trusted_root: Option<PathBuf>,
    rules: Vec<Rule>,
}

impl TrustPolicy {
    /// Reads a policy file; key paths are relative to it.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let fail = |message: String| PolicyError {
            file: path.to_path_buf(),
            message,
        };
        let text =
            super::read_small(path, super::MAX_SIGNATURE_FILE).map_err(|e| fail(e.to_string()))?;
        crate::manifest::check_yaml(&text).map_err(|e| fail(e.to_string()))?;
        let file: File = serde_yaml::from_str(&text).map_err(|e| fail(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut rules = Vec::new();
        for (index, rule) in file.rules.into_iter().enumerate() {
            let at = |m: String| fail(format!("rules[{index}]: {m}"));
            if rule.plugins.is_some() {
                return Err(at("`plugins` is no longer accepted (it matched names taken from the last segment of any reference): match where plugins come from with `references` (oci://REGISTRY/REPOSITORY, https://URL, file:///PATH globs) or catalog names with `names`".into()));
            }
            if rule.references.is_empty() && rule.names.is_empty() {
                return Err(at(
                    "lists no `references` or `names` globs: it would match no plugin".into(),
                ));
            }
            let verification = VerificationSpec {
                any_of: rule.any_of,
                all_of: rule.all_of,
                min_signers: rule.min_signers,
                insecure: rule.insecure,
            };
            let requirement = verification.requirement(base).map_err(&at)?;
            let globs = |patterns: &[String]| {
                patterns
                    .iter()
                    .map(|g| glob(g))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(&at)
            };
            rules.push(Rule {
                references: globs(&rule.references)?,
                names: globs(&rule.names)?,
                requirement,
            });
        }
        Ok(TrustPolicy {
            trusted_root: file.trusted_root.map(|p| base.join(p)),
            rules,
        })
    }

    /// The requirement for a plugin: that of the first rule matching its
    /// location (`references`) or its catalog name (`names`).
    pub fn requirement(&self, subject: &PluginSubject) -> Option<&Requirement> {
        self.rule(subject).map(|(_, r)| r)
    }

    /// Like [`requirement`](Self::requirement), with the rule's index (what
    /// a cache of verification results keys on besides the digest).
    pub fn rule(&self, subject: &PluginSubject) -> Option<(usize, &Requirement)> {
        self.rules
            .iter()
            .enumerate()
            .find(|(_, rule)| rule.matches(subject))
            .map(|(index, rule)| (index, &rule.requirement))
    }
}

fn signer(spec: &SignerSpec, base: &Path) -> Result<Signer, String> {
    match (&spec.key, &spec.keyless) {
        (Some(key), None) if key.trim_start().starts_with("-----BEGIN") => PublicKey::from_pem(key)
            .map(Signer::Key)
            .map_err(|e| format!("key: {e}")),
        (Some(file), None) => {
            let path = base.join(file);
            let pem = super::read_small(&path, super::MAX_KEY_FILE)
                .map_err(|e| format!("key {}: {e}", path.display()))?;
            PublicKey::from_pem(&pem)
                .map(Signer::Key)
                .map_err(|e| format!("key {}: {e}", path.display()))
        }
        (None, Some(k)) => {
            let identity = match (&k.identity, &k.identity_regex) {
                (Some(exact), None) => Identity::Exact(exact.clone()),
                (None, Some(pattern)) => {
                    Identity::regex(pattern).map_err(|e| format!("identityRegex: {e}"))?
                }
                _ => {
                    return Err(
                        "keyless signers need exactly one of `identity` and `identityRegex`".into(),
                    );
                }
            };
            Ok(Signer::Keyless(Keyless {
                identity,
                issuer: k.issuer.clone(),
            }))
        }
        _ => Err("a signer is either `key: PEM-or-FILE` or `keyless: {...}`".into()),
    }
}

/// `*` matches anything (including `/`), `?` one character; nothing else
/// is special.
fn glob(pattern: &str) -> Result<Glob, String> {
    Glob::wildcard(pattern).map_err(|e| e.to_string())
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

    fn reference(text: &str) -> PluginSubject {
        PluginSubject::reference(&PluginRef::parse(text).unwrap())
    }

    #[test]
    fn rules_match_by_reference_or_catalog_name_first_wins() {
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
            "rules:\n- names: [dev-*]\n  insecure: true\n\
             - references: ['oci://ghcr.io/acme/*']\n  allOf: [{key: a.pub}, {key: b.pub}]\n\
             - references: ['*']\n  anyOf:\n  - key: a.pub\n  - keyless: {identityRegex: 'https://github.com/acme/.*', issuer: https://token.actions.githubusercontent.com}\n",
        );
        let policy = TrustPolicy::load(&policy).unwrap();
        let dev = PluginSubject::catalog("dev-thing", &PluginRef::parse("/x.wasm").unwrap());
        assert!(policy.requirement(&dev).unwrap().insecure);
        let acme = policy
            .requirement(&reference("oci://ghcr.io/acme/values:1"))
            .unwrap();
        assert_eq!((acme.signers.len(), acme.min_signers), (2, 2));
        let any = policy.requirement(&reference("/values.wasm")).unwrap();
        assert_eq!((any.signers.len(), any.min_signers), (2, 1));
    }

    #[test]
    fn a_name_rule_does_not_match_the_last_segment_of_a_reference() {
        let dir = tempfile::tempdir().unwrap();
        let policy = write(
            dir.path(),
            "trust.yaml",
            "rules:\n- names: [dev-*]\n  insecure: true\n\
             - references: ['oci://ghcr.io/acme/*']\n  insecure: true\n",
        );
        let policy = TrustPolicy::load(&policy).unwrap();
        // What `kiln render --plugin oci://anyone/dev-x:1` asks.
        assert!(
            policy
                .requirement(&reference("oci://anyone/dev-x:1"))
                .is_none()
        );
        assert!(
            policy
                .requirement(&reference("oci://ghcr.io/acme/values:1"))
                .is_some()
        );
        // Dot segments are resolved before a URL is matched.
        let pin = format!("sha256:{}", "a".repeat(64));
        let policy = write(
            dir.path(),
            "trust.yaml",
            "rules:\n- references: ['https://plugins.acme.com/kiln/*']\n  insecure: true\n",
        );
        let policy = TrustPolicy::load(&policy).unwrap();
        assert!(
            policy
                .requirement(&reference(&format!(
                    "https://plugins.acme.com/kiln/../uploads/x.wasm@{pin}"
                )))
                .is_none()
        );
        assert!(
            policy
                .requirement(&reference(&format!(
                    "https://plugins.acme.com/kiln/x.wasm@{pin}"
                )))
                .is_some()
        );
    }

    #[test]
    fn mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("rules:\n- names: [x]\n", "needs `anyOf` or `allOf`"),
            (
                "rules:\n- names: [x]\n  anyOf: [{key: missing.pub}]\n",
                "key ",
            ),
            (
                "rules:\n- names: [x]\n  anyOf: [{keyless: {issuer: i}}]\n",
                "exactly one of `identity`",
            ),
            (
                "rules:\n- names: [x]\n  anyOf: [{keyless: {identity: a, issuer: i}}]\n  minSigners: 2\n",
                "between 1 and 1",
            ),
            ("rules:\n- names: [x]\n  insecure: yes-please\n", "rules"),
            (
                "rules:\n- plugins: [x]\n  insecure: true\n",
                "rules[0]: `plugins` is no longer accepted",
            ),
            (
                "rules:\n- insecure: true\n",
                "rules[0]: lists no `references` or `names`",
            ),
            ("rulez: []\n", "unknown field"),
        ];
        for (text, expected) in cases {
            let path = write(dir.path(), "p.yaml", text);
            let err = TrustPolicy::load(&path).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("trust policy "), "{err}");
        }
    }

    #[test]
    fn key_files_must_be_small_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.pub"), vec![b'x'; 100 << 10]).unwrap();
        let spec = |key: &str| SignerSpec {
            key: Some(key.into()),
            ..Default::default()
        };
        let error = signer(&spec("big.pub"), dir.path()).unwrap_err();
        assert!(error.contains("larger than the limit"), "{error}");
        // /dev/zero never ends: refused before reading.
        let error = signer(&spec("/dev/zero"), dir.path()).unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
    }
}
