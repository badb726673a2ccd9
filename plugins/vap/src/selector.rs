//! Kubernetes label selectors (`matchLabels`, `matchExpressions`).

use std::collections::BTreeMap;

use serde::Deserialize;

/// A label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: Operator,
    /// Values for `In` and `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// A requirement's operator.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum Operator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// The label the API server sets on every Namespace to its name: the one
/// label of a namespace Kiln knows without its Namespace object.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

impl LabelSelector {
    /// Whether `labels` satisfy this selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.holds(labels, |_| true)
    }

    /// Whether the requirements on the keys `known` says are known refuse
    /// `labels` (a namespace's labels, known only in part: a requirement on
    /// another key might hold on the live object, and so might the whole
    /// selector).
    pub fn refuses_by_known(
        &self,
        labels: &BTreeMap<String, String>,
        known: impl Fn(&str) -> bool,
    ) -> bool {
        !self.holds(labels, known)
    }

    /// Whether the requirements on the keys `checked` selects all hold.
    fn holds(&self, labels: &BTreeMap<String, String>, checked: impl Fn(&str) -> bool) -> bool {
        self.match_labels
            .iter()
            .filter(|(k, _)| checked(k))
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .match_expressions
                .iter()
                .filter(|r| checked(&r.key))
                .all(|r| {
                    let value = labels.get(&r.key);
                    match r.operator {
                        Operator::In => value.is_some_and(|v| r.values.contains(v)),
                        Operator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                        Operator::Exists => value.is_some(),
                        Operator::DoesNotExist => value.is_none(),
                    }
                })
    }
}

/// The labels of an object (`metadata.labels`; non-string values ignored).
pub fn labels_of(object: &serde_json::Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}
