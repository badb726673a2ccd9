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
}
