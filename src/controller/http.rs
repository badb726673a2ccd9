//! The controller's HTTP endpoints: `/healthz`, `/readyz`, Prometheus
//! `/metrics`, and `POST /api/webhook` for Git push notifications (GitHub,
//! GitLab, Gitea), which refreshes the Applications a push concerns at once
//! instead of at their next poll.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hmac::{Hmac, Mac};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use sha2::Sha256;

use super::context::Context;
use crate::api::appset::ApplicationSet;
use crate::api::{AppProject, Application, PolicySource, REFRESH_ANNOTATION};
use crate::source::git::{RepoUrl, Secret};

/// How webhook deliveries are authenticated.
#[derive(Clone, Debug, Default)]
pub enum WebhookAuth {
    /// No secret is configured: every delivery is refused (403), since
    /// anyone who reaches the endpoint could otherwise make the controller
    /// query Git servers at will. The default.
    #[default]
    Unconfigured,
    /// Deliveries must be signed with this secret (HMAC-SHA256 key for
    /// GitHub and Gitea) or carry it (token for GitLab).
    Secret(Secret),
    /// No secret, and unsigned deliveries are accepted
    /// (`--webhook-allow-unsigned`): for local trials only.
    AllowUnsigned,
}

impl WebhookAuth {
    /// A secret if one is given; otherwise refuse, or accept unsigned
    /// deliveries when `allow_unsigned` (a secret always wins).
    pub fn new(secret: Option<String>, allow_unsigned: bool) -> Self {
        match secret {
            Some(secret) => WebhookAuth::Secret(Secret::new(secret)),
            None if allow_unsigned => WebhookAuth::AllowUnsigned,
            None => WebhookAuth::Unconfigured,
        }
    }
}

/// Shared by the endpoints.
pub struct HttpState {
    /// The controller's context.
    pub ctx: Arc<Context>,
    /// How webhook deliveries are authenticated.
    pub webhook: WebhookAuth,
    /// Set once the controller is watching.
    pub ready: AtomicBool,
}

/// The router.
pub fn router(state: Arc<HttpState>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/webhook", post(webhook))
        .with_state(state)
}

async fn readyz(State(state): State<Arc<HttpState>>) -> Response {
    if state.ready.load(Ordering::Relaxed) {
        "ok".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting").into_response()
    }
}

