//! What a policy may read of the destination cluster: the contract's
//! `cluster` interface (since 0.1.2), answered from a [`ClusterView`]
//! that the controller filled for the review, never from an API server
//! (a review may run on a render server that holds no credentials).
//!
//! The view holds Namespaces and ConfigMaps read whole (the only kinds a
//! policy may read: never a Secret) and the keys of objects that exist.
//! A policy asking for an object the view does not hold gets `pending`:
//! its [`ClusterReads`] remember the question, and whoever runs the review
//! reads the object from the destination and runs it again. Every answer
//! is recorded ([`Lookups`]), like the source's reads, so that a cached
//! review is reused only while the cluster still answers the same.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// Distinct questions one review may ask; more are answered `unavailable`.
pub const MAX_LOOKUPS: usize = 4096;

/// Longest `metadata.name` Kubernetes allows (a DNS subdomain).
const MAX_NAME: usize = 253;
/// Longest group or kind the view reads (a DNS subdomain, a kind).
const MAX_SEGMENT: usize = 253;

/// One object of the destination, by group (not version), kind, namespace
/// and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKey {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The namespace; `None` for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

/// Why a key is not one Kubernetes could hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidKey(String);

impl ClusterKey {
    /// The key of `api_version`/`kind` `name` in `namespace` (an empty
    /// namespace is none), checked to be one Kubernetes could hold.
    pub fn new(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Self, InvalidKey> {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let namespace = namespace.filter(|n| !n.is_empty());
        let fields = [("group", group, MAX_SEGMENT), ("kind", kind, MAX_SEGMENT)]
            .into_iter()
            .chain(namespace.map(|n| ("namespace", n, MAX_NAME)))
            .chain([("name", name, MAX_NAME)]);
        for (field, value, max) in fields {
            if value.len() > max {
                return Err(InvalidKey(format!(
                    "a {field} of {} bytes (at most {max})",
                    value.len()
                )));
            }
            if value.chars().any(|c| c.is_control() || c == '/') {
                return Err(InvalidKey(format!(
                    "{field} {:?} holds a '/' or a control character",
                    value
                )));
            }
        }
        if kind.is_empty() || name.is_empty() {
            return Err(InvalidKey("an empty kind or name".into()));
        }
        Ok(ClusterKey {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        })
    }

    /// Whether a policy may read this object whole: a Namespace or a
    /// ConfigMap of the core group (never a Secret: the sandbox holds no
    /// credentials).
    pub fn readable(&self) -> bool {
        self.group.is_empty()
            && match self.kind.as_str() {
                "Namespace" => self.namespace.is_none(),
                "ConfigMap" => self.namespace.is_some(),
                _ => false,
            }
    }

    /// The `apiVersion` of a readable key (`v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            "v1".to_owned()
        } else {
            format!("{}/v1", self.group)
        }
    }
}

impl fmt::Display for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        match &self.namespace {
            Some(namespace) => write!(f, "{kind} {namespace}/{}", self.name),
            None => write!(f, "{kind} {}", self.name),
        }
    }
}

/// What the destination held of one object when the controller read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Observed {
    /// It exists: its JSON text.
    Present {
        /// The object, as JSON text.
        object: String,
    },
    /// It does not exist.
    Absent,
    /// It could not be read (the reason is for the policy's message).
    Unreadable {
        /// Why.
        reason: String,
    },
}

/// One entry of a [`ClusterView`] on the wire.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    key: ClusterKey,
    #[serde(flatten)]
    observed: Observed,
}

/// What a review may know of its destination: Namespaces and ConfigMaps
/// read whole, and which objects exist. Filled by the controller (from the
/// destination), carried with a render request, read by policies through
/// [`ClusterReads`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// Objects read whole, by key.
    #[serde(with = "entries")]
    objects: BTreeMap<ClusterKey, Observed>,
    /// Objects known to exist (those the Application manages and the
    /// destination holds); any other object not read whole does not.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    existing: BTreeSet<ClusterKey>,
}

/// `objects` as a list of entries (JSON maps have string keys only).
mod entries {
    use super::*;

