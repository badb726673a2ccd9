//! `values.schema.json`: the chart's values (and each enabled subchart's)
//! validated against its JSON Schema, as Helm's install action does, the
//! violations worded as Helm v4 words them (its validator's messages:
//! `- at '/replicas': got string, want integer`).
//!
//! A schema may `$ref` its own definitions; a reference to another
//! document (a file, a URL) is refused: the sandbox has no network, and a
//! chart's schema is read from the chart alone.

use std::fmt::Write as _;

use boon::{Compiler, ErrorKind, Schemas, UrlLoader, ValidationError};

use crate::chart::Chart;
use crate::value::{Map, Value};

/// Where Helm registers a chart's schema (and what its messages drop).
const SCHEMA_URL: &str = "file:///values.schema.json";

/// A schema that cannot be used, or values that violate it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema does not parse or compile.
    #[error("{file}: {message}")]
    Invalid {
        /// The schema file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The values violate one or more schemas.
    #[error(
        "values don't meet the specifications of the schema(s) in the following chart(s):\n{report}"
    )]
    Violations {
        /// The first schema violated (its file).
        file: String,
        /// Helm's report: per chart, its name and its violations.
        report: String,
    },
}

/// Refuses every document but the chart's own schema.
struct NoExternalDocuments;

impl UrlLoader for NoExternalDocuments {
    fn load(&self, url: &str) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
        Err(format!(
            "{url}: a values schema may only reference its own definitions (the renderer reads no other document)"
        )
        .into())
    }
}

/// Validates `values` against the schemas of `chart` and its subcharts.
pub fn validate(chart: &Chart, values: &Map) -> Result<(), SchemaError> {
    let mut report = String::new();
    let mut first = None;
    validate_chart(chart, values, &mut report, &mut first)?;
    match first {
        None => Ok(()),
        Some(file) => Err(SchemaError::Violations { file, report }),
    }
}

fn validate_chart(
    chart: &Chart,
    values: &Map,
    report: &mut String,
    first: &mut Option<String>,
) -> Result<(), SchemaError> {
    if let Some((file, bytes)) = &chart.schema {
        let json = crate::convert::to_json_value(&Value::map(values.clone()))
            .unwrap_or(serde_json::Value::Null);
        if let Some(lines) = violations(file, bytes, &json)? {
            let _ = writeln!(report, "{}:", chart.name());
            report.push_str(&lines);
            first.get_or_insert_with(|| file.clone());
        }
    }
    for sub in &chart.subcharts {
        match values.get(&sub.name()) {
            None | Some(Value::Nil) => {}
            Some(Value::Map(m)) => {
                let m = m.borrow().clone();
                validate_chart(sub, &m, report, first)?;
            }
            Some(other) => {
                let _ = writeln!(
                    report,
                    "{}:\ninvalid type for values: expected object (map), got {}",
                    sub.name(),
                    crate::gofmt::sprintf("%T", std::slice::from_ref(other))
                );
                first.get_or_insert_with(|| sub.dir.clone());
            }
        }
    }
    Ok(())
}

/// The violations of `json` (one `- at …` line each, nested ones indented),
/// None when it is valid.
fn violations(
    file: &str,
    bytes: &[u8],
    json: &serde_json::Value,
) -> Result<Option<String>, SchemaError> {
    let invalid = |message: String| SchemaError::Invalid {
        file: file.to_owned(),
        message,
    };
    let schema: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    let mut compiler = Compiler::new();
    compiler.use_loader(Box::new(NoExternalDocuments));
    compiler
        .add_resource(SCHEMA_URL, schema)
        .map_err(|e| invalid(format!("{e:#}")))?;
    let mut schemas = Schemas::new();
    let index = compiler
        .compile(SCHEMA_URL, &mut schemas)
        .map_err(|e| invalid(format!("{e:#}")))?;
    match schemas.validate(json, index) {
        Ok(()) => Ok(None),
        Err(e) => {
            let mut out = String::new();
            write_causes(&e, 0, &mut out);
            Ok(Some(out))
        }
    }
}

/// The errors under `e`, depth-first, sorted by instance location (Helm's
/// validator gives them in map order).
fn write_causes(e: &ValidationError<'_, '_>, depth: usize, out: &mut String) {
    let mut causes: Vec<&ValidationError<'_, '_>> = e.causes.iter().collect();
    causes.sort_by_key(|c| c.instance_location.to_string());
    for c in causes {
        write_error(c, depth, out);
    }
}

fn write_error(e: &ValidationError<'_, '_>, depth: usize, out: &mut String) {
    // Groups and references are transparent, as in Helm's output.
    if matches!(
        e.kind,
        ErrorKind::Group | ErrorKind::Reference { .. } | ErrorKind::Schema { .. }
    ) {
        write_causes(e, depth, out);
        return;
    }
    let _ = writeln!(
        out,
        "{}- at '{}': {}",
        "  ".repeat(depth),
        e.instance_location,
        message(&e.kind)
    );
    write_causes(e, depth + 1, out);
}

fn quoted<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn primitive(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(format!("'{s}'")),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => None,
        other => Some(other.to_string()),
    }
}

/// A count as Helm's validator prints it: English digit grouping (`70,000`).
fn g(n: impl std::fmt::Display) -> String {
    let text = n.to_string();
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", text.as_str()),
    };
    let split = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (int, tail) = rest.split_at(split);
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}{grouped}{tail}")
}

