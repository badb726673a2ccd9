//! Trust: proving a plugin came from someone the operator trusts before it
//! is compiled or run.
//!
//! Two kinds of signature are understood, both offline:
//! - **key-based** ([`keys`]): cosign-compatible ECDSA P-256 signatures over
//!   the component's bytes, in `FILE.sig` (base64 DER), as `cosign sign-blob
//!   --key` and `kiln plugin sign` write them;
//! - **Sigstore bundles** ([`TrustRoot`]): `FILE.sigstore.json`, v0.1–v0.3,
//!   keyless (certificate identity, exact or regex, and OIDC issuer) or by key,
//!   verified against a trusted root including the transparency-log inclusion
//!   proof and signed timestamps.
//!
//! A [`Requirement`] says which signers a plugin needs (`anyOf` with a
//! minimum of distinct signers, or `allOf`); a [`TrustPolicy`] maps plugins to
//! requirements. Every entry of a requirement counts only with a signer of
//! its own: a key listed twice, or two keyless entries one certificate
//! identity satisfies, count as one signer. Every refusal says exactly why.

mod bundle;
mod discover;
pub mod keys;
mod policy;
mod verifier;

use std::fmt;
use std::path::{Path, PathBuf};

pub use bundle::TrustRoot;
pub use keys::{KeyError, PrivateKey, PublicKey};
pub use policy::{
    KeylessSpec, PluginSubject, PolicyError, SignerSpec, TrustPolicy, VerificationSpec,
};
pub use verifier::{PolicyVerifier, Refused};

use crate::digest::Digest;

/// Why a plugin is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// No signature file next to the artifact.
    #[error("no signature found (looked for {})", looked.join(", "))]
    NoSignature {
        /// The files looked for.
        looked: Vec<String>,
    },
    /// Signatures exist, but none verifies with a trusted key: another key
    /// signed, or the bytes changed after signing (a plain signature does
    /// not name its key, so the two cannot be told apart).
    #[error(
        "signed, but not by a trusted key, or the file changed after it was signed \
         (trusted: {})",
        trusted.join(", ")
    )]
    UntrustedKey {
        /// Fingerprints of the trusted keys.
        trusted: Vec<String>,
    },
    /// The certificate names someone else.
    #[error("identity mismatch: expected {expected}, found {}", found.as_deref().unwrap_or("none"))]
    IdentityMismatch {
        /// What the policy asked for.
        expected: String,
        /// What the certificate says.
        found: Option<String>,
    },
    /// The certificate was issued for another OIDC issuer.
    #[error("OIDC issuer mismatch: expected {expected}, found {}", found.as_deref().unwrap_or("none"))]
    IssuerMismatch {
        /// What the policy asked for.
        expected: String,
        /// What the certificate says.
        found: Option<String>,
    },
    /// The signature is over other bytes.
    #[error("digest mismatch: {0}")]
    DigestMismatch(String),
    /// The signature does not verify.
    #[error("bad signature: {0}")]
    BadSignature(String),
    /// The signing certificate is expired, not yet valid or not issued by a
    /// trusted authority.
    #[error("untrusted certificate: {0}")]
    Certificate(String),
    /// The transparency-log entry, inclusion proof or checkpoint is wrong.
    #[error("transparency log: {0}")]
    TransparencyLog(String),
    /// A signed timestamp is wrong or untrusted.
    #[error("timestamp: {0}")]
    Timestamp(String),
    /// The signature file itself is malformed.
    #[error("{0}")]
    InvalidSignature(String),
    /// The trusted root cannot be used.
    #[error("trusted root: {0}")]
    Root(String),
    /// The entry is satisfied only by signers that already count for other
    /// entries of the requirement.
    #[error("signed only by {}, who already counted for another entry", signers.join(", "))]
    SignerCounted {
        /// The signers that satisfied the entry.
        signers: Vec<String>,
    },
    /// Fewer distinct trusted signers than required.
    #[error("{found} of {required} required signers verified ({})", reasons.join("; "))]
    NotEnoughSigners {
        /// How many are required.
        required: usize,
        /// How many verified.
        found: usize,
        /// Why each of the others did not.
        reasons: Vec<String>,
    },
}