    pub fn serialize<S: serde::Serializer>(
        objects: &BTreeMap<ClusterKey, Observed>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(objects.iter().map(|(key, observed)| Entry {
            key: key.clone(),
            observed: observed.clone(),
        }))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<ClusterKey, Observed>, D::Error> {
        let entries = Vec::<Entry>::deserialize(d)?;
        Ok(entries.into_iter().map(|e| (e.key, e.observed)).collect())
    }
}

/// An answer of the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer<T> {
    /// The view knows.
    Known(T),
    /// The view does not hold the object yet.
    Pending,
    /// The object could not be read, or may not be.
    Unavailable(String),
}

impl<T> Answer<T> {
    /// The known value mapped by `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Answer<U> {
        match self {
            Answer::Known(value) => Answer::Known(f(value)),
            Answer::Pending => Answer::Pending,
            Answer::Unavailable(reason) => Answer::Unavailable(reason),
        }
    }
}

impl ClusterView {
    /// An empty view: nothing read, nothing known to exist.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what the destination holds of a readable `key`.
    pub fn insert(&mut self, key: ClusterKey, observed: Observed) {
        self.objects.insert(key, observed);
    }

    /// Records that `key` exists.
    pub fn insert_existing(&mut self, key: ClusterKey) {
        self.existing.insert(key);
    }

    /// Whether the view holds `key` read whole.
    pub fn holds(&self, key: &ClusterKey) -> bool {
        self.objects.contains_key(key)
    }

    /// The objects read whole.
    pub fn objects(&self) -> impl Iterator<Item = (&ClusterKey, &Observed)> {
        self.objects.iter()
    }

    /// The JSON text of `key` (`None`: it does not exist).
    pub fn get(&self, key: &ClusterKey) -> Answer<Option<&str>> {
        if !key.readable() {
            return Answer::Unavailable(format!(
                "{key} may not be read by a policy (only core v1 Namespaces and ConfigMaps)"
            ));
        }
        match self.objects.get(key) {
            None => Answer::Pending,
            Some(Observed::Present { object }) => Answer::Known(Some(object)),
            Some(Observed::Absent) => Answer::Known(None),
            Some(Observed::Unreadable { reason }) => Answer::Unavailable(reason.clone()),
        }
    }

    /// Whether `key` exists.
    pub fn exists(&self, key: &ClusterKey) -> Answer<bool> {
        match self.objects.get(key) {
            Some(Observed::Present { .. }) => Answer::Known(true),
            Some(Observed::Absent) => Answer::Known(false),
            Some(Observed::Unreadable { reason }) => Answer::Unavailable(reason.clone()),
            None => Answer::Known(self.existing.contains(key)),
        }
    }
}

/// One question a review asked.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Question {
    /// `get`: the object.
    Get(ClusterKey),
    /// `exists`, of an object the view holds read whole.
    Exists(ClusterKey),
    /// `exists`, of any other object: answered from the objects known to
    /// exist, recorded once for them all (a review asks it of every object
    /// of the set).
    Existing,
}

impl Question {
    /// The answer `view` gives, as a digest (`None`: pending).
    fn answer(&self, view: &ClusterView) -> Option<Digest> {
        let text = match self {
            Question::Get(key) => match view.get(key) {
                Answer::Known(Some(object)) => format!("present:{object}"),
                Answer::Known(None) => "absent".to_owned(),
                Answer::Pending => return None,
                Answer::Unavailable(reason) => format!("unavailable:{reason}"),
            },
            Question::Exists(key) => match view.exists(key) {
                Answer::Known(exists) => format!("exists:{exists}"),
                Answer::Pending => return None,
                Answer::Unavailable(reason) => format!("unavailable:{reason}"),
            },
            Question::Existing => {
                let keys: Vec<String> = view.existing.iter().map(ToString::to_string).collect();
                format!("existing:{}", keys.join("\n"))
            }
        };
        Some(Digest::of(text.as_bytes()))
    }
}

/// Every question a review asked of the cluster, with a digest of each
/// answer: what its result can depend on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Lookups(BTreeMap<Question, Digest>);

