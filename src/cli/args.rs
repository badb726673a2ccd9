//! Parsers for argument values.

use std::time::Duration;

/// `10s`, `500ms`, `2m`, or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    kiln::units::parse_duration(text)
}

/// `256Mi`, `1Gi`, `64Ki`, `1000000` (bytes), also `M`/`G`/`K` (powers of 10).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    kiln::units::parse_size(text)
}

/// `key=value` (the value may contain `=`).
pub(crate) fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("`{text}` is not of the form key=value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration("5h").unwrap(), Duration::from_secs(5 * 3600));
        assert!(parse_duration("5d").is_err());
        assert_eq!(parse_size("256Mi").unwrap(), 256 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1_000_000_000);
        assert!(parse_size("x").is_err());
        assert_eq!(
            parse_key_value("a=b=c").unwrap(),
            ("a".into(), "b=c".into())
        );
        assert!(parse_key_value("=x").is_err());
    }
}