/// How a keyless signer's certificate identity must look.
#[derive(Debug, Clone)]
pub enum Identity {
    /// Exactly this SAN (an email or URI).
    Exact(String),
    /// A SAN matching this regex (anchored: the whole SAN must match).
    Regex(regex::Regex),
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Exact(s) => f.write_str(s),
            Identity::Regex(re) => write!(f, "/{}/", re.as_str()),
        }
    }
}

impl Identity {
    /// An anchored regex identity.
    pub fn regex(pattern: &str) -> Result<Self, regex::Error> {
        regex::Regex::new(&format!("^(?:{pattern})$")).map(Identity::Regex)
    }
}

/// A keyless (Fulcio certificate) signer.
#[derive(Debug, Clone)]
pub struct Keyless {
    /// The certificate identity.
    pub identity: Identity,
    /// The OIDC issuer, e.g. `https://token.actions.githubusercontent.com`.
    pub issuer: String,
}

/// Someone whose signature counts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Signer {
    /// Whoever holds this key (`.sig` files, or bundles signed with it).
    Key(PublicKey),
    /// A keyless identity (bundles).
    Keyless(Keyless),
}

impl fmt::Display for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signer::Key(key) => write!(f, "key {}", key.fingerprint()),
            Signer::Keyless(k) => write!(f, "{} via {}", k.identity, k.issuer),
        }
    }
}

/// Which signers a plugin needs.
#[derive(Debug, Clone)]
pub struct Requirement {
    /// The signers that count.
    pub signers: Vec<Signer>,
    /// How many entries of the list must be satisfied, each by a distinct
    /// signer (a key, or a certificate identity and issuer): `1` for
    /// "any of", `signers.len()` for "all of".
    pub min_signers: usize,
    /// Skip verification (development only; reported as a warning wherever
    /// it is used).
    pub insecure: bool,
}

/// The signatures found next to an artifact.
#[derive(Debug, Clone, Default)]
pub struct Signatures {
    /// Contents of `.sig` files (base64 DER signatures).
    pub key_signatures: Vec<String>,
    /// Contents of `.sigstore.json` files.
    pub bundles: Vec<String>,
    /// cosign signatures stored beside an OCI artifact, with the manifest
    /// digest they must vouch for.
    pub cosign: Vec<crate::artifact::CosignSignature>,
    /// The OCI manifest digest the artifact was resolved to.
    pub manifest: Option<Digest>,
    /// Where they were looked for, for messages.
    pub looked: Vec<String>,
}

impl Signatures {
    /// Collects `FILE.sig`, `FILE.*.sig`, `FILE.sigstore.json` and
    /// `FILE.*.sigstore.json` next to a file.
    pub fn next_to(file: &Path) -> std::io::Result<Self> {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut found = Signatures {
            looked: vec![
                format!("{}.sig", file.display()),
                format!("{}.sigstore.json", file.display()),
            ],
            ..Default::default()
        };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for path in entries {
            let Some(other) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            let Some(rest) = other.strip_prefix(&name) else {
                continue;
            };
            if rest == ".sig" || (rest.starts_with('.') && rest.ends_with(".sig") && rest.len() > 4)
            {
                found
                    .key_signatures
                    .push(read_small(&path, MAX_SIGNATURE_FILE)?);
            } else if rest == ".sigstore.json"
                || (rest.starts_with('.') && rest.ends_with(".sigstore.json"))
            {
                found.bundles.push(read_small(&path, MAX_SIGNATURE_FILE)?);
            }
        }
        Ok(found)
    }

    fn is_empty(&self) -> bool {
        self.key_signatures.is_empty() && self.bundles.is_empty() && self.cosign.is_empty()
    }
}

/// What verification established.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verified {
    /// These signers (by their display names) signed the artifact.
    Signed {
        /// The artifact's digest.
        digest: Digest,
        /// Who signed, as the policy names them.
        signers: Vec<String>,
    },
    /// Nothing was checked: the requirement says `insecure`.
    Insecure {
        /// The artifact's digest.
        digest: Digest,
    },
}

