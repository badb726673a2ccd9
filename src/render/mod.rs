//! Rendering: turning an Application's source into Kubernetes objects.
//!
//! A render runs a chain of [`Step`]s over one source view. Each plugin step
//! gets the previous step's objects as input (so a renderer can also be a
//! transformer or post-renderer); an empty chain means the built-in
//! [`directory`] renderer (plain YAML/JSON). Every read of the source, by any
//! step, is recorded: the [`Rendered`] result carries the exact
//! [`ReadSet`] the render cache keys on.

pub mod directory;
pub mod engine;
pub mod remote;

use std::sync::Arc;

use tracing::Instrument as _;

use crate::manifest::{ManifestError, Object};
use crate::plugin::{AppContext, Params, Plugin, PluginError};
use crate::source::{PathError, ReadSet, RecordingView, SourceError, SourcePath, SourceView};

pub use directory::DirectoryOptions;

/// One step of a render chain.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Step {
    /// The built-in plain-manifest renderer (no WASM).
    Directory(DirectoryOptions),
    /// A renderer plugin with its parameters.
    Plugin {
        /// The loaded renderer.
        plugin: Plugin,
        /// Its parameters, in order.
        params: Params,
    },
}

/// The result of a render.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The objects, in the order the last step produced them.
    pub objects: Vec<Object>,
    /// Everything the render read from the source.
    pub read_set: ReadSet,
    /// How long each plugin of the chain took, in order (for metrics).
    pub timings: Vec<(String, std::time::Duration)>,
}

/// A render failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// A plugin failed (the error names it).
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The built-in directory renderer could not read the source.
    #[error("directory renderer")]
    Source(#[from] SourceError),
    /// A plain manifest is invalid (the error names file and line).
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The Application's path cannot be inside the source tree.
    #[error("invalid application path")]
    Path(#[from] PathError),
    /// The render task itself failed on the host.
    #[error("render task failed: {0}")]
    Task(String),
    /// The directory holds what a plugin renders (a kustomization, a Helm
    /// chart), not plain manifests: the built-in renderer says which
    /// plugin to add instead of failing on the file as a manifest.
    #[error(
        "{file} is a {what}, not a plain manifest: render it with the {plugin} plugin \
         (a `{plugin}` step in the Application's plugin chain; with `kiln render`, \
         --plugin {plugin})"
    )]
    NeedsPlugin {
        /// The file that tells.
        file: String,
        /// What it is.
        what: &'static str,
        /// The plugin that renders it.
        plugin: &'static str,
    },
}

/// Renders `context.path` of `source` through `chain`.
pub async fn render(
    source: Arc<dyn SourceView>,
    context: &AppContext,
    chain: &[Step],
) -> Result<Rendered, RenderError> {
    let app_path = SourcePath::parse(&context.path)?;
    let recorder = Arc::new(RecordingView::new(source));
    let view: Arc<dyn SourceView> = recorder.clone();
    let default_chain = [Step::Directory(DirectoryOptions::default())];
    let chain = if chain.is_empty() {
        &default_chain[..]
    } else {
        chain
    };

    let mut objects = Vec::new();
    let mut timings = Vec::new();
    for step in chain {
        objects = match step {
            Step::Directory(options) => {
                let (view, path, options) = (view.clone(), app_path.clone(), options.clone());
                let span = tracing::Span::current();
                let interrupt = crate::interrupt::Interrupt::current();
                tokio::task::spawn_blocking(move || {
                    span.in_scope(|| directory::render_until(&*view, &path, &options, interrupt))
                })
                .await
                .map_err(|e| RenderError::Task(e.to_string()))??
            }
            Step::Plugin { plugin, params } => {
                let span = tracing::info_span!("render_step", plugin = plugin.name());
                let started = std::time::Instant::now();
                let rendered = plugin
                    .render(view.clone(), context.clone(), params.clone(), objects)
                    .instrument(span)
                    .await?;
                timings.push((plugin.name().to_owned(), started.elapsed()));
                rendered
            }
        };
    }
    Ok(Rendered {
        objects,
        read_set: recorder.read_set(),
        timings,
    })
}
