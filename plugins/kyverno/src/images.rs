//! The `images` variable: every container image of a resource, parsed as
//! Kyverno parses them (`registry`, `path`, `name`, `tag`, `digest`,
//! `reference`), by container list and container name.

use serde_json::{Map, Value, json};

/// `images` for `resource`: Pods and the pod templates of controllers.
pub fn of(resource: &Value) -> Value {
    let spec = [
        "/spec",
        "/spec/template/spec",
        "/spec/jobTemplate/spec/template/spec",
    ]
    .into_iter()
    .find_map(|p| {
        resource
            .pointer(p)
            .filter(|s| s.get("containers").is_some())
    });
    let Some(spec) = spec else {
        return json!({});
    };
    let mut out = Map::new();
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(Value::Array(containers)) = spec.get(list) else {
            continue;
        };
        let mut by_name = Map::new();
        for container in containers {
            let (Some(name), Some(image)) = (
                container.get("name").and_then(Value::as_str),
                container.get("image").and_then(Value::as_str),
            ) else {
                continue;
            };
            by_name.insert(name.to_owned(), parse(image));
        }
        out.insert(list.to_owned(), Value::Object(by_name));
    }
    Value::Object(out)
}

/// One image reference: `[REGISTRY/]PATH[:TAG][@DIGEST]`, the registry
/// `docker.io` when the first part is not a host, the tag `latest` when
/// there is neither tag nor digest.
pub fn parse(image: &str) -> Value {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, digest),
        None => (image, ""),
    };
    let (registry, remainder) = match rest.split_once('/') {
        Some((first, remainder)) if first.contains(['.', ':']) || first == "localhost" => {
            (first, remainder)
        }
        _ => ("docker.io", rest),
    };
    let (path, tag) = match remainder.rsplit_once(':') {
        Some((path, tag)) if !tag.contains('/') => (path, tag),
        _ => (remainder, ""),
    };
    let tag = if tag.is_empty() && digest.is_empty() {
        "latest"
    } else {
        tag
    };
    let name = path.rsplit('/').next().unwrap_or(path);
    // Kyverno's `ImageInfo.String()`: the digest when there is one, else
    // the tag.
    let reference = if digest.is_empty() {
        format!("{registry}/{path}:{tag}")
    } else {
        format!("{registry}/{path}@{digest}")
    };
    json!({
        "registry": registry,
        "path": path,
        "name": name,
        "tag": tag,
        "digest": digest,
        "reference": reference,
        "referenceWithTag": format!("{registry}/{path}:{tag}"),
    })
}

/// Checks `image` against the grammar of image references Kyverno parses
/// them with (the distribution project's `reference` package, normalized
/// as Docker names): `[DOMAIN[:PORT]/]PATH[:TAG][@ALGORITHM:HEX]`, the path
/// lower-case components joined by `/` and separated inside by `.`, `_`,
/// `__` or dashes, the name at most 255 bytes, and no 64-digit hex
/// identifier in place of a name.
pub fn check_reference(image: &str) -> Result<(), String> {
    static GRAMMAR: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let grammar = GRAMMAR.get_or_init(|| {
        let component = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
        let host = format!(r"(?:{component}(?:\.{component})*|\[[a-fA-F0-9:]+\])");
        let domain = format!(r"{host}(?::[0-9]+)?");
        let path_component = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
        let name = format!(r"(?:{domain}/)?{path_component}(?:/{path_component})*");
        let tag = r"[\w][\w.-]{0,127}";
        let digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
        regex::Regex::new(&format!(r"^({name})(?::{tag})?(?:@{digest})?$"))
            .expect("the reference grammar compiles")
    });
    let invalid = |why: &str| {
        Err(format!(
            "bad image: {image}, defaultRegistry: docker.io, enableDefaultRegistryMutation: true: invalid reference format{why}"
        ))
    };
    if image.len() > 4096 {
        return invalid(": longer than 4096 bytes");
    }
    let Some(found) = grammar.captures(image) else {
        if image.to_lowercase() != image && grammar.is_match(&image.to_lowercase()) {
            return invalid(": repository name must be lowercase");
        }
        return invalid("");
    };
    let name = found.get(1).map_or("", |m| m.as_str());
    if name.len() > 255 {
        return invalid(": repository name must not be more than 255 characters");
    }
    if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return invalid(": cannot specify 64-byte hexadecimal strings");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_parsed_as_kyverno_parses_them() {
        let nginx = parse("nginx");
        assert_eq!(nginx["registry"], "docker.io");
        assert_eq!(nginx["tag"], "latest");
        assert_eq!(nginx["path"], "nginx");
        let ghcr = parse("ghcr.io/acme/web:1.2@sha256:abc");
        assert_eq!(ghcr["registry"], "ghcr.io");
        assert_eq!(ghcr["path"], "acme/web");
        assert_eq!(ghcr["name"], "web");
        assert_eq!(ghcr["tag"], "1.2");
        assert_eq!(ghcr["digest"], "sha256:abc");
        // The reference names the digest, not the tag, when there is one.
        assert_eq!(ghcr["reference"], "ghcr.io/acme/web@sha256:abc");
        assert_eq!(nginx["reference"], "docker.io/nginx:latest");
        let local = parse("localhost:5000/x");
        assert_eq!(local["registry"], "localhost:5000");
        assert_eq!(local["tag"], "latest");
    }

    #[test]
    fn references_are_checked_as_the_distribution_grammar_reads_them() {
        for good in [
            "nginx",
            "nginx:1.27",
            "docker.io/library/nginx:latest",
            "ghcr.io/org/app_x/sub-part:v1.2.3-rc.1",
            "localhost:5000/app",
            "[::1]:5000/app",
            "registry.example.com/a/b@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ] {
            assert_eq!(check_reference(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("Nginx", "must be lowercase"),
            ("docker.io/Library/nginx", "must be lowercase"),
            ("nginx:", "invalid reference format"),
            ("nginx::1", "invalid reference format"),
            ("-nginx", "invalid reference format"),
            ("a//b", "invalid reference format"),
            ("nginx@sha256:abc", "invalid reference format"),
            (
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "64-byte",
            ),
        ] {
            let error = check_reference(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
        assert!(
            check_reference(&format!("a/{}", "b".repeat(300)))
                .unwrap_err()
                .contains("255")
        );
    }
}
