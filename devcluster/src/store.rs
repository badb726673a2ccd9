//! The object store: every object of every served type, one global
//! `resourceVersion`, the watch history, and the API semantics of each verb
//! (admission, defaults, validation, managed fields, finalizers, garbage
//! collection, dry runs).
//!
//! One mutex guards the whole state: requests are short and CPU-bound, and a
//! single lock makes every write atomic and every resource version ordered,
//! which is what clients of a real API server rely on.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use base64::Engine as _;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, broadcast};

use super::decode;
use super::defaults;
use super::managed::{self, Writer};
use super::merge;
use super::resources::{self, ResourceType};
use super::selector::{FieldSelector, LabelSelector};
use super::status::{ApiError, Result, Target};

/// The kind of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The object was created.
    Added,
    /// The object changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventKind {
    /// The wire name (`ADDED`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub struct Event {
    /// The resource version the change produced.
    pub rv: u64,
    /// What happened.
    pub kind: EventKind,
    /// `(group, plural)` of the object's type.
    pub bucket: (String, String),
    /// The object after the change (before it, for deletions).
    pub object: Value,
    /// The object before a modification.
    pub previous: Option<Value>,
}

/// How a patch body is to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatchKind {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`: server-side apply.
    Apply,
}

/// A patch as received: how to read it, and its body.
#[derive(Clone, Debug)]
pub struct PatchRequest {
    /// The patch format, from the content type.
    pub kind: PatchKind,
    /// The decoded body.
    pub body: Value,
}

/// Options every write takes.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: compute and return the result, store nothing.
    pub dry_run: bool,
    /// The field manager.
    pub manager: String,
    /// `force=true` for server-side apply.
    pub force: bool,
    /// `fieldValidation`: what becomes of fields the kind's schema does not
    /// declare.
    pub field_validation: FieldValidation,
    /// Warnings for the response's `Warning` headers.
    pub warnings: Warnings,
}

/// `fieldValidation`: fields a built-in kind or a CRD's schema does not
/// declare are dropped in every case; `Strict` refuses the request instead,
/// `Warn` (the API server's default since 1.27) also says so in a `Warning`
/// header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and warn.
    #[default]
    Warn,
    /// Refuse the request (400).
    Strict,
}

/// Warnings collected while a request is handled (`Warning: 299 - "…"`).
#[derive(Clone, Debug, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Adds one.
    pub fn push(&self, warning: String) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(warning);
    }

    /// Takes the warnings collected so far.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// How dependents are handled when their owner is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete the owner now, dependents afterwards.
    #[default]
    Background,
    /// Delete dependents first, then the owner.
    Foreground,
    /// Leave dependents, removing their owner references.
    Orphan,
}

/// Options of a delete.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The propagation policy; `None` uses the default (background).
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
}

/// Filters of list and watch.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Namespace, or all namespaces.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Filter {
    fn matches(&self, object: &Value) -> bool {
        let in_namespace = self.namespace.as_deref().is_none_or(|ns| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                == Some(ns)
        });
        in_namespace && self.labels.matches(object) && self.fields.matches(object)
    }
}

/// The start of a watch: events to send first, then the live feed.
pub struct WatchStart {
    /// `(type, object)` pairs to send before anything from `feed`.
    pub initial: Vec<(EventKind, Value)>,
    /// Changes after `from`.
    pub feed: broadcast::Receiver<Arc<Event>>,
    /// Events at or below this version are already covered by `initial`.
    pub from: u64,
}

/// Tunables of the store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// How many past events are kept for watches that resume from a version;
    /// older versions get `410 Gone`.
    pub history: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { history: 10_000 }
    }
}

type Bucket = BTreeMap<(String, String), Value>;

struct State {
    rv: u64,
    /// Highest version whose event fell out of the history.
    compacted: u64,
    builtins: Vec<Arc<ResourceType>>,
    /// CRD name → its served versions.
    custom: BTreeMap<String, Vec<Arc<ResourceType>>>,
    objects: BTreeMap<(String, String), Bucket>,
    history: VecDeque<Arc<Event>>,
    next_ip: u32,
    /// Set when something may have work for the garbage collector.
    dirty: bool,
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    state: Mutex<State>,
    feed: broadcast::Sender<Arc<Event>>,
    config: StoreConfig,
    changed: Notify,
    /// Watches started since the store was made.
    watches: std::sync::atomic::AtomicU64,
}

/// The current time as Kubernetes writes it (RFC 3339, seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn meta<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    object["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn set_finalizers(object: &mut Value, list: Vec<String>) {
    let metadata = metadata_mut(object);
    if list.is_empty() {
        metadata.remove("finalizers");
    } else {
        metadata.insert("finalizers".into(), json!(list));
    }
}

/// The object as seen through `rt`'s version.
fn as_version(mut object: Value, rt: &ResourceType) -> Value {
    object["apiVersion"] = rt.api_version().into();
    object
}

fn target<'a>(rt: &'a ResourceType, name: &'a str) -> Target<'a> {
    Target {
        group: &rt.group,
        resource: &rt.plural,
        name,
    }
}

impl State {
    fn all_types(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.builtins.iter().chain(self.custom.values().flatten())
    }

