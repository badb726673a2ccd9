//! Key-based signatures, compatible with `cosign sign-blob --key` /
//! `cosign verify-blob --key`: ECDSA P-256 with SHA-256 over the artifact's
//! bytes, the signature stored base64-encoded (DER) in `FILE.sig`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{DerSignature, Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};

use crate::digest::Digest;

/// A key problem: unreadable PEM, wrong algorithm, bad signature encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(String);

/// A P-256 public key that may sign plugins.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
    pem: String,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl PublicKey {
    /// Parses a `-----BEGIN PUBLIC KEY-----` PEM (as `cosign.pub`).
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let key = VerifyingKey::from_public_key_pem(pem.trim())
            .map_err(|e| KeyError(format!("not an ECDSA P-256 public key in PEM form: {e}")))?;
        Ok(PublicKey {
            key,
            pem: pem.trim().to_owned() + "\n",
        })
    }

    /// The PEM text.
    pub fn to_pem(&self) -> &str {
        &self.pem
    }

    /// A short, stable name for the key: `sha256:` of its DER form, 16 hex
    /// digits. Used in messages ("signed by key sha256:1a2b...").
    pub fn fingerprint(&self) -> String {
        let der = self
            .key
            .to_public_key_der()
            .map(|d| d.as_bytes().to_vec())
            .unwrap_or_default();
        format!("sha256:{}", &Digest::of(&der).hex()[..16])
    }

    /// Checks a base64 DER signature (the content of a `.sig` file) over
    /// `data`.
    pub fn verify(&self, data: &[u8], signature_b64: &str) -> Result<(), KeyError> {
        let der = BASE64
            .decode(signature_b64.trim())
            .map_err(|e| KeyError(format!("signature is not base64: {e}")))?;
        let signature = Signature::from_der(&der)
            .map_err(|e| KeyError(format!("signature is not DER ECDSA: {e}")))?;
        self.key.verify(data, &signature).map_err(|_| {
            KeyError(format!(
                "signature does not verify with key {}",
                self.fingerprint()
            ))
        })
    }

    /// The key in the form the Sigstore verifier takes.
    pub(crate) fn der_public_key(&self) -> sigstore_verify::types::DerPublicKey {
        let der = self
            .key
            .to_public_key_der()
            .map(|d| d.as_bytes().to_vec())
            .unwrap_or_default();
        sigstore_verify::types::DerPublicKey::new(der)
    }
}

/// A P-256 signing key.
pub struct PrivateKey {
    key: SigningKey,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateKey(***)")
    }
}

impl PrivateKey {
    /// A new random key.
    pub fn generate() -> Self {
        PrivateKey {
            key: SigningKey::random(&mut rand_core::OsRng),
        }
    }

    /// Parses an unencrypted PKCS#8 `-----BEGIN PRIVATE KEY-----` PEM, as
    /// `kiln plugin keygen` writes (or `openssl genpkey -algorithm EC
    /// -pkeyopt ec_paramgen_curve:P-256`). cosign's encrypted
    /// `ENCRYPTED SIGSTORE PRIVATE KEY` format is not read.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        if pem.contains("ENCRYPTED") {
            return Err(KeyError(
                "encrypted private keys are not supported; use an unencrypted PKCS#8 P-256 key \
                 (`kiln plugin keygen`)"
                    .into(),
            ));
        }
        let key = SigningKey::from_pkcs8_pem(pem.trim()).map_err(|e| {
            KeyError(format!(
                "not an unencrypted PKCS#8 ECDSA P-256 private key: {e}"
            ))
        })?;
        Ok(PrivateKey { key })
    }

    /// The PKCS#8 PEM text. Handle with care.
    pub fn to_pem(&self) -> Result<String, KeyError> {
        self.key
            .to_pkcs8_pem(LineEnding::LF)
            .map(|p| p.to_string())
            .map_err(|e| KeyError(e.to_string()))
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        let key = *self.key.verifying_key();
        let pem = key.to_public_key_pem(LineEnding::LF).unwrap_or_default();
        PublicKey { key, pem }
    }

    /// Signs `data`; returns the base64 DER signature (a `.sig` file's
    /// content).
    pub fn sign(&self, data: &[u8]) -> String {
        let signature: DerSignature = self.key.sign(data);
        BASE64.encode(signature.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_round_trip_and_tampering() {
        let key = PrivateKey::generate();
        let public = PublicKey::from_pem(key.public_key().to_pem()).unwrap();
        let sig = key.sign(b"component bytes");
        public.verify(b"component bytes", &sig).unwrap();
        let err = public.verify(b"component bytez", &sig).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("signature does not verify with key sha256:"),
            "{err}"
        );
        let other = PrivateKey::generate().public_key();
        assert!(other.verify(b"component bytes", &sig).is_err());
        let reloaded = PrivateKey::from_pem(&key.to_pem().unwrap()).unwrap();
        assert_eq!(reloaded.public_key(), key.public_key());
        assert!(format!("{key:?}").contains("***"));
    }

    #[test]
    fn bad_inputs_are_named() {
        assert!(
            PublicKey::from_pem("nope")
                .unwrap_err()
                .to_string()
                .contains("P-256 public key")
        );
        let key = PrivateKey::generate().public_key();
        assert!(
            key.verify(b"x", "%%%")
                .unwrap_err()
                .to_string()
                .contains("not base64")
        );
        assert!(PrivateKey::from_pem("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----").is_err());
    }
}