/// A JSON number as Helm's validator prints it (Go's message printer, a
/// float64's `%v`): grouped digits (`123,456.7`), or, below 1e-4 and from
/// 1e6 on, the shortest mantissa times a power of ten in superscript
/// (`1.234567×10⁰⁶`, `1×10⁻⁰⁵`).
fn num(n: &serde_json::Number) -> String {
    let Some(f) = n.as_f64() else {
        return g(n);
    };
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if f != 0.0 && !(-4..6).contains(&exp) {
        const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
        let sign = if exp < 0 { "⁻" } else { "" };
        let digits: String = format!("{:02}", exp.unsigned_abs())
            .chars()
            .map(|c| DIGITS[c.to_digit(10).unwrap_or(0) as usize])
            .collect();
        return format!("{mantissa}×10{sign}{digits}");
    }
    g(f)
}

/// One violation as Helm's validator words it.
fn message(kind: &ErrorKind<'_, '_>) -> String {
    match kind {
        ErrorKind::Type { got, want } => {
            let mut want: Vec<String> = want.iter().map(|t| t.to_string()).collect();
            want.sort();
            format!("got {got}, want {}", want.join(" or "))
        }
        ErrorKind::Enum { want } => match want.iter().map(primitive).collect::<Option<Vec<_>>>() {
            Some(w) if w.len() == 1 => format!("value must be {}", w[0]),
            Some(w) => format!("value must be one of {}", w.join(", ")),
            None => "'enum' failed".into(),
        },
        ErrorKind::Const { want } => match primitive(want) {
            Some(w) => format!("value must be {w}"),
            None => "'const' failed".into(),
        },
        ErrorKind::Format { got, want, err } => {
            let got = primitive(got).unwrap_or_else(|| got.to_string());
            format!("{got} is not valid {want}: {err}")
        }
        ErrorKind::MinProperties { got, want } => {
            format!("minProperties: got {}, want {}", g(got), g(want))
        }
        ErrorKind::MaxProperties { got, want } => {
            format!("maxProperties: got {}, want {}", g(got), g(want))
        }
        ErrorKind::AdditionalProperties { got } if got.len() == 1 => {
            format!(
                "additional property {} not allowed",
                quoted(got.iter().map(|s| s.as_ref()))
            )
        }
        ErrorKind::AdditionalProperties { got } => format!(
            "additional properties {} not allowed",
            quoted(got.iter().map(|s| s.as_ref()))
        ),
        ErrorKind::Required { want } if want.len() == 1 => {
            format!("missing property {}", quoted(want.iter().copied()))
        }
        ErrorKind::Required { want } => {
            format!("missing properties {}", quoted(want.iter().copied()))
        }
        ErrorKind::Dependency { prop, missing }
        | ErrorKind::DependentRequired { prop, missing } => {
            format!(
                "properties {} required, if {} exists",
                quoted(missing.iter().copied()),
                quoted([*prop])
            )
        }
        ErrorKind::MinItems { got, want } => format!("minItems: got {}, want {}", g(got), g(want)),
        ErrorKind::MaxItems { got, want } => format!("maxItems: got {}, want {}", g(got), g(want)),
        ErrorKind::Contains => "no items match contains schema".into(),
        ErrorKind::MinContains { got, want } => {
            format!("minContains: got {}, want {}", g(got.len()), g(want))
        }
        ErrorKind::MaxContains { got, want } => {
            format!("maxContains: got {}, want {}", g(got.len()), g(want))
        }
        ErrorKind::UniqueItems { got: [i, j] } => {
            format!("items at {} and {} are equal", g(i), g(j))
        }
        ErrorKind::AdditionalItems { got } => format!("last {got} additionalItems not allowed"),
        ErrorKind::MinLength { got, want } => {
            format!("minLength: got {}, want {}", g(got), g(want))
        }
        ErrorKind::MaxLength { got, want } => {
            format!("maxLength: got {}, want {}", g(got), g(want))
        }
        ErrorKind::Pattern { got, want } => format!("'{got}' does not match pattern '{want}'"),
        ErrorKind::Minimum { got, want } => {
            format!("minimum: got {}, want {}", num(got), num(want))
        }
        ErrorKind::Maximum { got, want } => {
            format!("maximum: got {}, want {}", num(got), num(want))
        }
        ErrorKind::ExclusiveMinimum { got, want } => {
            format!("exclusiveMinimum: got {}, want {}", num(got), num(want))
        }
        ErrorKind::ExclusiveMaximum { got, want } => {
            format!("exclusiveMaximum: got {}, want {}", num(got), num(want))
        }
        ErrorKind::MultipleOf { got, want } => {
            format!("multipleOf: got {}, want {}", num(got), num(want))
        }
        ErrorKind::Not => "'not' failed".into(),
        ErrorKind::AllOf => "'allOf' failed".into(),
        ErrorKind::AnyOf => "'anyOf' failed".into(),
        ErrorKind::OneOf(None) => "'oneOf' failed, none matched".into(),
        ErrorKind::OneOf(Some((i, j))) => format!("'oneOf' failed, subschemas {i}, {j} matched"),
        ErrorKind::FalseSchema => "false schema".into(),
        ErrorKind::PropertyName { prop } => format!("invalid propertyName '{prop}'"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Helm v4.2.3's printing of these numbers (through the oracle).
    #[test]
    fn numbers_print_as_helms_validator_prints_them() {
        for (n, want) in [
            ("0", "0"),
            ("100000", "100,000"),
            ("999999", "999,999"),
            ("1000000", "1×10⁰⁶"),
            ("0.0001", "0.0001"),
            ("0.00001", "1×10⁻⁰⁵"),
            ("123456.7", "123,456.7"),
            ("-2500000", "-2.5×10⁰⁶"),
            ("12345678901", "1.2345678901×10¹⁰"),
            ("1000.5", "1,000.5"),
            ("70000", "70,000"),
        ] {
            let number: serde_json::Number = serde_json::from_str(n).unwrap();
            assert_eq!(num(&number), want, "{n}");
        }
    }
}
