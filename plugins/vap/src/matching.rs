//! Which objects a policy or binding applies to: resource rules,
//! namespace and object selectors.
//!
//! Kiln has no API discovery when it reviews a rendered set, so the resource
//! (plural) of a kind is taken from a CustomResourceDefinition of the set
//! (`spec.names.plural`), else from a table of the built-in kinds whose
//! plural is irregular, else guessed as `kubectl` and the API machinery's
//! `UnsafeGuessKindToResource` do: lower case, `-s`/`-x`/`-ch`/`-sh` + `es`,
//! consonant + `y` → `ies`, else + `s`. The host hands the set over as it
//! will be applied (each namespaced object in its namespace, cluster-scoped
//! ones in none), so an object is namespaced when it carries
//! `metadata.namespace`, unless its kind is one of Kubernetes' own
//! cluster-scoped kinds or a CRD of the set says it is cluster-scoped.
//!
//! Absent versus empty, as the API server reads them: a policy's
//! `matchConstraints` must name resource rules (a policy without is
//! refused); a binding's `matchResources` without resource rules does not
//! constrain by resource (only its selectors and exclusions apply).

use std::collections::BTreeMap;

use crate::model::{MatchResources, ResourceRule};
use crate::selector::{NAMESPACE_NAME_LABEL, labels_of};

/// Built-in kinds whose plural the guess gets wrong.
const IRREGULAR: &[(&str, &str)] = &[
    ("Endpoints", "endpoints"),
    ("PodSecurityPolicy", "podsecuritypolicies"),
];

/// Built-in cluster-scoped kinds (Kubernetes 1.32), as `(group, kind)`.
pub const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "ComponentStatus"),
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
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
    ("storagemigration.k8s.io", "StorageVersionMigration"),
];

/// The plurals the CustomResourceDefinitions of a rendered set give their
/// kinds: `(group, kind)` → plural.
#[derive(Debug, Clone, Default)]
pub struct SetKinds(BTreeMap<(String, String), String>);

impl SetKinds {
    /// The kinds the CRDs of `objects` define.
    pub fn of(objects: &[serde_json::Value]) -> Self {
        SetKinds(
            objects
                .iter()
                .filter(|o| o["kind"] == "CustomResourceDefinition")
                .filter_map(|crd| {
                    let text = |p: &str| crd.pointer(p)?.as_str().map(str::to_owned);
                    Some((
                        (text("/spec/group")?, text("/spec/names/kind")?),
                        text("/spec/names/plural")?,
                    ))
                })
                .collect(),
        )
    }
}

/// The plural resource name of a kind.
pub fn resource_of(kind: &str) -> String {
    if let Some((_, plural)) = IRREGULAR.iter().find(|(k, _)| *k == kind) {
        return (*plural).to_owned();
    }
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        return format!("{lower}es");
    }
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    format!("{lower}s")
}

/// What matching needs to know of one object.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The object.
    pub object: &'a serde_json::Value,
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource (a CRD of the set's, else the guess).
    pub resource: String,
    /// The guessed plural too, when a CRD of the set declares another.
    pub other_resource: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// Namespace (`None` for cluster-scoped objects).
    pub namespace: Option<String>,
}

impl<'a> Target<'a> {
    /// Describes `object` (placed by the host as it will be applied;
    /// `kinds`: the CRDs of its set).
    pub fn new(object: &'a serde_json::Value, kinds: &SetKinds) -> Self {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (String::new(), api_version.to_owned()),
        };
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        // Where the host placed it is where it lands: a CRD of the set
        // (which the repository writes) decides nothing here but a plural.
        let namespace = if CLUSTER_SCOPED.contains(&(group.as_str(), kind.as_str())) {
            None
        } else {
            object
                .pointer("/metadata/namespace")
                .and_then(|n| n.as_str())
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
        };
        let guessed = resource_of(&kind);
        let declared = kinds
            .0
            .get(&(group.clone(), kind.clone()))
            .filter(|plural| !plural.is_empty() && **plural != guessed)
            .cloned();
        Target {
            object,
            group,
            version,
            resource: declared.clone().unwrap_or_else(|| guessed.clone()),
            other_resource: declared.map(|_| guessed),
            kind,
            name: object
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or_default()
                .to_owned(),
            namespace,
        }
    }

    /// The plurals it may be served under: a CRD of the set's, and the
    /// guess (a repository's CRD that renames a kind's plural must not
    /// take it out of the rules that name the usual one).
    fn resources(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.resource.as_str()).chain(self.other_resource.as_deref())
    }
}

