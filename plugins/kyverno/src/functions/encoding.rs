//! Encodings and digests: base64, JSON, YAML (alias bombs refused), semver
//! ranges, `sha256`, `sha1`, `md5`, `x509_decode` ([`super::x509`]);
//! `random` refused by name.

use jmespath::Runtime;
use serde_json::{Value, json};
use sha1::Digest as _;

use super::{define, string_arg, text};

pub(super) fn register(runtime: &mut Runtime) {
    define(runtime, "base64_decode", 1, |a| {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text(&a[0], "argument")?)
            .map_err(|e| e.to_string())?;
        Ok(json!(String::from_utf8_lossy(&bytes)))
    });
    define(runtime, "base64_encode", 1, |a| {
        use base64::Engine as _;
        let s = text(&a[0], "argument")?;
        if s.len() / 3 * 4 > super::MAX_OUTPUT {
            return Err(format!(
                "the result would be over the limit of {} bytes",
                super::MAX_OUTPUT
            ));
        }
        super::capped(base64::engine::general_purpose::STANDARD.encode(s))
    });
    define(runtime, "parse_json", 1, |a| {
        let s = text(&a[0], "argument")?;
        if s.len() > 1 << 20 {
            return Err("document over 1 MiB".into());
        }
        serde_json::from_str(&s).map_err(|e| e.to_string())
    });
    define(runtime, "parse_yaml", 1, |a| {
        let s = text(&a[0], "argument")?;
        if s.len() > 1 << 20 {
            return Err("document over 1 MiB".into());
        }
        // Aliases expanded within the budget for the text's length: a
        // billion laughs is refused before it grows.
        kiln_yaml_limits::check(&s, &kiln_yaml_limits::YamlLimits::default())
            .map_err(|e| e.to_string())?;
        serde_yaml::from_str::<Value>(&s).map_err(|e| e.to_string())
    });
    define(runtime, "semver_compare", 2, |a| {
        let version = text(&a[0], "version")?;
        let constraint = text(&a[1], "constraint")?;
        Ok(json!(semver_holds(&version, &constraint)?))
    });
    define(runtime, "sha256", 1, |a| {
        Ok(json!(hex(&sha2::Sha256::digest(string_arg(&a[0], 1)?))))
    });
    define(runtime, "sha1", 1, |a| {
        Ok(json!(hex(&sha1::Sha1::digest(string_arg(&a[0], 1)?))))
    });
    define(runtime, "md5", 1, |a| {
        Ok(json!(hex(&md5::Md5::digest(string_arg(&a[0], 1)?))))
    });
    define(runtime, "random", 1, |_| {
        Err("a review's verdict may not depend on chance: random is not available to validate rules before apply".into())
    });
    define(runtime, "x509_decode", 1, |a| {
        super::x509::decode(string_arg(&a[0], 1)?)
    });
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A blang/semver range: `>1.0.0 <2.0.0 || 3.x`-like, with `=`, `!=`, `>`,
/// `>=`, `<`, `<=` and a bare version.
fn semver_holds(version: &str, constraint: &str) -> Result<bool, String> {
    let parse = |v: &str| -> Result<(u64, u64, u64), String> {
        let v = v.trim().trim_start_matches('v');
        let core = v.split(['-', '+']).next().unwrap_or(v);
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() != 3 {
            return Err(format!("{v:?} is not a semantic version"));
        }
        let n = |p: &str| {
            p.parse::<u64>()
                .map_err(|_| format!("{v:?} is not a semantic version"))
        };
        Ok((n(parts[0])?, n(parts[1])?, n(parts[2])?))
    };
    let have = parse(version)?;
    for alternative in constraint.split("||") {
        let mut all = true;
        for part in alternative.split_whitespace() {
            let (op, rest) = ["!=", ">=", "<=", "=", ">", "<"]
                .iter()
                .find_map(|op| part.strip_prefix(op).map(|rest| (*op, rest)))
                .unwrap_or(("=", part));
            let want = parse(rest)?;
            let ok = match op {
                "=" => have == want,
                "!=" => have != want,
                ">" => have > want,
                ">=" => have >= want,
                "<" => have < want,
                _ => have <= want,
            };
            all &= ok;
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::variables::query;

    #[test]
    fn digests_are_hex_as_in_kyverno() {
        let data = json!({});
        let q = |e: &str| query(e, &data).unwrap();
        // Checked against sha256sum, sha1sum and md5sum.
        assert_eq!(
            q("sha256('kyverno')"),
            json!("6900ead2739f4d80767db3f097b8c7e352c395dac245945161cb7d5e3f8438b3")
        );
        assert_eq!(
            q("sha1('kyverno')"),
            json!("6fec57cb57bfc38106901b9a0c4f3155ebb386f5")
        );
        assert_eq!(
            q("md5('kyverno')"),
            json!("9638dd54a7735b1d741a6e202444d186")
        );
        assert!(
            query("random('[a-z]{5}')", &data)
                .unwrap_err()
                .contains("chance")
        );
        assert!(query("sha256(`1`)", &data).is_err());
    }
}
