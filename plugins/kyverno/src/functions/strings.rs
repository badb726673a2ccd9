//! String functions: case, trimming, splitting, replacing, regular
//! expressions (RE2 syntax, linear time: a hostile pattern cannot make a
//! review slow), wildcards, label maps, `compare`, `to_boolean`,
//! `path_canonicalize`, `image_normalize`, `is_external_url`.

use std::net::IpAddr;

use jmespath::Runtime;
use serde_json::{Value, json};

use super::{MAX_OUTPUT, capped, define, number, regex, string_arg, text};

pub(super) fn register(runtime: &mut Runtime) {
    define(runtime, "to_upper", 1, |a| {
        Ok(json!(text(&a[0], "argument")?.to_uppercase()))
    });
    define(runtime, "to_lower", 1, |a| {
        Ok(json!(text(&a[0], "argument")?.to_lowercase()))
    });
    define(runtime, "trim", 2, |a| {
        let cut: Vec<char> = text(&a[1], "cutset")?.chars().collect();
        Ok(json!(text(&a[0], "argument")?.trim_matches(cut.as_slice())))
    });
    define(runtime, "trim_prefix", 2, |a| {
        let s = text(&a[0], "argument")?;
        let p = text(&a[1], "prefix")?;
        Ok(json!(s.strip_prefix(p.as_str()).unwrap_or(&s)))
    });
    define(runtime, "split", 2, |a| {
        let s = text(&a[0], "argument")?;
        let sep = text(&a[1], "separator")?;
        if sep.is_empty() {
            return Ok(json!(s.chars().map(String::from).collect::<Vec<_>>()));
        }
        Ok(json!(s.split(sep.as_str()).collect::<Vec<_>>()))
    });
    define(runtime, "replace", 4, |a| {
        let s = text(&a[0], "argument")?;
        let old = text(&a[1], "old")?;
        let new = text(&a[2], "new")?;
        let n = number(&a[3], "count")?;
        let limit = if n < 0.0 { usize::MAX } else { n as usize };
        replaced(&s, &old, &new, limit)
    });
    define(runtime, "replace_all", 3, |a| {
        let s = text(&a[0], "argument")?;
        replaced(&s, &text(&a[1], "old")?, &text(&a[2], "new")?, usize::MAX)
    });
    define(runtime, "equal_fold", 2, |a| {
        Ok(json!(
            text(&a[0], "argument")?.to_lowercase() == text(&a[1], "argument")?.to_lowercase()
        ))
    });
    define(runtime, "truncate", 2, |a| {
        let s = text(&a[0], "argument")?;
        let n = number(&a[1], "length")?.max(0.0) as usize;
        Ok(json!(s.chars().take(n).collect::<String>()))
    });
    define(runtime, "regex_match", 2, |a| {
        Ok(json!(
            regex(&text(&a[0], "pattern")?)?.is_match(&text(&a[1], "argument")?)
        ))
    });
    define(runtime, "regex_replace_all", 3, |a| {
        let re = regex(&text(&a[0], "pattern")?)?;
        let s = text(&a[1], "argument")?;
        regex_replaced(&re, &s, &text(&a[2], "replacement")?, true)
    });
    define(runtime, "regex_replace_all_literal", 3, |a| {
        let re = regex(&text(&a[0], "pattern")?)?;
        let s = text(&a[1], "argument")?;
        regex_replaced(&re, &s, &text(&a[2], "replacement")?, false)
    });
    define(runtime, "pattern_match", 2, |a| {
        Ok(json!(crate::wildcard::matches(
            &text(&a[0], "pattern")?,
            &text(&a[1], "argument")?
        )))
    });
    define(runtime, "label_match", 2, |a| {
        let (Value::Object(wanted), Value::Object(have)) = (&a[0], &a[1]) else {
            return Err("both arguments must be maps".into());
        };
        Ok(json!(wanted.iter().all(|(k, v)| have.get(k) == Some(v))))
    });
    define(runtime, "compare", 2, |a| {
        let (x, y) = (string_arg(&a[0], 1)?, string_arg(&a[1], 2)?);
        Ok(json!(x.cmp(y) as i8))
    });
    define(runtime, "to_boolean", 1, |a| {
        let input = string_arg(&a[0], 1)?;
        match input.to_lowercase().as_str() {
            "true" => Ok(json!(true)),
            "false" => Ok(json!(false)),
            _ => Err(format!(
                "lowercase argument must be 'true' or 'false' (provided: '{input}')"
            )),
        }
    });
    define(runtime, "path_canonicalize", 1, |a| {
        Ok(json!(clean(string_arg(&a[0], 1)?)))
    });
    define(runtime, "image_normalize", 1, |a| {
        let image = string_arg(&a[0], 1)?;
        if image.is_empty() {
            return Err("bad image: empty reference".into());
        }
        crate::images::check_reference(image)?;
        Ok(crate::images::parse(image)["reference"].clone())
    });
    define(runtime, "is_external_url", 1, |a| {
        let url = string_arg(&a[0], 1)?;
        let host = hostname(url);
        match host.parse::<IpAddr>() {
            Ok(ip) => Ok(json!(!(is_loopback(&ip) || is_private(&ip)))),
            Err(_) => Err(format!(
                "{host:?} is not an IP address, and resolving a host name needs DNS, which a review before apply does not reach"
            )),
        }
    });
}

