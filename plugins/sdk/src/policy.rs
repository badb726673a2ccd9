//! The policy world.

#[cfg(feature = "policy")]
use crate::Param;
use crate::bindings::exports::kiln::plugin::review;

pub use review::{Finding, ObjectRef, ReviewRequest, Severity};

#[cfg(feature = "policy")]
/// An admission policy. Implement it on a unit struct and export it with
/// [`export_policy!`](crate::export_policy).
pub trait Policy {
    /// Checks the settings; the error explains what is wrong with them.
    fn validate_settings(settings: Vec<Param>) -> Result<(), String>;

    /// Reviews the whole rendered set (one JSON object per manifest) and
    /// returns findings. An error means the policy could not do its job.
    fn review(request: ReviewRequest) -> Result<Vec<Finding>, String>;
}

impl ObjectRef {
    /// The reference to a Kubernetes object given as JSON, if it has the
    /// fields every object has.
    pub fn of(object: &serde_json::Value) -> Option<ObjectRef> {
        let metadata = object.get("metadata")?;
        Some(ObjectRef {
            api_version: object.get("apiVersion")?.as_str()?.to_owned(),
            kind: object.get("kind")?.as_str()?.to_owned(),
            namespace: metadata
                .get("namespace")
                .and_then(|n| n.as_str())
                .map(str::to_owned),
            name: metadata.get("name")?.as_str()?.to_owned(),
        })
    }
}

/// Exports a [`Policy`] as the component's `review` interface.
#[cfg(feature = "policy")]
// rustfmt cannot format the `with_types_in` syntax stably.
#[rustfmt::skip]
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        const _: () = {
            struct KilnPolicyExport;
            impl $crate::bindings::exports::kiln::plugin::review::Guest for KilnPolicyExport {
                fn validate_settings(
                    settings: ::std::vec::Vec<$crate::Param>,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    <$policy as $crate::Policy>::validate_settings(settings)
                }
                fn review(
                    request: $crate::ReviewRequest,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::Finding>, ::std::string::String>
                {
                    <$policy as $crate::Policy>::review(request)
                }
            }
            $crate::bindings::export!(KilnPolicyExport with_types_in $crate::bindings);
        };
    };
}
