//! The built-in transformations of one kustomization layer, applied to every
//! object the layer holds (its own and its bases'), in kustomize's order:
//! namespace → name prefix/suffix → labels → annotations → replicas →
//! images. Name references are fixed up once names are final
//! ([`fix_references`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::build::{Id, Res};
use crate::config::TransformerConfig;
use crate::crds::{self, CrdConfig};
use crate::fieldspec::{FieldSpec, Leaf};
use crate::kustomization::{Image, Replicas};

/// Calls `set` on every field the configured `specs` select in `object`.
fn configured(
    object: &mut Value,
    specs: &[FieldSpec],
    leaf: Leaf,
    set: &mut dyn FnMut(&mut Value) -> Result<(), String>,
) -> Result<(), String> {
    for spec in specs {
        if !spec.selects(object) {
            continue;
        }
        let described = describe(object);
        spec.visit(object, leaf, set)
            .map_err(|e| format!("{described}: {e}"))?;
    }
    Ok(())
}

fn describe(object: &Value) -> String {
    let kind = kind(object);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{kind}/{namespace}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Adds `pairs` to the map at a configured field (created as the spec
/// says).
fn add_pairs(field: &mut Value, pairs: &BTreeMap<String, String>) -> Result<(), String> {
    if field.is_null() {
        *field = Value::Object(Map::new());
    }
    let Some(map) = field.as_object_mut() else {
        return Err("the field is not a map".to_owned());
    };
    for (k, v) in pairs {
        map.insert(k.clone(), v.clone().into());
    }
    Ok(())
}

/// The cluster-scoped types of kustomize v5.5's built-in schema (Kubernetes
/// 1.21's, kyaml's `precomputedIsNamespaceScoped`), by apiVersion and kind:
/// any other type — a newer version of one of these included — is
/// namespaced to kustomize.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingWebhookConfiguration",
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition"),
    ("apiregistration.k8s.io/v1", "APIService"),
    ("apiregistration.k8s.io/v1beta1", "APIService"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest"),
    ("certificates.k8s.io/v1beta1", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema"),
    (
        "flowcontrol.apiserver.k8s.io/v1beta1",
        "PriorityLevelConfiguration",
    ),
    ("networking.k8s.io/v1", "IngressClass"),
    ("networking.k8s.io/v1beta1", "IngressClass"),
    ("node.k8s.io/v1", "RuntimeClass"),
    ("node.k8s.io/v1beta1", "RuntimeClass"),
    ("policy/v1beta1", "PodSecurityPolicy"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("scheduling.k8s.io/v1beta1", "PriorityClass"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("storage.k8s.io/v1", "CSINode"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("storage.k8s.io/v1", "VolumeAttachment"),
    ("storage.k8s.io/v1beta1", "CSIDriver"),
    ("storage.k8s.io/v1beta1", "CSINode"),
    ("storage.k8s.io/v1beta1", "StorageClass"),
    ("storage.k8s.io/v1beta1", "VolumeAttachment"),
    ("v1", "ComponentStatus"),
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("v1", "NodeProxyOptions"),
    ("v1", "PersistentVolume"),
];

/// Whether objects of `api_version` and `kind` are cluster-scoped, as
/// kustomize decides it ([`CLUSTER_SCOPED`]).
pub fn cluster_scoped(api_version: &str, kind: &str) -> bool {
    CLUSTER_SCOPED.contains(&(api_version, kind))
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn map_at<'a>(
    object: &'a mut Value,
    path: &[&str],
    create: bool,
) -> Option<&'a mut Map<String, Value>> {
    let mut current = object;
    for key in path {
        if !current.get(*key).is_some_and(Value::is_object) {
            if !create {
                return None;
            }
            current
                .as_object_mut()?
                .insert((*key).to_owned(), Value::Object(Map::new()));
        }
        current = current.get_mut(*key)?;
    }
    current.as_object_mut()
}

/// Sets the namespace of namespaced objects; a `Namespace` object takes the
/// namespace's name, and every subject named `default` of a binding gets
/// it too (kustomize's rule: by name only, any kind; other subjects keep
/// theirs unless they name a ServiceAccount of the build).
pub fn namespace(
    resources: &mut [Res],
    namespace: &str,
    config: &TransformerConfig,
) -> Result<(), String> {
    for res in resources.iter_mut() {
        // kustomize stores every object's id before the namespace
        // transformer runs, changed or not: it is then an object the
        // build renamed, whose references (binding subjects naming a
        // ServiceAccount) get its name and namespace written, and whose
        // earlier id still identifies it (a var's `objref`, a patch).
        res.remember();
        let object = &mut res.value;
        let kind = kind(object).to_owned();
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
        // Only a `v1` Namespace is renamed (another group's `Namespace`
        // kind is an object like any other).
        if kind == "Namespace" && api_version == "v1" {
            if let Some(meta) = map_at(object, &["metadata"], true) {
                meta.insert("name".into(), namespace.into());
            }
            continue;
        }
        if matches!(kind.as_str(), "RoleBinding" | "ClusterRoleBinding")
            && let Some(subjects) = object.get_mut("subjects").and_then(Value::as_array_mut)
        {
            for subject in subjects {
                // kustomize's rule is the name alone: any subject named
                // `default`, whatever its kind or earlier namespace.
                if subject["name"] == "default" {
                    subject["namespace"] = namespace.into();
                }
            }
        }
        // kustomize's other namespace field specs: the Service an
        // APIService names (created if absent) and a CRD's conversion
        // webhook Service (if present).
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let service = match (group, kind.as_str()) {
            ("apiregistration.k8s.io", "APIService") => map_at(object, &["spec", "service"], true),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => map_at(
                object,
                &["spec", "conversion", "webhook", "clientConfig", "service"],
                false,
            ),
            _ => None,
        };
        if let Some(service) = service {
            service.insert("namespace".into(), namespace.into());
        }
        if cluster_scoped(&api_version, &kind) {
            continue;
        }
        if let Some(meta) = map_at(&mut res.value, &["metadata"], true) {
            meta.insert("namespace".into(), namespace.into());
        }
    }
    // Configured fields (`metadata/namespace` is the transformation itself).
    let specs: Vec<FieldSpec> = config
        .namespace
        .iter()
        .filter(|s| s.path != "metadata/namespace")
        .cloned()
        .collect();
    for res in resources {
        configured(&mut res.value, &specs, Leaf::Scalar, &mut |field| {
            if field.is_null() || field.is_string() {
                *field = namespace.into();
                Ok(())
            } else {
                Err("a namespace field spec must name a scalar".to_owned())
            }
        })?;
    }
    Ok(())
}

/// Adds the prefix and suffix to names (not of Namespaces, CRDs and
/// APIServices, whose names mean something to the API server; any version,
/// as kustomize skips them).
pub fn prefix_suffix(
    resources: &mut [Res],
    prefix: &str,
    suffix: &str,
    crds: &CrdConfig,
    config: &TransformerConfig,
) -> Result<(), String> {
    // Configured fields (`metadata/name` is the renaming itself), on every
    // object but those kustomize never renames.
    let extra = |specs: &[FieldSpec]| -> Vec<FieldSpec> {
        specs
            .iter()
            .filter(|s| s.path != "metadata/name")
            .cloned()
            .collect()
    };
    for (specs, affix, is_prefix) in [
        (extra(&config.name_prefix), prefix, true),
        (extra(&config.name_suffix), suffix, false),
    ] {
        if affix.is_empty() {
            continue;
        }
        for res in resources.iter_mut() {
            let original = res.original();
            let skipped = matches!(
                original.kind.as_str(),
                "CustomResourceDefinition" | "Namespace"
            ) || (original.kind == "APIService"
                && original.group == "apiregistration.k8s.io");
            if skipped {
                continue;
            }
            configured(&mut res.value, &specs, Leaf::Scalar, &mut |field| {
                if let Some(name) = field.as_str() {
                    *field = if is_prefix {
                        format!("{affix}{name}")
                    } else {
                        format!("{name}{affix}")
                    }
                    .into();
                }
                Ok(())
            })?;
        }
    }
    for res in resources {
        if !prefix.is_empty() {
            let object_kind = kind(&res.value).to_owned();
            for spec in crds.identity.iter().filter(|s| s.kind == object_kind) {
                let path: Vec<&str> = spec.path.iter().map(String::as_str).collect();
                rename_at(&mut res.value, &path, |name| {
                    Some(format!("{prefix}{name}"))
                });
            }
        }
        let group = res.value["apiVersion"]
            .as_str()
            .and_then(|v| v.rsplit_once('/'))
            .map_or("", |(group, _)| group);
        if matches!(kind(&res.value), "Namespace" | "CustomResourceDefinition")
            || (kind(&res.value) == "APIService" && group == "apiregistration.k8s.io")
        {
            continue;
        }
        if let Some(name) = res.value["metadata"]["name"].as_str() {
            let renamed = format!("{prefix}{name}{suffix}");
            res.remember();
            res.value["metadata"]["name"] = renamed.into();
            if !prefix.is_empty() {
                res.prefixes.push(prefix.to_owned());
            }
            if !suffix.is_empty() {
                res.suffixes.push(suffix.to_owned());
            }
        }
    }
    Ok(())
}

/// Where labels go besides `metadata.labels`: (kind, path, create when
/// missing). Selectors first, then templates.
fn selector_paths(kind: &str) -> &'static [(&'static [&'static str], bool)] {
    match kind {
        "Service" => &[(&["spec", "selector"], true)],
        "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet" => {
            &[(&["spec", "selector", "matchLabels"], true)]
        }
        "ReplicationController" => &[(&["spec", "selector"], true)],
        "Job" => &[(&["spec", "selector", "matchLabels"], false)],
        "CronJob" => &[(
            &["spec", "jobTemplate", "spec", "selector", "matchLabels"],
            false,
        )],
        "PodDisruptionBudget" => &[(&["spec", "selector", "matchLabels"], false)],
        "NetworkPolicy" => &[
            (&["spec", "podSelector", "matchLabels"], false),
            (
                &[
                    "spec",
                    "ingress",
                    "*",
                    "from",
                    "*",
                    "podSelector",
                    "matchLabels",
                ],
                false,
            ),
            (
                &[
                    "spec",
                    "egress",
                    "*",
                    "to",
                    "*",
                    "podSelector",
                    "matchLabels",
                ],
                false,
            ),
        ],
        _ => &[],
    }
}

/// Affinity and topology-spread selectors of Deployments and StatefulSets
/// (updated where they exist, never created).
const AFFINITY_SELECTORS: &[&[&str]] = &[
    &[
        "spec",
        "template",
        "spec",
        "affinity",
        "podAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        "*",
        "podAffinityTerm",
        "labelSelector",
        "matchLabels",
    ],
    &[
        "spec",
        "template",
        "spec",
        "affinity",
        "podAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "*",
        "labelSelector",
        "matchLabels",
    ],
    &[
        "spec",
        "template",
        "spec",
        "affinity",
        "podAntiAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        "*",
        "podAffinityTerm",
        "labelSelector",
        "matchLabels",
    ],
    &[
        "spec",
        "template",
        "spec",
        "affinity",
        "podAntiAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "*",
        "labelSelector",
        "matchLabels",
    ],
    &[
        "spec",
        "template",
        "spec",
        "topologySpreadConstraints",
        "*",
        "labelSelector",
        "matchLabels",
    ],
];

/// The maps at `path` (`*` walks every element of a list; lists are never
/// created, maps are with `create`).
fn maps_at<'a>(
    value: &'a mut Value,
    path: &[&str],
    create: bool,
    out: &mut Vec<&'a mut Map<String, Value>>,
) {
    let Some((first, rest)) = path.split_first() else {
        if let Some(map) = value.as_object_mut() {
            out.push(map);
        }
        return;
    };
    if *first == "*" {
        for item in value.as_array_mut().into_iter().flatten() {
            maps_at(item, rest, create, out);
        }
        return;
    }
    let Some(map) = value.as_object_mut() else {
        return;
    };
    let next_is_list = rest.first() == Some(&"*");
    if create && !next_is_list && !map.get(*first).is_some_and(Value::is_object) {
        map.insert((*first).to_owned(), Value::Object(Map::new()));
    }
    if let Some(next) = map.get_mut(*first) {
        maps_at(next, rest, create, out);
    }
}

fn template_paths(kind: &str) -> &'static [&'static [&'static str]] {
    match kind {
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => &[&["spec", "template", "metadata"]],
        "CronJob" => &[
            &["spec", "jobTemplate", "metadata"],
            &["spec", "jobTemplate", "spec", "template", "metadata"],
        ],
        _ => &[],
    }
}

/// Adds labels: always to `metadata.labels`; to selectors with
/// `selectors`; to pod templates with `templates`; and to the fields
/// `configured` (the `configurations` tables that apply: see
/// [`TransformerConfig::label_specs`]).
pub fn labels(
    resources: &mut [Res],
    labels: &BTreeMap<String, String>,
    selectors: bool,
    templates: bool,
    crds: &CrdConfig,
    extra: &[FieldSpec],
) -> Result<(), String> {
    if labels.is_empty() {
        return Ok(());
    }
    for res in resources {
        configured(&mut res.value, extra, Leaf::Map, &mut |field| {
            add_pairs(field, labels)
        })?;
        let object = &mut res.value;
        let kind = kind(object).to_owned();
        let mut targets: Vec<(Vec<&str>, bool)> = vec![(vec!["metadata", "labels"], true)];
        if selectors {
            targets.extend(selector_paths(&kind).iter().map(|(p, c)| (p.to_vec(), *c)));
            if matches!(kind.as_str(), "Deployment" | "StatefulSet") {
                targets.extend(AFFINITY_SELECTORS.iter().map(|p| (p.to_vec(), false)));
            }
            for spec in crds.labels.iter().filter(|s| s.kind == kind) {
                targets.push((spec.path.iter().map(String::as_str).collect(), false));
            }
        }
        if selectors || templates {
            for path in template_paths(&kind) {
                let mut path = path.to_vec();
                path.push("labels");
                targets.push((path, true));
            }
            if kind == "StatefulSet" {
                targets.push((
                    vec!["spec", "volumeClaimTemplates", "*", "metadata", "labels"],
                    true,
                ));
            }
        }
        for (path, create) in targets {
            let mut maps = Vec::new();
            maps_at(object, &path, create, &mut maps);
            for map in maps {
                for (k, v) in labels {
                    map.insert(k.clone(), v.clone().into());
                }
            }
        }
    }
    Ok(())
}

/// Adds annotations to `metadata.annotations` and pod templates.
pub fn annotations(
    resources: &mut [Res],
    annotations: &BTreeMap<String, String>,
    crds: &CrdConfig,
    config: &TransformerConfig,
) -> Result<(), String> {
    if annotations.is_empty() {
        return Ok(());
    }
    for res in resources {
        configured(
            &mut res.value,
            &config.common_annotations,
            Leaf::Map,
            &mut |field| add_pairs(field, annotations),
        )?;
        let object = &mut res.value;
        let kind = kind(object).to_owned();
        let mut targets: Vec<Vec<&str>> = vec![vec!["metadata", "annotations"]];
        for path in template_paths(&kind) {
            let mut path = path.to_vec();
            path.push("annotations");
            targets.push(path);
        }
        for path in targets {
            if let Some(map) = map_at(object, &path, true) {
                for (k, v) in annotations {
                    map.insert(k.clone(), v.clone().into());
                }
            }
        }
        for spec in crds.annotations.iter().filter(|s| s.kind == kind) {
            if let Some(map) = crds::map_at(object, &spec.path) {
                for (k, v) in annotations {
                    map.insert(k.clone(), v.clone().into());
                }
            }
        }
    }
    Ok(())
}

/// Sets replica counts of workloads by name.
pub fn replicas(
    resources: &mut [Res],
    replicas: &[Replicas],
    config: &TransformerConfig,
) -> Result<(), String> {
    for wanted in replicas {
        for res in resources.iter_mut() {
            let named = res.value["metadata"]["name"].as_str() == Some(wanted.name.as_str())
                || res.orig_name == wanted.name;
            if named {
                configured(
                    &mut res.value,
                    &config.replicas,
                    Leaf::Scalar,
                    &mut |field| {
                        *field = wanted.count.into();
                        Ok(())
                    },
                )?;
            }
            let scalable = matches!(
                kind(&res.value),
                "Deployment" | "ReplicaSet" | "StatefulSet" | "ReplicationController"
            );
            let name = res.value["metadata"]["name"].as_str().unwrap_or_default();
            if scalable
                && (name == wanted.name || res.orig_name == wanted.name)
                && let Some(spec) = map_at(&mut res.value, &["spec"], true)
            {
                spec.insert("replicas".into(), wanted.count.into());
            }
        }
    }
    Ok(())
}

/// The pod specs of a workload.
fn pod_specs(object: &mut Value) -> Vec<&mut Value> {
    let kind = kind(object).to_owned();
    let path: &[&str] = match kind.as_str() {
        "Pod" => &["spec"],
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController"
        | "PodTemplate" => &["spec", "template", "spec"],
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
        _ => return Vec::new(),
    };
    let mut current = object;
    for key in path {
        match current.get_mut(*key) {
            Some(next) => current = next,
            None => return Vec::new(),
        }
    }
    vec![current]
}

fn containers(pod: &mut Value) -> impl Iterator<Item = &mut Value> {
    let pod = pod.as_object_mut();
    pod.into_iter().flat_map(|pod| {
        pod.iter_mut()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "containers" | "initContainers" | "ephemeralContainers"
                )
            })
            .filter_map(|(_, v)| v.as_array_mut())
            .flat_map(|list| list.iter_mut())
    })
}

/// Splits an image reference into name, tag and digest; a `:` before the
/// first `/` is a registry port, not a tag.
fn split_image(image: &str) -> (&str, Option<&str>, Option<&str>) {
    let start = image.find('/').map_or(0, |i| i + 1);
    let rest = &image[start..];
    let at = rest.find('@');
    let colon = rest.find(':').filter(|c| at.is_none_or(|a| *c < a));
    match (colon, at) {
        (Some(c), Some(a)) => (
            &image[..start + c],
            Some(&rest[c + 1..a]),
            Some(&rest[a + 1..]),
        ),
        (Some(c), None) => (&image[..start + c], Some(&rest[c + 1..]), None),
        (None, Some(a)) => (&image[..start + a], None, Some(&rest[a + 1..])),
        (None, None) => (image, None, None),
    }
}

/// The image references of an object kustomize rewrites: `image` of every
/// element of any `containers` or `initContainers` list, at any depth.
fn image_fields<'a>(value: &'a mut Value, out: &mut Vec<&'a mut Value>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if matches!(key.as_str(), "containers" | "initContainers") && child.is_array() {
                    for element in child.as_array_mut().into_iter().flatten() {
                        if let Some(map) = element.as_object_mut() {
                            for (k, v) in map.iter_mut() {
                                if k == "image" {
                                    out.push(v);
                                } else {
                                    image_fields(v, out);
                                }
                            }
                        }
                    }
                } else {
                    image_fields(child, out);
                }
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| image_fields(v, out)),
        _ => {}
    }
}