    fn bucket_type(&self, bucket: &(String, String)) -> Option<Arc<ResourceType>> {
        self.all_types()
            .find(|rt| rt.group == bucket.0 && rt.plural == bucket.1)
            .cloned()
    }

    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, event: Event, feed: &broadcast::Sender<Arc<Event>>, history: usize) {
        let event = Arc::new(event);
        self.history.push_back(event.clone());
        while self.history.len() > history {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
        // Nobody listening is fine.
        let _ = feed.send(event);
    }

    fn namespace_state(&self, name: &str) -> Option<&Value> {
        self.objects
            .get(&(String::new(), "namespaces".to_owned()))
            .and_then(|bucket| bucket.get(&(String::new(), name.to_owned())))
    }
}

impl Store {
    /// An empty store with the namespaces every cluster has.
    pub fn new(config: StoreConfig) -> Arc<Self> {
        let (feed, _) = broadcast::channel(4096);

        Arc::new(Self {
            state: Mutex::new(State {
                rv: 0,
                compacted: 0,
                builtins: resources::builtins(),
                custom: BTreeMap::new(),
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                next_ip: 1,
                dirty: false,
            }),
            feed,
            config,
            changed: Notify::new(),
            watches: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Creates `default`, `kube-system`, `kube-public` and `kube-node-lease`
    /// where missing.
    pub fn seed_namespaces(&self) {
        let Some(rt) = self.resolve("", "v1", "namespaces") else {
            return;
        };
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let options = WriteOptions {
                manager: "kiln-dev-cluster".into(),
                ..WriteOptions::default()
            };
            // Already there (loaded from a data file) is fine.
            let _ = self.create(&rt, None, body, &options);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug; the state is still
        // consistent enough to keep serving, as each write is all-or-nothing.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Resolves a URL's group, version and resource name.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.lock()
            .all_types()
            .find(|rt| rt.group == group && rt.version == version && rt.plural == plural)
            .cloned()
    }

    /// Every served type, for discovery.
    pub fn types(&self) -> Vec<Arc<ResourceType>> {
        self.lock().all_types().cloned().collect()
    }

    /// The current resource version.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Resolves when something was committed (for persistence).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// A new subscription to committed changes.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.feed.subscribe()
    }

    /// Reads one object.
    pub fn get(&self, rt: &ResourceType, namespace: Option<&str>, name: &str) -> Result<Value> {
        let state = self.lock();
        let key = (namespace.unwrap_or_default().to_owned(), name.to_owned());
        state
            .objects
            .get(&rt.storage_key())
            .and_then(|bucket| bucket.get(&key))
            .map(|object| as_version(object.clone(), rt))
            .ok_or_else(|| ApiError::not_found(target(rt, name)))
    }

    /// Lists objects, `limit` at a time from the `continue` token.
    pub fn list(
        &self,
        rt: &ResourceType,
        filter: &Filter,
        limit: Option<usize>,
        token: Option<&str>,
    ) -> Result<Value> {
        let state = self.lock();
        let start = match token {
            Some(token) => Some(decode_continue(token, state.compacted)?),
            None => None,
        };
        let rv = start.as_ref().map_or(state.rv, |(rv, _)| *rv);
        let mut items = Vec::new();
        let mut next = None;
        if let Some(bucket) = state.objects.get(&rt.storage_key()) {
            let mut matching = bucket
                .iter()
                .filter(|(key, _)| start.as_ref().is_none_or(|(_, after)| *key > after))
                .filter(|(_, object)| filter.matches(object));
            for (key, object) in matching.by_ref() {
                if limit.is_some_and(|limit| items.len() >= limit) {
                    next = Some(key.clone());
                    break;
                }
                items.push(as_version(object.clone(), rt));
            }
            if let Some(after) = &next {
                // The token points at the last item returned.
                let last = items.last().map(|o| {
                    (
                        meta(o, "namespace").unwrap_or_default().to_owned(),
                        meta(o, "name").unwrap_or_default().to_owned(),
                    )
                });
                next = last.or(Some(after.clone()));
            }
        }
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if let Some(key) = next {
            metadata["continue"] = encode_continue(rv, &key).into();
        }
        Ok(json!({
            "apiVersion": rt.api_version(),
            "kind": format!("{}List", rt.kind),
            "metadata": metadata,
            "items": items,
        }))
    }

    /// How many watches were started (what a client that should watch
    /// nothing is checked against).
    pub fn watches_started(&self) -> u64 {
        self.watches.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts a watch. `rv` is the version to resume after; `None` (or "0")
    /// starts with the current objects as `ADDED` events.
    pub fn watch(&self, rt: &ResourceType, filter: &Filter, rv: Option<u64>) -> Result<WatchStart> {
        self.watches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let state = self.lock();
        let feed = self.feed.subscribe();
        let bucket = rt.storage_key();
        let mut initial = Vec::new();
        match rv {
            None => {
                if let Some(objects) = state.objects.get(&bucket) {
                    for object in objects.values().filter(|o| filter.matches(o)) {
                        initial.push((EventKind::Added, as_version(object.clone(), rt)));
                    }
                }
            }
            Some(rv) => {
                if rv < state.compacted {
                    return Err(ApiError::gone(format!(
                        "too old resource version: {rv} ({})",
                        state.compacted + 1
                    )));
                }
                for event in state
                    .history
                    .iter()
                    .filter(|e| e.rv > rv && e.bucket == bucket)
                {
                    if let Some(pair) = translate(event, rt, filter) {
                        initial.push(pair);
                    }
                }
            }
        }
        Ok(WatchStart {
            initial,
            feed,
            from: state.rv,
        })
    }

    /// Creates an object.
    pub fn create(
        &self,
        rt: &Arc<ResourceType>,
        namespace: Option<&str>,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Value> {
        let mut state = self.lock();
        let mut body = body;
        check_identity(rt, &body)?;
        let given = meta(&body, "name").unwrap_or_default().to_owned();
        let name = if given.is_empty() {
            match meta(&body, "generateName") {
                Some(prefix) if !prefix.is_empty() => format!("{prefix}{}", random_suffix()),
                _ => {
                    return Err(ApiError::invalid(
                        &rt.kind,
                        target(rt, ""),
                        vec![(
                            "metadata.name".into(),
                            "Required value: name or generateName is required".into(),
                        )],
                    ));
                }
            }
        } else {
            given
        };
        check_namespace(rt, &body, namespace)?;
        if meta(&body, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let key = (namespace.unwrap_or_default().to_owned(), name.clone());
        if state
            .objects
            .get(&rt.storage_key())
            .is_some_and(|b| b.contains_key(&key))
        {
            return Err(ApiError::already_exists(target(rt, &name)));
        }
        metadata_mut(&mut body).insert("name".into(), name.clone().into());
        let writer = self.writer(rt, options, false);
        let object = self.admit(
            &mut state, rt, namespace, &name, None, body, &writer, true, options,
        )?;
        self.commit(&mut state, rt, None, object, options.dry_run)
    }

    /// Replaces an object (`PUT`), or its status.
    pub fn replace(
        &self,
        rt: &Arc<ResourceType>,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        options: &WriteOptions,
        status: bool,
    ) -> Result<Value> {
        let mut state = self.lock();
        check_identity(rt, &body)?;
        check_namespace(rt, &body, namespace)?;
        check_name(&body, name)?;
        let old = lookup(&state, rt, namespace, name)?;
        match meta(&body, "resourceVersion").filter(|rv| !rv.is_empty()) {
            Some(rv) if Some(rv) != meta(&old, "resourceVersion") => {
                return Err(ApiError::conflict(
                    target(rt, name),
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            Some(_) => {}
            None if rt.is_custom() => {
                return Err(ApiError::invalid(
                    &rt.kind,
                    target(rt, name),
                    vec![(
                        "metadata.resourceVersion".into(),
                        "Invalid value: 0x0: must be specified for an update".into(),
                    )],
                ));
            }
            None => {}
        }
        let writer = self.writer(rt, options, status);
        let object = self.admit(
            &mut state,
            rt,
            namespace,
            name,
            Some(&old),
            body,
            &writer,
            true,
            options,
        )?;
        self.commit(&mut state, rt, Some(old), object, options.dry_run)
    }

    /// Patches an object (or its status). Returns the object and whether a
    /// server-side apply created it.
    pub fn patch(
        &self,
        rt: &Arc<ResourceType>,
        namespace: Option<&str>,
        name: &str,
        patch: PatchRequest,
        options: &WriteOptions,
        status: bool,
    ) -> Result<(Value, bool)> {
        let PatchRequest { kind, body } = patch;
        let mut state = self.lock();
        let old = match lookup(&state, rt, namespace, name) {
            Ok(old) => Some(old),
            Err(e) if kind != PatchKind::Apply || status => return Err(e),
            Err(_) => None,
        };
        let writer = self.writer(rt, options, status);
        let bad = |e: merge::PatchError| ApiError::bad_request(e.to_string());
        let (object, created) = match kind {
            PatchKind::Apply => {
                check_identity(rt, &body)?;
                check_name(&body, name)?;
                check_namespace(rt, &body, namespace)?;
                if let (Some(wanted), Some(old)) = (meta(&body, "resourceVersion"), &old)
                    && Some(wanted) != meta(old, "resourceVersion")
                {
                    return Err(ApiError::conflict(
                        target(rt, name),
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
                let live = old.clone().unwrap_or_else(|| {
                    let mut skeleton = json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": {"name": name}});
                    if let Some(ns) = namespace {
                        skeleton["metadata"]["namespace"] = ns.into();
                    }
                    skeleton
                });
                let mut body = body;
                let dropped = match &rt.openapi {
                    Some(schema) => defaults::custom(schema, &mut body, false),
                    None => decode_builtin(rt, &mut body)?,
                };
                strict_check(rt, options, &dropped)?;
                let merged =
                    managed::apply(&live, &body, &writer, options.force, &rt.schema, &now())
                        .map_err(|conflicts| {
                            let causes = conflicts
                                .iter()
                                .flat_map(|c| {
                                    c.fields.iter().map(move |f| {
                                        (
                                            format!(
                                                "conflict with \"{}\" using {}",
                                                c.manager, c.api_version
                                            ),
                                            f.clone(),
                                        )
                                    })
                                })
                                .collect();
                            ApiError::apply_conflict(
                                target(rt, name),
                                managed::conflict_message(&conflicts),
                                causes,
                            )
                        })?;
                let object = self.admit(
                    &mut state,
                    rt,
                    namespace,
                    name,
                    old.as_ref(),
                    merged,
                    &writer,
                    false,
                    options,
                )?;
                (object, old.is_none())
            }
            _ => {
                let old = old.expect("non-apply patches need an existing object");
                let patched = match kind {
                    PatchKind::Json => merge::json_patch(&old, &body).map_err(bad)?,
                    PatchKind::Merge => merge::json_merge(&old, &body),
                    PatchKind::Strategic if rt.is_custom() => {
                        return Err(ApiError::unsupported_media_type(
                            "application/strategic-merge-patch+json",
                        ));
                    }
                    _ => merge::strategic_merge(&old, &body, &rt.schema).map_err(bad)?,
                };
                if !patched.is_object() {
                    return Err(ApiError::bad_request("the patch did not produce an object"));
                }
                check_identity(rt, &patched)?;
                check_name(&patched, name)?;
                let object = self.admit(
                    &mut state,
                    rt,
                    namespace,
                    name,
                    Some(&old),
                    patched,
                    &writer,
                    true,
                    options,
                )?;
                (object, false)
            }
        };
        let old = lookup(&state, rt, namespace, name).ok();
        Ok((
            self.commit(&mut state, rt, old, object, options.dry_run)?,
            created,
        ))
    }

    /// Deletes an object. Returns a success `Status`, or the object when
    /// finalizers keep it for now.
    pub fn delete(
        &self,
        rt: &Arc<ResourceType>,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value> {
        let mut state = self.lock();
        let old = lookup(&state, rt, namespace, name)?;
        if let Some(uid) = &options.uid
            && Some(uid.as_str()) != meta(&old, "uid")
        {
            return Err(ApiError::conflict(
                target(rt, name),
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta(&old, "uid").unwrap_or_default()
                ),
            ));
        }
        if let Some(rv) = &options.resource_version
            && Some(rv.as_str()) != meta(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(
                target(rt, name),
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta(&old, "resourceVersion").unwrap_or_default()
                ),
            ));
        }
        let uid = meta(&old, "uid").unwrap_or_default().to_owned();
        let outcome = self.delete_in(
            &mut state,
            rt,
            old,
            options.propagation.unwrap_or_default(),
            options.dry_run,
        )?;
        if !options.dry_run {
            self.collect_garbage(&mut state);
        }
        Ok(match outcome {
            Some(pending) => as_version(pending, rt),
            None => super::status::success(target(rt, name), &uid),
        })
    }

    /// Deletes every matching object; returns them as a list.
    pub fn delete_collection(
        &self,
        rt: &Arc<ResourceType>,
        filter: &Filter,
        options: &DeleteOptions,
    ) -> Result<Value> {
        let mut state = self.lock();
        let doomed: Vec<Value> = state
            .objects
            .get(&rt.storage_key())
            .map(|bucket| {
                bucket
                    .values()
                    .filter(|o| filter.matches(o))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut items = Vec::new();
        for object in doomed {
            items.push(as_version(object.clone(), rt));
            self.delete_in(
                &mut state,
                rt,
                object,
                options.propagation.unwrap_or_default(),
                options.dry_run,
            )?;
        }
        if !options.dry_run {
            self.collect_garbage(&mut state);
        }
        Ok(
            json!({"apiVersion": rt.api_version(), "kind": format!("{}List", rt.kind),
            "metadata": {"resourceVersion": state.rv.to_string()}, "items": items}),
        )
    }

    /// Writes a status computed by the server itself (simulated readiness).
    /// Skips objects that changed generation since `generation`.
    pub fn set_status(
        &self,
        rt: &Arc<ResourceType>,
        namespace: Option<&str>,
        name: &str,
        generation: i64,
        status: Value,
    ) {
        let mut state = self.lock();
        let Ok(old) = lookup(&state, rt, namespace, name) else {
            return;
        };
        if old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            != generation
        {
            return;
        }
        let mut new = old.clone();
        new["status"] = status;
        let writer = Writer {
            manager: "kiln-dev-cluster".into(),
            api_version: rt.api_version(),
            status: true,
            has_status_subresource: rt.status,
        };
        managed::update(&old, &mut new, &writer, &rt.schema, &now());
        let _ = self.commit(&mut state, rt, Some(old), new, false);
    }

    fn writer(&self, rt: &ResourceType, options: &WriteOptions, status: bool) -> Writer {
        Writer {
            manager: options.manager.clone(),
            api_version: rt.api_version(),
            status,
            has_status_subresource: rt.status,
        }
    }

    /// Turns a request's object into the object to store: identity, server
    /// fields, status rules, defaults, validation, generation, managed fields.
    #[allow(clippy::too_many_arguments)]
    fn admit(
        &self,
        state: &mut State,
        rt: &Arc<ResourceType>,
        namespace: Option<&str>,
        name: &str,
        old: Option<&Value>,
        mut new: Value,
        writer: &Writer,
        record_update: bool,
        options: &WriteOptions,
    ) -> Result<Value> {
        if !new.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        new["apiVersion"] = rt.api_version().into();
        new["kind"] = rt.kind.clone().into();
        {
            let metadata = metadata_mut(&mut new);
            metadata.insert("name".into(), name.into());
            match namespace {
                Some(ns) => {
                    metadata.insert("namespace".into(), ns.into());
                }
                None => {
                    metadata.remove("namespace");
                }
            }
            if let Some(old_meta) = old.and_then(|o| o.get("metadata")) {
                for field in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "resourceVersion",
                    "generation",
                ] {
                    match old_meta.get(field) {
                        Some(value) => metadata.insert(field.into(), value.clone()),
                        None => metadata.remove(field),
                    };
                }
            } else {
                metadata.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
                metadata.insert("creationTimestamp".into(), now().into());
                for field in [
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    metadata.remove(field);
                }
            }
            if let Some(old) = old {
                // Clients cannot write managed fields directly here; keep the
                // server's record (an apply already computed the new one).
                if record_update {
                    match old.pointer("/metadata/managedFields") {
                        Some(fields) => metadata.insert("managedFields".into(), fields.clone()),
                        None => metadata.remove("managedFields"),
                    };
                }
            } else if record_update {
                metadata.remove("managedFields");
            }
        }
        // Go's `omitempty`: the API server never returns empty metadata
        // maps or lists.
        metadata_mut(&mut new).retain(|field, value| {
            !(matches!(
                field.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences"
            ) && (value.as_object().is_some_and(Map::is_empty)
                || value.as_array().is_some_and(Vec::is_empty)
                || value.is_null()))
        });
        if rt.status {
            if writer.status {
                // A status write changes the status and nothing else.
                let status = new.get("status").cloned();
                let managed_fields = new.pointer("/metadata/managedFields").cloned();
                new = old.cloned().unwrap_or(new);
                match status {
                    Some(status) => new["status"] = status,
                    None => {
                        new.as_object_mut().map(|o| o.remove("status"));
                    }
                }
                if let Some(fields) = managed_fields {
                    metadata_mut(&mut new).insert("managedFields".into(), fields);
                }
            } else {
                match old.and_then(|o| o.get("status")) {
                    Some(status) => new["status"] = status.clone(),
                    None => {
                        new.as_object_mut().map(|o| o.remove("status"));
                    }
                }
            }
        }
        if old.is_none()
            && let Some(problem) = defaults::name_problem(&rt.kind, name)
        {
            return Err(ApiError::invalid(
                &rt.kind,
                target(rt, name),
                vec![("metadata.name".into(), problem)],
            ));
        }
        if let Some(ns) = namespace {
            match state.namespace_state(ns) {
                None if old.is_none() => {
                    return Err(ApiError::not_found(Target {
                        group: "",
                        resource: "namespaces",
                        name: ns,
                    }));
                }
                Some(ns_object)
                    if old.is_none()
                        && ns_object.pointer("/metadata/deletionTimestamp").is_some() =>
                {
                    return Err(ApiError::forbidden(
                        target(rt, name),
                        &format!(
                            "unable to create new content in namespace {ns} because it is being terminated"
                        ),
                    ));
                }
                _ => {}
            }
        }
        match &rt.openapi {
            Some(schema) => {
                let dropped = defaults::custom(schema, &mut new, true);
                strict_check(rt, options, &dropped)?;
            }
            None => {
                let dropped = decode_builtin(rt, &mut new)?;
                strict_check(rt, options, &dropped)?;
                // One counter numbers cluster IPs and node ports (30000-32767).
                let counter = std::cell::Cell::new(state.next_ip);
                let mut cluster_ip = || {
                    counter.set(counter.get() + 1);
                    let n = counter.get();
                    format!("10.96.{}.{}", n / 250, n % 250 + 1)
                };
                let mut node_port = || {
                    counter.set(counter.get() + 1);
                    30000 + counter.get() % 2768
                };
                defaults::builtin(
                    &rt.kind,
                    &mut new,
                    &mut defaults::Allocator {
                        cluster_ip: &mut cluster_ip,
                        node_port: &mut node_port,
                    },
                );
                state.next_ip = counter.get();
            }
        }
        if rt.kind == "CustomResourceDefinition" && rt.group == "apiextensions.k8s.io" {
            // Validation only: the types are registered when it is stored.
            resources::from_crd(&new)
                .map_err(|causes| ApiError::invalid(&rt.kind, target(rt, name), causes))?;
            let storage = new
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .and_then(|v| v.iter().find(|v| v["storage"] == Value::Bool(true)))
                .and_then(|v| v["name"].as_str())
                .unwrap_or_default()
                .to_owned();
            let time = now();
            new["status"] = json!({
                "acceptedNames": new.pointer("/spec/names").cloned().unwrap_or_default(),
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": time},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": time},
                ],
                "storedVersions": [storage],
            });
            if let Some(old_status) = old.and_then(|o| o.get("status")) {
                // Keep transition times of an established CRD stable.
                if old_status.get("acceptedNames") == new["status"].get("acceptedNames") {
                    new["status"]["conditions"] = old_status["conditions"].clone();
                }
            }
        }
        let causes = defaults::validate(rt, &new, old);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&rt.kind, target(rt, name), causes));
        }
        if rt.generation {
            let strip = |o: &Value| {
                let mut o = o.clone();
                if let Some(map) = o.as_object_mut() {
                    map.remove("metadata");
                    map.remove("status");
                }
                o
            };
            let generation = match old {
                None => 1,
                Some(old) => {
                    let current = old
                        .pointer("/metadata/generation")
                        .and_then(Value::as_i64)
                        .unwrap_or(1);
                    if strip(old) != strip(&new) {
                        current + 1
                    } else {
                        current
                    }
                }
            };
            metadata_mut(&mut new).insert("generation".into(), generation.into());
        }
        if record_update {
            managed::update(
                old.unwrap_or(&Value::Null),
                &mut new,
                writer,
                &rt.schema,
                &now(),
            );
        }
        Ok(new)
    }

    /// Stores `new` (unless it equals `old`: a no-op write changes nothing,
    /// not even the resource version), records the event, and runs what
    /// follows from it (finalization, CRD registration, garbage collection).
    fn commit(
        &self,
        state: &mut State,
        rt: &Arc<ResourceType>,
        old: Option<Value>,
        new: Value,
        dry_run: bool,
    ) -> Result<Value> {
        if old.as_ref() == Some(&new) {
            return Ok(as_version(new, rt));
        }
        if dry_run {
            return Ok(as_version(new, rt));
        }
        let new = self.put(state, rt, old, new);
        if rt.kind == "CustomResourceDefinition"
            && rt.group == "apiextensions.k8s.io"
            && let Ok(types) = resources::from_crd(&new)
        {
            state
                .custom
                .insert(meta(&new, "name").unwrap_or_default().to_owned(), types);
        }
        // An object whose deletion waited only for finalizers goes now.
        if new.pointer("/metadata/deletionTimestamp").is_some()
            && finalizers(&new).is_empty()
            && rt.kind != "Namespace"
        {
            self.remove(state, rt, &new);
        }
        self.collect_garbage(state);
        self.changed.notify_one();
        Ok(as_version(new, rt))
    }

    /// Removes an object for good.
    fn remove(&self, state: &mut State, rt: &Arc<ResourceType>, object: &Value) {
        let key = (
            meta(object, "namespace").unwrap_or_default().to_owned(),
            meta(object, "name").unwrap_or_default().to_owned(),
        );
        let Some(mut gone) = state
            .objects
            .get_mut(&rt.storage_key())
            .and_then(|b| b.remove(&key))
        else {
            return;
        };
        state.dirty = true;
        let rv = state.bump();
        metadata_mut(&mut gone).insert("resourceVersion".into(), rv.to_string().into());
        state.record(
            Event {
                rv,
                kind: EventKind::Deleted,
                bucket: rt.storage_key(),
                object: gone.clone(),
                previous: None,
            },
            &self.feed,
            self.config.history,
        );
        if rt.kind == "CustomResourceDefinition" && rt.group == "apiextensions.k8s.io" {
            let name = meta(&gone, "name").unwrap_or_default().to_owned();
            if let Some(types) = state.custom.remove(&name)
                && let Some(first) = types.first()
            {
                let bucket = first.storage_key();
                let objects: Vec<Value> = state
                    .objects
                    .remove(&bucket)
                    .map(|b| b.into_values().collect())
                    .unwrap_or_default();
                for mut object in objects {
                    let rv = state.bump();
                    metadata_mut(&mut object)
                        .insert("resourceVersion".into(), rv.to_string().into());
                    state.record(
                        Event {
                            rv,
                            kind: EventKind::Deleted,
                            bucket: bucket.clone(),
                            object,
                            previous: None,
                        },
                        &self.feed,
                        self.config.history,
                    );
                }
            }
        }
        self.changed.notify_one();
    }

    /// Deletes one object: at once, or by marking it for deletion when
    /// finalizers (including the propagation ones) must run first. Returns
    /// the pending object in the second case.
    fn delete_in(
        &self,
        state: &mut State,
        rt: &Arc<ResourceType>,
        old: Value,
        propagation: Propagation,
        dry_run: bool,
    ) -> Result<Option<Value>> {
        let mut list = finalizers(&old);
        let already = old.pointer("/metadata/deletionTimestamp").is_some();
        match propagation {
            Propagation::Foreground
                if !list.iter().any(|f| f == "foregroundDeletion") && !already =>
            {
                list.push("foregroundDeletion".into())
            }
            Propagation::Orphan if !list.iter().any(|f| f == "orphan") && !already => {
                list.push("orphan".into())
            }
            _ => {}
        }
        let namespace = rt.kind == "Namespace" && rt.group.is_empty();
        if list.is_empty() && !namespace {
            if !dry_run {
                self.remove(state, rt, &old);
            }
            return Ok(None);
        }
        if already {
            return Ok(Some(old));
        }
        state.dirty = true;
        let mut pending = old.clone();
        set_finalizers(&mut pending, list);
        let metadata = metadata_mut(&mut pending);
        metadata.insert("deletionTimestamp".into(), now().into());
        metadata.insert("deletionGracePeriodSeconds".into(), 0.into());
        if namespace {
            pending["status"]["phase"] = "Terminating".into();
        }
        if dry_run {
            return Ok(Some(pending));
        }
        let pending = self.put(state, rt, Some(old), pending);
        Ok(Some(pending))
    }

    /// The garbage collector and namespace controller, run to a fixpoint
    /// after every write: foreground and orphan finalizers, namespace
    /// contents, and dependents whose owners are all gone.
    fn collect_garbage(&self, state: &mut State) {
        if !std::mem::take(&mut state.dirty) {
            return;
        }
        for _round in 0..64 {
            let mut progress = false;
            let mut uids = BTreeSet::new();
            let mut all: Vec<(Arc<ResourceType>, Value)> = Vec::new();
            let buckets: Vec<(String, String)> = state.objects.keys().cloned().collect();
            for bucket in buckets {
                let Some(rt) = state.bucket_type(&bucket) else {
                    continue;
                };
                for object in state.objects[&bucket].values() {
                    if let Some(uid) = meta(object, "uid") {
                        uids.insert(uid.to_owned());
                    }
                    all.push((rt.clone(), object.clone()));
                }
            }
            let dependents_of = |uid: &str| -> Vec<(Arc<ResourceType>, Value)> {
                all.iter()
                    .filter(|(_, o)| owner_uids(o).iter().any(|u| u == uid))
                    .cloned()
                    .collect()
            };
            for (rt, object) in &all {
                if object.pointer("/metadata/deletionTimestamp").is_none() {
                    // Dependents whose owners are all gone are collected.
                    let owners = owner_uids(object);
                    if !owners.is_empty() && owners.iter().all(|u| !uids.contains(u)) {
                        let _ = self.delete_in(
                            state,
                            rt,
                            object.clone(),
                            Propagation::Background,
                            false,
                        );
                        progress = true;
                    }
                    continue;
                }
                let uid = meta(object, "uid").unwrap_or_default();
                let mut list = finalizers(object);
                let mut changed = false;
                if list.iter().any(|f| f == "foregroundDeletion") {
                    let dependents = dependents_of(uid);
                    for (drt, dependent) in &dependents {
                        if dependent.pointer("/metadata/deletionTimestamp").is_none() {
                            let _ = self.delete_in(
                                state,
                                drt,
                                dependent.clone(),
                                Propagation::Foreground,
                                false,
                            );
                            progress = true;
                        }
                    }
                    if dependents.is_empty() {
                        list.retain(|f| f != "foregroundDeletion");
                        changed = true;
                    }
                }
                if list.iter().any(|f| f == "orphan") {
                    for (drt, dependent) in dependents_of(uid) {
                        let mut freed = dependent.clone();
                        if let Some(Value::Array(refs)) =
                            freed.pointer_mut("/metadata/ownerReferences")
                        {
                            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                        }
                        if freed
                            .pointer("/metadata/ownerReferences")
                            .and_then(Value::as_array)
                            .is_some_and(Vec::is_empty)
                        {
                            metadata_mut(&mut freed).remove("ownerReferences");
                        }
                        self.overwrite(state, &drt, dependent, freed);
                        progress = true;
                    }
                    list.retain(|f| f != "orphan");
                    changed = true;
                }
                if rt.kind == "Namespace" && rt.group.is_empty() {
                    let name = meta(object, "name").unwrap_or_default();
                    let contents: Vec<(Arc<ResourceType>, Value)> = all
                        .iter()
                        .filter(|(crt, o)| crt.namespaced && meta(o, "namespace") == Some(name))
                        .cloned()
                        .collect();
                    for (crt, content) in &contents {
                        if content.pointer("/metadata/deletionTimestamp").is_none() {
                            let _ = self.delete_in(
                                state,
                                crt,
                                content.clone(),
                                Propagation::Background,
                                false,
                            );
                            progress = true;
                        }
                    }
                    if contents.is_empty() && list.is_empty() {
                        self.remove(state, rt, object);
                        progress = true;
                    }
                    if !changed {
                        continue;
                    }
                }
                if changed {
                    let mut updated = object.clone();
                    set_finalizers(&mut updated, list.clone());
                    if list.is_empty() && !(rt.kind == "Namespace" && rt.group.is_empty()) {
                        self.remove(state, rt, object);
                    } else {
                        self.overwrite(state, rt, object.clone(), updated);
                    }
                    progress = true;
                }
            }
            if !progress {
                state.dirty = false;
                return;
            }
        }
    }

    /// Stores `new` under a fresh resource version and records the event
    /// (added, or modified when there was an `old` object).
    fn put(
        &self,
        state: &mut State,
        rt: &ResourceType,
        old: Option<Value>,
        mut new: Value,
    ) -> Value {
        let rv = state.bump();
        metadata_mut(&mut new).insert("resourceVersion".into(), rv.to_string().into());
        let key = (
            meta(&new, "namespace").unwrap_or_default().to_owned(),
            meta(&new, "name").unwrap_or_default().to_owned(),
        );
        state
            .objects
            .entry(rt.storage_key())
            .or_default()
            .insert(key, new.clone());
        // Deletions and owner references may give the collector work.
        state.dirty |= new.pointer("/metadata/deletionTimestamp").is_some()
            || new.pointer("/metadata/ownerReferences").is_some();
        let kind = if old.is_some() {
            EventKind::Modified
        } else {
            EventKind::Added
        };
        state.record(
            Event {
                rv,
                kind,
                bucket: rt.storage_key(),
                object: new.clone(),
                previous: old,
            },
            &self.feed,
            self.config.history,
        );
        self.changed.notify_one();
        new
    }

    /// A server-internal modification (garbage collector).
    fn overwrite(&self, state: &mut State, rt: &Arc<ResourceType>, old: Value, new: Value) {
        if old == new {
            return;
        }
        self.put(state, rt, Some(old), new);
    }

    /// Everything, for the data file: CRDs first so that their custom
    /// resources can be served again when the file is loaded.
    pub fn snapshot(&self) -> Value {
        let state = self.lock();
        let mut objects = Vec::new();
        let crds = (
            "apiextensions.k8s.io".to_owned(),
            "customresourcedefinitions".to_owned(),
        );
        if let Some(bucket) = state.objects.get(&crds) {
            objects.extend(bucket.values().cloned());
        }
        for (key, bucket) in &state.objects {
            if key != &crds {
                let Some(rt) = state.bucket_type(key) else {
                    continue;
                };
                objects.extend(bucket.values().map(|o| {
                    let mut o = o.clone();
                    o["kind"] = rt.kind.clone().into();
                    o
                }));
            }
        }
        json!({"resourceVersion": state.rv.to_string(), "objects": objects})
    }

    /// Restores a [`Store::snapshot`]. Objects of unknown types are skipped
    /// and reported.
    pub fn restore(&self, snapshot: &Value) -> Vec<String> {
        let mut state = self.lock();
        let mut skipped = Vec::new();
        for object in snapshot
            .get("objects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let api_version = object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let kind = object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let rt = state
                .all_types()
                .find(|rt| rt.group == group && rt.version == version && rt.kind == kind)
                .cloned();
            let Some(rt) = rt else {
                skipped.push(format!(
                    "{api_version} {kind} {}",
                    meta(object, "name").unwrap_or_default()
                ));
                continue;
            };
            let key = (
                meta(object, "namespace").unwrap_or_default().to_owned(),
                meta(object, "name").unwrap_or_default().to_owned(),
            );
            state
                .objects
                .entry(rt.storage_key())
                .or_default()
                .insert(key, object.clone());
            if rt.kind == "CustomResourceDefinition"
                && let Ok(types) = resources::from_crd(object)
            {
                state
                    .custom
                    .insert(meta(object, "name").unwrap_or_default().to_owned(), types);
            }
        }
        let rv = snapshot
            .get("resourceVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        state.rv = state.rv.max(rv);
        // Nothing before the restart can be replayed.
        state.compacted = state.rv;
        state.next_ip = state.next_ip.max(
            state
                .objects
                .get(&(String::new(), "services".to_owned()))
                .map_or(0, |b| b.len() as u32 + 1),
        );
        skipped
    }
}

/// Decodes a built-in object as the API server's typed decoding does
/// ([`decode`]): a body that cannot be decoded is a 400.
fn decode_builtin(rt: &ResourceType, object: &mut Value) -> Result<Vec<String>> {
    let schema = decode::OpenApi::of(&rt.group, &rt.version, &rt.kind);
    let types: &dyn decode::FieldTypes = match &schema {
        Some(schema) => schema,
        // A CRD's schema names fields (`limits`) that hold no quantities.
        None if rt.kind == "CustomResourceDefinition" => &decode::Untyped,
        None => &decode::ByName,
    };
    decode::decode(object, types).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}",
            kind = rt.kind,
            version = rt.version,
        ))
    })
}

/// What `fieldValidation` makes of the fields decoding dropped: with
/// `Strict` a 400 (`strict decoding error: unknown field "spec.foo"`, the
/// API server's words), with `Warn` one warning per field.
fn strict_check(rt: &ResourceType, options: &WriteOptions, dropped: &[String]) -> Result<()> {
    if dropped.is_empty() {
        return Ok(());
    }
    let fields = dropped.iter().map(|f| format!("unknown field \"{f}\""));
    match options.field_validation {
        FieldValidation::Ignore => {}
        FieldValidation::Warn => fields.for_each(|w| options.warnings.push(w)),
        FieldValidation::Strict => {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                fields.collect::<Vec<_>>().join(", "),
                kind = rt.kind,
                version = rt.version,
            )));
        }
    }
    Ok(())
}

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// An event as a watcher of `rt` with `filter` sees it: objects moving into
/// or out of the selection appear as added or deleted.
pub fn translate(event: &Event, rt: &ResourceType, filter: &Filter) -> Option<(EventKind, Value)> {
    if event.bucket != rt.storage_key() {
        return None;
    }
    let now = filter.matches(&event.object);
    let kind = match (
        event.kind,
        event.previous.as_ref().map(|p| filter.matches(p)),
    ) {
        (EventKind::Modified, Some(true)) if !now => EventKind::Deleted,
        (EventKind::Modified, Some(false)) if now => EventKind::Added,
        (EventKind::Modified, Some(false)) => return None,
        (kind, _) if now => kind,
        _ => return None,
    };
    Some((kind, as_version(event.object.clone(), rt)))
}

