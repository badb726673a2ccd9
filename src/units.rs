//! Units people write in flags and specs: durations (`10s`, `500ms`, `2m`)
//! and sizes (`256Mi`, `1G`).

use std::time::Duration;

/// `10s`, `500ms`, `2m`, `24h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = split_unit(text);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 10s or 500ms"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (ms, s, m, h)")),
    };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("`{text}` must be a positive duration"));
    }
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "`{text}` is longer than the longest duration Kiln takes ({} days)",
            MAX_DURATION.as_secs() / 86_400
        ));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("`{text}`: {e}"))
}

/// The longest duration [`parse_duration`] accepts: a year. Durations come
/// from specs anyone who writes an Application may set; one that cannot be
/// represented must be an error, never a panic.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// `256Mi`, `1Gi`, `64Ki`, `1000000` (bytes), also `M`/`G`/`K` (powers of 10).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_unit(text);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 256Mi"))?;
    let factor: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "K" | "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}` (Ki, Mi, Gi, K, M, G)"
            ));
        }
    };
    value
        .checked_mul(factor)
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("`{text}` must be a positive size"))
}

fn split_unit(text: &str) -> (&str, &str) {
    let at = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    text.split_at(at)
}

/// The current time as Kubernetes writes it (RFC 3339, seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_durations_are_errors_not_panics() {
        for text in ["100000000000000000000", "9999999999999999h", "1e300s"] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
        assert_eq!(
            parse_duration("8760h").unwrap(),
            Duration::from_secs(365 * 86_400)
        );
    }
}