async fn metrics(State(state): State<Arc<HttpState>>) -> Response {
    let metrics = &state.ctx.metrics;
    let stats = state.ctx.git.stats();
    metrics
        .git_lookups
        .set(i64::try_from(stats.ref_lookups).unwrap_or(i64::MAX));
    metrics
        .git_fetches
        .set(i64::try_from(stats.fetches).unwrap_or(i64::MAX));
    let (hits, misses) = state.ctx.renderer.cache_stats();
    metrics
        .cache_hits
        .set(i64::try_from(hits).unwrap_or(i64::MAX));
    metrics
        .cache_misses
        .set(i64::try_from(misses).unwrap_or(i64::MAX));
    let Some(text) = metrics.encode() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// True when the delivery carries a valid signature or token for `secret`.
fn authentic(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let hmac_ok = |hex_signature: &str| {
        let Ok(signature) = hex::decode(hex_signature) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(body);
        // Constant-time comparison.
        mac.verify_slice(&signature).is_ok()
    };
    if let Some(signature) = header("x-hub-signature-256") {
        return signature.strip_prefix("sha256=").is_some_and(hmac_ok);
    }
    if let Some(signature) = header("x-gitea-signature") {
        return hmac_ok(signature);
    }
    if let Some(token) = header("x-gitlab-token") {
        let (a, b) = (token.as_bytes(), secret.as_bytes());
        return a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    }
    false
}

/// The body of the refusal when no secret is configured.
const UNCONFIGURED: &str = "webhook deliveries are refused: no webhook secret is configured on the \
     controller (set KILN_WEBHOOK_SECRET; `kiln controller --webhook-allow-unsigned` accepts \
     unsigned deliveries, for local trials only)";

/// Whether a push that changed `files` concerns an application whose source
/// path is `path` and whose last render read `reads` (repository-relative
/// paths: files read or stat'ed, directories listed, paths found absent).
/// A file concerns it when it is at or under the path, or at or under
/// anything the render read (an overlay reading `../base` is concerned by
/// a push under `base/`). Not knowing what the last render read (no render
/// since the controller started) concerns it too.
fn concerns(path: &str, reads: Option<&BTreeSet<String>>, files: &[String]) -> bool {
    let Some(reads) = reads else { return true };
    files
        .iter()
        .any(|file| under(file, path) || reads.iter().any(|read| under(file, read)))
}

/// Whether `file` is `dir` or under it (everything is under the root).
fn under(file: &str, dir: &str) -> bool {
    dir.is_empty()
        || dir == "."
        || file == dir
        || file
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether a push that changed `files` (`None`: unknown, so any) concerns a
/// policy whose source is the directory `path` of the pushed repository: a
/// policy sees nothing else of it, so a push elsewhere (another team's
/// policies) refreshes nothing. Inside it, the review cache decides whether
/// the policy runs again (what it read).
fn concerns_policy(path: &str, files: Option<&[String]>) -> bool {
    let path = path.trim_start_matches("./").trim_matches('/');
    files.is_none_or(|files| files.iter().any(|file| under(file, path)))
}

/// The repository URLs and changed paths of a push payload.
fn push_of(payload: &Value) -> (Vec<String>, Option<Vec<String>>) {
    let mut urls = Vec::new();
    for pointer in [
        "/repository/clone_url",
        "/repository/html_url",
        "/repository/ssh_url",
        "/repository/git_url",
        "/project/git_http_url",
        "/project/git_ssh_url",
        "/project/web_url",
    ] {
        if let Some(url) = payload.pointer(pointer).and_then(Value::as_str) {
            urls.push(url.to_owned());
        }
    }
    let commits = payload.get("commits").and_then(Value::as_array);
    let files = commits.map(|commits| {
        commits
            .iter()
            .flat_map(|c| {
                ["added", "modified", "removed"].map(|k| {
                    c.get(k)
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
            })
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    });
    // A push that lists no files (tags, large pushes) concerns every path.
    (urls, files.filter(|f| !f.is_empty()))
}

/// Host and path, without scheme, user or `.git`: the same repository over
/// https and ssh compares equal.
fn repo_identity(url: &str) -> Option<String> {
    let parsed = RepoUrl::parse(url).ok()?;
    let key = parsed.key();
    let rest = key.split_once("://").map_or(key, |(_, rest)| rest);
    Some(
        rest.trim_end_matches('/')
            .trim_end_matches(".git")
            .to_lowercase(),
    )
}

async fn webhook(State(state): State<Arc<HttpState>>, headers: HeaderMap, body: Bytes) -> Response {
    let count = |result: &str| {
        state
            .ctx
            .metrics
            .webhooks
            .get_or_create(&vec![("result".into(), result.into())])
            .inc()
    };
    if let Err(refused) = authenticate(&state.webhook, &headers, &body) {
        count(refused.label());
        return refused.response();
    }
    let Ok(payload) = serde_json::from_slice::<Value>(&body) else {
        count("invalid");
        return (StatusCode::BAD_REQUEST, "the payload is not JSON").into_response();
    };
    let (urls, files) = push_of(&payload);
    let pushed: Vec<String> = urls.iter().filter_map(|u| repo_identity(u)).collect();
    if pushed.is_empty() {
        count("ignored");
        return (StatusCode::OK, axum::Json(json!({"refreshed": []}))).into_response();
    }
    let push = Push {
        repositories: pushed,
        files,
    };
    match refresh(&state.ctx, &push).await {
        Ok(refreshed) => {
            tracing::info!(?refreshed, "webhook");
            count("ok");
            (StatusCode::OK, axum::Json(json!({"refreshed": refreshed}))).into_response()
        }
        Err(message) => {
            count("error");
            (StatusCode::SERVICE_UNAVAILABLE, message).into_response()
        }
    }
}

/// Why a delivery was refused.
#[derive(Clone, Copy, Debug)]
enum Refused {
    /// No webhook secret is configured.
    Unconfigured,
    /// The signature is missing or wrong.
    Unauthorized,
}

impl Refused {
    /// The metric's result label.
    fn label(self) -> &'static str {
        match self {
            Self::Unconfigured => "unconfigured",
            Self::Unauthorized => "unauthorized",
        }
    }

    fn response(self) -> Response {
        match self {
            Self::Unconfigured => (StatusCode::FORBIDDEN, UNCONFIGURED).into_response(),
            Self::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "invalid or missing webhook signature",
            )
                .into_response(),
        }
    }
}

/// Whether a delivery may be acted on.
fn authenticate(auth: &WebhookAuth, headers: &HeaderMap, body: &[u8]) -> Result<(), Refused> {
    match auth {
        WebhookAuth::Unconfigured => {
            tracing::warn!(
                "webhook delivery refused: no webhook secret is configured (set KILN_WEBHOOK_SECRET)"
            );
            Err(Refused::Unconfigured)
        }
        WebhookAuth::Secret(secret) if !authentic(secret.expose(), headers, body) => {
            tracing::warn!("webhook delivery refused: invalid or missing signature");
            Err(Refused::Unauthorized)
        }
        WebhookAuth::Secret(_) | WebhookAuth::AllowUnsigned => Ok(()),
    }
}

/// A push: the identities of the repository pushed to, and the files it
/// changed (`None`: unknown, so any).
struct Push {
    repositories: Vec<String>,
    files: Option<Vec<String>>,
}

impl Push {
    fn to(&self, url: &str) -> bool {
        repo_identity(url).is_some_and(|id| self.repositories.contains(&id))
    }

    /// The repositories `set`'s generators name that this push went to.
    fn repositories_of(&self, set: &ApplicationSet) -> Vec<RepoUrl> {
        let mut urls = Vec::new();
        let mut pending: Vec<Value> = set.spec.generators.clone();
        while let Some(value) = pending.pop() {
            match value {
                Value::Object(mut map) => {
                    if let Some(url) = map.get("repoURL").and_then(|u| u.as_str())
                        && self.to(url)
                        && let Ok(url) = RepoUrl::parse(url)
                    {
                        urls.push(url);
                    }
                    pending.extend(map.values_mut().map(std::mem::take));
                }
                Value::Array(items) => pending.extend(items),
                _ => {}
            }
        }
        urls
    }
}

/// Marks every Application a push concerns for refresh; returns their
/// names, or why the Applications or projects could not be read.
async fn refresh(ctx: &Context, push: &Push) -> Result<Vec<String>, String> {
    let apps: Api<Application> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let list = apps
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("cannot list Applications: {e}"))?;
    let project_policies = project_policies(ctx)
        .await
        .map_err(|e| format!("cannot list AppProjects: {e}"))?;
    let mut refreshed = Vec::new();
    for app in list.items {
        let name = app.metadata.name.clone().unwrap_or_default();
        let reads = ctx.read_paths.get(&name);
        let stale = stale_sources(&app, push, reads.as_deref(), &project_policies);
        if stale.is_empty() {
            continue;
        }
        for url in stale.iter().filter_map(|u| RepoUrl::parse(u).ok()) {
            // The next poll must ask the server, not a cached advertisement.
            ctx.forget_refs(&url).await;
        }
        let patch = json!({"metadata": {"annotations": {REFRESH_ANNOTATION: crate::units::now()}}});
        if apps
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            refreshed.push(name);
        }
    }
    refreshed.extend(refresh_sets(ctx, push).await?);
    Ok(refreshed)
}

