//! Where the policy's files come from: the Application's source tree in the
//! component ([`Files`] over the host's `source` interface), a directory
//! natively (tests, benchmarks).

/// Extensions of the files a directory setting names.
pub const EXTENSIONS: &[&str] = &[".yaml", ".yml", ".json"];

/// Read-only access to files by `/`-separated path.
pub trait Files {
    /// The whole file as text; the error is a sentence naming the path.
    fn read(&self, path: &str) -> Result<String, String>;

    /// `Some(names)` (sorted file names, not paths) when `path` is a
    /// directory, `None` when it is a file; the error names the path.
    fn list(&self, path: &str) -> Result<Option<Vec<String>>, String>;
}

/// Expands a setting's path: itself when it is a file, else the files of
/// the directory with one of [`EXTENSIONS`], sorted by name.
pub fn expand(files: &dyn Files, path: &str) -> Result<Vec<String>, String> {
    Ok(match files.list(path)? {
        None => vec![path.to_owned()],
        Some(names) => {
            let mut out: Vec<String> = names
                .into_iter()
                .filter(|n| EXTENSIONS.iter().any(|e| n.ends_with(e)))
                .map(|n| join(path, &n))
                .collect();
            out.sort();
            out
        }
    })
}

/// Joins two `/`-separated relative paths; `.` and empty bases are the root.
pub fn join(base: &str, relative: &str) -> String {
    if let Some(absolute) = relative.strip_prefix('/') {
        return absolute.to_owned();
    }
    let base = base.trim_end_matches('/');
    if base.is_empty() || base == "." {
        relative.to_owned()
    } else {
        format!("{base}/{relative}")
    }
}

/// A directory of the local file system (natively: tests, benchmarks).
#[derive(Debug, Clone)]
pub struct Dir(pub std::path::PathBuf);

impl Files for Dir {
    fn read(&self, path: &str) -> Result<String, String> {
        std::fs::read_to_string(self.0.join(path)).map_err(|e| format!("{path}: {e}"))
    }

    fn list(&self, path: &str) -> Result<Option<Vec<String>>, String> {
        let full = self.0.join(path);
        let meta = std::fs::metadata(&full).map_err(|e| format!("{path}: {e}"))?;
        if !meta.is_dir() {
            return Ok(None);
        }
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&full).map_err(|e| format!("{path}: {e}"))? {
            let entry = entry.map_err(|e| format!("{path}: {e}"))?;
            if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(Some(names))
    }
}
