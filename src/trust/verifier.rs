//! A trust policy with its root and a cache of results by digest: what a
//! command or the controller consults before compiling a plugin.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use super::{PluginSubject, Signatures, TrustError, TrustPolicy, TrustRoot, Verified, verify};
use crate::digest::Digest;

/// Why a plugin may not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// No rule of the policy matches the plugin.
    #[error(
        "plugin {plugin} refused: no rule of the trust policy matches it (rules match `references` by where a plugin comes from, `names` by catalog name only)"
    )]
    NoRule {
        /// The plugin.
        plugin: PluginSubject,
    },
    /// Its signatures do not satisfy the rule.
    #[error("plugin {plugin} refused: {reason}")]
    Untrusted {
        /// The plugin.
        plugin: PluginSubject,
        /// Exactly why.
        reason: TrustError,
    },
}

/// Verifies plugins against a [`TrustPolicy`], once per digest and rule.
#[derive(Debug)]
pub struct PolicyVerifier {
    policy: TrustPolicy,
    root: TrustRoot,
    verified: Mutex<HashMap<(Digest, usize), Verified>>,
}

impl PolicyVerifier {
    /// A verifier for `policy`, bundles checked against `root`.
    pub fn new(policy: TrustPolicy, root: TrustRoot) -> Self {
        PolicyVerifier {
            policy,
            root,
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// Loads a policy file and the trusted root it names (default: the
    /// Sigstore public-good root built in).
    pub fn load(path: &Path) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let policy = TrustPolicy::load(path)?;
        let root = match &policy.trusted_root {
            Some(root) => TrustRoot::from_file(root)?,
            None => TrustRoot::public_good()?,
        };
        Ok(Self::new(policy, root))
    }

    /// The result of an earlier verification of these bytes under the rule
    /// that applies to this plugin, if any: no need to look for signatures.
    pub fn cached(&self, plugin: &PluginSubject, digest: &Digest) -> Option<Verified> {
        let (rule, _) = self.policy.rule(plugin)?;
        self.lock().get(&(*digest, rule)).cloned()
    }

    /// Verifies `artifact`, the bytes of `plugin`, with the signatures found
    /// for it.
    pub fn verify(
        &self,
        plugin: &PluginSubject,
        artifact: &[u8],
        signatures: &Signatures,
    ) -> Result<Verified, Refused> {
        let Some((rule, requirement)) = self.policy.rule(plugin) else {
            return Err(Refused::NoRule {
                plugin: plugin.clone(),
            });
        };
        let digest = Digest::of(artifact);
        if let Some(done) = self.lock().get(&(digest, rule)) {
            return Ok(done.clone());
        }
        let verified = verify(artifact, signatures, requirement, &self.root).map_err(|reason| {
            Refused::Untrusted {
                plugin: plugin.clone(),
                reason,
            }
        })?;
        self.lock().insert((digest, rule), verified.clone());
        Ok(verified)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Digest, usize), Verified>> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