/// The pod specs' image fields of kustomize's image field specs:
/// `spec/containers[]/image`, `spec/initContainers[]/image` and the same
/// under `spec/template/spec`.
fn spec_image_fields(value: &mut Value) -> Vec<&mut Value> {
    let mut out = Vec::new();
    let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) else {
        return out;
    };
    for (key, child) in spec.iter_mut() {
        match key.as_str() {
            "containers" | "initContainers" => out.extend(container_images(child)),
            "template" => {
                let pod = child.get_mut("spec").and_then(Value::as_object_mut);
                for (key, list) in pod.into_iter().flatten() {
                    if matches!(key.as_str(), "containers" | "initContainers") {
                        out.extend(container_images(list));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn container_images(list: &mut Value) -> impl Iterator<Item = &mut Value> {
    list.as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|c| c.get_mut("image"))
}

/// What `rule` makes of the image reference `current`, if it matches.
fn rewrite_image(rule: &Image, pattern: &regex_lite::Regex, current: &str) -> Option<String> {
    if !pattern.is_match(current) {
        return None;
    }
    let (name, tag, digest) = split_image(current);
    let name = rule.new_name.as_deref().unwrap_or(name);
    let suffixed;
    let (tag, digest) = match (&rule.new_tag, &rule.digest, &rule.tag_suffix) {
        (Some(t), Some(d), _) => (Some(t.as_str()), Some(d.as_str())),
        (Some(t), None, _) => (Some(t.as_str()), None),
        (None, Some(d), _) => (None, Some(d.as_str())),
        (None, None, Some(suffix)) if !suffix.is_empty() => {
            suffixed = format!("{}{suffix}", tag.unwrap_or_default());
            (Some(suffixed.as_str()), None)
        }
        (None, None, _) => (tag, digest),
    };
    let mut image = name.to_owned();
    if let Some(tag) = tag.filter(|t| !t.is_empty()) {
        image.push(':');
        image.push_str(tag);
    }
    if let Some(digest) = digest.filter(|d| !d.is_empty()) {
        image.push('@');
        image.push_str(digest);
    }
    Some(image)
}

/// Applies `images` overrides, one rule after the other. A rule's name is a
/// regular expression, as kustomize uses it: `^NAME(:TAG)?(@sha256:DIGEST)?$`.
/// Like kustomize v5.5, each rule runs over every `containers` and
/// `initContainers` list at any depth, then once more over the pod specs
/// its field specs name ([`spec_image_fields`]): idempotent for new names,
/// tags and digests, while a `tagSuffix` is appended twice there.
pub fn images(
    resources: &mut [Res],
    images: &[Image],
    config: &TransformerConfig,
) -> Result<(), String> {
    for rule in images {
        let Ok(pattern) = regex_lite::Regex::new(&format!(
            "^{}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$",
            rule.name
        )) else {
            continue;
        };
        for res in resources.iter_mut() {
            if kind(&res.value) == "CustomResourceDefinition" {
                continue;
            }
            let mut fields = Vec::new();
            image_fields(&mut res.value, &mut fields);
            for field in fields {
                retag(field, rule, &pattern);
            }
            for field in spec_image_fields(&mut res.value) {
                retag(field, rule, &pattern);
            }
            // Configured image fields (never created).
            let specs: Vec<FieldSpec> = config
                .images
                .iter()
                .map(|s| FieldSpec {
                    create: false,
                    ..s.clone()
                })
                .collect();
            configured(&mut res.value, &specs, Leaf::Scalar, &mut |field| {
                if field.is_array() || field.is_object() {
                    // kustomize: "wrong node kind: expected ScalarNode".
                    return Err(
                        "an images field spec must name a scalar (an image reference), \
                                not a list or a map"
                            .to_owned(),
                    );
                }
                retag(field, rule, &pattern);
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Applies one `images` rule to an image reference it matches.
fn retag(field: &mut Value, rule: &Image, pattern: &regex_lite::Regex) {
    if let Some(new) = field
        .as_str()
        .and_then(|current| rewrite_image(rule, pattern, current))
    {
        *field = new.into();
    }
}

/// A field that names another object: where it is, in which referring
/// kinds, and the kind it names.
struct Reference {
    target: &'static str,
    kinds: &'static [&'static str],
    path: &'static [&'static str],
}

/// Paths inside a pod spec naming other objects (`*` walks a list).
const POD_REFERENCES: &[(&str, &[&str])] = &[
    ("ConfigMap", &["volumes", "*", "configMap", "name"]),
    (
        "ConfigMap",
        &[
            "volumes",
            "*",
            "projected",
            "sources",
            "*",
            "configMap",
            "name",
        ],
    ),
    ("Secret", &["volumes", "*", "secret", "secretName"]),
    (
        "Secret",
        &[
            "volumes",
            "*",
            "projected",
            "sources",
            "*",
            "secret",
            "name",
        ],
    ),
    ("Secret", &["imagePullSecrets", "*", "name"]),
    ("ServiceAccount", &["serviceAccountName"]),
    ("PriorityClass", &["priorityClassName"]),
    (
        "PersistentVolumeClaim",
        &["volumes", "*", "persistentVolumeClaim", "claimName"],
    ),
];

/// Paths inside each container (of every container list) naming other
/// objects.
const CONTAINER_REFERENCES: &[(&str, &[&str])] = &[
    (
        "ConfigMap",
        &["env", "*", "valueFrom", "configMapKeyRef", "name"],
    ),
    ("ConfigMap", &["envFrom", "*", "configMapRef", "name"]),
    ("Secret", &["env", "*", "valueFrom", "secretKeyRef", "name"]),
    ("Secret", &["envFrom", "*", "secretRef", "name"]),
];

const OTHER_REFERENCES: &[Reference] = &[
    // kustomize renames a Role's `resourceNames` naming a ConfigMap or a
    // Secret of the build, whatever `resources` the rule lists.
    Reference {
        target: "ConfigMap",
        kinds: &["Role", "ClusterRole"],
        path: &["rules", "*", "resourceNames", "*"],
    },
    Reference {
        target: "Secret",
        kinds: &["Role", "ClusterRole"],
        path: &["rules", "*", "resourceNames", "*"],
    },
    Reference {
        target: "Deployment",
        kinds: &["HorizontalPodAutoscaler"],
        path: &["spec", "scaleTargetRef", "name"],
    },
    Reference {
        target: "StatefulSet",
        kinds: &["HorizontalPodAutoscaler"],
        path: &["spec", "scaleTargetRef", "name"],
    },
    Reference {
        target: "ReplicaSet",
        kinds: &["HorizontalPodAutoscaler"],
        path: &["spec", "scaleTargetRef", "name"],
    },
    Reference {
        target: "Secret",
        kinds: &["ServiceAccount"],
        path: &["imagePullSecrets", "*", "name"],
    },
    Reference {
        target: "PersistentVolume",
        kinds: &["PersistentVolumeClaim"],
        path: &["spec", "volumeName"],
    },
    Reference {
        target: "StorageClass",
        kinds: &["PersistentVolumeClaim", "PersistentVolume"],
        path: &["spec", "storageClassName"],
    },
    Reference {
        target: "StorageClass",
        kinds: &["StatefulSet"],
        path: &[
            "spec",
            "volumeClaimTemplates",
            "*",
            "spec",
            "storageClassName",
        ],
    },
    Reference {
        target: "Service",
        kinds: &["APIService"],
        path: &["spec", "service", "name"],
    },
    Reference {
        target: "ValidatingAdmissionPolicy",
        kinds: &["ValidatingAdmissionPolicyBinding"],
        path: &["spec", "policyName"],
    },
    Reference {
        target: "ClusterRole",
        kinds: &["RoleBinding", "ClusterRoleBinding"],
        path: &["roleRef", "name"],
    },
    Reference {
        target: "Role",
        kinds: &["RoleBinding"],
        path: &["roleRef", "name"],
    },
    Reference {
        target: "ServiceAccount",
        kinds: &["RoleBinding", "ClusterRoleBinding"],
        path: &["subjects", "*", "name"],
    },
    Reference {
        target: "Service",
        kinds: &["Ingress"],
        path: &[
            "spec", "rules", "*", "http", "paths", "*", "backend", "service", "name",
        ],
    },
    Reference {
        target: "Service",
        kinds: &["Ingress"],
        path: &["spec", "defaultBackend", "service", "name"],
    },
    Reference {
        target: "Secret",
        kinds: &["Ingress"],
        path: &["spec", "tls", "*", "secretName"],
    },
    Reference {
        target: "Service",
        kinds: &["StatefulSet"],
        path: &["spec", "serviceName"],
    },
];

fn visit<'a>(value: &'a mut Value, path: &[&str], out: &mut Vec<&'a mut Value>) {
    let Some((first, rest)) = path.split_first() else {
        out.push(value);
        return;
    };
    if *first == "*" {
        if let Some(list) = value.as_array_mut() {
            for item in list {
                visit(item, rest, out);
            }
        }
    } else if let Some(next) = value.get_mut(*first) {
        visit(next, rest, out);
    }
}

/// An object a reference may name.
struct Candidate {
    kind: String,
    /// Every name it had.
    names: Vec<String>,
    namespace: Option<String>,
    /// Its first namespace, as kustomize compares them (`default` if
    /// unset).
    original_namespace: String,
    /// Its namespace as kustomize compares them: `default` if unset, `""`
    /// if cluster-scoped.
    effective_namespace: String,
    name: String,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
}

/// Renames references to objects whose names changed (prefix, suffix,
/// hash): a field naming an object of the build by one of its earlier names
/// now names it by its final name. Among several candidates, kustomize's
/// sieve: the referrer's namespace, then the same prefixes and suffixes.
pub fn fix_references(
    resources: &mut [Res],
    crds: &CrdConfig,
    config: &TransformerConfig,
) -> Result<(), String> {
    let candidates: Vec<Candidate> = resources
        .iter()
        .map(|res| {
            // Only earlier names count (kustomize's previous ids): an object
            // renamed by a JSON patch keeps its references as they are.
            let names: Vec<String> = res.previous.iter().map(|id| id.name.clone()).collect();
            Candidate {
                kind: kind(&res.value).to_owned(),
                names,
                namespace: res.value["metadata"]["namespace"]
                    .as_str()
                    .map(str::to_owned),
                original_namespace: res.original().effective_namespace().to_owned(),
                effective_namespace: res.current().effective_namespace().to_owned(),
                name: res.value["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                prefixes: res.prefixes.clone(),
                suffixes: res.suffixes.clone(),
            }
        })
        .collect();
    let referrers: Vec<(Vec<String>, Vec<String>, String)> = resources
        .iter()
        .map(|r| {
            let namespace = r.current().effective_namespace().to_owned();
            (r.prefixes.clone(), r.suffixes.clone(), namespace)
        })
        .collect();
    let find = |referrer: usize,
                target: &str,
                name: &str,
                among: &dyn Fn(&Candidate) -> bool|
     -> Option<(Option<String>, String)> {
        let (_, _, referrer_namespace) = &referrers[referrer];
        let sieved: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| among(c))
            .filter(|c| c.kind == target && c.names.iter().any(|n| n == name))
            // kustomize's `sameCurrentNamespaceAsReferrer`: the referrer's
            // namespace (unset is `default`), unless the referrer or the
            // candidate is cluster-scoped, or the candidate a
            // ServiceAccount (bindings name them across namespaces).
            .filter(|c| {
                referrer_namespace.is_empty()
                    || c.effective_namespace.is_empty()
                    || c.kind == "ServiceAccount"
                    || &c.effective_namespace == referrer_namespace
            })
            .collect();
        let chosen = if sieved.len() > 1 {
            let (prefixes, suffixes, _) = &referrers[referrer];
            let same: Vec<&Candidate> = sieved
                .iter()
                .copied()
                .filter(|c| &c.prefixes == prefixes && &c.suffixes == suffixes)
                .collect();
            match same.first() {
                Some(first) => *first,
                None if sieved.iter().all(|c| c.name == sieved[0].name) => sieved[0],
                None => return None,
            }
        } else {
            sieved.first().copied()?
        };
        Some((chosen.namespace.clone(), chosen.name.clone()))
    };
    let lookup = |referrer: usize, target: &str, name: &str| {
        find(referrer, target, name, &|_| true).map(|(_, name)| name)
    };
    for (referrer, res) in resources.iter_mut().enumerate() {
        let object_kind = kind(&res.value).to_owned();
        let rename = |value: &mut Value, references: &[(&str, &[&str])]| {
            for (target, path) in references {
                rename_at(value, path, |name| lookup(referrer, target, name));
            }
        };
        for pod in pod_specs(&mut res.value) {
            rename(pod, POD_REFERENCES);
            for container in containers(pod) {
                rename(container, CONTAINER_REFERENCES);
            }
        }
        for reference in crds
            .references
            .iter()
            .filter(|r| r.field.kind == object_kind)
        {
            let path: Vec<&str> = reference.field.path.iter().map(String::as_str).collect();
            rename_at(&mut res.value, &path, |name| {
                lookup(referrer, &reference.target, name)
            });
        }
        // Configured name references (strings, or lists of strings).
        for references in &config.name_reference {
            for spec in &references.field_specs {
                if !spec.selects(&res.value) {
                    continue;
                }
                let spec = FieldSpec {
                    create: false,
                    ..spec.clone()
                };
                let mut rename_one = |field: &mut Value| {
                    if let Some(new) = field
                        .as_str()
                        .and_then(|name| lookup(referrer, &references.kind, name))
                    {
                        *field = new.into();
                    }
                };
                // A field that is not there, or not a name, is left alone; a
                // scalar on the way is an error, as in kustomize.
                let described = describe(&res.value);
                spec.visit(&mut res.value, Leaf::Scalar, &mut |field| {
                    match field {
                        Value::Array(list) => list.iter_mut().for_each(&mut rename_one),
                        other => rename_one(other),
                    }
                    Ok(())
                })
                .map_err(|e| format!("nameReference to {}: {described}: {e}", references.kind))?;
            }
        }
        // A `{name, namespace}` reference follows the object of the build
        // it names: its name and its namespace.
        let follow = |entry: &mut Value, target: &str| {
            let entry_ns = entry["namespace"].as_str().map(str::to_owned);
            // A reference with a namespace names the objects first in that
            // namespace, else those now in it (kustomize's
            // `filterMapCandidatesByNamespace`).
            let in_namespace = |c: &Candidate| match entry_ns.as_deref() {
                None => true,
                Some(ns) if candidates.iter().any(|c| c.original_namespace == ns) => {
                    c.original_namespace == ns
                }
                Some(ns) => Id::effective(c.namespace.as_deref().unwrap_or_default()) == ns,
            };
            if let Some(name) = entry["name"].as_str()
                && let Some((ns, new)) = find(referrer, target, name, &in_namespace)
            {
                entry["name"] = new.into();
                if let Some(ns) = ns {
                    entry["namespace"] = ns.into();
                }
            }
        };
        // Admission webhooks name the Service they call.
        if matches!(
            object_kind.as_str(),
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"
        ) {
            let mut services = Vec::new();
            visit(
                &mut res.value,
                &["webhooks", "*", "clientConfig", "service"],
                &mut services,
            );
            for service in services {
                follow(service, "Service");
            }
        }
        for reference in OTHER_REFERENCES {
            if !reference.kinds.contains(&object_kind.as_str()) {
                continue;
            }
            // A roleRef names a Role or a ClusterRole as its `kind` says.
            if reference.path == ["roleRef", "name"]
                && res.value["roleRef"]["kind"].as_str() != Some(reference.target)
            {
                continue;
            }
            if reference.path.first() == Some(&"subjects") {
                let subjects = res.value.get_mut("subjects").and_then(Value::as_array_mut);
                // A subject naming a ServiceAccount of the build follows its
                // name and namespace. kustomize looks at the name (and
                // namespace) only, whatever the subject's kind.
                for subject in subjects.into_iter().flatten() {
                    follow(subject, "ServiceAccount");
                }
                continue;
            }
            rename_at(&mut res.value, reference.path, |name| {
                lookup(referrer, reference.target, name)
            });
        }
    }
    Ok(())
}

/// Replaces every string at `path` with what `rename` gives for it.
fn rename_at(value: &mut Value, path: &[&str], rename: impl Fn(&str) -> Option<String>) {
    let mut fields = Vec::new();
    visit(value, path, &mut fields);
    for field in fields {
        if let Some(new) = field.as_str().and_then(&rename) {
            *field = new.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_split_like_docker_references() {
        assert_eq!(split_image("nginx"), ("nginx", None, None));
        assert_eq!(split_image("nginx:1.25"), ("nginx", Some("1.25"), None));
        assert_eq!(
            split_image("registry:5000/team/app:v1@sha256:ab"),
            ("registry:5000/team/app", Some("v1"), Some("sha256:ab"))
        );
        assert_eq!(
            split_image("registry:5000/app"),
            ("registry:5000/app", None, None)
        );
    }
}
