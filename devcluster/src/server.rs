//! The HTTP face of the store: Kubernetes REST paths, discovery, content
//! types, watch streams and `Status` errors.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::builtin;
use super::resources::ResourceType;
use super::reviews;
use super::selector::{FieldSelector, LabelSelector};
use super::status::{ApiError, Result};
use super::store::{
    DeleteOptions, FieldValidation, Filter, PatchKind, PatchRequest, Propagation, Store, Warnings,
    WriteOptions, translate,
};

/// The largest request body accepted, as the real API server (3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Tunables of the HTTP layer.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// How long a watch lasts when the client gives no `timeoutSeconds`.
    pub watch_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            watch_timeout: Duration::from_secs(1800),
        }
    }
}

/// What every request handler shares.
pub struct App {
    /// The objects.
    pub store: Arc<Store>,
    /// Tunables.
    pub config: HttpConfig,
    /// Ends watches when the server stops.
    pub shutdown: CancellationToken,
    /// `host:port` clients reach the server at (for `/api`).
    pub address: String,
}

/// Builds the router.
pub fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(app)
}

async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => return error(&ApiError::too_large()),
    };
    let span = tracing::debug_span!("request", method = %parts.method, path = %parts.uri.path());
    let _entered = span.enter();
    let query = parse_query(parts.uri.query());
    match route(
        &app,
        &parts.method,
        parts.uri.path(),
        &parts.headers,
        &query,
        body,
    ) {
        Ok(Reply::Json(code, value)) => json_response(code, &value),
        Ok(Reply::Written(code, value, warnings)) => {
            let mut response = json_response(code, &value);
            for warning in warnings {
                // RFC 7234 warn-code 299, agent "-", the text quoted.
                let text = format!("299 - {}", Value::String(warning));
                if let Ok(value) = HeaderValue::from_str(&text) {
                    response.headers_mut().append(header::WARNING, value);
                }
            }
            response
        }
        Ok(Reply::Text(text)) => (StatusCode::OK, text).into_response(),
        Ok(Reply::Aggregated(value)) => {
            let mut response = json_response(StatusCode::OK, &value);
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(AGGREGATED));
            response
        }
        Ok(Reply::Watch(watch)) => watch.into_response(&app),
        Err(e) => {
            tracing::debug!(code = e.code, reason = e.reason, message = %e.message, "request failed");
            error(&e)
        }
    }
}

enum Reply {
    Json(StatusCode, Value),
    /// A write's result, with the warnings it collected.
    Written(StatusCode, Value, Vec<String>),
    /// Aggregated discovery, with its own content type.
    Aggregated(Value),
    Text(&'static str),
    Watch(Box<WatchRequest>),
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    let mut response = (code, value.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error(e: &ApiError) -> Response {
    json_response(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
}

fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn route(
    app: &App,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: Bytes,
) -> Result<Reply> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get = method == Method::GET;
    match segments.as_slice() {
        ["version"] if get => Ok(Reply::Json(StatusCode::OK, version())),
        ["healthz" | "readyz" | "livez"] if get => Ok(Reply::Text("ok")),
        ["api"] if get && wants_aggregated(headers) => {
            Ok(Reply::Aggregated(aggregated(&app.store, true)))
        }
        ["apis"] if get && wants_aggregated(headers) => {
            Ok(Reply::Aggregated(aggregated(&app.store, false)))
        }
        ["api"] if get => Ok(Reply::Json(
            StatusCode::OK,
            json!({"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": app.address}]}),
        )),
        ["apis"] if get => Ok(Reply::Json(StatusCode::OK, group_list(&app.store))),
        ["api", "v1"] if get => Ok(Reply::Json(
            StatusCode::OK,
            resource_list(&app.store, "", "v1")?,
        )),
        ["apis", group] if get => group_list(&app.store)["groups"]
            .as_array()
            .and_then(|groups| groups.iter().find(|g| g["name"] == *group))
            .map(|g| {
                let mut g = g.clone();
                g["kind"] = "APIGroup".into();
                g["apiVersion"] = "v1".into();
                Reply::Json(StatusCode::OK, g)
            })
            .ok_or_else(|| ApiError::no_route(path)),
        ["apis", group, version] if get => Ok(Reply::Json(
            StatusCode::OK,
            resource_list(&app.store, group, version)?,
        )),
        ["openapi", "v3"] if get => Ok(Reply::Json(StatusCode::OK, openapi_index(&app.store))),
        ["openapi", "v3", "api", "v1"] if get => Ok(Reply::Json(
            StatusCode::OK,
            openapi_group(&app.store, "", "v1", path)?,
        )),
        ["openapi", "v3", "apis", group, version] if get => Ok(Reply::Json(
            StatusCode::OK,
            openapi_group(&app.store, group, version, path)?,
        )),
        ["api", "v1", rest @ ..] => {
            resource(app, method, "", "v1", rest, path, headers, query, body)
        }
        ["apis", group, version, rest @ ..] => resource(
            app, method, group, version, rest, path, headers, query, body,
        ),
        _ if get => Err(ApiError::no_route(path)),
        _ => Err(ApiError::method_not_allowed(method.as_str())),
    }
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0+kiln-dev-cluster",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": concat!("kiln ", env!("CARGO_PKG_VERSION")),
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

/// Kubernetes version priority: GA before beta before alpha, higher first.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (prefix, rank) in [("beta", 2), ("alpha", 1)] {
        if let Some(minor) = tail.strip_prefix(prefix).and_then(|m| m.parse().ok()) {
            return (rank, major, minor);
        }
    }
    (0, 0, 0)
}

