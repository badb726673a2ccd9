//! Numbers as go-yaml prints them after the JSON round trip.

/// `strconv.FormatFloat(f, 'g', -1, 64)`.
pub(crate) fn go_format_g(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest digits that read back exactly, as
    // Go's shortest formatting does.
    let scientific = format!("{:e}", f.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    // Go's shortest `%g` switches to an exponent below 1e-4 and from 1e6.
    if !(-4..6).contains(&exponent) {
        let mut out = String::from(sign);
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e_sign = if exponent < 0 { '-' } else { '+' };
        out.push_str(&format!("e{e_sign}{:02}", exponent.abs()));
        out
    } else if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        }
    }
}
