//! Kubernetes' URL library (`url`, `isURL`, `getScheme`, `getHost`,
//! `getHostname`, `getPort`, `getEscapedPath`, `getQuery`): URLs as Go's
//! `url.ParseRequestURI` reads them (an absolute URL, or an absolute path),
//! with its error messages for the common cases.

use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use super::{MAX_PARSED_STRING_BYTES, error, opaque, string_arg};

/// CEL type name of URLs.
pub const TYPE_NAME: &str = "kubernetes.URL";

/// A parsed URL: the parts the library's getters return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// Lowercased scheme (empty for a path).
    pub scheme: String,
    /// `host[:port]` as written (brackets kept for IPv6).
    pub host: String,
    /// The path as written (still escaped), or the opaque part.
    pub raw_path: String,
    /// The query, without `?`.
    pub raw_query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~".contains(&b)
}

/// Checks the `%XX` escapes of `s`; `what` names the part for Go's message.
fn check_escapes(s: &str) -> Result<(), String> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let ok = bytes.len() >= i + 3
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit();
            if !ok {
                let end = (i + 3).min(bytes.len());
                return Err(format!(
                    "invalid URL escape {:?}",
                    String::from_utf8_lossy(&bytes[i..end])
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

fn parse_host(host: &str) -> Result<(), String> {
    if let Some(rest) = host.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err("missing ']' in host".into());
        };
        let port = &rest[close + 1..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
        return Ok(());
    }
    if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    }
    check_escapes(host)?;
    if let Some(c) = host.chars().find(|c| {
        matches!(
            c,
            ' ' | '<' | '>' | '"' | '{' | '}' | '|' | '\\' | '^' | '`'
        )
    }) {
        return Err(format!(
            "invalid character {:?} in host name",
            c.to_string()
        ));
    }
    Ok(())
}

fn parse_inner(raw: &str) -> Result<Url, String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() {
        return Err("empty url".into());
    }
    let mut url = Url {
        scheme: String::new(),
        host: String::new(),
        raw_path: String::new(),
        raw_query: String::new(),
    };
    if raw == "*" {
        url.raw_path = "*".into();
        return Ok(url);
    }
    let mut rest = raw;
    // The scheme: letters first, then letters, digits, + - .
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => {
                url.scheme = raw[..i].to_ascii_lowercase();
                rest = &raw[i + 1..];
                break;
            }
            _ => break,
        }
    }
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query.to_owned();
        rest = before;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // An opaque URL (`mailto:x`).
            url.raw_path = rest.to_owned();
            return Ok(url);
        }
        return Err("invalid URI for request".into());
    }
    if !url.scheme.is_empty()
        && let Some(after) = rest.strip_prefix("//")
    {
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        let host = match authority.rfind('@') {
            Some(i) => {
                let user = &authority[..i];
                if user
                    .bytes()
                    .any(|b| !(is_unreserved(b) || b"%!$&'()*+,;=:".contains(&b) || b >= 0x80))
                {
                    return Err("net/url: invalid userinfo".into());
                }
                &authority[i + 1..]
            }
            None => authority,
        };
        parse_host(host)?;
        url.host = host.to_owned();
        rest = path;
    }
    check_escapes(rest)?;
    url.raw_path = rest.to_owned();
    Ok(url)
}

/// `url.ParseRequestURI`, with Go's error text (`parse "RAW": REASON`).
pub fn parse(raw: &str) -> Result<Url, String> {
    if raw.len() > MAX_PARSED_STRING_BYTES {
        return Err(format!(
            "the string is {} bytes long, more than the limit of {MAX_PARSED_STRING_BYTES}",
            raw.len()
        ));
    }
    parse_inner(raw).map_err(|e| format!("parse {raw:?}: {e}"))
}

fn of(value: &Value, function: &str) -> Result<Url, ExecutionError> {
    opaque::<Url>(value)
        .cloned()
        .ok_or_else(|| error(function, format!("no such overload for {value:?}")))
}

/// `url(string)`.
pub fn url(This(this): This<Value>) -> Result<Value, ExecutionError> {
    let raw = string_arg(&this, "url")?;
    let url = parse(&raw).map_err(|e| {
        error(
            "url",
            format!("URL parse error during conversion from string: {e}"),
        )
    })?;
    Ok(Value::Opaque(Arc::new(url)))
}

/// `isURL(string)`.
pub fn is_url(raw: Arc<String>) -> bool {
    parse(&raw).is_ok()
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

/// `u.getScheme()`.
pub fn get_scheme(This(this): This<Value>) -> Result<Value, ExecutionError> {
    Ok(text(&of(&this, "getScheme")?.scheme))
}

/// `u.getHost()`: host and port as written.
pub fn get_host(This(this): This<Value>) -> Result<Value, ExecutionError> {
    Ok(text(&of(&this, "getHost")?.host))
}

/// Host and port of `host[:port]` (Go's `Hostname` and `Port`).
fn split_host_port(host: &str) -> (&str, &str) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.find(']') {
            Some(i) => (&rest[..i], rest[i + 1..].strip_prefix(':').unwrap_or("")),
            None => (rest, ""),
        };
    }
    match host.rfind(':') {
        Some(i) => (&host[..i], &host[i + 1..]),
        None => (host, ""),
    }
}

/// `u.getHostname()`: the host without port or IPv6 brackets.
pub fn get_hostname(This(this): This<Value>) -> Result<Value, ExecutionError> {
    Ok(text(split_host_port(&of(&this, "getHostname")?.host).0))
}

/// `u.getPort()`: the port, or empty.
pub fn get_port(This(this): This<Value>) -> Result<Value, ExecutionError> {
    Ok(text(split_host_port(&of(&this, "getPort")?.host).1))
}

/// `u.getEscapedPath()`: the path, escaped (as written when that is a valid
/// escaping; other bytes percent-encoded).
pub fn get_escaped_path(This(this): This<Value>) -> Result<Value, ExecutionError> {
    let url = of(&this, "getEscapedPath")?;
    let mut out = String::with_capacity(url.raw_path.len());
    for b in url.raw_path.bytes() {
        if is_unreserved(b) || b"%/!$&'()*+,;=:@[]".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(text(&out))
}

/// Go's `QueryUnescape`: `+` is a space; a bad escape is an error.
fn query_unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `u.getQuery()`: a map from each key to its values, in order (pairs
/// holding `;` or a bad escape are skipped, as Go's `Query` does).
pub fn get_query(This(this): This<Value>) -> Result<Value, ExecutionError> {
    let url = of(&this, "getQuery")?;
    let mut map: HashMap<String, Vec<Value>> = HashMap::new();
    for pair in url.raw_query.split('&').filter(|p| !p.is_empty()) {
        if pair.contains(';') {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(key), Some(value)) = (query_unescape(key), query_unescape(value)) else {
            continue;
        };
        map.entry(key).or_default().push(text(&value));
    }
    Ok(Value::from(
        map.into_iter()
            .map(|(k, v)| (k, Value::List(Arc::new(v))))
            .collect::<HashMap<String, Value>>(),
    ))
}