fn group_list(store: &Store) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for rt in store.types() {
        if rt.group.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(name, _)| *name == rt.group) {
            Some((_, versions)) if !versions.contains(&rt.version) => {
                versions.push(rt.version.clone())
            }
            Some(_) => {}
            None => groups.push((rt.group.clone(), vec![rt.version.clone()])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, mut versions)| {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
            let entries: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            json!({"name": name, "versions": entries, "preferredVersion": entries[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/openapi/v3`: one document per group version.
fn openapi_index(store: &Store) -> Value {
    let mut paths = serde_json::Map::new();
    for rt in store.types() {
        let key = if rt.group.is_empty() {
            "api/v1".to_owned()
        } else {
            format!("apis/{}/{}", rt.group, rt.version)
        };
        let url = format!("/openapi/v3/{key}?hash={}", store.resource_version());
        paths.insert(key, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// A group version's OpenAPI v3 document: enough for clients to see that
/// PATCH takes `fieldValidation` (so `kubectl apply` validates on the server),
/// and the schemas of its kinds (the published ones of built-in kinds, the
/// CRD's of custom resources), so that `kubectl explain` works.
fn openapi_group(store: &Store, group: &str, version: &str, path: &str) -> Result<Value> {
    let types: Vec<Arc<ResourceType>> = store
        .types()
        .into_iter()
        .filter(|rt| rt.group == group && rt.version == version)
        .collect();
    if types.is_empty() {
        return Err(ApiError::no_route(path));
    }
    let prefix = if group.is_empty() {
        "/api/v1".to_owned()
    } else {
        format!("/apis/{group}/{version}")
    };
    let parameters = json!(["dryRun", "fieldManager", "fieldValidation", "force"]
        .iter()
        .map(|name| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect::<Vec<_>>());
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for rt in types {
        let gvk = json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
        let item = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", rt.plural)
        } else {
            format!("{prefix}/{}/{{name}}", rt.plural)
        };
        let operation = |id: &str| {
            json!({"operationId": format!("{id}{}", rt.kind), "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters, "responses": {"200": {"description": "OK"}}})
        };
        paths.insert(item, json!({"get": operation("read"), "put": operation("replace"), "patch": operation("patch")}));
        if let Some(schema) = &rt.openapi {
            let mut schema = (**schema).clone();
            schema["x-kubernetes-group-version-kind"] = json!([gvk]);
            let id = format!(
                "{}.{}.{}",
                rt.group.split('.').rev().collect::<Vec<_>>().join("."),
                rt.version,
                rt.kind
            );
            schemas.insert(id, schema);
        }
    }
    // The built-in kinds' published schemas, and all they refer to.
    if let Ok(catalog) = builtin::catalog() {
        for (name, schema) in catalog.components(group, version) {
            schemas.entry(name).or_insert(schema);
        }
    }
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": builtin::KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// True when the client asks for aggregated discovery (`apidiscovery.k8s.io/v2`).
fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| {
            accept.contains("g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
        })
}

/// The aggregated discovery document of the core group (`core`) or of all
/// other groups: every version and resource in one response.
fn aggregated(store: &Store, core: bool) -> Value {
    // group → [(version, [resource])]
    type Versions = Vec<(String, Vec<Value>)>;
    let mut groups: Vec<(String, Versions)> = Vec::new();
    for rt in store
        .types()
        .into_iter()
        .filter(|rt| rt.group.is_empty() == core)
    {
        let kind = json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
        let mut subresources = Vec::new();
        if rt.status {
            subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
        }
        if scale_paths(&rt).is_some() {
            subresources.push(json!({"subresource": "scale",
                "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
        }
        let resource = json!({
            "resource": rt.plural, "responseKind": kind, "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": rt.singular, "verbs": rt.verbs, "shortNames": rt.short_names, "categories": rt.categories,
            "subresources": subresources,
        });
        let index = match groups.iter().position(|(name, _)| *name == rt.group) {
            Some(index) => index,
            None => {
                groups.push((rt.group.clone(), Vec::new()));
                groups.len() - 1
            }
        };
        let versions = &mut groups[index].1;
        match versions.iter_mut().find(|(v, _)| *v == rt.version) {
            Some((_, resources)) => resources.push(resource),
            None => versions.push((rt.version.clone(), vec![resource])),
        }
    }
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(name, mut versions)| {
            versions.sort_by_key(|(v, _)| std::cmp::Reverse(version_priority(v)));
            let versions: Vec<Value> = versions
                .into_iter()
                .map(|(version, resources)| json!({"version": version, "resources": resources, "freshness": "Current"}))
                .collect();
            json!({"metadata": {"name": name}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

fn resource_list(store: &Store, group: &str, version: &str) -> Result<Value> {
    let types: Vec<Arc<ResourceType>> = store
        .types()
        .into_iter()
        .filter(|rt| rt.group == group && rt.version == version)
        .collect();
    if types.is_empty() {
        return Err(ApiError::no_route(&format!("/apis/{group}/{version}")));
    }
    let mut resources = Vec::new();
    for rt in types {
        resources.push(json!({
            "name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced, "kind": rt.kind,
            "verbs": rt.verbs, "shortNames": rt.short_names, "categories": rt.categories,
        }));
        if rt.status {
            resources.push(json!({
                "name": format!("{}/status", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "kind": rt.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        if scale_paths(&rt).is_some() {
            resources.push(json!({
                "name": format!("{}/scale", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Ok(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

/// Where a resource path points.
struct Location<'a> {
    rt: Arc<ResourceType>,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    status: bool,
    scale: bool,
}

fn locate<'a>(
    store: &Store,
    group: &str,
    version: &str,
    rest: &[&'a str],
    path: &str,
) -> Result<Location<'a>> {
    let not_found = || ApiError::no_route(path);
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, ..]
            if !matches!(*plural, "status" | "finalize")
                && store
                    .resolve(group, version, plural)
                    .is_some_and(|rt| rt.namespaced) =>
        {
            (Some(*ns), &rest[2..])
        }
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return Err(not_found()),
    };
    let rt = store
        .resolve(group, version, plural)
        .ok_or_else(not_found)?;
    let (status, scale) = match sub {
        None => (false, false),
        Some("status") if rt.status => (true, false),
        Some("scale") if scale_paths(&rt).is_some() => (false, true),
        Some(_) => return Err(not_found()),
    };
    if rt.namespaced && name.is_some() && namespace.is_none() {
        return Err(not_found());
    }
    if !rt.namespaced && namespace.is_some() {
        return Err(not_found());
    }
    Ok(Location {
        rt,
        namespace,
        name,
        status,
        scale,
    })
}

/// Where the `scale` subresource reads and writes replicas: `(spec replicas,
/// status replicas)` as JSON pointers.
fn scale_paths(rt: &ResourceType) -> Option<(String, String)> {
    let scale = rt.scale.as_ref()?;
    let pointer = |path: &str| path.trim_start_matches('.').replace('.', "/");
    Some((
        format!("/{}", pointer(scale.get("specReplicasPath")?.as_str()?)),
        format!(
            "/{}",
            pointer(
                scale
                    .get("statusReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".status.replicas")
            )
        ),
    ))
}

/// The `autoscaling/v1` `Scale` view of an object.
fn to_scale(rt: &ResourceType, object: &Value) -> Value {
    let (spec, status) = scale_paths(rt).unwrap_or_default();
    let mut metadata = object["metadata"].clone();
    if let Some(fields) = metadata.as_object_mut() {
        fields.retain(|k, _| {
            matches!(
                k.as_str(),
                "name" | "namespace" | "uid" | "resourceVersion" | "creationTimestamp"
            )
        });
    }
    let selector = object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata,
        "spec": {"replicas": object.pointer(&spec).cloned().unwrap_or(json!(0))},
        "status": {"replicas": object.pointer(&status).cloned().unwrap_or(json!(0)), "selector": selector},
    })
}

/// Reads or writes the `scale` subresource.
fn scale(
    app: &App,
    method: &Method,
    at: &Location<'_>,
    name: &str,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: &[u8],
) -> Result<Reply> {
    let store = &app.store;
    let object = store.get(&at.rt, at.namespace, name)?;
    let current = to_scale(&at.rt, &object);
    let wanted = match *method {
        Method::GET => return Ok(Reply::Json(StatusCode::OK, current)),
        Method::PUT => decode_object(body, &content_type(headers))?,
        Method::PATCH => {
            let patch = decode_object(body, "application/json")?;
            match content_type(headers).as_str() {
                "application/json-patch+json" => super::merge::json_patch(&current, &patch)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?,
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    super::merge::json_merge(&current, &patch)
                }
                other => return Err(ApiError::unsupported_media_type(other)),
            }
        }
        _ => return Err(ApiError::method_not_allowed(method.as_str())),
    };
    let replicas = wanted
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
        .ok_or_else(|| ApiError::bad_request("spec.replicas must be a non-negative integer"))?;
    let (spec, _) = scale_paths(&at.rt).unwrap_or_default();
    let mut updated = object.clone();
    if let Some(slot) = updated.pointer_mut(&spec) {
        *slot = json!(replicas);
    } else if spec == "/spec/replicas" {
        updated["spec"]["replicas"] = json!(replicas);
    }
    if let Some(rv) = wanted
        .pointer("/metadata/resourceVersion")
        .filter(|rv| rv.as_str().is_some_and(|s| !s.is_empty()))
    {
        updated["metadata"]["resourceVersion"] = rv.clone();
    }
    let options = write_options(query, headers, false)?;
    let written = store.replace(&at.rt, at.namespace, name, updated, &options, false)?;
    Ok(Reply::Json(StatusCode::OK, to_scale(&at.rt, &written)))
}

fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    query.get(name).is_some_and(|v| v == "true" || v == "1")
}

fn write_options(
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    apply: bool,
) -> Result<WriteOptions> {
    let dry_run = match query.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dry run value: {other:?}: supported values: \"All\""
            )));
        }
    };
    let manager = match query.get("fieldManager").filter(|m| !m.is_empty()) {
        Some(manager) if manager.len() > 128 => {
            return Err(ApiError::bad_request(
                "fieldManager must be at most 128 characters",
            ));
        }
        Some(manager) => manager.clone(),
        None if apply => {
            return Err(ApiError::invalid(
                "PatchOptions",
                super::status::Target {
                    group: "meta.k8s.io",
                    resource: "",
                    name: "",
                },
                vec![(
                    "fieldManager".into(),
                    "Required value: is required for apply patch".into(),
                )],
            ));
        }
        // As the API server: the user agent up to its first '/'.
        None => headers
            .get(header::USER_AGENT)
            .and_then(|ua| ua.to_str().ok())
            .and_then(|ua| ua.split('/').next())
            .filter(|ua| !ua.is_empty())
            .unwrap_or("unknown")
            .chars()
            .take(128)
            .collect(),
    };
    let field_validation = match query.get("fieldValidation").map(String::as_str) {
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        None | Some("" | "Warn") => FieldValidation::Warn,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            )));
        }
    };
    Ok(WriteOptions {
        dry_run,
        manager,
        force: flag(query, "force"),
        field_validation,
        warnings: Warnings::default(),
    })
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

