//! The secret behind the Helm plugin's random functions.
//!
//! `randAlphaNum`, `uuidv4`, `genCA`, … are deterministic in the `helm`
//! plugin: seeded from the release, the chart, the template and the call
//! site, so that a chart generating a password does not go OutOfSync at
//! every refresh. Seeded from those alone, their output could be computed
//! by anyone who can read the repository. The controller therefore mixes
//! in a secret: one key per controller installation, kept in the Secret
//! [`SECRET_NAME`] of its namespace (created with 32 random bytes the first
//! time a chart needs it, shared by every replica and shard), from which
//! each Application gets its own seed (HMAC-SHA256 of its namespace, name
//! and project), passed to the plugin as its `randomSeed` parameter. The seed
//! travels to a render server inside the (mutually authenticated) render
//! request and is never logged, printed or written to a status.
//!
//! The key is read once per controller process. To rotate it (every
//! generated value changes), delete the Secret and restart every replica;
//! copying it to another installation makes that one generate the same
//! values.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac as _};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use sha2::Sha256;

/// The Secret holding the key, in the controller's namespace.
pub const SECRET_NAME: &str = "kiln-random-seed";

/// The key of the Secret's `data` holding the key's bytes.
pub const DATA_KEY: &str = "key";

/// Bytes of a key created by the controller; a shorter one is refused.
pub const KEY_BYTES: usize = 32;

/// Domain separation of the per-Application seeds.
const DOMAIN: &[u8] = b"kiln.dev/helm-random-seed/v1";

/// Why the key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The API server refused or failed a request.
    #[error("Secret {namespace}/{SECRET_NAME}: {source}")]
    Api {
        /// The controller's namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// There is no key, and this process does not make one.
    #[error(
        "Secret {namespace}/{SECRET_NAME} does not exist yet: the controller makes it when it \
         first renders a chart"
    )]
    Missing {
        /// The controller's namespace.
        namespace: String,
    },
    /// The Secret exists but holds no usable key.
    #[error(
        "Secret {namespace}/{SECRET_NAME}: data.{DATA_KEY} must hold at least {KEY_BYTES} bytes \
         (it holds {found}); delete the Secret to have a new key made"
    )]
    Invalid {
        /// The controller's namespace.
        namespace: String,
        /// Bytes found.
        found: usize,
    },
}

/// The installation's key: derives each Application's seed.
#[derive(Clone)]
pub struct RandomSeeds {
    key: Vec<u8>,
}

impl std::fmt::Debug for RandomSeeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RandomSeeds { key: <redacted> }")
    }
}

impl RandomSeeds {
    /// Seeds derived from `key` (at least [`KEY_BYTES`] long).
    pub fn from_key(key: Vec<u8>) -> Option<Self> {
        (key.len() >= KEY_BYTES).then_some(Self { key })
    }

    /// The key of the Secret in `namespace`; with `make`, made (with
    /// [`KEY_BYTES`] random bytes) if there is none. Two replicas racing to
    /// make it agree: the loser reads the winner's.
    pub async fn load(
        client: kube::Client,
        namespace: &str,
        make: bool,
    ) -> Result<Self, SeedError> {
        let api: Api<Secret> = Api::namespaced(client, namespace);
        let api_error = |source| SeedError::Api {
            namespace: namespace.to_owned(),
            source,
        };
        if let Some(secret) = api.get_opt(SECRET_NAME).await.map_err(api_error)? {
            return Self::of_secret(&secret, namespace);
        }
        if !make {
            return Err(SeedError::Missing {
                namespace: namespace.to_owned(),
            });
        }
        let mut key = vec![0u8; KEY_BYTES];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut key);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(SECRET_NAME.to_owned()),
                namespace: Some(namespace.to_owned()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/part-of".to_owned(),
                    "kiln".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([(DATA_KEY.to_owned(), ByteString(key))])),
            ..Secret::default()
        };
        match api.create(&PostParams::default(), &secret).await {
            Ok(created) => {
                tracing::info!(
                    secret = SECRET_NAME,
                    "made the key of the Helm plugin's random functions"
                );
                Self::of_secret(&created, namespace)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let secret = api.get(SECRET_NAME).await.map_err(api_error)?;
                Self::of_secret(&secret, namespace)
            }
            Err(e) => Err(api_error(e)),
        }
    }

    fn of_secret(secret: &Secret, namespace: &str) -> Result<Self, SeedError> {
        let key = secret
            .data
            .as_ref()
            .and_then(|d| d.get(DATA_KEY))
            .map(|b| b.0.clone())
            .unwrap_or_default();
        let found = key.len();
        Self::from_key(key).ok_or_else(|| SeedError::Invalid {
            namespace: namespace.to_owned(),
            found,
        })
    }

    /// The seed of the Application `namespace`/`name` of `project` (64 hex
    /// digits). The project is part of it: an Application deleted and made
    /// again under the same name in another project does not regenerate
    /// the first one's values.
    pub fn for_application(&self, namespace: &str, name: &str, project: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        for part in [
            DOMAIN,
            namespace.as_bytes(),
            name.as_bytes(),
            project.as_bytes(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        hex::encode(mac.finalize().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_application_gets_its_own_seed_and_the_key_decides_them_all() {
        let seeds = RandomSeeds::from_key(vec![7; KEY_BYTES]).unwrap();
        let web = seeds.for_application("kiln", "web", "default");
        assert_eq!(web.len(), 64);
        assert_eq!(web, seeds.for_application("kiln", "web", "default"));
        assert_ne!(web, seeds.for_application("kiln", "api", "default"));
        assert_ne!(web, seeds.for_application("team", "web", "default"));
        assert_ne!(web, seeds.for_application("kiln", "web", "payments"));
        // Parts are length-prefixed: moving a character across them is
        // another Application.
        assert_ne!(
            seeds.for_application("kil", "nweb", "default"),
            seeds.for_application("kiln", "web", "default")
        );
        let other = RandomSeeds::from_key(vec![8; KEY_BYTES]).unwrap();
        assert_ne!(web, other.for_application("kiln", "web", "default"));
    }

    #[test]
    fn a_short_key_is_refused_and_the_key_is_never_printed() {
        assert!(RandomSeeds::from_key(vec![1; KEY_BYTES - 1]).is_none());
        let seeds = RandomSeeds::from_key(vec![0xab; KEY_BYTES]).unwrap();
        assert!(!format!("{seeds:?}").contains("171"));
    }
}
