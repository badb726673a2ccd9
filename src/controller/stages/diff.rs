//! The diff: the rendered objects against the live state the watches
//! keep, with the Application's sync options and ignored differences.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::super::context::Context;
use super::admit::Admitted;
use crate::api::Application;
use crate::condition::{Reason, Stop};
use crate::diff::{DiffOptions, IgnoreRules, Report};
use crate::sync::{Application as SyncApp, Engine, RetryPolicy, SyncOptions};

/// What the diff found, and what a sync needs of it.
pub struct Diffed {
    /// The application as the sync engine knows it.
    pub sync_app: SyncApp,
    /// Sync options from the spec.
    pub options: SyncOptions,
    /// The diff against the live state.
    pub diff: Report,
    /// The live state it read (`None`: read from the API server, no
    /// watch; [`ControllerConfig::watch`](crate::controller::ControllerConfig::watch)).
    pub live_state: Option<Arc<dyn crate::sync::LiveState>>,
}

/// Diffs `objects` against the live state of `app`'s destination.
pub async fn diff(
    app: &Application,
    ctx: &Context,
    admitted: &Admitted,
    objects: &[Value],
) -> Result<Diffed, Stop> {
    let name = &admitted.name;
    let sync_app = SyncApp {
        name: name.clone(),
        namespace: Some(admitted.destination_namespace.clone()).filter(|ns| !ns.is_empty()),
    };
    let options = sync_options(app, ctx)?;
    let rules: Vec<crate::diff::IgnoreDifferences> =
        app.spec.ignore_differences.iter().map(Into::into).collect();
    let diff_options = DiffOptions {
        ignore: IgnoreRules::new(rules, &ctx.jq)
            .await
            .map_err(|e| Stop::new(Reason::InvalidIgnoreDifferences, crate::text::chain(&e)))?,
        manager: ctx.config.manager.clone(),
        ..DiffOptions::default()
    };
    // Live state comes from the watches: of every kind rendered, and of
    // every kind the application had objects of (what it may prune).
    let live_state = if ctx.config.watch {
        watch_kinds(app, name, ctx, &admitted.target, objects).await;
        Some(ctx.live.state(
            &admitted.target.server,
            name,
            app.metadata.generation.unwrap_or_default(),
        ))
    } else {
        None
    };
    let mut engine = Engine::new(&admitted.target.cluster, sync_app.clone(), options.clone());
    if let Some(state) = &live_state {
        engine = engine.with_live_state(state.clone());
    }
    let diff = engine
        .diff(objects.to_vec(), &diff_options)
        .await
        .map_err(|e| Stop::new(Reason::DiffFailed, crate::text::chain(&e)))?;
    Ok(Diffed {
        sync_app,
        options,
        diff,
        live_state,
    })
}

/// The sync options an Application's spec asks for.
fn sync_options(app: &Application, ctx: &Context) -> Result<SyncOptions, Stop> {
    let config = &ctx.config;
    let mut options = SyncOptions {
        health_timeout: config.health_timeout,
        manager: config.manager.clone(),
        ..SyncOptions::default()
    };
    let policy = app.spec.sync_policy.clone().unwrap_or_default();
    for option in &policy.sync_options {
        options
            .set(option)
            .map_err(|e| Stop::new(Reason::InvalidSyncOption, e.to_string()))?;
    }
    options.prune = policy.automated.as_ref().is_some_and(|a| a.prune);
    if let Some(retry) = &policy.retry {
        let backoff = retry.backoff.clone().unwrap_or_default();
        let parse = |text: Option<&String>, default: Duration| -> Result<Duration, Stop> {
            match text {
                None => Ok(default),
                Some(t) => crate::units::parse_duration(t).map_err(|_| {
                    Stop::new(
                        Reason::InvalidRetry,
                        format!("retry backoff duration {t:?} is not a duration such as 5s"),
                    )
                }),
            }
        };
        options.retry = RetryPolicy {
            limit: retry.limit.unwrap_or(5),
            duration: parse(backoff.duration.as_ref(), Duration::from_secs(5))?,
            factor: backoff.factor.unwrap_or(2),
            max_duration: parse(backoff.max_duration.as_ref(), Duration::from_secs(180))?,
        };
    }
    Ok(options)
}

/// Records that application `name` needs the kinds of `objects`, and
/// those of the objects its status lists, watched on `target` (and no
/// other kinds).
async fn watch_kinds(
    app: &Application,
    name: &str,
    ctx: &Context,
    target: &crate::controller::destination::Target,
    objects: &[Value],
) {
    let mut kinds: std::collections::BTreeSet<(String, String)> = objects
        .iter()
        .map(|object| {
            let text = |field: &str| {
                object
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            (text("apiVersion"), text("kind"))
        })
        .collect();
    let listed = app
        .status
        .as_ref()
        .map(|s| s.resources.as_slice())
        .unwrap_or_default();
    for resource in listed {
        if let Ok(resolved) = target
            .cluster
            .resolve_group_kind(&resource.group, &resource.kind)
            .await
        {
            kinds.insert((resolved.resource.api_version.clone(), resource.kind.clone()));
        }
    }
    let mut needed = Vec::new();
    for (api_version, kind) in kinds {
        if let Ok(resolved) = target.cluster.resolve(&api_version, &kind).await {
            needed.push(resolved);
        }
    }
    ctx.live
        .need(name, &target.server, &target.cluster, &needed);
}
