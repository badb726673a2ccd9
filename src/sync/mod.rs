//! The sync stage: make the cluster what Git says, and say exactly what
//! happened.
//!
//! An [`Engine`] applies an application's rendered objects with server-side
//! apply (field manager `kiln`), phase by phase and wave by wave
//! ([`plan`]), running hooks and waiting for each wave to be healthy before
//! the next; prunes tracked objects that are no longer rendered; retries a
//! failed sync with backoff; and reports per object what it did. Every
//! object it applies carries Kiln's tracking annotation
//! (`kiln.dev/tracking-id: APP:GROUP/KIND:NAMESPACE/NAME`) and label
//! (`kiln.dev/app: APP`); only objects whose annotation names this
//! application and the object itself are ever pruned.

pub mod deletion;
pub mod helm_hooks;
pub mod live;
pub mod options;
pub mod plan;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    ValidationDirective,
};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::cluster::{Cluster, ClusterError, Resolved};
use crate::diff::{self, DiffOptions, Report, SyncStatus};
use crate::health::{self, Health};
use crate::manifest::ObjectKey;
pub use deletion::{Deletion, HookRound};
pub use live::{Labelled, LiveState};
pub use options::{PrunePropagation, RetryPolicy, SyncOptions};
use plan::{DeletePolicy, Phase, Plan, Planned};

/// The tracking annotation: which application an object belongs to.
pub const TRACKING_ID: &str = "kiln.dev/tracking-id";
/// The tracking label, for finding an application's objects cheaply.
pub const APP_LABEL: &str = "kiln.dev/app";

/// Why a sync or diff could not run at all (per-object problems are part
/// of the result instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// An object's sync annotations are invalid.
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// The cluster could not be asked.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// Listing tracked objects failed.
    #[error("cannot list {kind} to find what to prune")]
    List {
        /// The kind.
        kind: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Deleting an object failed.
    #[error("cannot delete {object}")]
    Delete {
        /// The object.
        object: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// `ignoreDifferences` could not be applied.
    #[error(transparent)]
    Ignore(#[from] diff::IgnoreError),
}

/// The result type of sync operations.
pub type Result<T, E = SyncError> = std::result::Result<T, E>;

/// The application being synced.
#[derive(Clone, Debug)]
pub struct Application {
    /// Its name: the value of the tracking label and the prefix of the
    /// tracking annotation.
    pub name: String,
    /// The destination namespace for namespaced objects that set none.
    pub namespace: Option<String>,
}

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Action {
    /// It did not exist and was created.
    Created,
    /// It existed and changed.
    Configured,
    /// It was already as desired: nothing was written.
    Unchanged,
    /// Skipped (`ApplyOutOfSyncOnly` and already synced).
    Skipped,
    /// Deleted because it is no longer rendered.
    Pruned,
    /// Would be pruned, but pruning is off or the object says `Prune=false`
    /// or `helm.sh/resource-policy: keep`.
    PruneSkipped,
    /// Left in the cluster while its application is deleted: the object
    /// says `Delete=false` or `helm.sh/resource-policy: keep`.
    Kept,
    /// A hook no sync runs (Helm's test, deletion and rollback hooks, as
    /// in Argo CD): never applied; the message says which.
    NeverRun,
    /// A hook ran and succeeded.
    HookSucceeded,
    /// A hook ran and failed.
    HookFailed,
    /// The write failed; the message has the API error.
    Failed,
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// The result for one object.
#[derive(Clone, Debug, Serialize)]
pub struct ObjectResult {
    /// Which object.
    pub key: ObjectKey,
    /// Its phase (none for pruned objects and hooks no sync runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Its wave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<i64>,
    /// What happened.
    pub action: Action,
    /// Details: the API error, the health message, why something was skipped.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// How the sync ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Outcome {
    /// Every object applied, every wave healthy, every hook succeeded.
    Succeeded,
    /// Something failed; [`SyncResult::objects`] says what.
    Failed,
    /// Stopped between waves because the interrupt flag was raised (the
    /// controller shutting down): the waves reported were applied, the
    /// rest were not, nothing was pruned.
    Terminated,
}

/// The result of a sync.
#[derive(Clone, Debug, Serialize)]
pub struct SyncResult {
    /// How it ended.
    pub outcome: Outcome,
    /// One line for people.
    pub message: String,
    /// Per object, in the order things happened (of the last attempt).
    pub objects: Vec<ObjectResult>,
    /// The application's health after the sync (the worst of its objects).
    pub health: Health,
    /// How many attempts were made.
    pub attempts: u32,
    /// What the last attempt's applies wrote (the API server's answers),
    /// by object: the freshest state of each that the caller need not read
    /// again. Never printed nor serialized (it holds Secret values).
    #[serde(skip)]
    pub written: Written,
}

/// What a sync wrote, by object. Its `Debug` names only how many objects
/// it holds: their values may be Secrets'.
#[derive(Clone, Default)]
pub struct Written(pub HashMap<ObjectKey, Value>);

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Written({} objects)", self.0.len())
    }
}

impl SyncResult {
    /// How many objects ended with `action`.
    pub fn count(&self, action: Action) -> usize {
        self.objects.iter().filter(|o| o.action == action).count()
    }
}

/// Syncs one application to one cluster.
pub struct Engine<'a> {
    cluster: &'a Cluster,
    app: Application,
    options: SyncOptions,
    interrupt: Option<Arc<AtomicBool>>,
    /// The kinds the set being diffed or synced defines itself (set by
    /// [`Engine::prepare`]): only those are waited for when not served yet.
    defined: std::sync::RwLock<DefinedScopes>,
    prune_guard: Option<PruneGuard>,
    live_state: Option<Arc<dyn LiveState>>,
    /// Live objects a comparison has just read, each used once by the
    /// first apply of its object ([`Engine::with_known_live`]).
    known: std::sync::Mutex<HashMap<ObjectKey, Option<Value>>>,
    /// What this attempt's applies wrote (their health is judged from it).
    written: std::sync::Mutex<HashMap<ObjectKey, Value>>,
}

