//! Sprig's date functions from the render's clock (`Options::now`, which
//! the oracle cannot share: Helm reads the system time), and hostile date
//! inputs: huge durations, pathological layouts, the ends of Go's time
//! range, all answered without a panic (a trap in the wasm component).
//! The deterministic functions are compared with Helm by the corpus
//! (`tests/helm/73-dates` and the `*-dates-*-failure` cases).

use chrono::{DateTime, Utc};
use kiln_helm::chart::DirSource;
use kiln_helm::{Options, render};

/// What `template` prints as the one value `v` of a ConfigMap, rendered at
/// `now` (None: the Unix epoch, the default); the error's text if it fails.
fn value_at(name: &str, template: &str, now: Option<&str>) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("kiln-helm-dates-{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: dates\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/cm.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\ndata:\n  v: {{{{ {template} | toString | quote }}}}\n"
        ),
    )
    .unwrap();
    let mut options = Options::default();
    if let Some(now) = now {
        options.now = DateTime::parse_from_rfc3339(now)
            .unwrap()
            .with_timezone(&Utc);
    }
    let result = render(&DirSource(dir.clone()), ".", &options);
    std::fs::remove_dir_all(&dir).unwrap();
    let docs = result.map_err(|e| e.to_string())?;
    let stream = kiln_helm::stream(&docs);
    let object: serde_json::Value = serde_yaml::from_str(
        stream
            .split("\n---\n")
            .find(|d| d.contains("kind: ConfigMap"))
            .unwrap(),
    )
    .unwrap();
    Ok(object["data"]["v"].as_str().unwrap().to_owned())
}

const NOW: &str = "2024-03-05T13:04:05.123456789Z";

#[test]
fn now_is_the_renders_clock() {
    for (template, want) in [
        ("now", "2024-03-05 13:04:05.123456789 +0000 UTC"),
        ("now | unixEpoch", "1709643845"),
        (
            "now | date \"2006-01-02T15:04:05.000Z07:00\"",
            "2024-03-05T13:04:05.123Z",
        ),
        ("now | htmlDate", "2024-03-05"),
        (
            "dateInZone \"2006-01-02 15:04 MST\" now \"Asia/Tokyo\"",
            "2024-03-05 22:04 JST",
        ),
        // Sprig takes the current time for a date it cannot read.
        ("date \"2006-01-02\" \"yesterday\"", "2024-03-05"),
        ("htmlDateInZone 1.5 \"America/New_York\"", "2024-03-05"),
        ("now | dateModify \"-24h\" | htmlDate", "2024-03-04"),
        ("typeOf now", "time.Time"),
        ("(now).Unix", "1709643845"),
        ("(now).UnixNano", "1709643845123456789"),
        ("now | toJson", "\"2024-03-05T13:04:05.123456789Z\""),
    ] {
        assert_eq!(
            value_at("now", template, Some(NOW)).as_deref(),
            Ok(want),
            "{template}"
        );
    }
}

#[test]
fn the_default_clock_is_the_unix_epoch() {
    assert_eq!(
        value_at("epoch", "now", None).as_deref(),
        Ok("1970-01-01 00:00:00 +0000 UTC")
    );
    assert_eq!(
        value_at("epoch-unix", "now | unixEpoch", None).as_deref(),
        Ok("0")
    );
}

#[test]
fn ago_and_duration_round_count_from_the_renders_clock() {
    for (template, want) in [
        (
            "ago (toDate \"2006-01-02 15:04\" \"2024-03-05 11:34\")",
            "1h30m5s",
        ),
        (
            "ago (toDate \"2006-01-02 15:04:05.000\" \"2024-03-05 13:04:04.500\")",
            "1s",
        ),
        ("ago 1709643845", "0s"),
        ("ago (int64 1709640245)", "1h0m0s"),
        ("ago 1709647445", "-1h0m0s"),
        // Another type: the current time itself.
        ("ago \"yesterday\"", "0s"),
        // From year 1: beyond a Duration, Go saturates.
        ("ago (toDate \"2006\" \"x\")", "2562047h47m16.854775807s"),
        (
            "durationRound (toDate \"2006-01-02\" \"2024-02-01\")",
            "1mo",
        ),
        ("durationRound (toDate \"2006\" \"2020\")", "4y"),
    ] {
        assert_eq!(
            value_at("ago", template, Some(NOW)).as_deref(),
            Ok(want),
            "{template}"
        );
    }
}

#[test]
fn hostile_dates_are_answered_without_a_panic() {
    let long_fraction = format!("date \"05.{}\" 0", "0".repeat(5000));
    let many_elements = format!(
        "date \"{}\" 9223372036854775807",
        "2006 Jan _2 __2 MST Z07:00:00 .999999999 ".repeat(2000)
    );
    let long_parse = format!(
        "toDate \"{}\" \"{}\"",
        "2006".repeat(3000),
        "2024".repeat(3000)
    );
    for (template, want) in [
        // The ends of Go's range wrap as Go's arithmetic does.
        (
            "date \"2006-01-02 15:04:05\" 9223372036854775807",
            Some("292277026596-12-04 15:30:07"),
        ),
        (
            "date \"2006-01-02 15:04:05\" -9223372036854775808",
            Some("292277026596-12-04 15:30:08"),
        ),
        (
            "dateModify \"2562047h\" (dateModify \"2562047h\" (toDate \"2006\" \"9999\")) | date \"2006\"",
            Some("10583"),
        ),
        (
            "dateModify \"-2562047h47m16.854775808s\" (toDate \"2006\" \"0000\") | date \"2006\"",
            Some("-0293"),
        ),
        // Beyond a Duration: Go refuses the text (dateModify keeps the time).
        (
            "dateModify \"2562048h\" (toDate \"2006\" \"2024\") | date \"2006\"",
            Some("2024"),
        ),
        ("duration (int64 9223372036854775807)", Some("-1s")),
        ("durationRound (int64 -9223372036854775808)", Some("292y")),
        ("durationRound \"99999999999999999999h\"", Some("0s")),
        // Zones that are not names of the database: UTC, as Sprig does.
        ("dateInZone \"MST\" 0 \"../../etc/passwd\"", Some("UTC")),
        ("dateInZone \"MST\" 0 \"\\x00\"", Some("UTC")),
        // Layouts: long, odd, not ASCII.
        (long_fraction.as_str(), None),
        (many_elements.as_str(), None),
        (long_parse.as_str(), None),
        ("date \"é2006ü\" 0", Some("é1970ü")),
        (
            "toDate \"2006é\" \"2024\\xff\"",
            Some("0001-01-01 00:00:00 +0000 UTC"),
        ),
        (
            "toDate \"2006-01-02 15:04:05\" \"2024-03-05 13:04:05.99999999999999999999\"",
            Some("2024-03-05 13:04:05.999999999 +0000 UTC"),
        ),
    ] {
        let got = value_at("hostile", template, Some(NOW));
        match want {
            Some(want) => assert_eq!(got.as_deref(), Ok(want), "{template}"),
            // Whatever Go prints, or a limit's error: never a panic.
            None => drop(got),
        }
    }
}
