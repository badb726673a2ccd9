//! Go's `time.ParseDuration`: `300ms`, `-1.5h`, `2h45m`; `0` alone without a
//! unit. Nanoseconds, refusing what overflows an int64 as Go does.

/// The duration `text` names, in nanoseconds.
pub fn parse(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        // The number: digits, then an optional fraction.
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let mut fraction = "";
        if let Some(after) = rest.strip_prefix('.') {
            let len = after.bytes().take_while(u8::is_ascii_digit).count();
            fraction = &after[..len];
            rest = &after[len..];
            if whole.is_empty() && fraction.is_empty() {
                return Err(invalid());
            }
        } else if whole.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            other => return Err(format!("time: unknown unit {other:?} in duration {text:?}")),
        };
        rest = &rest[unit_len..];
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut nanos = whole.checked_mul(unit).ok_or_else(invalid)?;
        // The fraction, to the nanosecond (Go truncates the same way).
        let mut scale = unit;
        for digit in fraction.bytes().take(30) {
            scale /= 10;
            nanos += u128::from(digit - b'0') * scale;
        }
        total = total.checked_add(nanos).ok_or_else(invalid)?;
        if total > i64::MAX as u128 + u128::from(negative) {
            return Err(invalid());
        }
    }
    let total = total as i128;
    Ok(if negative { -total } else { total } as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_reads_them() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("300ms"), Ok(300_000_000));
        assert_eq!(parse("-1.5h"), Ok(-5_400_000_000_000));
        assert_eq!(parse("2h45m"), Ok(9_900_000_000_000));
        assert_eq!(parse("1.5µs"), Ok(1_500));
        assert_eq!(parse(".5s"), Ok(500_000_000));
        assert!(parse("1").is_err());
        assert!(parse("").is_err());
        assert!(parse("1d").is_err());
        assert!(parse(".s").is_err());
        assert!(parse("9999999999999999999h").is_err());
        assert!(parse("3000000h").is_err());
    }
}
