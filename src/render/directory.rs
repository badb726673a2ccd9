//! The built-in `directory` renderer: plain Kubernetes YAML and JSON files.

use crate::interrupt::Interrupt;
use crate::manifest::{self, Object, ParseBudget, ParseLimits};
use crate::source::{EntryKind, SourcePath, SourceView};

use super::RenderError;

/// Options of the directory renderer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectoryOptions {
    /// Descend into subdirectories. Default: `false` (as in Argo CD).
    pub recurse: bool,
    /// How much the render may read and parse over all its files (64 MiB,
    /// 4,000,000 nodes by default): past it, the render fails naming the
    /// file it was reading.
    pub limits: ParseLimits,
}

const EXTENSIONS: &[&str] = &[".yaml", ".yml", ".json"];

/// Reads every `*.yaml`, `*.yml` and `*.json` file under `path` (with
/// `recurse`, in subdirectories too) in path order, and parses each into
/// objects: multi-document files are split, `List` kinds flattened, empty
/// documents skipped. Hidden files and directories (name starting with `.`)
/// are skipped, so that `.github/` workflows are never taken for manifests.
pub fn render(
    view: &dyn SourceView,
    path: &SourcePath,
    options: &DirectoryOptions,
) -> Result<Vec<Object>, RenderError> {
    render_until(view, path, options, Interrupt::new())
}

/// [`render`], stopping at the next file or document once `interrupt` is
/// raised (its render was given up), with an error naming the file.
pub fn render_until(
    view: &dyn SourceView,
    path: &SourcePath,
    options: &DirectoryOptions,
    interrupt: Interrupt,
) -> Result<Vec<Object>, RenderError> {
    let mut objects = Vec::new();
    let budget = ParseBudget::new(options.limits).with_interrupt(interrupt);
    refuse_what_plugins_render(view, path)?;
    walk(view, path, options, &budget, &mut objects)?;
    Ok(objects)
}

/// The files that make a directory something a plugin renders, as Argo
/// CD's source type detection reads them.
const PLUGIN_SOURCES: &[(&str, &str, &str)] = &[
    ("kustomization.yaml", "kustomization", "kustomize"),
    ("kustomization.yml", "kustomization", "kustomize"),
    ("Kustomization", "kustomization", "kustomize"),
    ("Chart.yaml", "Helm chart", "helm"),
];

/// Fails, naming the plugin to add, when the application's directory is a
/// kustomization or a Helm chart: parsed as manifests, its files would
/// fail with a message about a missing `metadata.name`.
fn refuse_what_plugins_render(view: &dyn SourceView, dir: &SourcePath) -> Result<(), RenderError> {
    for entry in view.read_dir(dir)? {
        if entry.kind != EntryKind::File {
            continue;
        }
        if let Some((_, what, plugin)) =
            PLUGIN_SOURCES.iter().find(|(name, ..)| *name == entry.name)
        {
            return Err(RenderError::NeedsPlugin {
                file: dir.join(&entry.name)?.to_string(),
                what,
                plugin,
            });
        }
    }
    Ok(())
}

fn walk(
    view: &dyn SourceView,
    dir: &SourcePath,
    options: &DirectoryOptions,
    budget: &ParseBudget,
    out: &mut Vec<Object>,
) -> Result<(), RenderError> {
    for entry in view.read_dir(dir)? {
        if entry.name.starts_with('.') {
            continue;
        }
        let path = dir.join(&entry.name)?;
        match entry.kind {
            EntryKind::File if EXTENSIONS.iter().any(|e| entry.name.ends_with(e)) => {
                budget.check_interrupt(Some(path.as_str()))?;
                let bytes = view.read_file(&path)?;
                let text = String::from_utf8(bytes).map_err(|_| manifest::ManifestError {
                    file: Some(path.to_string()),
                    line: None,
                    message: "not valid UTF-8".into(),
                })?;
                out.extend(manifest::parse_within(&text, Some(path.as_str()), budget)?);
            }
            EntryKind::Directory if options.recurse => walk(view, &path, options, budget, out)?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LocalDir;

    fn write(root: &std::path::Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ";

    #[test]
    fn renders_in_path_order_with_recurse_option() {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            &[
                ("app/b.yaml", &format!("{CM}b\n---\n{CM}b2\n")),
                (
                    "app/a.json",
                    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
                ),
                ("app/sub/c.yml", &format!("{CM}c\n")),
                ("app/notes.txt", "not a manifest"),
                ("app/.github/ci.yaml", "on: push"),
            ],
        );
        let view = LocalDir::open(tmp.path()).unwrap();
        let app = SourcePath::parse("app").unwrap();
        let names = |recurse| -> Vec<String> {
            render(
                &view,
                &app,
                &DirectoryOptions {
                    recurse,
                    ..DirectoryOptions::default()
                },
            )
            .unwrap()
            .iter()
            .map(|o| o.name().to_owned())
            .collect()
        };
        assert_eq!(names(false), ["a", "b", "b2"]);
        assert_eq!(names(true), ["a", "b", "b2", "c"]);
    }

    #[test]
    fn a_kustomization_or_a_chart_names_the_plugin_to_add() {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            &[
                ("k/kustomization.yaml", "resources: [cm.yaml]\n"),
                ("k/cm.yaml", &format!("{CM}a\n")),
                (
                    "c/Chart.yaml",
                    "apiVersion: v2\nname: web\nversion: 1.0.0\n",
                ),
            ],
        );
        let view = LocalDir::open(tmp.path()).unwrap();
        let error = |dir: &str| {
            render(
                &view,
                &SourcePath::parse(dir).unwrap(),
                &DirectoryOptions::default(),
            )
            .unwrap_err()
            .to_string()
        };
        let k = error("k");
        assert!(k.starts_with("k/kustomization.yaml is a kustomization, not a plain manifest: render it with the kustomize plugin"), "{k}");
        let c = error("c");
        assert!(
            c.contains("c/Chart.yaml is a Helm chart") && c.contains("--plugin helm)"),
            "{c}"
        );
    }

    #[test]
    fn broken_yaml_names_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            &[
                ("app/ok.yaml", &format!("{CM}ok\n")),
                ("app/bad.yaml", &format!("{CM}x\ndata:\n  k: v\n k2: [\n")),
            ],
        );
        let view = LocalDir::open(tmp.path()).unwrap();
        let err = render(
            &view,
            &SourcePath::parse("app").unwrap(),
            &DirectoryOptions::default(),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("app/bad.yaml:7: invalid YAML"),
            "{message}"
        );
    }

    #[test]
    fn a_given_up_render_stops_at_the_next_file_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), &[("app/a.yaml", &format!("{CM}a\n"))]);
        let view = LocalDir::open(tmp.path()).unwrap();
        let interrupt = Interrupt::new();
        interrupt.raise();
        let err = render_until(
            &view,
            &SourcePath::parse("app").unwrap(),
            &DirectoryOptions::default(),
            interrupt,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "app/a.yaml: stopped: the render was given up (its deadline passed)"
        );
    }
}
