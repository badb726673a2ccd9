//! Objects as they will be applied: where a rendered object lands.
//!
//! A namespaced object that names no namespace is written into the
//! Application's destination namespace at apply. A policy must review it
//! there, or a constraint scoped to namespaces (Gatekeeper's
//! `scope: Namespaced`, `namespaces`, `namespaceSelector`; a VAP binding's
//! `namespaceSelector`) is evaded by leaving `metadata.namespace` out. So
//! before any policy runs, the host fills the namespace in by the rule the
//! project's admission uses (`controller::stages::admit::admit_objects`):
//!
//! 1. the destination cluster's discovery ([`KindScopes`], sent with the
//!    render) says whether the kind is namespaced;
//! 2. else a CustomResourceDefinition of the same rendered set does;
//! 3. else Kubernetes' own cluster-scoped kinds ([`CLUSTER_SCOPED`]) are
//!    cluster-scoped, and every other kind is taken as namespaced: it is
//!    one the cluster did not serve when discovery ran, which the sync
//!    asks the cluster about again as it applies it (a CRD installed
//!    since), and without a cluster (`kiln render`) it is where `kubectl
//!    apply -n` would place it.
//!
//! `metadata.namespace` absent, `null` or `""` all mean "none": the API
//! server reads them alike. The API server also does two more things before
//! admission that a policy could otherwise be fooled by, and so does this:
//!
//! - it clears `metadata.namespace` of a cluster-scoped object (a
//!   ClusterRoleBinding claiming `namespace: kube-system` is not in
//!   `kube-system`, and must not be excluded with it), when the scope is
//!   known (rules 1–2, or one of Kubernetes' own kinds);
//! - it sets the label `kubernetes.io/metadata.name` of a Namespace to its
//!   name, over any value the manifest gives (a Namespace cannot pose as
//!   `kube-system` to a selector on that label).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::manifest::{Object, ObjectKey};
use crate::sync::DefinedScopes;

/// Kubernetes' own cluster-scoped kinds (v1.32), and Kiln's
/// ClusterPolicyReport: `(group, kind)`.
pub const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "ComponentStatus"),
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("authentication.k8s.io", "SelfSubjectReview"),
    ("authentication.k8s.io", "TokenReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("internal.apiserver.k8s.io", "StorageVersion"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    (crate::policy::report::GROUP, "ClusterPolicyReport"),
];

/// Whether `(group, kind)` is one of Kubernetes' own cluster-scoped kinds.
pub fn builtin_cluster_scoped(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED
        .iter()
        .any(|(g, k)| *g == group && *k == kind)
}

/// The scope of one kind as the destination cluster serves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindScope {
    /// API group (`""` for the core group).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

/// What the destination cluster's discovery says of its kinds' scopes: the
/// controller sends it with every render, so that policies (which may run
/// on a render server, away from the cluster) review each object where it
/// will land.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KindScopes(Vec<KindScope>);

impl KindScopes {
    /// The most kinds a render request may carry (a cluster with every
    /// popular operator serves a few hundred).
    pub const MAX_KINDS: usize = 10_000;

    /// From a discovery listing.
    pub fn new(kinds: impl IntoIterator<Item = KindScope>) -> Self {
        Self(kinds.into_iter().collect())
    }

    /// How many kinds it names.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it names no kind.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn index(&self) -> HashMap<(&str, &str), bool> {
        self.0
            .iter()
            .map(|k| ((k.group.as_str(), k.kind.as_str()), k.namespaced))
            .collect()
    }
}

