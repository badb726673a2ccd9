//! Secret values never leave the diff engine: before anything is compared,
//! printed or logged, every value of a Secret's `data` and `stringData` is
//! replaced by a keyed hash of its decoded bytes. Equal values still compare
//! equal and a change still shows, but nothing can be read back — the key is
//! random per process, so the hashes cannot be looked up or brute-forced
//! across runs.

use base64::Engine as _;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// Masks Secret values with a per-process key.
#[derive(Clone)]
pub struct Masker {
    key: [u8; 32],
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Masker { key: <redacted> }")
    }
}

impl Default for Masker {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut key);
        Self { key }
    }
}

/// True for core `Secret` objects.
pub fn is_secret(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Secret")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

impl Masker {
    /// A masker with a fixed key, for reproducible output (golden tests).
    /// Production code uses [`Masker::default`], whose key is random.
    pub fn with_key(key: [u8; 32]) -> Self {
        Self { key }
    }

    fn hash(&self, bytes: &[u8]) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.key);
        hasher.update(bytes);
        let digest = hasher.finalize();
        format!("<secret sha256:{}>", &hex::encode(digest)[..16])
    }

    /// Folds `stringData` into `data` (as the API server does) and replaces
    /// every value with its masked hash. Does nothing to other kinds.
    pub fn mask(&self, object: &mut Value) {
        if !is_secret(object) {
            return;
        }
        let Some(map) = object.as_object_mut() else {
            return;
        };
        let mut masked = Map::new();
        if let Some(Value::Object(data)) = map.remove("data") {
            for (key, value) in data {
                let text = value.as_str().unwrap_or_default();
                // Undecodable data is masked as it stands.
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap_or_else(|_| text.as_bytes().to_vec());
                masked.insert(key, self.hash(&bytes).into());
            }
        }
        if let Some(Value::Object(strings)) = map.remove("stringData") {
            for (key, value) in strings {
                masked.insert(
                    key,
                    self.hash(value.as_str().unwrap_or_default().as_bytes())
                        .into(),
                );
            }
        }
        if !masked.is_empty() {
            map.insert("data".into(), Value::Object(masked));
        }
        // A client-side apply annotation holds the whole Secret in clear.
        if let Some(Value::Object(annotations)) = map
            .get_mut("metadata")
            .and_then(|m| m.get_mut("annotations"))
        {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn equal_values_mask_equally_and_plaintext_never_survives() {
        let masker = Masker::default();
        let mut desired =
            json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"password": "hunter2"}});
        let mut live = json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": "aHVudGVyMg=="},
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"stringData\":{\"password\":\"hunter2\"}}"}}});
        masker.mask(&mut desired);
        masker.mask(&mut live);
        assert_eq!(desired["data"], live["data"]);
        for text in [desired.to_string(), live.to_string()] {
            assert!(
                !text.contains("hunter2") && !text.contains("aHVudGVyMg=="),
                "{text}"
            );
        }
        let mut changed =
            json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": "b3RoZXI="}});
        masker.mask(&mut changed);
        assert_ne!(changed["data"], live["data"]);
        assert_ne!(
            Masker::default().hash(b"x"),
            masker.hash(b"x"),
            "keys differ per masker"
        );
    }
}