/// Checks `artifact` against `requirement`, with `root` for bundles.
pub fn verify(
    artifact: &[u8],
    signatures: &Signatures,
    requirement: &Requirement,
    root: &TrustRoot,
) -> Result<Verified, TrustError> {
    let digest = Digest::of(artifact);
    if requirement.insecure {
        tracing::warn!(%digest, "signature verification is switched off for this plugin (insecure: true)");
        return Ok(Verified::Insecure { digest });
    }
    if signatures.is_empty() {
        return Err(TrustError::NoSignature {
            looked: signatures.looked.clone(),
        });
    }
    // Which distinct signers vouch for each entry of the requirement.
    let checked: Vec<Result<Vec<SignedBy>, TrustError>> = requirement
        .signers
        .iter()
        .map(|signer| check_signer(artifact, signatures, signer, root))
        .collect();
    let candidates: Vec<&[SignedBy]> = checked
        .iter()
        .map(|c| c.as_deref().unwrap_or_default())
        .collect();
    // Each entry counts only with a signer of its own: a key listed twice,
    // or two keyless entries one certificate satisfies, are one signer.
    let assigned = distinct_signers(&candidates);
    let mut verified = Vec::new();
    let mut reasons = Vec::new();
    for ((signer, result), by) in requirement.signers.iter().zip(checked).zip(&assigned) {
        match (result, by) {
            (Ok(_), Some(_)) => verified.push(signer.to_string()),
            (Ok(others), None) => reasons.push((
                signer,
                TrustError::SignerCounted {
                    signers: others.iter().map(ToString::to_string).collect(),
                },
            )),
            (Err(reason), _) => reasons.push((signer, reason)),
        }
    }
    let required = requirement
        .min_signers
        .clamp(1, requirement.signers.len().max(1));
    if verified.len() >= required {
        return Ok(Verified::Signed {
            digest,
            signers: verified,
        });
    }
    // One signer required and one tried: its own reason is the answer.
    if requirement.signers.len() == 1 && reasons.len() == 1 {
        return Err(reasons.remove(0).1);
    }
    if verified.is_empty()
        && reasons
            .iter()
            .all(|(_, r)| matches!(r, TrustError::UntrustedKey { .. }))
    {
        return Err(TrustError::UntrustedKey {
            trusted: requirement
                .signers
                .iter()
                .filter_map(|s| match s {
                    Signer::Key(k) => Some(k.fingerprint()),
                    Signer::Keyless(_) => None,
                })
                .collect(),
        });
    }
    Err(TrustError::NotEnoughSigners {
        required,
        found: verified.len(),
        reasons: reasons
            .into_iter()
            .map(|(s, r)| format!("{s}: {r}"))
            .collect(),
    })
}

/// Who made a signature that verified: what makes two signatures distinct.
/// A key is one signer however many signatures it made; a keyless signer is
/// its certificate identity and issuer, however many certificates it got.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SignedBy {
    /// The key with this fingerprint.
    Key(String),
    /// This certificate identity, vouched for by this OIDC issuer.
    Keyless {
        /// The certificate's SAN.
        identity: String,
        /// The OIDC issuer.
        issuer: String,
    },
}

impl fmt::Display for SignedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignedBy::Key(fingerprint) => write!(f, "key {fingerprint}"),
            SignedBy::Keyless { identity, issuer } => write!(f, "{identity} via {issuer}"),
        }
    }
}

/// A largest assignment of distinct signers to entries (bipartite matching
/// by augmenting paths; requirements list a handful of entries):
/// `candidates[i]` are the signers that satisfy entry `i`; the answer holds,
/// for each entry, the index in `candidates[i]` of the signer it counts
/// with, if any.
fn distinct_signers(candidates: &[&[SignedBy]]) -> Vec<Option<usize>> {
    // The distinct signers, and which entry each is assigned to.
    let mut signers: Vec<&SignedBy> = Vec::new();
    for by in candidates.iter().flat_map(|c| c.iter()) {
        if !signers.contains(&by) {
            signers.push(by);
        }
    }
    let edges: Vec<Vec<usize>> = candidates
        .iter()
        .map(|c| {
            c.iter()
                .filter_map(|by| signers.iter().position(|s| *s == by))
                .collect()
        })
        .collect();
    let mut owner: Vec<Option<usize>> = vec![None; signers.len()];
    for entry in 0..candidates.len() {
        let mut seen = vec![false; signers.len()];
        augment(entry, &edges, &mut owner, &mut seen);
    }
    let mut assigned = vec![None; candidates.len()];
    for (signer, entry) in owner.iter().enumerate() {
        if let Some(entry) = entry {
            assigned[*entry] = edges[*entry].iter().position(|s| *s == signer);
        }
    }
    assigned
}

