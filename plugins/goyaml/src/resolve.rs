//! Whether go-yaml v2 reads a plain scalar back as a string: YAML 1.1's
//! booleans, nulls, integers, floats, sexagesimal numbers and timestamps
//! are not strings, so the emitter must quote them.

/// Whether go-yaml v2 reads the plain text back as a string (and not as a
/// YAML 1.1 bool, null, number or timestamp).
pub(crate) fn resolves_to_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no",
        "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null",
        "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF",
    ];
    if SPECIAL.contains(&s) {
        return false;
    }
    match s.as_bytes()[0] {
        b'.' => !go_parse_float(s),
        b'+' | b'-' | b'0'..=b'9' => {
            if timestamp_rfc3339(s).is_some() {
                return false;
            }
            let plain = s.replace('_', "");
            !(go_parse_int(&plain) || go_yaml_float(&plain) || binary_int(&plain))
        }
        _ => true,
    }
}

/// `strconv.ParseInt(s, 0, 64)` or `ParseUint` would succeed (the range is
/// not checked: an out-of-range number still is not a string).
fn go_parse_int(s: &str) -> bool {
    go_int_parts(s).is_some_and(|(_, digits, radix)| {
        u128::from_str_radix(&digits, radix).is_ok_and(|n| n <= u64::MAX as u128)
    })
}

/// An integer as Go's `strconv.ParseInt(s, 0, 64)` reads it: an optional
/// sign, then `0x`, `0o`, `0b`, a leading `0` (octal) or decimal. Returns
/// whether it is negative, its digits (lower case) and their radix; the
/// range is the caller's to check.
pub fn go_int_parts(s: &str) -> Option<(bool, String, u32)> {
    let negative = s.starts_with('-');
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = unsigned.to_ascii_lowercase();
    let (digits, radix) = if let Some(hex) = lower.strip_prefix("0x") {
        (hex, 16)
    } else if let Some(octal) = lower.strip_prefix("0o") {
        (octal, 8)
    } else if let Some(binary) = lower.strip_prefix("0b") {
        (binary, 2)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (&lower[1..], 8)
    } else {
        (lower.as_str(), 10)
    };
    (!digits.is_empty() && digits.chars().all(|c| c.is_digit(radix)))
        .then(|| (negative, digits.to_owned(), radix))
}

/// `-0b101` and `0b101` (go-yaml's extra binary rule).
fn binary_int(s: &str) -> bool {
    let digits = s
        .strip_prefix("0b")
        .or_else(|| s.strip_prefix("-0b"))
        .unwrap_or_default();
    !digits.is_empty() && digits.chars().all(|c| c == '0' || c == '1')
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// [`yaml_float`] and `strconv.ParseFloat(s, 64)` succeeds: Go refuses a
/// number that overflows to an infinity (`1e400` is a string), and accepts
/// one that underflows to zero (`1e-400` is a float).
fn go_yaml_float(s: &str) -> bool {
    yaml_float(s) && go_parse_float(s)
}

/// `strconv.ParseFloat(s, 64)` would succeed (for the texts go-yaml hands
/// it: starting with `.`, or matching [`yaml_float`]).
fn go_parse_float(s: &str) -> bool {
    s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// go-yaml's `isBase60Float`: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
pub(crate) fn base60_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (s, frac) = match s.split_once('.') {
        Some((s, frac)) => (s, Some(frac)),
        None => (s, None),
    };
    if frac.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit() || b == b'_')) {
        return false;
    }
    let mut parts = s.split(':');
    let head = parts.next().unwrap_or_default();
    if !head.starts_with(|c: char| c.is_ascii_digit())
        || !head.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return false;
    }
    let mut sexagesimal = 0;
    for part in parts {
        let b = part.as_bytes();
        let ok = match b {
            [d] => d.is_ascii_digit(),
            [a, d] => (b'0'..=b'5').contains(a) && d.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
        sexagesimal += 1;
    }
    sexagesimal > 0
}

/// A go-yaml timestamp (`2006-1-2`, `2006-1-2 15:4:5.999999999`,
/// `2006-1-2T15:4:5.999999999Z07:00`, or with a lower-case `t`) as Go's
/// `time.Time` marshals it to JSON (RFC 3339, fraction without trailing
/// zeros, `Z` for UTC).
pub fn timestamp_rfc3339(s: &str) -> Option<String> {
    fn number(s: &str, min: usize, max: usize) -> Option<u32> {
        (s.len() >= min && s.len() <= max && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    }
    let (date, time) = match s.find([' ', 'T', 't']) {
        Some(i) => (&s[..i], Some((&s[i..i + 1], &s[i + 1..]))),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let (year, month, day) = (number(y, 4, 4)?, number(m, 1, 2)?, number(d, 1, 2)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day == 0 || day > days {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    let Some((separator, time)) = time else {
        return Some(format!("{date}T00:00:00Z"));
    };
    let (clock, zone) = if separator == " " {
        (time, "Z".to_owned())
    } else {
        let i = time.find(['Z', '+', '-'])?;
        let zone = &time[i..];
        let zone = if zone == "Z" {
            "Z".to_owned()
        } else {
            let (h, m) = zone[1..].split_once(':')?;
            let (h, m) = (number(h, 2, 2)?, number(m, 2, 2)?);
            if h >= 24 || m >= 60 {
                return None;
            }
            if h == 0 && m == 0 {
                "Z".to_owned()
            } else {
                format!("{}{h:02}:{m:02}", &zone[..1])
            }
        };
        (&time[..i], zone)
    };
    let (clock, frac) = match clock.split_once('.') {
        Some((clock, frac)) => (clock, Some(frac)),
        None => (clock, None),
    };
    let frac = match frac {
        Some(f) => {
            number(f, 1, 9)?;
            let f = f.trim_end_matches('0');
            if f.is_empty() {
                String::new()
            } else {
                format!(".{f}")
            }
        }
        None => String::new(),
    };
    let mut fields = clock.split(':');
    let (Some(h), Some(mi), Some(se), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return None;
    };
    let (h, mi, se) = (number(h, 1, 2)?, number(mi, 1, 2)?, number(se, 1, 2)?);
    if h >= 24 || mi >= 60 || se >= 60 {
        return None;
    }
    Some(format!("{date}T{h:02}:{mi:02}:{se:02}{frac}{zone}"))
}
