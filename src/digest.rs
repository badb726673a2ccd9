//! Content digests.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// A SHA-256 content digest, written `sha256:<64 hex digits>` as in OCI.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex digits, without the `sha256:` prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl From<[u8; 32]> for Digest {
    fn from(bytes: [u8; 32]) -> Self {
        Digest(bytes)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A stable 64-bit hash of `parts`: the first 8 bytes (big-endian) of
/// SHA-256 over the parts separated by a zero byte. Stable across
/// processes, platforms and releases, unlike `std::hash`: shard
/// assignment, render-server routing and prediction fingerprints rely on it.
pub fn stable_hash64(parts: &[&[u8]]) -> u64 {
    let mut hash = Sha256::new();
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            hash.update([0]);
        }
        hash.update(part);
    }
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The text is not `sha256:` followed by 64 hex digits.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a digest of the form sha256:<64 hex digits>")]
pub struct ParseDigestError(String);

impl FromStr for Digest {
    type Err = ParseDigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseDigestError(s.to_owned());
        let hex = s.strip_prefix("sha256:").ok_or_else(err)?;
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes).map_err(|_| err())?;
        Ok(Digest(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stable_hash_is_the_head_of_sha256_over_zero_separated_parts() {
        // SHA-256("a") = ca978112ca1bbdca…: a release that changed this
        // would move every Application to another shard.
        assert_eq!(stable_hash64(&[b"a"]), 0xca97_8112_ca1b_bdca);
        let joined = Digest::of(b"a\0b");
        let mut head = [0u8; 8];
        head.copy_from_slice(&joined.as_bytes()[..8]);
        assert_eq!(stable_hash64(&[b"a", b"b"]), u64::from_be_bytes(head));
        assert_ne!(stable_hash64(&[b"ab"]), stable_hash64(&[b"a", b"b"]));
    }

    #[test]
    fn round_trips_through_text() {
        let d = Digest::of(b"kiln");
        assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
        assert!("sha256:zz".parse::<Digest>().is_err());
        assert!(d.hex().parse::<Digest>().is_err(), "prefix is required");
    }
}
