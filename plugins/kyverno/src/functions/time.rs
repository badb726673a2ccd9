//! Kyverno's time functions, on Go's time (`kiln-gotime`, shared with the
//! helm plugin): times are RFC 3339 strings (`2024-03-05T10:00:00Z`),
//! durations Go's (`1h30m0s`), layouts Go's reference time.
//!
//! A plugin reads no clock (its reviews are reproducible): `time_now`,
//! `time_now_utc` and `time_since` with no end read the review's time,
//! which the `now` setting gives ([`set_now`]); without it they are an
//! error naming the function, never a made-up time.

use std::cell::Cell;

use jmespath::Runtime;
use kiln_gotime::layout;
use kiln_gotime::time::{Location, Time, duration_string, parse_duration};
use serde_json::{Value, json};

use super::{define, string_arg};

/// Go's `time.RFC3339`.
const RFC3339: &str = "2006-01-02T15:04:05Z07:00";

thread_local! {
    /// The review's time: Unix seconds and nanoseconds.
    static NOW: Cell<Option<(i64, i64)>> = const { Cell::new(None) };
}

/// Sets the review's time for the functions that read the clock (`None`:
/// they fail).
pub fn set_now(now: Option<(i64, i64)>) {
    NOW.with(|cell| cell.set(now));
}

/// Parses the `now` setting: an RFC 3339 time, as Unix seconds and
/// nanoseconds.
pub fn parse_now(text: &str) -> Result<(i64, i64), String> {
    let t = layout::parse(RFC3339, text)?;
    Ok((t.unix_seconds(), i64::from(t.nanosecond())))
}

fn now(function: &str) -> Result<Time, String> {
    let (sec, nsec) = NOW.with(Cell::get).ok_or_else(|| {
        format!(
            "{function} reads the review's time, which this review was not given (the kyverno plugin's `now` setting)"
        )
    })?;
    Ok(Time::unix(sec, nsec))
}

/// An RFC 3339 time argument.
fn time_arg(a: &[Value], index: usize) -> Result<Time, String> {
    layout::parse(RFC3339, string_arg(&a[index], index + 1)?)
}

/// A Go duration argument.
fn duration_arg(a: &[Value], index: usize) -> Result<i64, String> {
    parse_duration(string_arg(&a[index], index + 1)?)
}

fn rfc3339(t: &Time) -> Value {
    json!(layout::format(t, RFC3339))
}

/// `time.Parse(layout, text)`, RFC 3339 for an empty layout.
fn parse_with(layout_text: &str, text: &str) -> Result<Time, String> {
    layout::parse(
        if layout_text.is_empty() {
            RFC3339
        } else {
            layout_text
        },
        text,
    )
}