/// Tries to give `entry` a signer, moving earlier entries to other signers
/// of theirs if needed.
fn augment(
    entry: usize,
    edges: &[Vec<usize>],
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for &signer in &edges[entry] {
        if seen[signer] {
            continue;
        }
        seen[signer] = true;
        let free = match owner[signer] {
            None => true,
            Some(other) => augment(other, edges, owner, seen),
        };
        if free {
            owner[signer] = Some(entry);
            return true;
        }
    }
    false
}

/// Whether `signer` signed `artifact` in any of the signatures: the
/// distinct signers of the signatures that satisfy it (never empty).
fn check_signer(
    artifact: &[u8],
    signatures: &Signatures,
    signer: &Signer,
    root: &TrustRoot,
) -> Result<Vec<SignedBy>, TrustError> {
    let mut last = None;
    match signer {
        Signer::Key(key) => {
            let by = || Ok(vec![SignedBy::Key(key.fingerprint())]);
            for sig in &signatures.key_signatures {
                match key.verify(artifact, sig) {
                    Ok(()) => return by(),
                    Err(e) if e.to_string().starts_with("signature does not verify") => {
                        last.get_or_insert(TrustError::UntrustedKey {
                            trusted: vec![key.fingerprint()],
                        });
                    }
                    Err(e) => last = Some(TrustError::InvalidSignature(e.to_string())),
                }
            }
            for bundle in &signatures.bundles {
                match root.verify_with_key(artifact, bundle, key) {
                    Ok(()) => return by(),
                    Err(e) => last = Some(e),
                }
            }
            for cosign in &signatures.cosign {
                if key.verify(&cosign.payload, &cosign.signature).is_err() {
                    last.get_or_insert(TrustError::UntrustedKey {
                        trusted: vec![key.fingerprint()],
                    });
                    continue;
                }
                // A valid signature over another manifest does not count.
                match (cosign.signed_manifest(), signatures.manifest) {
                    (Some(signed), Some(manifest)) if signed == manifest => return by(),
                    (signed, manifest) => {
                        last = Some(TrustError::DigestMismatch(format!(
                            "the signature is for manifest {}, the artifact is {}",
                            signed.map_or("(none)".into(), |d| d.to_string()),
                            manifest.map_or("(unknown)".into(), |d| d.to_string()),
                        )))
                    }
                }
            }
        }
        Signer::Keyless(keyless) => {
            let mut found = Vec::new();
            for bundle in &signatures.bundles {
                match root.verify_keyless(artifact, bundle, keyless) {
                    Ok(identity) => {
                        let by = SignedBy::Keyless {
                            identity,
                            issuer: keyless.issuer.clone(),
                        };
                        if !found.contains(&by) {
                            found.push(by);
                        }
                    }
                    Err(e) => last = Some(e),
                }
            }
            if !found.is_empty() {
                return Ok(found);
            }
        }
    }
    Err(last.unwrap_or(TrustError::NoSignature {
        looked: signatures.looked.clone(),
    }))
}

/// The largest signature or bundle file read beside a plugin: 1 MiB.
pub const MAX_SIGNATURE_FILE: u64 = 1 << 20;
/// The largest public key file read: 64 KiB.
pub const MAX_KEY_FILE: u64 = 64 << 10;

/// Reads a small text file: a regular file (never a FIFO or device that
/// could block or never end) of at most `max` bytes.
pub(crate) fn read_small(path: &std::path::Path, max: u64) -> std::io::Result<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut text = String::new();
    file.take(max + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the limit of {max} bytes"),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_counts_with_a_signer_of_its_own() {
        let (a, b) = (SignedBy::Key("a".into()), SignedBy::Key("b".into()));
        // The first entry takes `a`, then yields it to the second, which
        // has no other: both count.
        let both = [a.clone(), b.clone()];
        let only_a = [a.clone()];
        assert_eq!(
            distinct_signers(&[&both, &only_a]),
            [Some(1), Some(0)],
            "entry 0 counts with b, entry 1 with a"
        );
        // Two entries, one signer: one counts.
        assert_eq!(distinct_signers(&[&only_a, &only_a]), [Some(0), None]);
        assert_eq!(distinct_signers(&[&[], &only_a]), [None, Some(0)]);
    }
}
