//! Sigstore bundles (v0.1–v0.3), verified fully offline against a trusted
//! root: certificate chain to Fulcio at signing time, SCTs, transparency-log
//! inclusion proof and checkpoint, signed timestamps, identity and issuer.
//! The work is done by the Sigstore project's `sigstore-verify`.

use std::path::Path;

use sigstore_verify::trust_root::{SigstoreInstance, TrustedRoot};
use sigstore_verify::types::Bundle;
use sigstore_verify::{PublicKeyVerificationPolicy, VerificationPolicy, Verifier};

use super::keys::PublicKey;
use super::{Identity, Keyless, TrustError};

/// The roots of trust bundles are verified against.
pub struct TrustRoot {
    verifier: Verifier,
    source: String,
}

impl std::fmt::Debug for TrustRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TrustRoot({})", self.source)
    }
}

impl TrustRoot {
    /// The Sigstore public-good instance's root, as embedded in this build
    /// (no network: no TUF refresh).
    pub fn public_good() -> Result<Self, TrustError> {
        let root = TrustedRoot::from_embedded(SigstoreInstance::PublicGood)
            .map_err(|e| TrustError::Root(format!("embedded public-good root: {e}")))?;
        Self::new(root, "the Sigstore public-good root".into())
    }

    /// A `trusted_root.json` file (a private Sigstore deployment, or a pinned
    /// snapshot of the public one).
    pub fn from_file(path: &Path) -> Result<Self, TrustError> {
        let root = TrustedRoot::from_file(path)
            .map_err(|e| TrustError::Root(format!("{}: {e}", path.display())))?;
        Self::new(root, path.display().to_string())
    }

    fn new(root: TrustedRoot, source: String) -> Result<Self, TrustError> {
        let verifier =
            Verifier::new(&root).map_err(|e| TrustError::Root(format!("{source}: {e}")))?;
        Ok(TrustRoot { verifier, source })
    }

    /// Verifies a bundle over `artifact`, signed by `key`.
    pub fn verify_with_key(
        &self,
        artifact: &[u8],
        bundle_json: &str,
        key: &PublicKey,
    ) -> Result<(), TrustError> {
        let bundle = parse(bundle_json)?;
        let policy = PublicKeyVerificationPolicy::new(key.der_public_key());
        self.verifier
            .verify(artifact, &bundle, &policy)
            .map(|_| ())
            .map_err(refusal)
    }

    /// Verifies a bundle over `artifact`, signed keylessly by `signer`;
    /// returns the certificate identity found.
    pub fn verify_keyless(
        &self,
        artifact: &[u8],
        bundle_json: &str,
        signer: &Keyless,
    ) -> Result<String, TrustError> {
        let bundle = parse(bundle_json)?;
        let result = match &signer.identity {
            Identity::Exact(identity) => {
                let policy = VerificationPolicy::new(identity.as_str(), signer.issuer.as_str());
                self.verifier.verify(artifact, &bundle, &policy)
            }
            Identity::Regex(_) => {
                let policy =
                    VerificationPolicy::any_identity().require_issuer(signer.issuer.as_str());
                self.verifier.verify(artifact, &bundle, &policy)
            }
        }
        .map_err(refusal)?;
        let found = result.identity().map(|i| i.as_str().to_owned());
        match (&signer.identity, found) {
            (Identity::Regex(re), Some(found)) if re.is_match(&found) => Ok(found),
            (Identity::Exact(_), Some(found)) => Ok(found),
            (_, found) => Err(TrustError::IdentityMismatch {
                expected: signer.identity.to_string(),
                found,
            }),
        }
    }
}

fn parse(json: &str) -> Result<Bundle, TrustError> {
    Bundle::from_json(json)
        .map_err(|e| TrustError::InvalidSignature(format!("invalid Sigstore bundle: {e}")))
}

/// Turns the verifier's error into the refusal reason a person reads.
fn refusal(error: sigstore_verify::Error) -> TrustError {
    use sigstore_verify::Error as E;
    match error {
        E::IdentityMismatch { expected, actual } => TrustError::IdentityMismatch {
            expected: expected.to_string(),
            found: actual.map(|a| a.as_str().to_owned()),
        },
        E::IssuerMismatch { expected, actual } => TrustError::IssuerMismatch {
            expected: expected.to_string(),
            found: actual.map(|a| a.to_string()),
        },
        E::ArtifactMismatch(detail) => TrustError::DigestMismatch(detail),
        E::SignatureInvalid(detail) => TrustError::BadSignature(detail),
        E::Certificate(e) => TrustError::Certificate(e.to_string()),
        E::TransparencyLog(e) => TrustError::TransparencyLog(e.to_string()),
        E::Timestamp(e) => TrustError::Timestamp(e.to_string()),
        other => TrustError::InvalidSignature(other.to_string()),
    }
}