/// Marks every ApplicationSet a push concerns for a new generation (its
/// git generators read the pushed repository, where the push changed
/// something they read); returns them as `applicationset/NAME`.
async fn refresh_sets(ctx: &Context, push: &Push) -> Result<Vec<String>, String> {
    let sets: Api<ApplicationSet> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let list = sets
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("cannot list ApplicationSets: {e}"))?;
    let mut refreshed = Vec::new();
    for set in list.items {
        if !crate::appset::concerned_by_push(&set, &|url| push.to(url), push.files.as_deref()) {
            continue;
        }
        for url in push.repositories_of(&set) {
            ctx.forget_refs(&url).await;
        }
        let name = set.metadata.name.clone().unwrap_or_default();
        let patch = json!({"metadata": {"annotations": {REFRESH_ANNOTATION: crate::units::now()}}});
        if sets
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            refreshed.push(format!("applicationset/{name}"));
        }
    }
    Ok(refreshed)
}

/// The projects' policy sources, by project: a push to the security team's
/// repository refreshes the applications its policies review.
async fn project_policies(
    ctx: &Context,
) -> Result<HashMap<String, Vec<PolicySource>>, kube::Error> {
    let projects: Api<AppProject> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    Ok(projects
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| {
            let sources = p.spec.policies.into_iter().filter_map(|u| u.source);
            (p.metadata.name.unwrap_or_default(), sources.collect())
        })
        .collect())
}

