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
/// Longest namespace (a DNS label).
const MAX_NAMESPACE: usize = 63;
/// Longest group the view reads (a DNS subdomain).
const MAX_GROUP: usize = 253;
/// Longest kind the view reads.
const MAX_KIND: usize = 63;

/// One object of the destination, by group (not version), kind, namespace
/// and name; checked when made and when read from the wire.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "RawKey")]
pub struct ClusterKey {
    group: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
}

/// A [`ClusterKey`] as the wire carries it, before it is checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawKey {
    #[serde(default)]
    group: String,
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    name: String,
}

impl TryFrom<RawKey> for ClusterKey {
    type Error = InvalidKey;

    fn try_from(raw: RawKey) -> Result<Self, InvalidKey> {
        ClusterKey::checked(raw.group, raw.kind, raw.namespace, raw.name)
    }
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
        ClusterKey::checked(
            group.to_owned(),
            kind.to_owned(),
            namespace.map(str::to_owned),
            name.to_owned(),
        )
    }

    /// The key of these parts, checked: a DNS subdomain (or nothing) for
    /// the group, letters and digits for the kind, a DNS label for the
    /// namespace (an empty one is none) and, for a name, no `/`, `%` or
    /// control character and no `.` or `..` alone (it is a path segment of
    /// the API's URL; the kinds read whole need a DNS subdomain besides,
    /// [`ClusterKey::readable`]).
    fn checked(
        group: String,
        kind: String,
        namespace: Option<String>,
        name: String,
    ) -> Result<Self, InvalidKey> {
        let namespace = namespace.filter(|n| !n.is_empty());
        let invalid = |field: &str, value: &str, rule: &str| {
            InvalidKey(format!(
                "{field} {:?} is not {rule}",
                crate::text::bounded(value, 64)
            ))
        };
        if !group.is_empty() && !dns_subdomain(&group, MAX_GROUP) {
            return Err(invalid("group", &group, "a DNS subdomain"));
        }
        if kind.is_empty()
            || kind.len() > MAX_KIND
            || !kind.starts_with(|c: char| c.is_ascii_alphabetic())
            || !kind.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(invalid("kind", &kind, "a kind (letters and digits)"));
        }
        if let Some(namespace) = &namespace
            && !dns_label(namespace, MAX_NAMESPACE)
        {
            return Err(invalid("namespace", namespace, "a DNS label"));
        }
        if name.is_empty()
            || name.len() > MAX_NAME
            || name == "."
            || name == ".."
            || name.chars().any(|c| c.is_control() || c == '/' || c == '%')
        {
            return Err(invalid("name", &name, "an object name"));
        }
        Ok(ClusterKey {
            group,
            kind,
            namespace,
            name,
        })
    }

    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The namespace; `None` for a cluster-scoped object.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace this object is, or is in: a Namespace's own name.
    pub fn namespace_of(&self) -> Option<&str> {
        match (
            &self.namespace,
            self.group.is_empty() && self.kind == "Namespace",
        ) {
            (Some(namespace), _) => Some(namespace),
            (None, true) => Some(&self.name),
            (None, false) => None,
        }
    }

    /// Whether a policy may read this object whole: a Namespace or a
    /// ConfigMap of the core group named as Kubernetes names them (never a
    /// Secret: the sandbox holds no credentials).
    pub fn readable(&self) -> bool {
        self.group.is_empty()
            && dns_subdomain(&self.name, MAX_NAME)
            && match self.kind.as_str() {
                "Namespace" => self.namespace.is_none() && dns_label(&self.name, MAX_NAMESPACE),
                "ConfigMap" => self.namespace.is_some(),
                _ => false,
            }
    }
}

/// A DNS label (RFC 1123) of at most `max` bytes: lower-case letters,
/// digits and `-`, a letter or digit at each end.
fn dns_label(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.len() <= max
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// A DNS subdomain (RFC 1123) of at most `max` bytes: DNS labels joined
/// by `.`.
fn dns_subdomain(text: &str, max: usize) -> bool {
    text.len() <= max && text.split('.').all(|label| dns_label(label, 63))
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

    /// Whether `key` exists: as read, when the view read it whole; else
    /// whether it is among the objects known to exist.
    pub fn exists(&self, key: &ClusterKey) -> Answer<bool> {
        match self.objects.get(key) {
            Some(Observed::Present { .. }) => Answer::Known(true),
            Some(Observed::Absent) => Answer::Known(false),
            Some(Observed::Unreadable { reason }) => Answer::Unavailable(reason.clone()),
            None => Answer::Known(self.existing.contains(key)),
        }
    }

    /// What every `exists` answer depends on: the objects known to exist
    /// and the state (not the content) of those read whole.
    fn existence_digest(&self) -> Digest {
        let mut text = String::new();
        for key in &self.existing {
            text.push_str(&format!("existing {key}\n"));
        }
        for (key, observed) in &self.objects {
            let state = match observed {
                Observed::Present { .. } => "present",
                Observed::Absent => "absent",
                Observed::Unreadable { .. } => "unreadable",
            };
            text.push_str(&format!("{state} {key}\n"));
        }
        Digest::of(text.as_bytes())
    }
}

/// One question a review asked.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Question {
    /// `get`: the object.
    Get(ClusterKey),
    /// `exists`, of any object: recorded once for them all (a review asks
    /// it of every object of the set), with what every answer depends on.
    Existence,
}

