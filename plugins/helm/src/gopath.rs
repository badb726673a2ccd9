//! Go's `path` package (slash-separated paths, as `filepath` on Linux):
//! `Clean`, `Base`, `Dir`, `Ext`, `IsAbs`.

/// `path.Clean`: the shortest equivalent path (`.` for an empty one).
pub fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            part => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// `path.Base`: the last element, trailing slashes dropped (`.` for an
/// empty path, `/` for slashes only).
pub fn base(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_owned();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_owned()
}

/// `path.Dir`: all but the last element, cleaned.
pub fn dir(path: &str) -> String {
    let cut = path.rfind('/').map_or(0, |i| i + 1);
    clean(&path[..cut])
}

/// `path.Ext`: the suffix from the last `.` of the last element.
pub fn ext(path: &str) -> String {
    for (i, c) in path.char_indices().rev() {
        match c {
            '/' => break,
            '.' => return path[i..].to_owned(),
            _ => {}
        }
    }
    String::new()
}

/// `path.IsAbs`.
pub fn is_abs(path: &str) -> bool {
    path.starts_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_go_path() {
        for (input, want) in [
            ("", "."),
            ("/a/../b//c/.", "/b/c"),
            ("a/../..", ".."),
            ("/..", "/"),
            ("./a/", "a"),
            ("../../x/./y/..", "../../x"),
        ] {
            assert_eq!(clean(input), want, "{input:?}");
        }
        assert_eq!(dir("a"), ".");
        assert_eq!(dir("/a/b/"), "/a/b");
        assert_eq!(dir("a//b"), "a");
        assert_eq!(base("a/b/"), "b");
        assert_eq!(ext("a.b/c"), "");
        assert_eq!(ext("x/y.tar.gz"), ".gz");
    }
}
