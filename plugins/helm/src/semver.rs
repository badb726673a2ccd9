//! Semantic versions and constraints as Masterminds/semver v3 reads them
//! (what Helm's `semverCompare` and `kubeVersion` use), including its
//! prerelease rule: a constraint without a prerelease never matches a
//! prerelease version (`>=1.20` rejects `1.21.0-gke.1`; `>=1.20-0` takes it).

use std::cmp::Ordering;

/// A parsed version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// Prerelease (after `-`), empty if none.
    pub pre: String,
    /// Build metadata (after `+`).
    pub build: String,
}

impl Version {
    /// Parses `v1.2.3-pre+build` leniently (`1`, `1.2`, a leading `v`).
    pub fn parse(s: &str) -> Result<Version, String> {
        let (v, _) = parse_loose(s.trim())?;
        Ok(v)
    }

    fn cmp_pre(&self, other: &Version) -> Ordering {
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => {
                let a: Vec<&str> = self.pre.split('.').collect();
                let b: Vec<&str> = other.pre.split('.').collect();
                for (x, y) in a.iter().zip(b.iter()) {
                    let o = match (x.parse::<u64>(), y.parse::<u64>()) {
                        (Ok(p), Ok(q)) => p.cmp(&q),
                        (Ok(_), Err(_)) => Ordering::Less,
                        (Err(_), Ok(_)) => Ordering::Greater,
                        _ => x.cmp(y),
                    };
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                a.len().cmp(&b.len())
            }
        }
    }

    /// Masterminds' `Compare`: major, minor, patch, then the prerelease
    /// (build metadata ignored).
    pub fn compare(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| self.cmp_pre(other))
    }
}

/// Masterminds' `NewVersion` (what Sprig's `semver` calls): `v1`, `1.2`,
/// `1.2.3-pre+meta` and leading zeros in the numbers accepted (its
/// coercion), nothing else; its errors word for word.
pub fn new_version(s: &str) -> Result<Version, String> {
    const INVALID: &str = "invalid semantic version";
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'-';
    let b = s.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'v'));
    // `[0-9]+`, then up to two `\.[0-9]+`.
    let mut numbers: Vec<&str> = Vec::new();
    loop {
        let start = i + usize::from(!numbers.is_empty());
        if !numbers.is_empty() && b.get(i) != Some(&b'.') {
            break;
        }
        let end = start
            + b[start.min(b.len())..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
        if end == start {
            if numbers.is_empty() {
                return Err(INVALID.into());
            }
            break;
        }
        numbers.push(&s[start..end]);
        i = end;
        if numbers.len() == 3 {
            break;
        }
    }
    // `(-IDENT(.IDENT)*)?(+IDENT(.IDENT)*)?` to the end.
    let mut part = |lead: u8| -> Result<&str, String> {
        if b.get(i) != Some(&lead) {
            return Ok("");
        }
        let start = i + 1;
        let end = start
            + b[start..]
                .iter()
                .take_while(|&&c| ident(c) || c == b'.')
                .count();
        let text = &s[start..end];
        if text.is_empty() || text.split('.').any(str::is_empty) {
            return Err(INVALID.into());
        }
        i = end;
        Ok(text)
    };
    let pre = part(b'-')?;
    let build = part(b'+')?;
    if i != b.len() {
        return Err(INVALID.into());
    }
    let mut nums = [0u64; 3];
    for (n, text) in nums.iter_mut().zip(&numbers) {
        *n = text.parse().map_err(|_| {
            format!("error parsing version segment: strconv.ParseUint: parsing {text:?}: value out of range")
        })?;
    }
    if !pre.is_empty() {
        validate_prerelease(pre)?;
    }
    if !build.is_empty() {
        validate_metadata(build)?;
    }
    Ok(Version {
        major: nums[0],
        minor: nums[1],
        patch: nums[2],
        pre: pre.to_owned(),
        build: build.to_owned(),
    })
}

/// Masterminds' `validatePrerelease`: dot-separated identifiers of
/// `[0-9A-Za-z-]`, a number without a leading zero.
pub fn validate_prerelease(p: &str) -> Result<(), String> {
    for part in p.split('.') {
        if part.is_empty() {
            return Err("invalid prerelease string".into());
        } else if part.bytes().all(|c| c.is_ascii_digit()) {
            if part.len() > 1 && part.starts_with('0') {
                return Err("version segment starts with 0".into());
            }
        } else if !part.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
            return Err("invalid prerelease string".into());
        }
    }
    Ok(())
}

/// Masterminds' `validateMetadata`: dot-separated identifiers of
/// `[0-9A-Za-z-]`.
pub fn validate_metadata(m: &str) -> Result<(), String> {
    if m.split('.').any(|part| {
        part.is_empty() || !part.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
    }) {
        return Err("invalid metadata string".into());
    }
    Ok(())
}

