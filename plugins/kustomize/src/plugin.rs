//! The component glue: the host's source view as [`Files`], parameters as
//! [`Overrides`], objects as manifests.

use kiln_plugin_sdk::{AppContext, Manifest, Param, Params, RenderError, Renderer, source};

use crate::Failure;
use crate::build::{self, Overrides};
use crate::fs::{Files, Kind};
use crate::kustomization::{Image, Replicas};
use crate::restrict::LoadRestrictor;

struct HostFiles;

impl Files for HostFiles {
    fn read(&self, path: &str) -> Result<String, String> {
        source::read_to_string(path).map_err(|e| source::describe(&e))
    }

    fn read_bytes(&self, path: &str) -> Result<Vec<u8>, String> {
        source::read(path).map_err(|e| source::describe(&e))
    }

    fn kind(&self, path: &str) -> Option<Kind> {
        let meta = source::stat(path).ok()??;
        Some(match meta.kind {
            source::EntryKind::Directory => Kind::Directory,
            _ => Kind::File,
        })
    }
}

const KNOWN: &[&str] = &[
    "image",
    "namePrefix",
    "nameSuffix",
    "namespace",
    "commonLabel",
    "commonAnnotation",
    "replicas",
    "strictPatchTargets",
    "loadRestrictor",
];

fn pair<'a>(key: &str, value: &'a str) -> Result<(&'a str, &'a str), RenderError> {
    value.split_once('=').ok_or_else(|| {
        RenderError::InvalidParameters(format!("{key}: {value:?} is not NAME=VALUE"))
    })
}

/// `[NAME=]NEWNAME[:TAG][@DIGEST]`, as `kustomize edit set image` takes it.
fn image(value: &str) -> Image {
    let (name, new) = match value.split_once('=') {
        Some((name, new)) => (Some(name), new),
        None => (None, value),
    };
    let (rest, digest) = match new.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest.to_owned())),
        None => (new, None),
    };
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (new_name, tag) = match rest[slash..].rfind(':') {
        Some(colon) => (
            &rest[..slash + colon],
            Some(rest[slash + colon + 1..].to_owned()),
        ),
        None => (rest, None),
    };
    let name = name.unwrap_or(new_name);
    Image {
        name: name.to_owned(),
        new_name: (new_name != name).then(|| new_name.to_owned()),
        new_tag: tag,
        digest,
        tag_suffix: None,
    }
}

fn overrides(params: &Params<'_>) -> Result<Overrides, RenderError> {
    if let Some(unknown) = params.unknown_key(KNOWN) {
        return Err(RenderError::InvalidParameters(format!(
            "unknown parameter {unknown:?} (known: {})",
            KNOWN.join(", ")
        )));
    }
    let mut out = Overrides {
        name_prefix: params.get("namePrefix").map(str::to_owned),
        name_suffix: params.get("nameSuffix").map(str::to_owned),
        namespace: params.get("namespace").map(str::to_owned),
        images: params.get_all("image").map(image).collect(),
        strict_patch_targets: match params.get("strictPatchTargets") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(RenderError::InvalidParameters(format!(
                    "strictPatchTargets: {other:?} is not true or false"
                )));
            }
        },
        load_restrictor: match params.get("loadRestrictor") {
            None => LoadRestrictor::default(),
            Some(value) => LoadRestrictor::parse(value).ok_or_else(|| {
                RenderError::InvalidParameters(format!(
                    "loadRestrictor: {value:?} is not LoadRestrictionsRootOnly or LoadRestrictionsNone"
                ))
            })?,
        },
        ..Overrides::default()
    };
    for value in params.get_all("commonLabel") {
        let (k, v) = pair("commonLabel", value)?;
        out.common_labels.insert(k.to_owned(), v.to_owned());
    }
    for value in params.get_all("commonAnnotation") {
        let (k, v) = pair("commonAnnotation", value)?;
        out.common_annotations.insert(k.to_owned(), v.to_owned());
    }
    for value in params.get_all("replicas") {
        let (name, count) = pair("replicas", value)?;
        let count = count.parse().map_err(|_| {
            RenderError::InvalidParameters(format!("replicas: {count:?} is not a number"))
        })?;
        out.replicas.push(Replicas {
            name: name.to_owned(),
            count,
        });
    }
    Ok(out)
}

fn failure(f: Failure) -> RenderError {
    RenderError::input(f.file, f.line, f.message)
}

struct Kustomize;

impl Renderer for Kustomize {
    fn render(
        ctx: AppContext,
        params: Vec<Param>,
        _input: Vec<Manifest>,
    ) -> Result<Vec<Manifest>, RenderError> {
        let overrides = overrides(&Params(&params))?;
        let objects = build::build(&HostFiles, &ctx.path, &overrides).map_err(failure)?;
        // JSON, one manifest per object: the host parses it several times
        // faster than YAML, and re-serializes objects anyway. (The text
        // `kustomize build` prints is `crate::yaml::stream`, checked byte for
        // byte against kustomize natively.)
        Ok(objects
            .iter()
            .map(|o| Manifest::new(serde_json::to_string(o).unwrap_or_default(), None))
            .collect())
    }
}

kiln_plugin_sdk::export_renderer!(Kustomize);