fn decode_object(body: &[u8], kind: &str) -> Result<Value> {
    let value: Value = match kind {
        "application/json" | "" => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))?,
        "application/vnd.kubernetes.protobuf" => {
            super::protobuf::decode(body).map_err(|message| {
                if message.contains("send JSON") {
                    ApiError::unsupported(message)
                } else {
                    ApiError::bad_request(format!("error decoding protobuf body: {message}"))
                }
            })?
        }
        "application/yaml" | "application/apply-patch+yaml" => {
            let text = std::str::from_utf8(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML body: {e}")))?;
            kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML body: {e}")))?;
            serde_yaml::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML body: {e}")))?
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    Ok(value)
}

fn filter(query: &HashMap<String, String>, namespace: Option<&str>) -> Result<Filter> {
    Ok(Filter {
        namespace: namespace.map(str::to_owned),
        labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
            .map_err(ApiError::bad_request)?,
        fields: FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))
            .map_err(ApiError::bad_request)?,
    })
}

fn delete_options(query: &HashMap<String, String>, body: &[u8]) -> Result<DeleteOptions> {
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let text = |name: &str| {
        query
            .get(name)
            .cloned()
            .or_else(|| body.get(name).and_then(Value::as_str).map(str::to_owned))
    };
    let propagation = match text("propagationPolicy").as_deref() {
        None | Some("") => match body
            .get("orphanDependents")
            .and_then(Value::as_bool)
            .or_else(|| query.get("orphanDependents").map(|v| v == "true"))
        {
            Some(true) => Some(Propagation::Orphan),
            _ => None,
        },
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    let dry_run = match query.get("dryRun").cloned().or_else(|| {
        body["dryRun"]
            .get(0)
            .and_then(Value::as_str)
            .map(str::to_owned)
    }) {
        None => false,
        Some(v) if v == "All" => true,
        Some(v) if v.is_empty() => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dry run value: {other:?}"
            )));
        }
    };
    Ok(DeleteOptions {
        dry_run,
        propagation,
        uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The discovery verb a request needs: `None` for a method the API has no
/// verb for.
fn verb(method: &Method, named: bool, watch: bool) -> Option<&'static str> {
    Some(match (method.clone(), named) {
        (Method::GET, _) if watch => "watch",
        (Method::GET, false) => "list",
        (Method::GET, true) => "get",
        (Method::POST, false) => "create",
        (Method::PUT, true) => "update",
        (Method::PATCH, true) => "patch",
        (Method::DELETE, true) => "delete",
        (Method::DELETE, false) => "deletecollection",
        _ => return None,
    })
}

#[allow(clippy::too_many_arguments)]
fn resource(
    app: &App,
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&str],
    path: &str,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: Bytes,
) -> Result<Reply> {
    let store = &app.store;
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let at = locate(store, group, version, rest, path)?;
    let rt = &at.rt;
    let ok = |value| Ok(Reply::Json(StatusCode::OK, value));
    if let (true, Some(name)) = (at.scale, at.name) {
        return scale(app, method, &at, name, headers, query, &body);
    }
    if !at.status {
        let verb = verb(
            method,
            at.name.is_some(),
            legacy_watch || flag(query, "watch"),
        );
        if !verb.is_some_and(|verb| rt.verbs.iter().any(|v| v == verb)) {
            return Err(ApiError::method_not_allowed(method.as_str()));
        }
    }
    if *method == Method::POST && at.name.is_none() && !rt.is_custom() && rt.create_only() {
        let object = decode_object(&body, &content_type(headers))?;
        let options = write_options(query, headers, false)?;
        let answer = reviews::answer(store, rt, at.namespace, object, &options)?;
        return Ok(Reply::Json(StatusCode::CREATED, answer));
    }
    match (method.clone(), at.name) {
        (Method::GET, None) | (Method::GET, Some(_)) if legacy_watch || flag(query, "watch") => {
            let mut filter = filter(query, at.namespace)?;
            if let Some(name) = at.name {
                filter.fields = FieldSelector::parse(&format!("metadata.name={name}"))
                    .map_err(ApiError::bad_request)?;
            }
            let send_initial = flag(query, "sendInitialEvents");
            let rv = match query.get("resourceVersion").map(String::as_str) {
                None | Some("" | "0") => None,
                Some(_) if send_initial => None,
                Some(text) => Some(text.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version {text:?}"))
                })?),
            };
            let timeout = query
                .get("timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .map_or(app.config.watch_timeout, Duration::from_secs);
            Ok(Reply::Watch(Box::new(WatchRequest {
                rt: rt.clone(),
                filter,
                rv,
                send_initial,
                bookmarks: flag(query, "allowWatchBookmarks"),
                timeout,
            })))
        }
        (Method::GET, None) => {
            let filter = filter(query, at.namespace)?;
            let limit = query
                .get("limit")
                .and_then(|l| l.parse().ok())
                .filter(|l| *l > 0);
            let list = store.list(
                rt,
                &filter,
                limit,
                query
                    .get("continue")
                    .map(String::as_str)
                    .filter(|c| !c.is_empty()),
            )?;
            ok(table_if_asked(headers, rt, list, true))
        }
        (Method::GET, Some(name)) => ok(table_if_asked(
            headers,
            rt,
            store.get(rt, at.namespace, name)?,
            false,
        )),
        (Method::POST, None) => {
            let object = decode_object(&body, &content_type(headers))?;
            let options = write_options(query, headers, false)?;
            let created = store.create(rt, at.namespace, object, &options)?;
            Ok(Reply::Written(
                StatusCode::CREATED,
                created,
                options.warnings.take(),
            ))
        }
        (Method::PUT, Some(name)) => {
            let object = decode_object(&body, &content_type(headers))?;
            let options = write_options(query, headers, false)?;
            let replaced = store.replace(rt, at.namespace, name, object, &options, at.status)?;
            Ok(Reply::Written(
                StatusCode::OK,
                replaced,
                options.warnings.take(),
            ))
        }
        (Method::PATCH, Some(name)) => {
            let kind = match content_type(headers).as_str() {
                "application/json-patch+json" => PatchKind::Json,
                "application/merge-patch+json" => PatchKind::Merge,
                "application/strategic-merge-patch+json" => PatchKind::Strategic,
                "application/apply-patch+yaml" => PatchKind::Apply,
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            let patch = if kind == PatchKind::Apply {
                decode_object(&body, "application/apply-patch+yaml")?
            } else {
                decode_object(&body, "application/json")?
            };
            let options = write_options(query, headers, kind == PatchKind::Apply)?;
            let (object, created) = store.patch(
                rt,
                at.namespace,
                name,
                PatchRequest { kind, body: patch },
                &options,
                at.status,
            )?;
            Ok(Reply::Written(
                if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                },
                object,
                options.warnings.take(),
            ))
        }
        (Method::DELETE, Some(name)) if !at.status => {
            ok(store.delete(rt, at.namespace, name, &delete_options(query, &body)?)?)
        }
        (Method::DELETE, None) => {
            let filter = filter(query, at.namespace)?;
            ok(store.delete_collection(rt, &filter, &delete_options(query, &body)?)?)
        }
        (method, _) => Err(ApiError::method_not_allowed(method.as_str())),
    }
}

