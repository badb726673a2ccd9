//! `.Files`: the chart's files that are not templates, values or
//! subcharts, with Helm's methods.

use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine as _;

use crate::gostr;
use crate::value::{Map, Value};

/// The files of one chart, by path relative to the chart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Files(BTreeMap<String, Vec<u8>>);

impl Files {
    /// Files from (path, content) pairs.
    pub fn new(entries: BTreeMap<String, Vec<u8>>) -> Self {
        Files(entries)
    }

    /// Every file.
    pub fn entries(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.0
    }

    /// Go's `string(bytes)` of a file: bytes that are not UTF-8 kept
    /// ([`crate::gostr`]); empty when there is no such file.
    fn get(&self, path: &str) -> String {
        self.0
            .get(path)
            .map(|b| gostr::from_bytes(b).into_owned())
            .unwrap_or_default()
    }

    fn glob(&self, pattern: &str) -> Files {
        Files(
            self.0
                .iter()
                .filter(|(k, _)| glob_match(pattern.as_bytes(), k.as_bytes()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    fn by_base(&self, f: impl Fn(&[u8]) -> String) -> String {
        let m: Map = self
            .0
            .iter()
            .map(|(k, v)| {
                (
                    k.rsplit('/').next().unwrap_or(k).to_owned(),
                    Value::str(f(v)),
                )
            })
            .collect();
        // An empty set (a Glob that matched nothing) is `{}`, as Helm's
        // `toYAML` of an empty map: never nil, its result never "".
        crate::convert::to_yaml(&Value::map(m))
            .trim_end_matches('\n')
            .to_owned()
    }
}

/// Calls method `name` of `.Files` with `args`.
pub fn method(files: &Rc<Files>, name: &str, args: &[Value]) -> Result<Value, String> {
    let arg = |i: usize| -> Result<String, String> {
        match args.get(i) {
            Some(Value::Str(s)) => Ok(s.to_string()),
            _ => Err(format!(
                "wrong number of args for {name}: want 1 got {}",
                args.len()
            )),
        }
    };
    Ok(match name {
        "Get" => Value::str(files.get(&arg(0)?)),
        "GetBytes" => Value::Bytes(
            files
                .0
                .get(&arg(0)?)
                .map_or_else(|| Rc::from(&[][..]), |b| Rc::from(b.as_slice())),
        ),
        "Glob" => Value::Files(Rc::new(files.glob(&arg(0)?))),
        "Lines" => {
            let text = files.get(&arg(0)?);
            if text.is_empty() {
                return Ok(Value::Strings(Rc::new(Vec::new())));
            }
            let text = text.strip_suffix('\n').unwrap_or(&text);
            Value::Strings(Rc::new(text.split('\n').map(Value::str).collect()))
        }
        // Helm marshals through JSON: each byte that is not UTF-8 is U+FFFD.
        "AsConfig" => Value::str(files.by_base(|b| gostr::from_bytes(b).into_owned())),
        "AsSecrets" => {
            Value::str(files.by_base(|b| base64::engine::general_purpose::STANDARD.encode(b)))
        }
        other => return Err(format!("can't evaluate field {other} in type engine.files")),
    })
}

/// gobwas/glob with `/` as separator: `*` and `?` stay within a path
/// segment, `**` crosses them, `{a,b}` alternatives, `[abc]` classes.
pub fn glob_match(p: &[u8], s: &[u8]) -> bool {
    if p.is_empty() {
        return s.is_empty();
    }
    match p[0] {
        b'*' if p.get(1) == Some(&b'*') => (0..=s.len()).any(|i| glob_match(&p[2..], &s[i..])),
        b'*' => (0..=s.len())
            .take_while(|&i| i == 0 || s[i - 1] != b'/')
            .any(|i| glob_match(&p[1..], &s[i..])),
        b'?' => !s.is_empty() && s[0] != b'/' && glob_match(&p[1..], &s[1..]),
        b'{' => {
            let Some(end) = p.iter().position(|&c| c == b'}') else {
                return !s.is_empty() && s[0] == b'{' && glob_match(&p[1..], &s[1..]);
            };
            p[1..end].split(|&c| c == b',').any(|alt| {
                let mut q = alt.to_vec();
                q.extend_from_slice(&p[end + 1..]);
                glob_match(&q, s)
            })
        }
        b'[' => {
            let Some(end) = p.iter().position(|&c| c == b']') else {
                return false;
            };
            if s.is_empty() {
                return false;
            }
            let class = &p[1..end];
            let (neg, class) = match class.first() {
                Some(b'!') | Some(b'^') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= class[i] <= s[0] && s[0] <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == s[0];
                    i += 1;
                }
            }
            hit != neg && glob_match(&p[end + 1..], &s[1..])
        }
        b'\\' if p.len() > 1 => !s.is_empty() && s[0] == p[1] && glob_match(&p[2..], &s[1..]),
        c => !s.is_empty() && s[0] == c && glob_match(&p[1..], &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_as_gobwas() {
        assert!(glob_match(b"files/*.conf", b"files/a.conf"));
        assert!(!glob_match(b"files/*.conf", b"files/sub/a.conf"));
        assert!(glob_match(b"files/**.conf", b"files/sub/a.conf"));
        assert!(glob_match(b"**.{yaml,json}", b"x/y.json"));
    }
}
