//! What a policy may read of the destination cluster, through the host
//! (since contract 0.1.2): Namespaces and ConfigMaps read whole, and
//! whether any object exists. The host answers from what the controller
//! read for the review, and records every answer, as it does the source's
//! reads.
//!
//! [`ClusterError::Pending`] means the host does not hold the object yet:
//! carry on (report the rule that needed it as an error, the message
//! naming it) and the host runs the review again once it does. A review
//! with no destination (`kiln render`, `kiln policy test`) gets
//! [`ClusterError::NoCluster`].

use crate::bindings::kiln::plugin::cluster as wit;

pub use wit::{ClusterError, ObjectKey};

/// The object `api_version`/`kind` `name` (in `namespace`) as JSON text;
/// `None` when the destination has no such object.
pub fn get(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<String>, ClusterError> {
    wit::get(&key(api_version, kind, namespace, name))
}

/// Whether the object exists on the destination.
pub fn exists(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<bool, ClusterError> {
    wit::exists(&key(api_version, kind, namespace, name))
}

fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
    ObjectKey {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
    }
}

/// Why a lookup has no answer, for a person.
pub fn describe(error: &ClusterError) -> String {
    match error {
        ClusterError::NoCluster => "there is no destination cluster in this review".into(),
        ClusterError::NotPermitted(why) => format!("not permitted: {why}"),
        ClusterError::Pending => {
            "not read from the destination yet (the host reads it and reviews again)".into()
        }
        ClusterError::Unavailable(why) => format!("the destination could not tell: {why}"),
    }
}