impl Lookups {
    /// True when `view` gives every answer again (a review that asked
    /// exactly this would see the same).
    pub fn hold(&self, view: &ClusterView) -> bool {
        self.0
            .iter()
            .all(|(question, digest)| question.answer(view).as_ref() == Some(digest))
    }

    /// The objects read whole (to read again before the next review).
    pub fn objects(&self) -> impl Iterator<Item = &ClusterKey> {
        self.0.keys().filter_map(|q| match q {
            Question::Get(key) => Some(key),
            Question::Exists(_) | Question::Existing => None,
        })
    }

    /// How many questions.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none was asked.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A review's access to a [`ClusterView`]: the questions it asked, with
/// their answers, and the objects it asked for that the view lacks.
#[derive(Debug)]
pub struct ClusterReads {
    view: Arc<ClusterView>,
    record: Mutex<Record>,
}

#[derive(Debug, Default)]
struct Record {
    lookups: Lookups,
    pending: BTreeSet<ClusterKey>,
}

impl ClusterReads {
    /// Reads of `view`, none yet.
    pub fn new(view: Arc<ClusterView>) -> Self {
        ClusterReads {
            view,
            record: Mutex::default(),
        }
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks `question` about `key`, recording it: `view`'s answer, or why
    /// there is none.
    fn ask<T>(
        &self,
        question: Question,
        key: &ClusterKey,
        answer: impl FnOnce(&ClusterView) -> Answer<T>,
    ) -> Answer<T> {
        let mut record = self.record();
        let asked = record.lookups.0.contains_key(&question) || record.pending.contains(key);
        if !asked && record.lookups.len() + record.pending.len() >= MAX_LOOKUPS {
            return Answer::Unavailable(format!(
                "more than {MAX_LOOKUPS} lookups of the cluster in one review"
            ));
        }
        let given = answer(&self.view);
        if !asked {
            match question.answer(&self.view) {
                Some(digest) => {
                    record.lookups.0.insert(question, digest);
                }
                None => {
                    record.pending.insert(key.clone());
                }
            }
        }
        given
    }

    /// The object `key` (JSON text), recorded.
    pub fn get(&self, key: ClusterKey) -> Answer<Option<String>> {
        self.ask(Question::Get(key.clone()), &key, |view| {
            view.get(&key).map(|object| object.map(str::to_owned))
        })
    }

    /// Whether `key` exists, recorded.
    pub fn exists(&self, key: ClusterKey) -> Answer<bool> {
        let question = if self.view.holds(&key) {
            Question::Exists(key.clone())
        } else {
            Question::Existing
        };
        self.ask(question, &key, |view| view.exists(&key))
    }

    /// What the review asked and was answered.
    pub fn lookups(&self) -> Lookups {
        self.record().lookups.clone()
    }

    /// The objects it asked for that the view does not hold.
    pub fn pending(&self) -> Vec<ClusterKey> {
        self.record().pending.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str, namespace: Option<&str>, name: &str) -> ClusterKey {
        ClusterKey::new("v1", kind, namespace, name).unwrap()
    }

    #[test]
    fn keys_are_checked_and_only_namespaces_and_config_maps_are_readable() {
        assert!(key("Namespace", None, "prod").readable());
        assert!(key("ConfigMap", Some("prod"), "settings").readable());
        assert!(!key("Secret", Some("prod"), "token").readable());
        assert!(!key("ConfigMap", None, "settings").readable());
        let deployment = ClusterKey::new("apps/v1", "Deployment", Some("prod"), "web").unwrap();
        assert_eq!(deployment.group, "apps");
        assert!(!deployment.readable());
        assert_eq!(deployment.to_string(), "Deployment.apps prod/web");
        // Lying keys: too long, empty, a path in a name.
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), &"x".repeat(254)).is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), "").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), "../b").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a\n"), "b").is_err());
        // An empty namespace is none.
        assert_eq!(key("Namespace", Some(""), "prod").namespace, None);
    }

    #[test]
    fn a_view_answers_what_it_holds_and_pends_the_rest() {
        let mut view = ClusterView::new();
        let prod = key("Namespace", None, "prod");
        view.insert(
            prod.clone(),
            Observed::Present {
                object: r#"{"metadata":{"name":"prod"}}"#.into(),
            },
        );
        view.insert(key("Namespace", None, "gone"), Observed::Absent);
        let web = ClusterKey::new("apps/v1", "Deployment", Some("prod"), "web").unwrap();
        view.insert_existing(web.clone());
        assert!(matches!(view.get(&prod), Answer::Known(Some(_))));
        assert_eq!(
            view.get(&key("Namespace", None, "gone")),
            Answer::Known(None)
        );
        assert_eq!(view.get(&key("Namespace", None, "other")), Answer::Pending);
        assert!(matches!(
            view.get(&key("Secret", Some("prod"), "token")),
            Answer::Unavailable(_)
        ));
        assert_eq!(view.exists(&web), Answer::Known(true));
        assert_eq!(view.exists(&prod), Answer::Known(true));
        let other = ClusterKey::new("apps/v1", "Deployment", Some("prod"), "api").unwrap();
        assert_eq!(view.exists(&other), Answer::Known(false));
        // The wire form keeps everything.
        let wire = serde_json::to_string(&view).unwrap();
        assert_eq!(serde_json::from_str::<ClusterView>(&wire).unwrap(), view);
    }

    #[test]
    fn reads_record_answers_and_pending_objects_and_hold_while_answers_do() {
        let prod = key("Namespace", None, "prod");
        let settings = key("ConfigMap", Some("prod"), "settings");
        let mut view = ClusterView::new();
        view.insert(
            prod.clone(),
            Observed::Present {
                object: r#"{"metadata":{"labels":{"tier":"a"}}}"#.into(),
            },
        );
        let reads = ClusterReads::new(Arc::new(view.clone()));
        assert!(matches!(reads.get(prod.clone()), Answer::Known(Some(_))));
        assert_eq!(reads.get(settings.clone()), Answer::Pending);
        assert_eq!(reads.pending(), vec![settings.clone()]);
        let lookups = reads.lookups();
        assert_eq!(lookups.len(), 1);
        assert!(lookups.hold(&view));
        // New labels: the review does not hold.
        let mut relabelled = view.clone();
        relabelled.insert(
            prod.clone(),
            Observed::Present {
                object: r#"{"metadata":{"labels":{"tier":"b"}}}"#.into(),
            },
        );
        assert!(!lookups.hold(&relabelled));
        // Another object added: it still holds.
        view.insert(settings, Observed::Absent);
        assert!(lookups.hold(&view));
        assert_eq!(lookups.objects().collect::<Vec<_>>(), vec![&prod]);
    }

    #[test]
    fn existence_of_every_object_of_a_large_set_is_one_lookup() {
        let mut view = ClusterView::new();
        view.insert_existing(key("Namespace", None, "n3"));
        let reads = ClusterReads::new(Arc::new(view.clone()));
        for i in 0..20_000 {
            let exists = reads.exists(key("Namespace", None, &format!("n{i}")));
            assert_eq!(exists, Answer::Known(i == 3));
        }
        // Later questions are still answered.
        assert_eq!(reads.get(key("Namespace", None, "x")), Answer::Pending);
        let lookups = reads.lookups();
        assert_eq!(lookups.len(), 1);
        assert!(lookups.hold(&view));
        view.insert_existing(key("Namespace", None, "n4"));
        assert!(!lookups.hold(&view), "a new object changes the answers");
    }

    #[test]
    fn attack_a_review_asking_without_end_is_bounded() {
        let reads = ClusterReads::new(Arc::new(ClusterView::new()));
        for i in 0..MAX_LOOKUPS {
            assert_eq!(
                reads.get(key("Namespace", None, &format!("n{i}"))),
                Answer::Pending
            );
        }
        assert!(matches!(
            reads.get(key("Namespace", None, "one-more")),
            Answer::Unavailable(reason) if reason.contains("more than 4096 lookups")
        ));
        assert_eq!(reads.pending().len(), MAX_LOOKUPS);
    }
}