/// `s` with at most `limit` occurrences of `old` replaced by `new`, built
/// only when the result fits the output bound (a chain of replacements
/// would otherwise grow geometrically before the bound is checked).
fn replaced(s: &str, old: &str, new: &str, limit: usize) -> Result<Value, String> {
    let occurrences = if old.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(old).count()
    }
    .min(limit);
    let size = (s.len() as u128) + (occurrences as u128) * (new.len() as u128)
        - (occurrences as u128) * (old.len() as u128).min(s.len() as u128);
    if size > MAX_OUTPUT as u128 {
        return Err(format!(
            "the result is {size} bytes, over the limit of {MAX_OUTPUT}"
        ));
    }
    capped(if limit == usize::MAX {
        s.replace(old, new)
    } else {
        s.replacen(old, new, limit)
    })
}

/// `s` with every match of `re` replaced (`$1` expanded when `expand`),
/// stopping as soon as the result passes the output bound.
fn regex_replaced(
    re: &regex::Regex,
    s: &str,
    replacement: &str,
    expand: bool,
) -> Result<Value, String> {
    let mut out = String::new();
    let mut last = 0;
    for captures in re.captures_iter(s) {
        let whole = captures.get(0).map_or(0..0, |m| m.range());
        out.push_str(&s[last..whole.start]);
        if expand {
            captures.expand(replacement, &mut out);
        } else {
            out.push_str(replacement);
        }
        last = whole.end;
        if out.len() > MAX_OUTPUT {
            return Err(format!(
                "the result is over the limit of {MAX_OUTPUT} bytes"
            ));
        }
    }
    out.push_str(&s[last..]);
    capped(out)
}

/// Go's `filepath.Join(p)` of one path on Linux: `path.Clean`, except
/// that the empty path stays empty.
fn clean(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Go's `url.Parse(u).Hostname()`: the host of `scheme://[user@]host[:port]`
/// without port or IPv6 brackets; empty without an authority.
fn hostname(url: &str) -> &str {
    let Some((_, after)) = url.split_once("://") else {
        return "";
    };
    let authority = after.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(bracketed) = host.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or("");
    }
    host.split(':').next().unwrap_or("")
}

/// Go's `IP.IsLoopback`: an IPv4-mapped address is read as IPv4.
fn is_loopback(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or_else(|| v6.is_loopback(), |v4| v4.is_loopback()),
    }
}

/// Go's `IP.IsPrivate`: RFC 1918 for IPv4, RFC 4193 (fc00::/7) for IPv6.
fn is_private(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.is_private(),
            None => v6.segments()[0] & 0xfe00 == 0xfc00,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::variables::query;

    // The examples of Kyverno's documentation (JMESPath, "Kyverno functions").
    #[test]
    fn compare_booleans_paths_images_and_urls() {
        let data = json!({});
        let q = |e: &str| query(e, &data).unwrap();
        assert_eq!(q("compare('a', 'b')"), json!(-1));
        assert_eq!(q("compare('b', 'a')"), json!(1));
        assert_eq!(q("compare('a', 'a')"), json!(0));
        assert_eq!(q("to_boolean('TRUE')"), json!(true));
        assert_eq!(q("to_boolean('false')"), json!(false));
        assert!(query("to_boolean('yes')", &data).is_err());
        assert_eq!(
            q("path_canonicalize('/var/run/containerd/containerd.sock')"),
            json!("/var/run/containerd/containerd.sock")
        );
        assert_eq!(q("path_canonicalize('//etc//./x/../')"), json!("/etc"));
        assert_eq!(q("path_canonicalize('a/../..')"), json!(".."));
        assert_eq!(q("path_canonicalize('/..')"), json!("/"));
        assert_eq!(q("path_canonicalize('')"), json!(""));
        assert_eq!(
            q("image_normalize('nginx')"),
            json!("docker.io/nginx:latest")
        );
        let digest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(
            q(&format!(
                "image_normalize('ghcr.io/kyverno/kyverno:v1.9@{digest}')"
            )),
            json!(format!("ghcr.io/kyverno/kyverno@{digest}"))
        );
        assert_eq!(
            q("image_normalize('ghcr.io/nginx:1.2')"),
            json!("ghcr.io/nginx:1.2")
        );
        // What the reference grammar refuses is an error, as in Kyverno.
        let error = query("image_normalize('Nginx')", &data).unwrap_err();
        assert!(error.contains("bad image: Nginx, defaultRegistry: docker.io, enableDefaultRegistryMutation: true: invalid reference format: repository name must be lowercase"), "{error}");
        assert!(query("image_normalize('nginx@sha256:abc')", &data).is_err());
        assert_eq!(q("is_external_url('http://10.0.0.1/x')"), json!(false));
        assert_eq!(q("is_external_url('https://127.0.0.1:8443')"), json!(false));
        assert_eq!(q("is_external_url('http://[fd00::1]/')"), json!(false));
        assert_eq!(q("is_external_url('http://8.8.8.8')"), json!(true));
        // An IPv4-mapped loopback address is loopback, as Go reads it.
        assert_eq!(
            q("is_external_url('http://[::ffff:127.0.0.1]/')"),
            json!(false)
        );
        // Replacements that would outgrow the output bound are refused
        // before the result is built.
        let x = "x".repeat(2000);
        let data_x = json!({"x": x});
        let grow = "replace_all(replace_all(x, 'x', x), 'x', x)";
        assert!(query(grow, &data_x).unwrap_err().contains("over the limit"));
        let grow = "regex_replace_all('x', regex_replace_all('x', x, x), x)";
        assert!(query(grow, &data_x).unwrap_err().contains("over the limit"));
        let mut chain = "x".to_owned();
        for _ in 0..40 {
            chain = format!("base64_encode({chain})");
        }
        assert!(
            query(&chain, &data_x)
                .unwrap_err()
                .contains("over the limit")
        );
        // A host name would need DNS: refused, never guessed.
        let error = query("is_external_url('https://kyverno.io')", &data).unwrap_err();
        assert!(error.contains("DNS"), "{error}");
    }
}