/// The repositories of `app` (its source, its own and its project's policy
/// sources) that `push` makes stale.
fn stale_sources(
    app: &Application,
    push: &Push,
    reads: Option<&BTreeSet<String>>,
    project_policies: &HashMap<String, Vec<PolicySource>>,
) -> Vec<String> {
    let source = &app.spec.source;
    let mut stale = Vec::new();
    if push.to(&source.repo_url) {
        let path = source.path.trim_start_matches("./").trim_matches('/');
        if push
            .files
            .as_ref()
            .is_none_or(|files| concerns(path, reads, files))
        {
            stale.push(source.repo_url.clone());
        }
    }
    let policy_sources = project_policies
        .get(&app.spec.project)
        .into_iter()
        .flatten()
        .chain(app.spec.policies.iter().filter_map(|u| u.source.as_ref()));
    for policy in policy_sources {
        if push.to(&policy.repo_url) && concerns_policy(&policy.path, push.files.as_deref()) {
            stale.push(policy.repo_url.clone());
        }
    }
    stale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        let body = b"{\"x\":1}";
        let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(body);
        let good = hex::encode(mac.finalize().into_bytes());
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-hub-signature-256",
            format!("sha256={good}").parse().unwrap(),
        );
        assert!(authentic("s3cret", &headers, body));
        assert!(!authentic("other", &headers, body));
        assert!(!authentic("s3cret", &HeaderMap::new(), body));
        let mut gitlab = HeaderMap::new();
        gitlab.insert("x-gitlab-token", "s3cret".parse().unwrap());
        assert!(authentic("s3cret", &gitlab, body));
    }

    #[test]
    fn payloads_and_identities() {
        let github = json!({"repository": {"clone_url": "https://github.com/org/apps.git", "ssh_url": "git@github.com:org/apps.git"},
            "commits": [{"added": ["guestbook/a.yaml"], "modified": [], "removed": ["README.md"]}]});
        let (urls, files) = push_of(&github);
        assert_eq!(urls.len(), 2);
        assert_eq!(files.unwrap(), vec!["guestbook/a.yaml", "README.md"]);
        assert_eq!(
            repo_identity("https://github.com/org/apps.git"),
            repo_identity("ssh://git@github.com/org/apps")
        );
    }

    #[test]
    fn a_push_concerns_what_the_last_render_read() {
        use crate::source::{LocalDir, RecordingView, SourcePath, SourceView};
        // An overlay at apps/prod reading ../../base, as kustomize does.
        let repo = tempfile::tempdir().unwrap();
        for (file, text) in [
            ("apps/prod/kustomization.yaml", "resources: [../../base]\n"),
            ("base/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("base/cm.yaml", "kind: ConfigMap\n"),
            ("README.md", "docs\n"),
        ] {
            let path = repo.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let view = RecordingView::new(Arc::new(LocalDir::open(repo.path()).unwrap()));
        for file in [
            "apps/prod/kustomization.yaml",
            "base/kustomization.yaml",
            "base/cm.yaml",
        ] {
            view.read_file(&SourcePath::parse(file).unwrap()).unwrap();
        }
        let absent = SourcePath::parse("base/kustomization.yml").unwrap();
        assert_eq!(view.stat(&absent).unwrap(), None);
        let reads = crate::controller::read_paths::ReadPaths::default();
        reads.record("prod", &view.read_set());
        let reads = reads.get("prod");
        let concerned = |files: &[&str]| {
            let files: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
            concerns("apps/prod", reads.as_deref(), &files)
        };
        assert!(concerned(&["base/cm.yaml"]));
        assert!(concerned(&["apps/prod/patch.yaml"]));
        // A file whose absence the render relied on, created.
        assert!(concerned(&["base/kustomization.yml"]));
        assert!(!concerned(&[
            "README.md",
            "apps/staging/kustomization.yaml"
        ]));
        assert!(!concerned(&["base-other/cm.yaml"]));
        // Nothing known yet (no render since the start): concerned.
        assert!(concerns("apps/prod", None, &["README.md".to_owned()]));
    }

    #[test]
    fn a_push_concerns_a_policy_only_inside_its_source_path() {
        let files = |list: &[&str]| list.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>();
        let vap = files(&["security/vap/policy.yaml"]);
        let other = files(&["other-team/policy.yaml", "README.md"]);
        assert!(concerns_policy("security/vap", Some(&vap)));
        assert!(concerns_policy("./security/vap/", Some(&vap)));
        assert!(!concerns_policy("security/vap", Some(&other)));
        assert!(!concerns_policy("security/va", Some(&vap)));
        // The whole repository, or an unknown set of files: concerned.
        assert!(concerns_policy(".", Some(&other)));
        assert!(concerns_policy("security/vap", None));
    }
}