/// `kubectl get` asks for a server-side table; give it the columns every
/// kind has (Name, Created At) and the object in each row.
fn table_if_asked(headers: &HeaderMap, rt: &ResourceType, value: Value, list: bool) -> Value {
    let wants_table = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("as=Table"));
    if !wants_table {
        return value;
    }
    let items: Vec<Value> = if list {
        value["items"].as_array().cloned().unwrap_or_default()
    } else {
        vec![value.clone()]
    };
    // A CRD's printer columns (priority 0 only, as kubectl shows by
    // default), or Name and Age.
    let columns: Vec<&Value> = rt
        .printer_columns
        .iter()
        .filter(|c| c.get("priority").and_then(Value::as_i64).unwrap_or(0) == 0)
        .collect();
    let cell = |item: &Value, column: &Value| -> Value {
        let path = column
            .get("jsonPath")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let pointer = path.trim_start_matches('.').replace('.', "/");
        let value = item
            .pointer(&format!("/{pointer}"))
            .cloned()
            .unwrap_or(Value::Null);
        match (column.get("type").and_then(Value::as_str), value.as_str()) {
            (Some("date"), Some(time)) => Value::String(age(time)),
            _ => value,
        }
    };
    let rows: Vec<Value> = items
        .into_iter()
        .map(|item| {
            let name = item.pointer("/metadata/name").cloned().unwrap_or_default();
            let mut cells = vec![name];
            if columns.is_empty() {
                let created = item
                    .pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .map(age)
                    .unwrap_or_default();
                cells.push(created.into());
            } else {
                cells.extend(columns.iter().map(|c| cell(&item, c)));
            }
            let mut object = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": item["metadata"].clone()});
            if let Some(fields) = object["metadata"].as_object_mut() {
                fields.remove("managedFields");
            }
            json!({"cells": cells, "object": object})
        })
        .collect();
    let mut definitions = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    if columns.is_empty() {
        definitions.push(json!({"name": "Age", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}));
    } else {
        definitions.extend(columns.iter().map(|c| {
            json!({
                "name": c.get("name").cloned().unwrap_or_default(),
                "type": c.get("type").cloned().unwrap_or_else(|| "string".into()),
                "format": c.get("format").cloned().unwrap_or_else(|| "".into()),
                "description": c.get("description").cloned().unwrap_or_else(|| "".into()),
                "priority": 0,
            })
        }));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": value.pointer("/metadata/resourceVersion").cloned().unwrap_or_default()},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// How long ago an RFC 3339 time was, the way `kubectl get` shows ages.
fn age(timestamp: &str) -> String {
    let Ok(then) = timestamp.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let seconds = (jiff::Timestamp::now().as_second() - then.as_second()).max(0);
    let (m, h, d) = (seconds / 60, seconds / 3600, seconds / 86400);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{m}m{}s", s % 60),
        s if s < 3 * 3600 => format!("{m}m"),
        s if s < 8 * 3600 => format!("{h}h{}m", m % 60),
        s if s < 48 * 3600 => format!("{h}h"),
        _ => format!("{d}d"),
    }
}