/// How many of major/minor/patch were given (wildcards count as missing).
fn parse_loose(s: &str) -> Result<(Version, usize), String> {
    let bad = || format!("Invalid Semantic Version: {s:?}");
    let t = s.strip_prefix('v').unwrap_or(s);
    let (t, build) = t.split_once('+').unwrap_or((t, ""));
    let (t, pre) = t.split_once('-').unwrap_or((t, ""));
    let mut nums = [0u64; 3];
    let mut given = 0;
    for (i, part) in t.split('.').enumerate() {
        if i >= 3 {
            return Err(bad());
        }
        if matches!(part, "x" | "X" | "*") {
            break;
        }
        nums[i] = part.parse().map_err(|_| bad())?;
        given = i + 1;
    }
    if t.is_empty() {
        return Err(bad());
    }
    Ok((
        Version {
            major: nums[0],
            minor: nums[1],
            patch: nums[2],
            pre: pre.to_owned(),
            build: build.to_owned(),
        },
        given,
    ))
}

/// Helm's `IsCompatibleRange`: whether `version` is a version and meets
/// `constraint`; false when either does not parse (an empty constraint
/// among them).
pub fn compatible_range(constraint: &str, version: &str) -> bool {
    matches(constraint, version).unwrap_or(false)
}

/// Whether `version` satisfies `constraint` (`semverCompare`).
pub fn matches(constraint: &str, version: &str) -> Result<bool, String> {
    let v = Version::parse(version).map_err(|_| "Invalid Semantic Version".to_owned())?;
    for alt in constraint.split("||") {
        let mut all = true;
        let parts = split_and(alt);
        if parts.is_empty() {
            return Err(format!("improper constraint: {constraint}"));
        }
        for c in parts {
            if !check(&c, &v).map_err(|_| format!("improper constraint: {constraint}"))? {
                all = false;
                break;
            }
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `>= 1.2, < 2` / `>=1.2 <2`: the AND-ed parts.
fn split_and(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut pending_op = String::new();
    for tok in s.split([',', ' ']).filter(|t| !t.is_empty()) {
        if tok.chars().all(|c| "<>=!~^".contains(c)) {
            pending_op.push_str(tok);
            continue;
        }
        out.push(format!("{pending_op}{tok}"));
        pending_op.clear();
    }
    out
}

fn check(c: &str, v: &Version) -> Result<bool, String> {
    let op_len = c.find(|ch: char| !"<>=!~^".contains(ch)).unwrap_or(c.len());
    let (op, ver) = c.split_at(op_len);
    let (cv, given) = parse_loose(ver.trim())?;
    // The prerelease rule.
    if !v.pre.is_empty() && cv.pre.is_empty() && op != "!=" {
        return Ok(false);
    }
    let next = |level: usize| -> Version {
        let mut n = cv.clone();
        n.pre.clear();
        match level {
            0 => {
                n.major += 1;
                n.minor = 0;
                n.patch = 0;
            }
            1 => {
                n.minor += 1;
                n.patch = 0;
            }
            _ => n.patch += 1,
        }
        n
    };
    let o = v.compare(&cv);
    Ok(match op {
        "" | "=" | "==" => {
            if given == 3 {
                o == Ordering::Equal
            } else if given == 0 {
                true
            } else {
                o != Ordering::Less && v.compare(&next(given - 1)) == Ordering::Less
            }
        }
        "!=" => o != Ordering::Equal,
        ">" => {
            if given < 3 && given > 0 {
                v.compare(&next(given - 1)) != Ordering::Less
            } else {
                o == Ordering::Greater
            }
        }
        "<" => o == Ordering::Less,
        ">=" | "=>" => o != Ordering::Less,
        "<=" | "=<" => {
            if given < 3 && given > 0 {
                v.compare(&next(given - 1)) == Ordering::Less
            } else {
                o != Ordering::Greater
            }
        }
        "~" | "~>" => {
            o != Ordering::Less
                && v.compare(&next(if given <= 1 { 0 } else { 1 })) == Ordering::Less
        }
        "^" => {
            let level = if cv.major > 0 || given <= 1 {
                0
            } else if cv.minor > 0 || given == 2 {
                1
            } else {
                2
            };
            o != Ordering::Less && v.compare(&next(level)) == Ordering::Less
        }
        _ => return Err(format!("unknown operator {op}")),
    })
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn constraints_as_masterminds() {
        assert!(matches(">=1.20-0", "v1.36.0").unwrap());
        assert!(matches(">=1.20-0", "v1.21.3-gke.100").unwrap());
        assert!(!matches(">=1.20", "v1.21.3-gke.100").unwrap());
        assert!(matches("<1.19-0", "1.18.2").unwrap());
        assert!(matches("^1.2.3", "1.9.0").unwrap());
        assert!(!matches("^1.2.3", "2.0.0").unwrap());
        assert!(matches("~1.2.3", "1.2.9").unwrap());
        assert!(!matches("~1.2.3", "1.3.0").unwrap());
        assert!(matches("1.2.x", "1.2.7").unwrap());
        assert!(matches(">= 1.2, < 2", "1.5.0").unwrap());
        assert!(matches("<1.0 || >=2.0", "2.1.0").unwrap());
    }
}
