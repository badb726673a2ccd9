//! Sprig's `urlParse` and `urlJoin`: Go's `net/url` parsing of a URL into
//! its parts and the reassembly of parts into a URL (`URL.String`), with
//! Go's escaping rules per component and its errors word for word.
//!
//! Everything works on bytes, as Go does; unescaped bytes that are not
//! UTF-8 stay Go string bytes ([`crate::gostr`]).

use crate::gofmt::quote as go_quote;
use crate::gostr;
use crate::value::{Map, Value};

/// Which component a text is escaped or unescaped for (Go's `encoding`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    Fragment,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// Go's `unescape`.
fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, String> {
    let escape_error = |e: &[u8]| format!("invalid URL escape {}", go_quote(&gostr::from_bytes(e)));
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                if i + 2 >= s.len()
                    || !s[i + 1].is_ascii_hexdigit()
                    || !s[i + 2].is_ascii_hexdigit()
                {
                    let end = (i + 3).min(s.len());
                    return Err(escape_error(&s[i..end]));
                }
                let triple = &s[i..i + 3];
                if mode == Mode::Host && unhex(s[i + 1]) < 8 && triple != b"%25" {
                    return Err(escape_error(triple));
                }
                if mode == Mode::Zone {
                    let v = unhex(s[i + 1]) << 4 | unhex(s[i + 2]);
                    if triple != b"%25" && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(escape_error(triple));
                    }
                }
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {} in host name",
                        go_quote(&gostr::from_bytes(&s[i..=i]))
                    ));
                }
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            out.push(unhex(s[i + 1]) << 4 | unhex(s[i + 2]));
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Go's `escape`.
fn escape(s: &[u8], mode: Mode) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        if should_escape(c, mode) {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        } else {
            out.push(c);
        }
    }
    out
}

/// A parsed URL (the fields Sprig reads).
#[derive(Default)]
struct Url {
    scheme: Vec<u8>,
    opaque: Vec<u8>,
    /// Username, and the password when one was given.
    user: Option<(Vec<u8>, Option<Vec<u8>>)>,
    host: Vec<u8>,
    path: Vec<u8>,
    raw_path: Vec<u8>,
    force_query: bool,
    raw_query: Vec<u8>,
    fragment: Vec<u8>,
    raw_fragment: Vec<u8>,
}

fn find(s: &[u8], c: u8) -> Option<usize> {
    s.iter().position(|&b| b == c)
}

fn rfind(s: &[u8], c: u8) -> Option<usize> {
    s.iter().rposition(|&b| b == c)
}

fn valid_optional_port(port: &[u8]) -> bool {
    port.is_empty() || port[0] == b':' && port[1..].iter().all(u8::is_ascii_digit)
}

fn parse_host(host: &[u8]) -> Result<Vec<u8>, String> {
    let invalid_port = |p: &[u8]| {
        format!(
            "invalid port {} after host",
            go_quote(&gostr::from_bytes(p))
        )
    };
    if host.first() == Some(&b'[') {
        let Some(i) = rfind(host, b']') else {
            return Err("missing ']' in host".into());
        };
        let colon_port = &host[i + 1..];
        if !valid_optional_port(colon_port) {
            return Err(invalid_port(colon_port));
        }
        if let Some(zone) = host[..i].windows(3).position(|w| w == b"%25") {
            let mut out = unescape(&host[..zone], Mode::Host)?;
            out.extend(unescape(&host[zone..i], Mode::Zone)?);
            out.extend(unescape(&host[i..], Mode::Host)?);
            return Ok(out);
        }
    } else if let Some(i) = rfind(host, b':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(invalid_port(colon_port));
        }
    }
    unescape(host, Mode::Host)
}

fn valid_userinfo(s: &[u8]) -> bool {
    s.iter().all(|&c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b':'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'%'
                    | b'@'
            )
    })
}

type User = Option<(Vec<u8>, Option<Vec<u8>>)>;