struct WatchRequest {
    rt: Arc<ResourceType>,
    filter: Filter,
    rv: Option<u64>,
    send_initial: bool,
    bookmarks: bool,
    timeout: Duration,
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

impl WatchRequest {
    fn into_response(self, app: &App) -> Response {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
        let store = app.store.clone();
        let shutdown = app.shutdown.clone();
        let bookmark_every = app.config.bookmark_interval;
        tokio::spawn(async move {
            let start = match store.watch(&self.rt, &self.filter, self.rv) {
                Ok(start) => start,
                Err(e) => {
                    let _ = tx.send(line("ERROR", e.to_status())).await;
                    return;
                }
            };
            for (kind, object) in start.initial {
                if tx.send(line(kind.as_str(), object)).await.is_err() {
                    return;
                }
            }
            let bookmark = |rv: u64, extra: Option<(&str, &str)>| {
                let mut metadata = json!({"resourceVersion": rv.to_string()});
                if let Some((key, value)) = extra {
                    metadata["annotations"] = json!({key: value});
                }
                line(
                    "BOOKMARK",
                    json!({"kind": self.rt.kind, "apiVersion": self.rt.api_version(), "metadata": metadata}),
                )
            };
            let mut seen = start.from;
            if self.send_initial
                && tx
                    .send(bookmark(seen, Some(("k8s.io/initial-events-end", "true"))))
                    .await
                    .is_err()
            {
                return;
            }
            let mut feed = start.feed;
            let deadline = tokio::time::sleep(self.timeout);
            tokio::pin!(deadline);
            let mut ticker = tokio::time::interval(bookmark_every);
            ticker.tick().await;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = &mut deadline => return,
                    () = tx.closed() => return,
                    _ = ticker.tick(), if self.bookmarks => {
                        if tx.send(bookmark(seen, None)).await.is_err() {
                            return;
                        }
                    }
                    event = feed.recv() => match event {
                        Ok(event) if event.rv <= seen => {}
                        Ok(event) => {
                            seen = event.rv;
                            if let Some((kind, object)) = translate(&event, &self.rt, &self.filter)
                                && tx.send(line(kind.as_str(), object)).await.is_err() {
                                    return;
                                }
                        }
                        Err(RecvError::Lagged(_)) => {
                            let gone = ApiError::gone("the watch fell behind; start a new watch from a fresh list");
                            let _ = tx.send(line("ERROR", gone.to_status())).await;
                            return;
                        }
                        Err(RecvError::Closed) => return,
                    },
                }
            }
        });
        let stream = ReceiverStream::new(rx).map(Ok::<_, Infallible>);
        let mut response = Response::new(Body::from_stream(stream));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}