fn any(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// Whether `pattern` (a rule's resource: `*`, `*/*`, `res`, `res/sub`,
/// `res/*`, `*/sub`) covers the main resource `resource` (Kubernetes'
/// `rules.go`: `*` matches any resource, a sub-resource `*` matches the
/// main resource too).
fn resource_matches(pattern: &str, resource: &str) -> bool {
    let (res, sub) = match pattern.split_once('/') {
        Some((res, sub)) => (res, Some(sub)),
        None => (pattern, None),
    };
    (res == "*" || res == resource) && matches!(sub, None | Some("*"))
}

/// The operations of a sync: it creates or updates each object, and Kiln
/// reviews before it knows which.
pub const OPERATIONS: [&str; 2] = ["CREATE", "UPDATE"];

/// Whether one rule covers the target under `operation`. With
/// `matchPolicy: Equivalent` (the default) the version is not compared: the
/// API server would convert the request to a version the rule lists, and
/// Kiln, without discovery, takes every version of the group's resource as
/// equivalent.
pub fn rule_matches(
    rule: &ResourceRule,
    target: &Target<'_>,
    operation: &str,
    exact: bool,
) -> bool {
    let scope_ok = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Cluster") => target.namespace.is_none(),
        Some("Namespaced") => target.namespace.is_some(),
        Some(_) => false,
    };
    scope_ok
        && any(&rule.api_groups, &target.group)
        && (!exact || any(&rule.api_versions, &target.version))
        && rule
            .resources
            .iter()
            .any(|r| target.resources().any(|res| resource_matches(r, res)))
        && any(&rule.operations, operation)
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&target.name))
}

/// Whose `matchResources` is being matched: a policy's must name resource
/// rules; a binding's without any does not constrain by resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matcher {
    /// `spec.matchConstraints` of a ValidatingAdmissionPolicy.
    Policy,
    /// `spec.matchResources` of a ValidatingAdmissionPolicyBinding.
    Binding,
}

/// Whether `m` selects the target; `namespaces` holds the labels of the
/// rendered Namespaces. It does when, for one operation of a sync, its
/// rules include the target and its exclusions do not.
///
/// A namespace's labels are known only in part: those the set renders (and
/// the name label the API server sets); the live Namespace may carry more
/// (another manager's, or all of them when the set does not render it). A
/// namespace selector refuses the object only when its requirements on the
/// known labels refuse it: a policy that might apply is applied (fail
/// closed).
pub fn matches(
    m: &MatchResources,
    matcher: Matcher,
    target: &Target<'_>,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    let unconstrained = matcher == Matcher::Binding && m.resource_rules.is_empty();
    let exact = m.match_policy.as_deref() == Some("Exact");
    let selected = OPERATIONS.iter().any(|operation| {
        (unconstrained
            || m.resource_rules
                .iter()
                .any(|r| rule_matches(r, target, operation, exact)))
            && !m
                .exclude_resource_rules
                .iter()
                .any(|r| rule_matches(r, target, operation, exact))
    });
    if !selected {
        return false;
    }
    if let Some(selector) = &m.object_selector
        && !selector.matches(&labels_of(target.object))
    {
        return false;
    }
    if let Some(selector) = &m.namespace_selector {
        let rendered = if target.kind == "Namespace" && target.group.is_empty() {
            Some((target.name.as_str(), Some(labels_of(target.object))))
        } else {
            target
                .namespace
                .as_deref()
                .map(|ns| (ns, namespaces.get(ns).cloned()))
        };
        // Cluster-scoped objects other than Namespaces are not filtered by
        // the namespace selector (as in the API server).
        if let Some((name, rendered)) = rendered {
            let labels = namespace_labels(name, rendered.as_ref());
            if selector.refuses_by_known(&labels, |key| labels.contains_key(key)) {
                return false;
            }
        }
    }
    true
}

/// The labels of namespace `name`: those of its rendered Namespace, plus
/// `kubernetes.io/metadata.name`, which the API server always sets.
pub fn namespace_labels(
    name: &str,
    rendered: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut labels = rendered.cloned().unwrap_or_default();
    labels.insert(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned());
    labels
}

#[cfg(test)]
mod tests {
    use super::resource_of;

    #[test]
    fn plurals() {
        for (kind, plural) in [
            ("Pod", "pods"),
            ("Deployment", "deployments"),
            ("Ingress", "ingresses"),
            ("NetworkPolicy", "networkpolicies"),
            ("Gateway", "gateways"),
            ("Endpoints", "endpoints"),
            ("StorageClass", "storageclasses"),
            ("Mesh", "meshes"),
            ("Box", "boxes"),
        ] {
            assert_eq!(resource_of(kind), plural);
        }
    }
}
