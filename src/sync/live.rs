//! Where the engine reads live state when comparing: from the API server
//! (the default, what `kiln diff` does), or from a [`LiveState`] the caller
//! keeps up to date with watches (the controller), which also remembers
//! which predictions still hold so that an unchanged object is not
//! predicted (a `dryRun=All` apply) again.

use serde_json::Value;

use crate::cluster::Resolved;
use crate::manifest::ObjectKey;

/// Live state known without asking the API server. Every method may say
/// "not known" (`None`/`false`); the engine then asks the API server.
#[async_trait::async_trait]
pub trait LiveState: Send + Sync {
    /// The live object `key` of kind `resolved`: `Some(None)` when it is
    /// known not to exist, `None` when not known.
    async fn get(&self, resolved: &Resolved, key: &ObjectKey) -> Option<Option<Value>>;

    /// The live objects labelled for application `app`, of every kind it
    /// may have objects of, and the kinds not known yet (the engine lists
    /// those from the API server); `None` when nothing is known. The engine
    /// still checks each object's tracking annotation.
    async fn labelled(&self, app: &str) -> Option<Labelled>;

    /// Whether the object `key` was last compared with the same desired
    /// state and the same live version (`fingerprint`) and was in sync then:
    /// its prediction holds and need not be asked again.
    fn still_in_sync(&self, key: &ObjectKey, fingerprint: u64) -> bool;

    /// Records the outcome of comparing `key` at `fingerprint`.
    fn compared(&self, key: &ObjectKey, fingerprint: u64, in_sync: bool);

    /// Forgets the outcomes of every object but `keys` (those rendered now).
    fn keep_only(&self, keys: &std::collections::BTreeSet<ObjectKey>);
}

/// What a [`LiveState`] knows of an application's labelled objects.
#[derive(Debug, Default)]
pub struct Labelled {
    /// The objects of the kinds it knows.
    pub objects: Vec<(Resolved, Value)>,
    /// Kinds it watches but has not listed yet.
    pub unknown: Vec<Resolved>,
}

/// The fingerprint of comparing `desired` with the live version
/// `resource_version`: equal fingerprints predict equally.
pub fn fingerprint(desired: &Value, resource_version: &str) -> u64 {
    let desired = serde_json::to_vec(desired).unwrap_or_default();
    crate::digest::stable_hash64(&[&desired, resource_version.as_bytes()])
}