impl Question {
    /// The answer `view` gives, as a digest (`None`: pending).
    fn answer(&self, view: &ClusterView) -> Option<Digest> {
        let text = match self {
            Question::Get(key) => match view.get(key) {
                Answer::Known(Some(object)) => format!("present:{}", Digest::of(object.as_bytes())),
                Answer::Known(None) => "absent".to_owned(),
                Answer::Pending => return None,
                Answer::Unavailable(reason) => format!("unavailable:{reason}"),
            },
            Question::Existence => format!("existence:{}", view.existence_digest()),
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
            Question::Existence => None,
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

    /// Asks `question`, recording it: `view`'s answer, or why there is
    /// none. `Get` questions the view cannot answer are pending.
    fn ask<T>(
        &self,
        question: Question,
        answer: impl FnOnce(&ClusterView) -> Answer<T>,
    ) -> Answer<T> {
        let mut record = self.record();
        let asked = record.lookups.0.contains_key(&question)
            || matches!(&question, Question::Get(key) if record.pending.contains(key));
        if !asked && record.lookups.len() + record.pending.len() >= MAX_LOOKUPS {
            return Answer::Unavailable(format!(
                "more than {MAX_LOOKUPS} lookups of the cluster in one review"
            ));
        }
        let given = answer(&self.view);
        if !asked {
            match (question.answer(&self.view), question) {
                (Some(digest), question) => {
                    record.lookups.0.insert(question, digest);
                }
                (None, Question::Get(key)) => {
                    record.pending.insert(key);
                }
                (None, Question::Existence) => {}
            }
        }
        given
    }

    /// The object `key` (JSON text), recorded.
    pub fn get(&self, key: ClusterKey) -> Answer<Option<String>> {
        self.ask(Question::Get(key.clone()), |view| {
            view.get(&key).map(|object| object.map(str::to_owned))
        })
    }

    /// Whether `key` exists, recorded.
    pub fn exists(&self, key: ClusterKey) -> Answer<bool> {
        self.ask(Question::Existence, |view| view.exists(&key))
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
        assert_eq!(deployment.group(), "apps");
        assert!(!deployment.readable());
        assert_eq!(deployment.to_string(), "Deployment.apps prod/web");
        // Lying keys: too long, empty, a path or a query in a name, a
        // namespace or group that is no DNS name, a kind that is no kind.
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), &"x".repeat(254)).is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), "").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), "../b").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), "..").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a"), "b%2Fc").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("a\n"), "b").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some("A"), "b").is_err());
        assert!(ClusterKey::new("v1", "ConfigMap", Some(&"a".repeat(64)), "b").is_err());
        assert!(ClusterKey::new("Apps/v1", "Deployment", Some("a"), "b").is_err());
        assert!(ClusterKey::new("v1", "Config Map", Some("a"), "b").is_err());
        // A name only an `exists` may ask about (RBAC names have colons):
        // never read whole, so never in a URL.
        let query = key("ConfigMap", Some("a"), "x?watch=true");
        assert!(!query.readable());
        assert!(
            key("ClusterRole", None, "system:auth")
                .namespace()
                .is_none()
        );
        assert!(!key("Namespace", None, "Prod").readable());
        // An empty namespace is none.
        assert_eq!(key("Namespace", Some(""), "prod").namespace(), None);
        // The wire is checked too.
        let wire = r#"{"group":"","kind":"ConfigMap","namespace":"a","name":"../b"}"#;
        assert!(serde_json::from_str::<ClusterKey>(wire).is_err());
        let wire = r#"{"kind":"ConfigMap","namespace":"a","name":"b"}"#;
        assert!(serde_json::from_str::<ClusterKey>(wire).unwrap().readable());
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
        let mut read_whole = view.clone();
        read_whole.insert(key("Namespace", None, "n5"), Observed::Absent);
        assert!(
            !lookups.hold(&read_whole),
            "an object read whole changes the answers"
        );
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
