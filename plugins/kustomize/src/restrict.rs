//! kustomize's load restrictor: which files a kustomization may read.
//!
//! By default (`LoadRestrictionsRootOnly`, kustomize's and `kubectl
//! kustomize`'s default, and Argo CD's unless its `kustomize.buildOptions`
//! say otherwise) a kustomization reads files — resources, patches,
//! generator inputs, replacements, crds — only in or below its own
//! directory; directories (bases, components) may be anywhere in the
//! repository, each then reading below itself. `LoadRestrictionsNone`
//! lifts that (`kustomize build --load-restrictor LoadRestrictionsNone`).
//! Either way nothing is read outside the repository.

use crate::Failure;

/// Which files a kustomization may read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LoadRestrictor {
    /// Only files in or below the kustomization's directory (kustomize's
    /// default).
    #[default]
    RootOnly,
    /// Any file of the repository.
    None,
}

impl LoadRestrictor {
    /// The restrictor kustomize's flag value names:
    /// `LoadRestrictionsRootOnly` or `LoadRestrictionsNone`.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "LoadRestrictionsRootOnly" => Some(LoadRestrictor::RootOnly),
            "LoadRestrictionsNone" => Some(LoadRestrictor::None),
            _ => None,
        }
    }

    /// Refuses `path` (the file `entry` of the kustomization `file` in
    /// `dir` names, relative to the repository root) unless this
    /// restrictor allows it.
    pub fn check(
        self,
        dir: &str,
        file: &str,
        what: &str,
        entry: &str,
        path: &str,
    ) -> Result<(), Failure> {
        if self == LoadRestrictor::None || within(dir, path) {
            return Ok(());
        }
        let shown = if dir.is_empty() { "." } else { dir };
        Err(Failure::new(
            file,
            format!(
                "{what} {entry:?}: security: file {path} is not in or below {shown} \
                 (kustomize's default load restrictor; the parameter \
                 loadRestrictor=LoadRestrictionsNone lifts it)"
            ),
        ))
    }
}

/// Whether `path` is `dir` or below it (both normalized, relative to the
/// repository root).
fn within(dir: &str, path: &str) -> bool {
    dir.is_empty()
        || path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_below_the_directory_only() {
        assert!(within("app", "app/cm.yaml"));
        assert!(within("app", "app/sub/cm.yaml"));
        assert!(within("", "anything/cm.yaml"));
        assert!(!within("app", "apple/cm.yaml"));
        assert!(!within("app", "shared/cm.yaml"));
        assert!(!within("app/sub", "app/cm.yaml"));
        let refused = LoadRestrictor::RootOnly
            .check(
                "app",
                "app/kustomization.yaml",
                "patch",
                "../p.yaml",
                "p.yaml",
            )
            .unwrap_err();
        assert_eq!(refused.file, "app/kustomization.yaml");
        assert!(
            refused
                .message
                .starts_with("patch \"../p.yaml\": security: file p.yaml is not in or below app")
        );
        assert!(
            LoadRestrictor::None
                .check(
                    "app",
                    "app/kustomization.yaml",
                    "patch",
                    "../p.yaml",
                    "p.yaml"
                )
                .is_ok()
        );
        assert_eq!(
            LoadRestrictor::parse("LoadRestrictionsNone"),
            Some(LoadRestrictor::None)
        );
        assert_eq!(LoadRestrictor::parse("none"), None);
    }
}
