//! Which objects a policy or binding applies to: resource rules,
//! namespace and object selectors.
//!
//! Kiln has no API discovery when it reviews a rendered set, so the resource
//! (plural) of a kind is taken from a table of the built-in kinds whose
//! plural is irregular, else guessed as `kubectl` and the API machinery's
//! `UnsafeGuessKindToResource` do: lower case, `-s`/`-x`/`-ch`/`-sh` + `es`,
//! consonant + `y` → `ies`, else + `s`. Scope is taken from a table of the
//! built-in cluster-scoped kinds; other kinds are namespaced when they carry
//! `metadata.namespace` (or the Application's destination namespace applies).

use std::collections::BTreeMap;

use crate::model::{MatchResources, ResourceRule};
use crate::selector::labels_of;

/// Built-in kinds whose plural the guess gets wrong.
const IRREGULAR: &[(&str, &str)] = &[
    ("Endpoints", "endpoints"),
    ("PodSecurityPolicy", "podsecuritypolicies"),
];

/// Built-in cluster-scoped kinds.
pub const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "IngressClass",
    "RuntimeClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "CertificateSigningRequest",
    "FlowSchema",
    "PriorityLevelConfiguration",
];

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
    /// Plural resource.
    pub resource: String,
    /// `metadata.name`.
    pub name: String,
    /// Namespace (`None` for cluster-scoped objects).
    pub namespace: Option<String>,
}

impl<'a> Target<'a> {
    /// Describes `object`; `default_namespace` applies to namespaced kinds
    /// that carry none.
    pub fn new(object: &'a serde_json::Value, default_namespace: &str) -> Self {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (String::new(), api_version.to_owned()),
        };
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let namespace = if CLUSTER_SCOPED.contains(&kind.as_str()) {
            None
        } else {
            object
                .pointer("/metadata/namespace")
                .and_then(|n| n.as_str())
                .filter(|n| !n.is_empty())
                .or(Some(default_namespace).filter(|n| !n.is_empty()))
                .map(str::to_owned)
        };
        Target {
            object,
            group,
            version,
            resource: resource_of(&kind),
            kind,
            name: object
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or_default()
                .to_owned(),
            namespace,
        }
    }
}

fn any(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// Whether one rule covers the target (as a CREATE of the main resource).
pub fn rule_matches(rule: &ResourceRule, target: &Target<'_>) -> bool {
    let scope_ok = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Cluster") => target.namespace.is_none(),
        Some("Namespaced") => target.namespace.is_some(),
        Some(_) => false,
    };
    scope_ok
        && any(&rule.api_groups, &target.group)
        && any(&rule.api_versions, &target.version)
        && rule
            .resources
            .iter()
            .any(|r| r == "*" || r == "*/*" || *r == target.resource)
        && any(&rule.operations, "CREATE")
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&target.name))
}

/// Whether `m` selects the target; `namespaces` holds the labels of the
/// rendered Namespaces.
pub fn matches(
    m: &MatchResources,
    target: &Target<'_>,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    if !m.resource_rules.iter().any(|r| rule_matches(r, target)) {
        return false;
    }
    if m.exclude_resource_rules
        .iter()
        .any(|r| rule_matches(r, target))
    {
        return false;
    }
    if let Some(selector) = &m.object_selector
        && !selector.matches(&labels_of(target.object))
    {
        return false;
    }
    if let Some(selector) = &m.namespace_selector {
        let labels = if target.kind == "Namespace" && target.group.is_empty() {
            Some(namespace_labels(
                &target.name,
                Some(&labels_of(target.object)),
            ))
        } else {
            target
                .namespace
                .as_ref()
                .map(|ns| namespace_labels(ns, namespaces.get(ns)))
        };
        // Cluster-scoped objects other than Namespaces are not filtered by
        // the namespace selector (as in the API server).
        if let Some(labels) = labels
            && !selector.matches(&labels)
        {
            return false;
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
    labels.insert("kubernetes.io/metadata.name".to_owned(), name.to_owned());
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