fn parse_authority(authority: &[u8]) -> Result<(User, Vec<u8>), String> {
    let at = rfind(authority, b'@');
    let host = parse_host(&authority[at.map_or(0, |i| i + 1)..])?;
    let Some(i) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..i];
    if !valid_userinfo(userinfo) {
        return Err("net/url: invalid userinfo".into());
    }
    let user = match find(userinfo, b':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some(c) => (
            unescape(&userinfo[..c], Mode::UserPassword)?,
            Some(unescape(&userinfo[c + 1..], Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

/// Go's `getScheme`.
fn get_scheme(raw: &[u8]) -> Result<(&[u8], &[u8]), String> {
    for (i, &c) in raw.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i == 0 => return Ok((b"", raw)),
            b'0'..=b'9' | b'+' | b'-' | b'.' => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok((b"", raw)),
        }
    }
    Ok((b"", raw))
}

/// Go's `parse(rawURL, false)`.
fn parse_without_fragment(raw: &[u8]) -> Result<Url, String> {
    if raw.iter().any(|&b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let mut url = Url::default();
    if raw == b"*" {
        url.path = b"*".to_vec();
        return Ok(url);
    }
    let (scheme, mut rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.last() == Some(&b'?') && rest.iter().filter(|&&c| c == b'?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some(q) = find(rest, b'?') {
        url.raw_query = rest[q + 1..].to_vec();
        rest = &rest[..q];
    }
    if rest.first() != Some(&b'/') {
        if !url.scheme.is_empty() {
            url.opaque = rest.to_vec();
            return Ok(url);
        }
        let segment = &rest[..find(rest, b'/').unwrap_or(rest.len())];
        if segment.contains(&b':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !rest.starts_with(b"///")) && rest.starts_with(b"//") {
        let authority = &rest[2..];
        let (authority, path) = match find(authority, b'/') {
            Some(i) => authority.split_at(i),
            None => (authority, &b""[..]),
        };
        (url.user, url.host) = parse_authority(authority)?;
        rest = path;
    }
    url.path = unescape(rest, Mode::Path)?;
    if escape(&url.path, Mode::Path) != rest {
        url.raw_path = rest.to_vec();
    }
    Ok(url)
}

/// Go's `url.Parse`, its error as Go's `*url.Error` prints.
fn parse(raw: &[u8]) -> Result<Url, String> {
    let (u, frag) = match find(raw, b'#') {
        Some(i) => (&raw[..i], &raw[i + 1..]),
        None => (raw, &b""[..]),
    };
    let error =
        |op_url: &[u8], e: String| format!("parse {}: {e}", go_quote(&gostr::from_bytes(op_url)));
    let mut url = parse_without_fragment(u).map_err(|e| error(u, e))?;
    if !frag.is_empty() {
        url.fragment = unescape(frag, Mode::Fragment).map_err(|e| error(raw, e))?;
        if escape(&url.fragment, Mode::Fragment) != frag {
            url.raw_fragment = frag.to_vec();
        }
    }
    Ok(url)
}

fn user_string(user: &User) -> Vec<u8> {
    let Some((name, password)) = user else {
        return Vec::new();
    };
    let mut out = escape(name, Mode::UserPassword);
    if let Some(p) = password {
        out.push(b':');
        out.extend(escape(p, Mode::UserPassword));
    }
    out
}

/// Go's `validEncoded`.
fn valid_encoded(s: &[u8], mode: Mode) -> bool {
    s.iter().all(|&c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c, mode)
    })
}

impl Url {
    fn escaped_path(&self) -> Vec<u8> {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return b"*".to_vec();
        }
        escape(&self.path, Mode::Path)
    }

    fn escaped_fragment(&self) -> Vec<u8> {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(&self.raw_fragment, Mode::Fragment).is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }

    /// Go's `URL.String()`.
    fn to_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        if !self.scheme.is_empty() {
            buf.extend_from_slice(&self.scheme);
            buf.push(b':');
        }
        if !self.opaque.is_empty() {
            buf.extend_from_slice(&self.opaque);
        } else {
            if !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some() {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    buf.extend_from_slice(b"//");
                }
                if self.user.is_some() {
                    buf.extend(user_string(&self.user));
                    buf.push(b'@');
                }
                buf.extend(escape(&self.host, Mode::Host));
            }
            let path = self.escaped_path();
            if path.first().is_some_and(|&c| c != b'/') && !self.host.is_empty() {
                buf.push(b'/');
            }
            if buf.is_empty() {
                let segment = &path[..find(&path, b'/').unwrap_or(path.len())];
                if segment.contains(&b':') {
                    buf.extend_from_slice(b"./");
                }
            }
            buf.extend(path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push(b'?');
            buf.extend_from_slice(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push(b'#');
            buf.extend(self.escaped_fragment());
        }
        buf
    }
}

fn text(b: &[u8]) -> Value {
    Value::str(gostr::from_bytes(b))
}

/// Sprig's `urlParse`: the URL's parts as a dict.
pub fn url_parse(raw: &str) -> Result<Value, String> {
    let url = parse(&gostr::to_bytes(raw)).map_err(|e| format!("unable to parse url: {e}"))?;
    let mut hostname = url.host.as_slice();
    if let Some(colon) = rfind(hostname, b':')
        && valid_optional_port(&hostname[colon..])
    {
        hostname = &hostname[..colon];
    }
    if hostname.len() >= 2 && hostname[0] == b'[' && hostname[hostname.len() - 1] == b']' {
        hostname = &hostname[1..hostname.len() - 1];
    }
    let mut m = Map::new();
    m.insert("scheme".into(), text(&url.scheme));
    m.insert("host".into(), text(&url.host));
    m.insert("hostname".into(), text(hostname));
    m.insert("path".into(), text(&url.path));
    m.insert("query".into(), text(&url.raw_query));
    m.insert("opaque".into(), text(&url.opaque));
    m.insert("fragment".into(), text(&url.fragment));
    m.insert("userinfo".into(), text(&user_string(&url.user)));
    Ok(Value::map(m))
}

/// Sprig's `urlJoin`: a URL from a dict of parts (each a string, missing
/// ones empty).
pub fn url_join(parts: &Map) -> Result<Value, String> {
    let get = |key: &str| -> Result<Vec<u8>, String> {
        match parts.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Str(s)) => Ok(gostr::to_bytes(s).into_owned()),
            Some(other) => Err(format!(
                "unable to parse {key} key, must be of type string, but {} found",
                other.kind_name()
            )),
        }
    };
    let mut url = Url {
        scheme: get("scheme")?,
        host: get("host")?,
        path: get("path")?,
        raw_query: get("query")?,
        opaque: get("opaque")?,
        fragment: get("fragment")?,
        ..Url::default()
    };
    let userinfo = get("userinfo")?;
    if !userinfo.is_empty() {
        let mut probe = b"proto://".to_vec();
        probe.extend_from_slice(&userinfo);
        probe.extend_from_slice(b"@host");
        url.user = parse(&probe)
            .map_err(|e| format!("unable to parse userinfo in dict: {e}"))?
            .user;
    }
    Ok(text(&url.to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected messages from Helm v4.2.3 (Go's net/url through Sprig).
    #[test]
    fn bad_urls_are_refused_as_go_refuses_them() {
        for (url, want) in [
            ("https://h:port/", "invalid port \":port\" after host"),
            ("http://[::1", "missing ']' in host"),
            ("/a%zz", "invalid URL escape \"%zz\""),
            ("https://a b@h/", "net/url: invalid userinfo"),
            ("https://h st/", "invalid character \" \" in host name"),
            ("http://x/#%zz", "invalid URL escape \"%zz\""),
            ("https://h/%2", "invalid URL escape \"%2\""),
            ("http://%41/", "invalid URL escape \"%41\""),
            ("http://[fe80::1%25%0a]/", "invalid URL escape \"%0a\""),
            (
                "9http://x",
                "first path segment in URL cannot contain colon",
            ),
        ] {
            let want = format!("unable to parse url: parse {}: {want}", go_quote(url));
            assert_eq!(url_parse(url).err(), Some(want), "{url}");
        }
    }

    #[test]
    fn join_refuses_parts_that_are_not_strings() {
        let mut parts = Map::new();
        parts.insert("host".into(), Value::Int(1));
        assert_eq!(
            url_join(&parts).err().as_deref(),
            Some("unable to parse host key, must be of type string, but int found")
        );
    }
}