/// The label the API server sets on every Namespace to its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// `objects` as they will be applied (this module's rules): each namespaced
/// object that names no namespace placed in `destination_namespace`
/// (nothing is placed when it is empty), known cluster-scoped objects
/// without a namespace, Namespaces labelled with their name. `discovery`:
/// the destination cluster's kinds, `None` when there is no cluster.
pub fn as_applied(
    objects: &[Object],
    destination_namespace: &str,
    discovery: Option<&KindScopes>,
) -> Vec<Object> {
    let values: Vec<Value> = objects
        .iter()
        .filter(|o| o.kind() == "CustomResourceDefinition")
        .map(|o| Value::Object(o.value().clone()))
        .collect();
    let defined = DefinedScopes::of(&values);
    let served = discovery.map(KindScopes::index);
    let namespaced = |key: &ObjectKey| -> Option<bool> {
        served
            .as_ref()
            .and_then(|s| s.get(&(key.group.as_str(), key.kind.as_str())).copied())
            .or_else(|| defined.namespaced(key))
            .or_else(|| builtin_cluster_scoped(&key.group, &key.kind).then_some(false))
    };
    objects
        .iter()
        .map(|object| {
            let key = ObjectKey::of_map(object.value());
            let scope = namespaced(&key);
            let clear = scope == Some(false) && object.namespace().is_some();
            // Namespaced, or a kind neither the cluster's discovery nor the
            // set knows: the sync asks the cluster again when it applies it
            // (a CRD installed since discovery ran), so it is reviewed where
            // a namespaced object would land.
            let place = scope != Some(false)
                && key.namespace.is_none()
                && !destination_namespace.is_empty();
            let label = key.group.is_empty() && key.kind == "Namespace";
            if !(clear || place || label) {
                return object.clone();
            }
            let mut value = object.value().clone();
            let Some(Value::Object(metadata)) = value.get_mut("metadata") else {
                // Nothing to place, and nothing the API server accepts.
                return object.clone();
            };
            if clear {
                metadata.remove("namespace");
            }
            if place {
                metadata.insert("namespace".into(), destination_namespace.into());
            }
            if label {
                if !metadata.get("labels").is_some_and(Value::is_object) {
                    metadata.insert("labels".into(), Value::Object(Default::default()));
                }
                if let Some(Value::Object(labels)) = metadata.get_mut("labels") {
                    labels.insert(NAMESPACE_NAME_LABEL.into(), key.name.clone().into());
                }
            }
            Object::new(value, object.source().map(str::to_owned))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Object {
        let Value::Object(map) = value else {
            unreachable!()
        };
        Object::new(map, Some("app.yaml".into()))
    }

    fn namespaces(objects: &[Object]) -> Vec<Option<&str>> {
        objects.iter().map(Object::namespace).collect()
    }

    fn deployment(metadata: Value) -> Object {
        object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata}))
    }

    #[test]
    fn a_namespaced_object_without_a_namespace_lands_in_the_destination() {
        let objects = [
            deployment(json!({"name": "web"})),
            deployment(json!({"name": "null", "namespace": null})),
            deployment(json!({"name": "empty", "namespace": ""})),
            deployment(json!({"name": "named", "namespace": "other"})),
            object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}})),
            object(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}),
            ),
        ];
        let placed = as_applied(&objects, "prod", None);
        assert_eq!(
            namespaces(&placed),
            [
                Some("prod"),
                Some("prod"),
                Some("prod"),
                Some("other"),
                None,
                None
            ]
        );
        assert_eq!(placed[0].source(), Some("app.yaml"));
        // Nothing is placed without a destination namespace.
        assert_eq!(
            namespaces(&as_applied(&objects, "", None)),
            [None, None, Some(""), Some("other"), None, None]
        );
    }

    #[test]
    fn discovery_decides_then_the_sets_crds_then_the_builtin_kinds() {
        let crd = |kind: &str, scope: &str| {
            object(json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{kind}s.example.com")},
                "spec": {"group": "example.com", "names": {"kind": kind}, "scope": scope}
            }))
        };
        let custom = |kind: &str| {
            object(json!({"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "x"}}))
        };
        let objects = [
            crd("Widget", "Namespaced"),
            crd("Gadget", "Cluster"),
            custom("Widget"),
            custom("Gadget"),
            custom("Unknown"),
            deployment(json!({"name": "web"})),
        ];
        // Without discovery: the set's CRDs, then every other kind but
        // Kubernetes' cluster-scoped ones is namespaced.
        assert_eq!(
            namespaces(&as_applied(&objects, "prod", None))[2..],
            [Some("prod"), None, Some("prod"), Some("prod")]
        );
        // Discovery wins over the set; a kind neither knows is reviewed as
        // namespaced (the sync asks the cluster again when it applies it).
        let discovery = KindScopes::new([
            KindScope {
                group: "example.com".into(),
                kind: "Gadget".into(),
                namespaced: true,
            },
            KindScope {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespaced: true,
            },
        ]);
        assert_eq!(
            namespaces(&as_applied(&objects, "prod", Some(&discovery)))[2..],
            [Some("prod"), Some("prod"), Some("prod"), Some("prod")]
        );
    }

    #[test]
    fn a_cluster_scoped_object_is_in_no_namespace_whatever_it_claims() {
        let binding = object(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "pwn", "namespace": "kube-system"}
        }));
        let custom = object(json!({
            "apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
            "metadata": {"name": "evil", "namespace": "kube-system"}
        }));
        let discovery = KindScopes::new([KindScope {
            group: "cert-manager.io".into(),
            kind: "ClusterIssuer".into(),
            namespaced: false,
        }]);
        let objects = [binding, custom];
        assert_eq!(
            namespaces(&as_applied(&objects, "prod", Some(&discovery))),
            [None, None]
        );
        // Without discovery the custom kind's scope is unknown: its claim
        // stands.
        assert_eq!(
            namespaces(&as_applied(&objects, "prod", None)),
            [None, Some("kube-system")]
        );
    }

    #[test]
    fn a_namespace_is_labelled_with_its_own_name() {
        let objects = [
            object(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "team-x", "labels": {"kubernetes.io/metadata.name": "kube-system", "a": "b"}}
            })),
            object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bare"}})),
        ];
        let placed = as_applied(&objects, "", None);
        assert_eq!(
            placed[0].value()["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "team-x", "a": "b"})
        );
        assert_eq!(
            placed[1].value()["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "bare"})
        );
    }

    #[test]
    fn objects_without_metadata_are_left_as_they_are() {
        let objects = [
            object(json!({"apiVersion": "v1", "kind": "ConfigMap"})),
            object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"})),
        ];
        let placed = as_applied(&objects, "prod", None);
        assert_eq!(placed[0].value(), objects[0].value());
        assert_eq!(placed[1].value(), objects[1].value());
    }
}