fn lookup(state: &State, rt: &ResourceType, namespace: Option<&str>, name: &str) -> Result<Value> {
    state
        .objects
        .get(&rt.storage_key())
        .and_then(|bucket| bucket.get(&(namespace.unwrap_or_default().to_owned(), name.to_owned())))
        .cloned()
        .ok_or_else(|| ApiError::not_found(target(rt, name)))
}

fn check_identity(rt: &ResourceType, body: &Value) -> Result<()> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON or YAML object",
        ));
    }
    let api_version = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
    if !api_version.is_empty() {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if group != rt.group {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
    }
    if !kind.is_empty() && kind != rt.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({}) for this resource",
            rt.kind
        )));
    }
    Ok(())
}

fn check_namespace(rt: &ResourceType, body: &Value, namespace: Option<&str>) -> Result<()> {
    if let (Some(given), Some(url)) = (meta(body, "namespace").filter(|n| !n.is_empty()), namespace)
        && given != url
        && rt.namespaced
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

fn check_name(body: &Value, name: &str) -> Result<()> {
    if let Some(given) = meta(body, "name").filter(|n| !n.is_empty())
        && given != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

fn encode_continue(rv: u64, key: &(String, String)) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "start": [key.0, key.1]}).to_string())
}

fn decode_continue(token: &str, compacted: u64) -> Result<(u64, (String, String))> {
    let bad = || ApiError::bad_request(format!("invalid continue token {token:?}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = value["rv"].as_u64().ok_or_else(bad)?;
    let ns = value["start"][0].as_str().ok_or_else(bad)?.to_owned();
    let name = value["start"][1].as_str().ok_or_else(bad)?.to_owned();
    if rv < compacted {
        return Err(ApiError::gone(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        ));
    }
    Ok((rv, (ns, name)))
}