pub(super) fn register(runtime: &mut Runtime) {
    define(runtime, "time_since", 3, |a| {
        let layout_text = string_arg(&a[0], 1)?;
        let start = parse_with(layout_text, string_arg(&a[1], 2)?)?;
        let end = match string_arg(&a[2], 3)? {
            "" => now("time_since with no end")?,
            text => parse_with(layout_text, text)?,
        };
        Ok(json!(duration_string(end.sub(&start))))
    });
    define(runtime, "time_now", 0, |_| Ok(rfc3339(&now("time_now")?)));
    define(runtime, "time_now_utc", 0, |_| {
        Ok(rfc3339(&now("time_now_utc")?.with_location(Location::Utc)))
    });
    define(runtime, "time_to_cron", 1, |a| {
        let (_, _, c) = time_arg(a, 0)?.civil();
        Ok(json!(format!(
            "{} {} {} {} {}",
            c.minute, c.hour, c.day, c.month, c.weekday
        )))
    });
    define(runtime, "time_add", 2, |a| {
        Ok(rfc3339(&time_arg(a, 0)?.add(duration_arg(a, 1)?)))
    });
    define(runtime, "time_parse", 2, |a| {
        let layout_text = string_arg(&a[0], 1)?;
        let text = string_arg(&a[1], 2)?;
        // A layout that is a number means epoch seconds.
        if layout_text.parse::<i64>().is_ok() {
            let seconds: i64 = text
                .parse()
                .map_err(|_| format!("strconv.ParseInt: parsing {text:?}: invalid syntax"))?;
            return Ok(rfc3339(
                &Time::unix(seconds, 0).with_location(Location::Utc),
            ));
        }
        Ok(rfc3339(&layout::parse(layout_text, text)?))
    });
    define(runtime, "time_utc", 1, |a| {
        Ok(rfc3339(&time_arg(a, 0)?.with_location(Location::Utc)))
    });
    define(runtime, "time_diff", 2, |a| {
        let (start, end) = (time_arg(a, 0)?, time_arg(a, 1)?);
        Ok(json!(duration_string(end.sub(&start))))
    });
    define(runtime, "time_before", 2, |a| {
        Ok(json!(time_arg(a, 0)?.sub(&time_arg(a, 1)?) < 0))
    });
    define(runtime, "time_after", 2, |a| {
        Ok(json!(time_arg(a, 0)?.sub(&time_arg(a, 1)?) > 0))
    });
    define(runtime, "time_between", 3, |a| {
        let t = time_arg(a, 0)?;
        let (start, end) = (time_arg(a, 1)?, time_arg(a, 2)?);
        Ok(json!(t.sub(&start) > 0 && t.sub(&end) < 0))
    });
    define(runtime, "time_truncate", 2, |a| {
        Ok(rfc3339(&time_arg(a, 0)?.truncate(duration_arg(a, 1)?)))
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{parse_now, set_now};
    use crate::variables::query;

    // The examples of Kyverno's documentation (JMESPath, "Time").
    #[test]
    fn times_as_kyverno_computes_them() {
        let data = json!({});
        let q = |e: &str| query(e, &data).unwrap();
        assert_eq!(
            q("time_add('2023-01-12T12:37:56Z', '3h')"),
            json!("2023-01-12T15:37:56Z")
        );
        assert_eq!(
            q("time_parse('Mon Jan 02 2006 15:04:05 -0700', 'Fri Jun 22 2022 17:45:00 +0100')"),
            json!("2022-06-22T17:45:00+01:00")
        );
        assert_eq!(
            q("time_parse('1136214245', '1666351768')"),
            json!("2022-10-21T11:29:28Z")
        );
        assert_eq!(
            q("time_utc('2021-01-02T18:04:05-05:00')"),
            json!("2021-01-02T23:04:05Z")
        );
        assert_eq!(
            q("time_diff('2021-01-01T00:00:00Z', '2021-01-01T01:02:03Z')"),
            json!("1h2m3s")
        );
        assert_eq!(
            q("time_since('', '2022-04-10T03:14:05-07:00', '2022-04-11T03:14:05-07:00')"),
            json!("24h0m0s")
        );
        assert_eq!(
            q("time_before('2023-01-12T12:37:56Z', '2023-01-12T12:37:57Z')"),
            json!(true)
        );
        assert_eq!(
            q("time_after('2023-01-12T12:37:56Z', '2023-01-12T12:37:57Z')"),
            json!(false)
        );
        assert_eq!(
            q(
                "time_between('2023-01-12T12:37:56Z', '2023-01-12T12:00:00Z', '2023-01-12T13:00:00Z')"
            ),
            json!(true)
        );
        assert_eq!(
            q("time_truncate('2023-01-12T12:37:56Z', '1h')"),
            json!("2023-01-12T12:00:00Z")
        );
        assert_eq!(
            q("time_to_cron('2023-02-02T15:30:00Z')"),
            json!("30 15 2 2 4")
        );
        assert!(query("time_add('yesterday', '1h')", &data).is_err());
        // No clock without the review's time; with it, the functions read it.
        set_now(None);
        let error = query("time_now_utc()", &data).unwrap_err();
        assert!(error.contains("`now` setting"), "{error}");
        set_now(Some(parse_now("2024-05-06T07:08:09Z").unwrap()));
        assert_eq!(q("time_now_utc()"), json!("2024-05-06T07:08:09Z"));
        assert_eq!(q("time_now()"), json!("2024-05-06T07:08:09Z"));
        assert_eq!(
            q("time_since('', '2024-05-06T06:08:09Z', '')"),
            json!("1h0m0s")
        );
        set_now(None);
    }
}