/// Says whether a tracked object may be pruned (`Err` says why not), given
/// its key and whether its kind is namespaced: the controller holds what it
/// deletes to the application's project, like what it applies.
pub type PruneGuard =
    Arc<dyn Fn(&ObjectKey, bool) -> std::result::Result<(), String> + Send + Sync>;

fn api_version_kind(object: &Value) -> (&str, &str) {
    let text = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    (text("apiVersion"), text("kind"))
}

fn api_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            format!("{} ({}, {})", status.message, status.reason, status.code)
        }
        other => other.to_string(),
    }
}

/// The tracking annotation of a live object, if any.
fn tracked_as(object: &Value) -> Option<&str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(TRACKING_ID)?
        .as_str()
}

fn tracking_id(app: &str, key: &ObjectKey) -> String {
    format!(
        "{app}:{}/{}:{}/{}",
        key.group,
        key.kind,
        key.namespace.as_deref().unwrap_or_default(),
        key.name
    )
}

impl<'a> Engine<'a> {
    /// An engine for `app` on `cluster`.
    pub fn new(cluster: &'a Cluster, app: Application, options: SyncOptions) -> Self {
        Self {
            cluster,
            app,
            options,
            interrupt: None,
            defined: std::sync::RwLock::new(DefinedScopes::default()),
            prune_guard: None,
            live_state: None,
            known: std::sync::Mutex::new(HashMap::new()),
            written: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The live objects (`None`: missing) a comparison has just read: the
    /// first server-side apply of each uses it instead of reading it
    /// again (a retry, or any other kind of write, reads afresh).
    pub fn with_known_live(mut self, known: HashMap<ObjectKey, Option<Value>>) -> Self {
        self.known = std::sync::Mutex::new(known);
        self
    }

    /// Compares against `state` (kept by watches) instead of reading every
    /// object and listing every kind, and skips predictions that still
    /// hold; what `state` does not know is read from the API server. A
    /// sync's prune candidates come from `state` too.
    pub fn with_live_state(mut self, state: Arc<dyn LiveState>) -> Self {
        self.live_state = Some(state);
        self
    }

    /// Prunes only what `guard` allows; the rest is reported as
    /// `PruneSkipped` with the guard's reason.
    pub fn with_prune_guard(mut self, guard: PruneGuard) -> Self {
        self.prune_guard = Some(guard);
        self
    }

    /// Stops a sync cleanly between waves once `flag` is raised: the wave
    /// being applied is finished (its objects applied), waiting for its
    /// health is cut short, no later wave starts and nothing is pruned or
    /// retried. The result says [`Outcome::Terminated`].
    pub fn with_interrupt(mut self, flag: Arc<AtomicBool>) -> Self {
        self.interrupt = Some(flag);
        self
    }

    fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// Resolves a kind as the cluster serves it now.
    async fn resolve(&self, object: &Value) -> Result<Resolved, ClusterError> {
        let (api_version, kind) = api_version_kind(object);
        self.cluster.resolve(api_version, kind).await
    }

    /// Resolves a kind about to be applied, waiting briefly when the set
    /// itself defines it through a CRD applied earlier in this sync (a real
    /// API server takes a moment to serve it).
    async fn resolve_waiting(&self, object: &Value) -> Result<Resolved, ClusterError> {
        let (api_version, kind) = api_version_kind(object);
        let defined_here = self
            .defined
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .namespaced(&ObjectKey::of(object))
            .is_some();
        let mut tries = 0;
        loop {
            match self.cluster.resolve(api_version, kind).await {
                Err(ClusterError::UnknownKind { .. })
                    if defined_here && tries < 10 && !self.options.dry_run =>
                {
                    tries += 1;
                    // Discovery runs at most once per MIN_REFRESH_INTERVAL:
                    // wait for the next round a few times.
                    tokio::time::sleep(Duration::from_millis(400)).await;
                }
                other => return other,
            }
        }
    }

    /// Sets the destination namespace on namespaced objects that have none,
    /// and Kiln's tracking annotation and label on every object.
    pub async fn prepare(&self, objects: Vec<Value>) -> Vec<Value> {
        let defined = DefinedScopes::of(&objects);
        *self
            .defined
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = defined.clone();
        let mut out = Vec::with_capacity(objects.len());
        for mut object in objects {
            let key = ObjectKey::of(&object);
            // Absent, `null` and `""` are alike to the API server (and to
            // the policies, which reviewed the object here:
            // `policy::placement`): the key has no namespace.
            if let (Some(ns), None) = (&self.app.namespace, &key.namespace) {
                let namespaced = match defined.namespaced(&key) {
                    Some(namespaced) => Some(namespaced),
                    // Unknown kinds are left alone here; applying them reports it.
                    None => self.resolve(&object).await.ok().map(|r| r.namespaced),
                };
                if namespaced == Some(true) {
                    object["metadata"]["namespace"] = ns.clone().into();
                }
            }
            let key = ObjectKey::of(&object);
            let metadata = &mut object["metadata"];
            if !metadata.get("annotations").is_some_and(Value::is_object) {
                metadata["annotations"] = json!({});
            }
            metadata["annotations"][TRACKING_ID] = tracking_id(&self.app.name, &key).into();
            if !metadata.get("labels").is_some_and(Value::is_object) {
                metadata["labels"] = json!({});
            }
            metadata["labels"][APP_LABEL] = self.app.name.clone().into();
            out.push(object);
        }
        out
    }

    fn patch_params(&self, dry_run: bool) -> PatchParams {
        let mut params = PatchParams::apply(&self.options.manager);
        params.force = self.options.force;
        params.dry_run = dry_run;
        params.field_validation = Some(if self.options.validate {
            ValidationDirective::Strict
        } else {
            ValidationDirective::Ignore
        });
        params
    }

    async fn live(
        &self,
        resolved: &Resolved,
        key: &ObjectKey,
    ) -> Result<Option<Value>, kube::Error> {
        let api = self.cluster.api(resolved, key.namespace.as_deref());
        Ok(api
            .get_opt(&key.name)
            .await?
            .map(|o| serde_json::to_value(o).unwrap_or_default()))
    }

    /// Those of `labelled` this application tracks: whose annotation names
    /// this app *and* this very object (a copied label or annotation is not
    /// enough).
    fn tracked_among(&self, labelled: Vec<(Resolved, Value)>) -> Vec<(Resolved, Value)> {
        labelled
            .into_iter()
            .filter(|(_, value)| self.tracks(value))
            .collect()
    }

    /// True when this application tracks `live`: its tracking annotation
    /// names this app *and* this very object.
    fn tracks(&self, live: &Value) -> bool {
        tracked_as(live) == Some(tracking_id(&self.app.name, &ObjectKey::of(live)).as_str())
    }

    /// The objects of `kind` labelled for this application, from the API
    /// server (none when the client may not list the kind: not ours to
    /// prune).
    async fn labelled_of(&self, kind: &Resolved) -> Result<Vec<(Resolved, Value)>> {
        let selector = ListParams::default().labels(&format!("{APP_LABEL}={}", self.app.name));
        let api = self.cluster.api(kind, None);
        let list = match api.list(&selector).await {
            Ok(list) => list,
            Err(kube::Error::Api(status)) if matches!(status.code, 403..=405) => {
                return Ok(Vec::new());
            }
            Err(source) => {
                return Err(SyncError::List {
                    kind: kind.resource.kind.clone(),
                    source,
                });
            }
        };
        Ok(list
            .items
            .into_iter()
            .map(|object| {
                (
                    kind.clone(),
                    serde_json::to_value(&object).unwrap_or_default(),
                )
            })
            .collect())
    }

    /// The live object a server-side apply starts from: the live state's
    /// when it has it, otherwise the API server's.
    async fn live_for_apply(
        &self,
        resolved: &Resolved,
        key: &ObjectKey,
    ) -> Result<Option<Value>, kube::Error> {
        if self.options.server_side_apply
            && !self.options.replace
            && let Some(state) = &self.live_state
            && let Some(cached) = state.get(resolved, key).await
        {
            return Ok(cached);
        }
        self.live(resolved, key).await
    }

    /// The objects this application tracks: from the live state when there
    /// is one (the kinds it has not listed yet from the API server),
    /// otherwise by listing every served kind.
    async fn tracked_now(&self) -> Result<Vec<(Resolved, Value)>> {
        let Some(state) = &self.live_state else {
            return self.tracked().await;
        };
        let Some(labelled) = state.labelled(&self.app.name).await else {
            return self.tracked().await;
        };
        let mut found = labelled.objects;
        for kind in &labelled.unknown {
            found.extend(self.labelled_of(kind).await?);
        }
        Ok(self.tracked_among(found))
    }

    /// The objects this application tracks in the cluster, by key.
    async fn tracked(&self) -> Result<Vec<(Resolved, Value)>> {
        let mut found = Vec::new();
        for resolved in self.cluster.all_kinds().await?.iter() {
            found.extend(self.labelled_of(resolved).await?);
        }
        Ok(self.tracked_among(found))
    }

    /// Compares the rendered objects with the cluster. Each object is
    /// predicted with a `dryRun=All` server-side apply where the server
    /// accepts one (otherwise compared structurally); tracked objects that
    /// are no longer rendered are reported as extraneous.
    pub async fn diff(&self, objects: Vec<Value>, options: &DiffOptions) -> Result<Report> {
        let objects = self.prepare(objects).await;
        let mut report = Report::default();
        let mut desired_keys = BTreeSet::new();
        for object in &objects {
            let key = ObjectKey::of(object);
            desired_keys.insert(key.clone());
            if plan::is_hook(object) {
                report.hooks.push(key);
                continue;
            }
            let resolved = match self.resolve(object).await {
                Ok(resolved) => resolved,
                Err(ClusterError::UnknownKind { .. }) => {
                    report
                        .objects
                        .push(diff::compare(Some(object), None, None, options).await?);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let cached = match &self.live_state {
                Some(state) => state.get(&resolved, &key).await,
                None => None,
            };
            let live = match cached {
                Some(live) => live,
                None => self.live(&resolved, &key).await.ok().flatten(),
            };
            // A prediction that still holds (same desired object, same live
            // version, in sync last time) is not asked for again.
            let fingerprint = live.as_ref().map(|live| {
                let version = live
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                live::fingerprint(object, version)
            });
            let holds = match (&self.live_state, fingerprint) {
                (Some(state), Some(fingerprint)) => state.still_in_sync(&key, fingerprint),
                _ => false,
            };
            let predicted = match &live {
                Some(live) if holds => Some(live.clone()),
                Some(_) => {
                    let api = self.cluster.api(&resolved, key.namespace.as_deref());
                    api.patch(&key.name, &self.patch_params(true), &Patch::Apply(object))
                        .await
                        .ok()
                        .map(|o| serde_json::to_value(o).unwrap_or_default())
                }
                None => None,
            };
            let compared =
                diff::compare(Some(object), live.as_ref(), predicted.as_ref(), options).await?;
            if let (Some(state), Some(fingerprint)) = (&self.live_state, fingerprint)
                && predicted.is_some()
            {
                state.compared(&key, fingerprint, compared.status == SyncStatus::Synced);
            }
            report.objects.push(compared);
        }
        if let Some(state) = &self.live_state {
            state.keep_only(&desired_keys);
        }
        for (_, live) in self.tracked_now().await? {
            if !desired_keys.contains(&ObjectKey::of(&live)) {
                report
                    .objects
                    .push(diff::compare(None, Some(&live), None, options).await?);
            }
        }
        Ok(report)
    }

    /// Syncs, retrying a failed attempt as the retry policy says.
    pub async fn sync(&self, objects: Vec<Value>) -> Result<SyncResult> {
        let objects = self.prepare(objects).await;
        let plan = Plan::new(objects)?;
        let mut attempt = 1;
        loop {
            let span = tracing::info_span!("sync", app = %self.app.name, attempt);
            let mut result = tracing::Instrument::instrument(self.attempt(&plan), span).await?;
            result.attempts = attempt;
            if result.outcome != Outcome::Failed || attempt > self.options.retry.limit {
                return Ok(result);
            }
            let wait = self.options.retry.backoff(attempt);
            tracing::warn!(app = %self.app.name, attempt, ?wait, message = %result.message, "sync failed; retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, plan: &Plan) -> Result<SyncResult> {
        if let Ok(mut written) = self.written.lock() {
            written.clear();
        }
        let mut results = never_run(plan);
        let mut failure: Option<String> = None;
        if self.options.create_namespace
            && let Some(ns) = &self.app.namespace
            && let Err(message) = self.create_namespace(ns).await
        {
            failure = Some(message);
        }
        let desired: BTreeSet<ObjectKey> = plan
            .waves
            .iter()
            .flat_map(|w| w.objects.iter().map(|o| o.key.clone()))
            .collect();
        let mut pruned = false;
        let mut terminated = None;
        for (index, wave) in plan.waves.iter().enumerate() {
            if failure.is_some() {
                break;
            }
            if self.interrupted() {
                terminated = Some(format!(
                    "interrupted before {} wave {}: {index} of {} waves applied; nothing pruned",
                    wave.phase,
                    wave.wave,
                    plan.waves.len()
                ));
                break;
            }
            // Prune once the Sync phase is done (or at the very end with PruneLast).
            if !pruned && !self.options.prune_last && wave.phase == Phase::PostSync {
                self.prune(&desired, &mut results).await?;
                pruned = true;
            }
            let span = tracing::info_span!("wave", phase = %wave.phase, wave = wave.wave);
            let applied = tracing::Instrument::instrument(
                self.apply_wave(wave, &mut results, &mut failure),
                span,
            )
            .await;
            let more = index + 1 < plan.waves.len();
            if failure.is_none()
                && more
                && !self.options.dry_run
                && let Err(message) = self.wait_healthy(&applied).await
            {
                failure = Some(format!("{} wave {}: {message}", wave.phase, wave.wave));
            }
        }
        if failure.is_none() && terminated.is_none() && !pruned {
            self.prune(&desired, &mut results).await?;
        }
        if failure.is_some() {
            for planned in &plan.on_failure {
                let (action, message) = match self.run_hook(planned).await {
                    Ok((action, message, _)) => (action, message),
                    Err(message) => (Action::Failed, message),
                };
                results.push(result_for(planned, action, message));
            }
        }
        let written = self
            .written
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        let health = self.health(plan, &written).await;
        let outcome = if failure.is_some() {
            Outcome::Failed
        } else if terminated.is_some() {
            Outcome::Terminated
        } else {
            Outcome::Succeeded
        };
        let message = match failure.or(terminated) {
            Some(message) => message,
            None => summary(&results, self.options.dry_run),
        };
        Ok(SyncResult {
            outcome,
            message,
            objects: results,
            health,
            attempts: 1,
            written: Written(written),
        })
    }

    /// Applies (or runs, for hooks) every object of one wave, recording
    /// each result and the first failure; returns what was applied, for
    /// the health wait before the next wave.
    async fn apply_wave(
        &self,
        wave: &plan::Wave,
        results: &mut Vec<ObjectResult>,
        failure: &mut Option<String>,
    ) -> Vec<(Resolved, ObjectKey)> {
        let mut applied = Vec::new();
        for planned in &wave.objects {
            let outcome = if planned.hook.is_some() {
                self.run_hook(planned).await
            } else {
                self.apply(planned).await
            };
            match outcome {
                Ok((action, message, resolved)) => {
                    if action == Action::HookFailed {
                        failure.get_or_insert_with(|| {
                            format!("hook {} failed: {message}", planned.key)
                        });
                    }
                    if let Some(resolved) = resolved {
                        applied.push((resolved, planned.key.clone()));
                    }
                    results.push(result_for(planned, action, message));
                }
                Err(message) => {
                    failure.get_or_insert_with(|| format!("{}: {message}", planned.key));
                    results.push(result_for(planned, Action::Failed, message));
                }
            }
        }
        applied
    }

    async fn create_namespace(&self, name: &str) -> Result<(), String> {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let resolved = self.resolve(&object).await.map_err(|e| e.to_string())?;
        let api = self.cluster.api(&resolved, None);
        if api
            .get_opt(name)
            .await
            .map_err(|e| api_error(&e))?
            .is_some()
        {
            return Ok(());
        }
        api.patch(
            name,
            &self.patch_params(self.options.dry_run),
            &Patch::Apply(&object),
        )
        .await
        .map_err(|e| format!("cannot create namespace {name}: {}", api_error(&e)))?;
        Ok(())
    }

    /// Applies one object; returns what happened.
    async fn apply(&self, planned: &Planned) -> Result<(Action, String, Option<Resolved>), String> {
        let key = &planned.key;
        let resolved = self
            .resolve_waiting(&planned.object)
            .await
            .map_err(|e| e.to_string())?;
        let api = self.cluster.api(&resolved, key.namespace.as_deref());
        let live = self.live_before(&resolved, key).await?;
        if let Some(live) = &live
            && let Some((action, message)) = self.preflight(&api, planned, live).await?
        {
            return Ok((action, message, Some(resolved)));
        }
        if self.options.dry_run && live.is_none() && !self.namespace_exists(key).await? {
            return Ok((
                Action::Created,
                "dry run: its namespace is created by this sync".into(),
                Some(resolved),
            ));
        }
        let written = if self.options.replace {
            self.replace(&api, planned, live.as_ref()).await
        } else if !self.options.server_side_apply {
            self.client_side_apply(&api, planned, live.as_ref()).await
        } else {
            self.server_side_apply(&api, planned, live.as_ref()).await
        }?;
        self.record_written(planned, &written);
        let action = self.action_of(planned, live.as_ref(), &written).await?;
        tracing::info!(object = %key, %action, "applied");
        let message = live
            .as_ref()
            .and_then(|live| self.taken_from(key, live))
            .unwrap_or_default();
        Ok((action, message, Some(resolved)))
    }

    /// When `live` was tracked by another application: the warning the
    /// object's result carries (it is this one's now, as in Argo CD, whose
    /// SharedResourceWarning this is; FailOnSharedResource=true refuses
    /// instead). Never silent.
    fn taken_from(&self, key: &ObjectKey, live: &Value) -> Option<String> {
        let other = tracked_as(live)?.split(':').next()?;
        // The application, not the whole id: the same application under
        // another API group of the kind is not someone else.
        if other == self.app.name {
            return None;
        }
        tracing::warn!(object = %key, other, "an object another application tracked is now this one's");
        Some(format!(
            "shared resource: it was tracked by application {other}; {} it now \
             (set FailOnSharedResource=true to refuse)",
            if self.options.dry_run {
                "this sync would take"
            } else {
                "this application tracks"
            }
        ))
    }

    /// The live object before an apply: what the comparison already read
    /// (server-side apply only), or the API server's.
    async fn live_before(
        &self,
        resolved: &Resolved,
        key: &ObjectKey,
    ) -> Result<Option<Value>, String> {
        let known = self
            .known
            .lock()
            .ok()
            .and_then(|mut known| known.remove(key))
            .filter(|_| self.options.server_side_apply && !self.options.replace);
        match known {
            Some(live) => Ok(live),
            None => self
                .live_for_apply(resolved, key)
                .await
                .map_err(|e| api_error(&e)),
        }
    }

    /// The checks before an object that exists is written: refused when
    /// another application tracks it (FailOnSharedResource), skipped when
    /// already in sync (ApplyOutOfSyncOnly).
    async fn preflight(
        &self,
        api: &Api<DynamicObject>,
        planned: &Planned,
        live: &Value,
    ) -> Result<Option<(Action, String)>, String> {
        let key = &planned.key;
        let owner = tracked_as(live);
        if self.options.fail_on_shared_resource
            && owner.is_some_and(|id| id != tracking_id(&self.app.name, key))
        {
            return Err(format!(
                "shared with another application ({})",
                owner.unwrap_or_default()
            ));
        }
        if !self.options.apply_out_of_sync_only {
            return Ok(None);
        }
        let predicted = api
            .patch(
                &key.name,
                &self.patch_params(true),
                &Patch::Apply(&planned.object),
            )
            .await
            .ok()
            .map(|o| serde_json::to_value(o).unwrap_or_default());
        let compared = diff::compare(
            Some(&planned.object),
            Some(live),
            predicted.as_ref(),
            &DiffOptions::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok((compared.status == SyncStatus::Synced)
            .then(|| (Action::Skipped, "already synced".into())))
    }

    /// Whether the namespace of an object that does not exist exists: the
    /// namespace this sync would create does not during a dry run, so the
    /// server cannot predict objects inside it.
    async fn namespace_exists(&self, key: &ObjectKey) -> Result<bool, String> {
        if !(self.options.create_namespace
            && key.namespace.is_some()
            && key.namespace == self.app.namespace)
        {
            return Ok(true);
        }
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace"});
        let resolved = self.resolve(&namespace).await.map_err(|e| e.to_string())?;
        Ok(self
            .cluster
            .api(&resolved, None)
            .get_opt(key.namespace.as_deref().unwrap_or_default())
            .await
            .map_err(|e| api_error(&e))?
            .is_some())
    }

    /// Replace=true: replaces the object at the live version, or creates it.
    async fn replace(
        &self,
        api: &Api<DynamicObject>,
        planned: &Planned,
        live: Option<&Value>,
    ) -> Result<DynamicObject, String> {
        let mut object: DynamicObject =
            serde_json::from_value(planned.object.clone()).map_err(|e| e.to_string())?;
        let params = PostParams {
            dry_run: self.options.dry_run,
            field_manager: Some(self.options.manager.clone()),
        };
        match live
            .and_then(|l| l.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str)
        {
            Some(rv) => {
                object.metadata.resource_version = Some(rv.to_owned());
                api.replace(&planned.key.name, &params, &object).await
            }
            None => api.create(&params, &object).await,
        }
        .map_err(|e| api_error(&e))
    }

    /// ServerSideApply=false: a merge patch of what exists, or a create.
    async fn client_side_apply(
        &self,
        api: &Api<DynamicObject>,
        planned: &Planned,
        live: Option<&Value>,
    ) -> Result<DynamicObject, String> {
        let dry_run = self.options.dry_run;
        let field_manager = Some(self.options.manager.clone());
        // Read as an object first, whether it exists or not: a manifest
        // that is not one fails the same way in both cases.
        let object: DynamicObject =
            serde_json::from_value(planned.object.clone()).map_err(|e| e.to_string())?;
        if live.is_some() {
            let params = PatchParams {
                dry_run,
                field_manager,
                ..PatchParams::default()
            };
            return api
                .patch(&planned.key.name, &params, &Patch::Merge(&planned.object))
                .await
                .map_err(|e| api_error(&e));
        }
        api.create(
            &PostParams {
                dry_run,
                field_manager,
            },
            &object,
        )
        .await
        .map_err(|e| api_error(&e))
    }

    /// Server-side apply. Fields taken by imperative edits (`kubectl edit`,
    /// `kubectl scale`: Update operations) are drift, and Git wins. Fields
    /// another *applier* owns are a real conflict between two
    /// declarations: reported, never forced.
    async fn server_side_apply(
        &self,
        api: &Api<DynamicObject>,
        planned: &Planned,
        live: Option<&Value>,
    ) -> Result<DynamicObject, String> {
        let key = &planned.key;
        let dry_run = self.options.dry_run;
        let apply = Patch::Apply(&planned.object);
        match api
            .patch(&key.name, &self.patch_params(dry_run), &apply)
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 409 && !self.options.force => {
                let managers = conflicting_managers(&status);
                let appliers = managers.iter().any(|m| applies(live, m));
                if managers.is_empty() || appliers {
                    return Err(format!(
                        "{} (another field manager owns these fields; set force to take them over)",
                        api_error(&kube::Error::Api(status))
                    ));
                }
                let mut params = self.patch_params(dry_run);
                params.force = true;
                tracing::info!(object = %key, ?managers, "reverting imperative edits");
                api.patch(&key.name, &params, &apply).await
            }
            other => other,
        }
        .map_err(|e| api_error(&e))
    }

    /// What was just applied is in sync at the version it produced (the
    /// next comparison need not predict it again), and what the sync wrote
    /// is kept for the health checks.
    fn record_written(&self, planned: &Planned, written: &DynamicObject) {
        if self.options.dry_run {
            return;
        }
        if let (Some(state), Some(version)) = (
            &self.live_state,
            written.metadata.resource_version.as_deref(),
        ) {
            state.compared(
                &planned.key,
                live::fingerprint(&planned.object, version),
                true,
            );
        }
        if let Ok(value) = serde_json::to_value(written)
            && let Ok(mut all) = self.written.lock()
        {
            all.insert(planned.key.clone(), value);
        }
    }

    /// What an apply did: created, left unchanged (same version) or
    /// configured; a dry run reports what would change.
    async fn action_of(
        &self,
        planned: &Planned,
        live: Option<&Value>,
        written: &DynamicObject,
    ) -> Result<Action, String> {
        let before = live
            .and_then(|l| l.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str);
        Ok(
            match (before, written.metadata.resource_version.as_deref()) {
                (None, _) => Action::Created,
                // A dry run writes nothing, so the resource version stays
                // as it was even when the apply would change the object:
                // what would change is read from the predicted object.
                _ if self.options.dry_run => {
                    let predicted = serde_json::to_value(written).unwrap_or_default();
                    let compared = diff::compare(
                        Some(&planned.object),
                        live,
                        Some(&predicted),
                        &DiffOptions::default(),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                    if compared.status == SyncStatus::Synced {
                        Action::Unchanged
                    } else {
                        Action::Configured
                    }
                }
                (Some(a), Some(b)) if a == b => Action::Unchanged,
                _ => Action::Configured,
            },
        )
    }

    /// Runs a hook: replaces an earlier run (BeforeHookCreation), creates it,
    /// waits for it to finish, deletes it as its policies say.
    async fn run_hook(
        &self,
        planned: &Planned,
    ) -> Result<(Action, String, Option<Resolved>), String> {
        let key = &planned.key;
        let policies = planned.hook.clone().unwrap_or_default();
        let resolved = self
            .resolve(&planned.object)
            .await
            .map_err(|e| e.to_string())?;
        let api = self.cluster.api(&resolved, key.namespace.as_deref());
        if self.options.dry_run {
            return Ok((Action::HookSucceeded, "dry run: not run".into(), None));
        }
        if let Some(live) = self.live(&resolved, key).await.map_err(|e| api_error(&e))? {
            // Only an earlier run of this application's hook is replaced
            // or counted: a chart must not delete, or pass off as its
            // own, another owner's object by naming a hook after it.
            if !self.tracks(&live) {
                return Err(format!(
                    "{key} exists and is not this application's hook: nothing was replaced"
                ));
            }
            if policies.contains(&DeletePolicy::BeforeHookCreation) {
                api.delete(&key.name, &DeleteParams::background())
                    .await
                    .map_err(|e| api_error(&e))?;
                self.wait_gone(&resolved, key).await?;
            } else {
                return Ok((Action::HookSucceeded, "already ran".into(), None));
            }
        }
        let object: DynamicObject =
            serde_json::from_value(planned.object.clone()).map_err(|e| e.to_string())?;
        let params = PostParams {
            dry_run: false,
            field_manager: Some(self.options.manager.clone()),
        };
        api.create(&params, &object)
            .await
            .map_err(|e| api_error(&e))?;
        let (succeeded, message) = self.wait_finished(&resolved, key).await;
        let doomed = (succeeded && policies.contains(&DeletePolicy::HookSucceeded))
            || (!succeeded && policies.contains(&DeletePolicy::HookFailed));
        if doomed && let Err(e) = api.delete(&key.name, &DeleteParams::background()).await {
            tracing::warn!(hook = %key, error = %api_error(&e), "could not delete the hook");
        }
        tracing::info!(hook = %key, succeeded, "hook finished");
        Ok((
            if succeeded {
                Action::HookSucceeded
            } else {
                Action::HookFailed
            },
            message,
            None,
        ))
    }

    async fn wait_gone(&self, resolved: &Resolved, key: &ObjectKey) -> Result<(), String> {
        let deadline = Instant::now() + self.options.health_timeout;
        while self
            .live(resolved, key)
            .await
            .map_err(|e| api_error(&e))?
            .is_some()
        {
            if Instant::now() >= deadline {
                return Err("the previous run of the hook was not deleted in time".into());
            }
            tokio::time::sleep(self.options.poll_interval).await;
        }
        Ok(())
    }

    /// Waits for a hook to succeed (healthy) or fail (degraded).
    async fn wait_finished(&self, resolved: &Resolved, key: &ObjectKey) -> (bool, String) {
        let deadline = Instant::now() + self.options.health_timeout;
        loop {
            match self.live(resolved, key).await {
                Ok(Some(live)) => {
                    let assessment = health::assess(&live);
                    match assessment.status {
                        Health::Healthy => return (true, assessment.message),
                        Health::Degraded => return (false, assessment.message),
                        _ => {}
                    }
                }
                Ok(None) => return (false, "the hook disappeared before it finished".into()),
                Err(e) => return (false, api_error(&e)),
            }
            if Instant::now() >= deadline {
                return (
                    false,
                    format!("did not finish within {:?}", self.options.health_timeout),
                );
            }
            tokio::time::sleep(self.options.poll_interval).await;
        }
    }

    /// Waits for every applied object of a wave to be healthy.
    async fn wait_healthy(&self, applied: &[(Resolved, ObjectKey)]) -> Result<(), String> {
        let deadline = Instant::now() + self.options.health_timeout;
        loop {
            let mut waiting = None;
            for (resolved, key) in applied {
                let live = self.live(resolved, key).await.map_err(|e| api_error(&e))?;
                let assessment = live.as_ref().map_or(
                    health::Assessment {
                        status: Health::Missing,
                        message: "missing".into(),
                    },
                    health::assess,
                );
                match assessment.status {
                    Health::Healthy | Health::Suspended => {}
                    Health::Degraded => {
                        return Err(format!("{key} is degraded: {}", assessment.message));
                    }
                    _ => {
                        waiting = Some(format!("{key}: {}", assessment.message));
                        break;
                    }
                }
            }
            let Some(waiting) = waiting else {
                return Ok(());
            };
            if self.interrupted() {
                // The next wave will not start; waiting longer helps nobody.
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "not healthy within {:?}: {waiting}",
                    self.options.health_timeout
                ));
            }
            tracing::debug!(%waiting, "waiting for the wave to be healthy");
            tokio::time::sleep(self.options.poll_interval).await;
        }
    }

    /// How pruned objects are deleted: as a dry run or not, with the
    /// configured propagation.
    fn prune_params(&self) -> DeleteParams {
        DeleteParams {
            dry_run: self.options.dry_run,
            propagation_policy: Some(match self.options.prune_propagation {
                PrunePropagation::Foreground => kube::api::PropagationPolicy::Foreground,
                PrunePropagation::Background => kube::api::PropagationPolicy::Background,
                PrunePropagation::Orphan => kube::api::PropagationPolicy::Orphan,
            }),
            ..DeleteParams::default()
        }
    }

    /// Deletes (or reports) tracked objects that are no longer rendered.
    async fn prune(
        &self,
        desired: &BTreeSet<ObjectKey>,
        results: &mut Vec<ObjectResult>,
    ) -> Result<()> {
        for (resolved, live) in self.tracked_now().await? {
            let key = ObjectKey::of(&live);
            if desired.contains(&key) {
                continue;
            }
            let protected = plan::object_options(&live)
                .iter()
                .any(|o| o == "Prune=false");
            let (action, message) = if !self.options.prune {
                (
                    Action::PruneSkipped,
                    "no longer rendered; pruning is off".to_owned(),
                )
            } else if protected {
                (
                    Action::PruneSkipped,
                    "no longer rendered; the object says Prune=false".to_owned(),
                )
            } else if plan::helm_keep(&live) {
                // Helm never deletes such an object when it leaves the
                // chart; Argo CD would prune it (its issue #17819).
                (
                    Action::PruneSkipped,
                    "no longer rendered; the object says helm.sh/resource-policy: keep".to_owned(),
                )
            } else if let Some(Err(why)) = self
                .prune_guard
                .as_ref()
                .map(|guard| guard(&key, resolved.namespaced))
            {
                (
                    Action::PruneSkipped,
                    format!("no longer rendered; not pruned: {why}"),
                )
            } else {
                let api = self.cluster.api(&resolved, key.namespace.as_deref());
                match api.delete(&key.name, &self.prune_params()).await {
                    Ok(_) => (Action::Pruned, String::new()),
                    // Gone since the live state saw it.
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        (Action::Pruned, "already gone".into())
                    }
                    Err(e) => (Action::Failed, format!("prune failed: {}", api_error(&e))),
                }
            };
            tracing::info!(object = %key, %action, "prune");
            results.push(ObjectResult {
                key,
                phase: None,
                wave: None,
                action,
                message,
            });
        }
        Ok(())
    }

    /// The worst health of the application's (non-hook) objects: of what
    /// this attempt wrote, or else of what the API server has.
    async fn health(&self, plan: &Plan, written: &HashMap<ObjectKey, Value>) -> Health {
        let mut healths = Vec::new();
        for planned in plan
            .waves
            .iter()
            .flat_map(|w| &w.objects)
            .filter(|p| p.hook.is_none())
        {
            if let Some(object) = written.get(&planned.key) {
                healths.push(health::assess(object).status);
                continue;
            }
            let status = match self.resolve(&planned.object).await {
                Ok(resolved) => match self.live(&resolved, &planned.key).await {
                    Ok(Some(live)) => health::assess(&live).status,
                    Ok(None) => Health::Missing,
                    Err(_) => Health::Unknown,
                },
                Err(_) => Health::Missing,
            };
            healths.push(status);
        }
        health::aggregate(healths)
    }
}

/// The managers named in a server-side apply conflict's causes.
fn conflicting_managers(status: &kube::core::Status) -> Vec<String> {
    let mut managers: Vec<String> = status
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .filter_map(|cause| cause.message.split('"').nth(1).map(str::to_owned))
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

/// True when `manager` owns fields of `live` through server-side apply.
fn applies(live: Option<&Value>, manager: &str) -> bool {
    live.and_then(|l| l.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .is_some_and(|entries| {
            entries.iter().any(|e| {
                e.get("manager").and_then(Value::as_str) == Some(manager)
                    && e.get("operation").and_then(Value::as_str) == Some("Apply")
            })
        })
}

/// The results of the objects a plan never runs (and why).
fn never_run(plan: &Plan) -> Vec<ObjectResult> {
    plan.never_run
        .iter()
        .map(|skipped| ObjectResult {
            key: skipped.key.clone(),
            phase: None,
            wave: None,
            action: Action::NeverRun,
            message: skipped.reason.clone(),
        })
        .collect()
}

/// One line for a sync that went through: what it created, configured,
/// left alone and pruned.
fn summary(results: &[ObjectResult], dry_run: bool) -> String {
    let count = |a| results.iter().filter(|r| r.action == a).count();
    format!(
        "{} created, {} configured, {} unchanged, {} pruned{}",
        count(Action::Created),
        count(Action::Configured),
        count(Action::Unchanged) + count(Action::Skipped),
        count(Action::Pruned),
        if dry_run { " (dry run)" } else { "" }
    )
}

fn result_for(planned: &Planned, action: Action, message: String) -> ObjectResult {
    ObjectResult {
        key: planned.key.clone(),
        phase: Some(planned.phase),
        wave: Some(planned.wave),
        action,
        message,
    }
}

/// The scopes of the kinds a set of objects defines itself, read from the
/// CustomResourceDefinitions among them.
#[derive(Debug, Default, Clone)]
pub struct DefinedScopes(std::collections::HashMap<(String, String), bool>);

impl DefinedScopes {
    /// The kinds `objects` define.
    pub fn of(objects: &[Value]) -> Self {
        DefinedScopes(
            objects
                .iter()
                .filter(|o| {
                    o.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
                })
                .filter_map(|crd| {
                    let text = |p: &str| crd.pointer(p).and_then(Value::as_str).map(str::to_owned);
                    Some((
                        (text("/spec/group")?, text("/spec/names/kind")?),
                        text("/spec/scope")? == "Namespaced",
                    ))
                })
                .collect(),
        )
    }

    /// Whether the kind of `key` is namespaced, if the set defines it.
    pub fn namespaced(&self, key: &ObjectKey) -> Option<bool> {
        self.0.get(&(key.group.clone(), key.kind.clone())).copied()
    }
}
