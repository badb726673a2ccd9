//! The component glue: the host's source view as a chart [`Source`],
//! parameters as [`Options`], documents as manifests.

use kiln_plugin_sdk::{AppContext, Manifest, Param, Params, RenderError, Renderer, source};

use crate::chart::Source;
use crate::render::{self, Options};

struct HostSource;

impl Source for HostSource {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        source::read(path).map_err(|e| source::describe(&e))
    }

    fn list(&self, path: &str) -> Option<Vec<(String, bool)>> {
        let mut out: Vec<(String, bool)> = source::read_dir(path)
            .ok()?
            .into_iter()
            .map(|e| (e.name, matches!(e.kind, source::EntryKind::Directory)))
            .collect();
        out.sort();
        Some(out)
    }
}

const KNOWN: &[&str] = &[
    "releaseName",
    "namespace",
    "valueFiles",
    "set",
    "setString",
    "kubeVersion",
    "apiVersions",
    "skipCrds",
    "now",
    "randomSeed",
    "cryptoWork",
];

/// The largest `cryptoWork` accepted: about 17 minutes of work, more than
/// the longest plugin deadline a host allows.
const MAX_CRYPTO_WORK: u64 = 1_000_000;

fn options(params: &Params<'_>) -> Result<Options, RenderError> {
    if let Some(unknown) = params.unknown_key(KNOWN) {
        return Err(RenderError::InvalidParameters(format!(
            "unknown parameter {unknown:?} (known: {})",
            KNOWN.join(", ")
        )));
    }
    let defaults = Options::default();
    Ok(Options {
        release_name: params
            .get("releaseName")
            .map_or(defaults.release_name, str::to_owned),
        namespace: params
            .get("namespace")
            .map_or(defaults.namespace, str::to_owned),
        value_files: params
            .get_all("valueFiles")
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect(),
        set: params.get_all("set").map(str::to_owned).collect(),
        set_string: params.get_all("setString").map(str::to_owned).collect(),
        kube_version: params.get("kubeVersion").map(str::to_owned),
        api_versions: params.get_all("apiVersions").map(str::to_owned).collect(),
        skip_crds: match params.get("skipCrds") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(RenderError::InvalidParameters(format!(
                    "skipCrds: {other:?} is not true or false"
                )));
            }
        },
        limits: crate::exec::Limits {
            max_crypto_work: match params.get("cryptoWork") {
                None => defaults.limits.max_crypto_work,
                Some(text) => text
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= MAX_CRYPTO_WORK)
                    .ok_or_else(|| {
                        RenderError::InvalidParameters(format!(
                            "cryptoWork: {text:?} is not a number of work units \
                             from 0 to {MAX_CRYPTO_WORK}"
                        ))
                    })?,
            },
            ..defaults.limits
        },
        archive: defaults.archive,
        now: match params.get("now") {
            None => defaults.now,
            Some(text) => chrono::DateTime::parse_from_rfc3339(text)
                .map_err(|e| {
                    RenderError::InvalidParameters(format!(
                        "now: {text:?} is not an RFC 3339 time: {e}"
                    ))
                })?
                .to_utc(),
        },
        random_seed: params.get("randomSeed").map(str::to_owned),
        // The host instantiates the plugin for every call and discards
        // its memory after it: nothing built for the render is freed.
        free_memory: false,
    })
}

struct Helm;

impl Renderer for Helm {
    fn render(
        ctx: AppContext,
        params: Vec<Param>,
        _input: Vec<Manifest>,
    ) -> Result<Vec<Manifest>, RenderError> {
        let opts = options(&Params(&params))?;
        let docs = render::render(&HostSource, &ctx.path, &opts).map_err(|e| {
            let (file, line) = e.location();
            match file {
                Some(file) => RenderError::input(file, line, e.to_string()),
                None => RenderError::Failed(e.to_string()),
            }
        })?;
        let mut out = Vec::new();
        for d in docs {
            // Helm prints each document followed by a newline; a block scalar
            // at its end keeps that newline (`|` clips to one).
            let json = match d.json {
                Some(json) => json,
                None => crate::head::output_json(&format!("{}\n", d.text))
                    .map_err(|e| RenderError::input(d.source.clone(), None, e))?,
            };
            if json == "null" {
                continue;
            }
            out.push(Manifest::new(
                crate::convert::json_for_yaml_readers(json),
                Some(d.source),
            ));
        }
        Ok(out)
    }
}

kiln_plugin_sdk::export_renderer!(Helm);
