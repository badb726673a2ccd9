//! Go values with methods, as templates see what Sprig and `time.Time`'s
//! methods return: semantic versions (`semver`), durations, months,
//! weekdays and locations.
//!
//! Go's `text/template` calls a method by name (`$v.Compare $w`,
//! `$d.Sub $e`), prints a value through its `String` method, and
//! compares the integer kinds (`time.Month`, `time.Duration`) as integers
//! in `eq` and `lt`. A value a method returned is not addressable, so the
//! methods of its pointer type are not found on it: `(semver
//! "1.2.3").IncPatch.Compare` fails as in Go ([`GoObject::Semver`]'s
//! `pointer`).

use std::rc::Rc;

use crate::golayout::{LONG_DAYS, LONG_MONTHS};
use crate::gotime::{Location, duration_round, duration_string};
use crate::semver::{self, Version};
use crate::value::Value;

/// A Go value with methods (see the module documentation).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum GoObject {
    /// Masterminds' `*semver.Version` (Sprig's `semver`), or the
    /// `semver.Version` its `Inc*` and `Set*` methods return (`pointer`
    /// false: without the pointer methods `Original`, `Compare`,
    /// `LessThan`…).
    Semver {
        /// The version.
        version: Version,
        /// The text it was parsed from (`Original`).
        original: String,
        /// Whether this is the pointer Sprig returns.
        pointer: bool,
    },
    /// `time.Duration`: nanoseconds.
    Duration(i64),
    /// `time.Month`: 1 (January) to 12.
    Month(i64),
    /// `time.Weekday`: 0 (Sunday) to 6.
    Weekday(i64),
    /// `*time.Location`.
    Location(Location),
}

impl GoObject {
    /// Wraps the object as a template value.
    pub fn value(self) -> Value {
        Value::Go(Rc::new(self))
    }

    /// Go's type name (`typeOf`, `printf "%T"`).
    pub fn type_name(&self) -> &'static str {
        match self {
            GoObject::Semver { pointer: true, .. } => "*semver.Version",
            GoObject::Semver { pointer: false, .. } => "semver.Version",
            GoObject::Duration(_) => "time.Duration",
            GoObject::Month(_) => "time.Month",
            GoObject::Weekday(_) => "time.Weekday",
            GoObject::Location(_) => "*time.Location",
        }
    }

    /// Go's kind name (`kindOf`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            GoObject::Semver { pointer: true, .. } | GoObject::Location(_) => "ptr",
            GoObject::Semver { pointer: false, .. } => "struct",
            GoObject::Duration(_) => "int64",
            GoObject::Month(_) | GoObject::Weekday(_) => "int",
        }
    }

    /// The integer of an integer kind (`eq`, `lt` and `printf "%d"` see
    /// it; Sprig's `int` only for months and weekdays, as `cast` does).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            GoObject::Duration(n) | GoObject::Month(n) | GoObject::Weekday(n) => Some(*n),
            GoObject::Semver { .. } | GoObject::Location(_) => None,
        }
    }

    /// Go's truth: a pointer or a struct is true, an integer when not 0.
    pub fn truth(&self) -> bool {
        self.as_int().is_none_or(|n| n != 0)
    }

    /// What its `String` method returns (what `%v`, `%s` and a template
    /// action print).
    pub fn go_string(&self) -> String {
        match self {
            GoObject::Semver { version, .. } => semver_string(version),
            GoObject::Duration(d) => duration_string(*d),
            GoObject::Month(m) => usize::try_from(*m - 1)
                .ok()
                .and_then(|i| LONG_MONTHS.get(i))
                .map_or_else(|| format!("%!Month({m})"), |s| (*s).to_owned()),
            GoObject::Weekday(d) => usize::try_from(*d)
                .ok()
                .and_then(|i| LONG_DAYS.get(i))
                .map_or_else(|| format!("%!Weekday({d})"), |s| (*s).to_owned()),
            GoObject::Location(loc) => location_name(loc),
        }
    }

    /// What `encoding/json` makes of it: a version's `MarshalJSON` text,
    /// an integer kind's number, a location's `{}` (no exported field).
    pub fn json(&self) -> serde_json::Value {
        match self {
            GoObject::Semver { version, .. } => serde_json::Value::String(semver_string(version)),
            GoObject::Duration(n) | GoObject::Month(n) | GoObject::Weekday(n) => {
                serde_json::Value::from(*n)
            }
            GoObject::Location(_) => serde_json::Value::Object(serde_json::Map::new()),
        }
    }

    /// Calls method `name` with `args` (Go's template errors otherwise).
    pub fn method(&self, name: &str, args: &[Value]) -> Result<Value, String> {
        match self {
            GoObject::Semver {
                version,
                original,
                pointer,
            } => semver_method(version, original, *pointer, name, args),
            GoObject::Duration(d) => duration_method(*d, name, args),
            GoObject::Month(_) | GoObject::Weekday(_) | GoObject::Location(_) => {
                if name == "String" {
                    want_args(name, args, 0)?;
                    Ok(Value::str(self.go_string()))
                } else {
                    Err(no_field(name, self.type_name()))
                }
            }
        }
    }
}

/// A `time.Location`'s `String()`: its name.
pub fn location_name(loc: &Location) -> String {
    match loc {
        Location::Utc => "UTC".to_owned(),
        Location::Local => "Local".to_owned(),
        Location::Fixed(zone) => zone.name.to_string(),
        Location::Zone(tz) => tz.name().to_owned(),
    }
}

/// Masterminds' `Version.String()`: `1.2.3-pre+meta`, without the `v`.
fn semver_string(v: &Version) -> String {
    let mut s = format!("{}.{}.{}", v.major, v.minor, v.patch);
    if !v.pre.is_empty() {
        s.push('-');
        s.push_str(&v.pre);
    }
    if !v.build.is_empty() {
        s.push('+');
        s.push_str(&v.build);
    }
    s
}

/// Go's message for a method or field a type does not have.
pub fn no_field(name: &str, type_name: &str) -> String {
    format!("can't evaluate field {name} in type {type_name}")
}

/// Go's check of a method's argument count.
pub fn want_args(name: &str, args: &[Value], want: usize) -> Result<(), String> {
    if args.len() == want {
        Ok(())
    } else {
        Err(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        ))
    }
}

/// Go's message for an argument of the wrong type.
pub fn wrong_type(want: &str, got: &Value) -> String {
    format!(
        "wrong type for value; expected {want}; got {}",
        match got {
            Value::Nil => "interface {}",
            other => other.type_name(),
        }
    )
}

fn string_arg(v: &Value) -> Result<&str, String> {
    v.as_str().ok_or_else(|| wrong_type("string", v))
}

/// A `*semver.Version` argument.
fn semver_arg(v: &Value) -> Result<&Version, String> {
    match v {
        Value::Go(o) => match &**o {
            GoObject::Semver {
                version,
                pointer: true,
                ..
            } => Ok(version),
            _ => Err(wrong_type("*semver.Version", v)),
        },
        other => Err(wrong_type("*semver.Version", other)),
    }
}

/// A `time.Duration` argument: a duration, or a number written in the
/// template (Go converts a constant to the parameter's type; it refuses a
/// computed `int64`, as from `mul`, and so does this — a computed `int`,
/// as from `len`, is taken here where Go refuses it).
pub fn duration_arg(v: &Value) -> Result<i64, String> {
    match v {
        Value::Int(n) => Ok(*n),
        Value::Go(o) => match &**o {
            GoObject::Duration(d) => Ok(*d),
            _ => Err(wrong_type("time.Duration", v)),
        },
        other => Err(wrong_type("time.Duration", other)),
    }
}

fn semver_method(
    v: &Version,
    original: &str,
    pointer: bool,
    name: &str,
    args: &[Value],
) -> Result<Value, String> {
    let uint = |n: u64| Value::Int64(n as i64);
    // The methods of `semver.Version` (value receivers).
    let next = |version: Version| {
        let prefix = if original.starts_with('v') { "v" } else { "" };
        GoObject::Semver {
            original: format!("{prefix}{}", semver_string(&version)),
            version,
            pointer: false,
        }
        .value()
    };
    let by_value = match name {
        "String" | "Major" | "Minor" | "Patch" | "Prerelease" | "Metadata" | "IncPatch"
        | "IncMinor" | "IncMajor" => {
            want_args(name, args, 0)?;
            Some(match name {
                "String" => Value::str(semver_string(v)),
                "Major" => uint(v.major),
                "Minor" => uint(v.minor),
                "Patch" => uint(v.patch),
                "Prerelease" => Value::str(&v.pre),
                "Metadata" => Value::str(&v.build),
                "IncPatch" => {
                    let mut n = Version {
                        pre: String::new(),
                        build: String::new(),
                        ..v.clone()
                    };
                    // A prerelease is dropped, not passed: 1.2.3-rc.1 -> 1.2.3.
                    if v.pre.is_empty() {
                        n.patch = v.patch.wrapping_add(1);
                    }
                    next(n)
                }
                "IncMinor" => next(Version {
                    minor: v.minor.wrapping_add(1),
                    patch: 0,
                    pre: String::new(),
                    build: String::new(),
                    ..v.clone()
                }),
                _ => next(Version {
                    major: v.major.wrapping_add(1),
                    minor: 0,
                    patch: 0,
                    pre: String::new(),
                    build: String::new(),
                }),
            })
        }
        "SetPrerelease" | "SetMetadata" => {
            want_args(name, args, 1)?;
            let part = string_arg(&args[0])?;
            let mut n = v.clone();
            if name == "SetPrerelease" {
                if !part.is_empty() {
                    semver::validate_prerelease(part)
                        .map_err(|e| format!("error calling {name}: {e}"))?;
                }
                n.pre = part.to_owned();
            } else {
                if !part.is_empty() {
                    semver::validate_metadata(part)
                        .map_err(|e| format!("error calling {name}: {e}"))?;
                }
                n.build = part.to_owned();
            }
            Some(next(n))
        }
        _ => None,
    };
    if let Some(found) = by_value {
        return Ok(found);
    }
    let type_name = if pointer {
        "*semver.Version"
    } else {
        "semver.Version"
    };
    // The methods of `*semver.Version`.
    if !pointer {
        return Err(no_field(name, type_name));
    }
    let compare = || -> Result<std::cmp::Ordering, String> {
        want_args(name, args, 1)?;
        Ok(v.compare(semver_arg(&args[0])?))
    };
    use std::cmp::Ordering::{Equal, Greater, Less};
    Ok(match name {
        "Original" => {
            want_args(name, args, 0)?;
            Value::str(original)
        }
        "Compare" => Value::Int(match compare()? {
            Less => -1,
            Equal => 0,
            Greater => 1,
        }),
        "LessThan" => Value::Bool(compare()? == Less),
        "LessThanEqual" => Value::Bool(compare()? != Greater),
        "GreaterThan" => Value::Bool(compare()? == Greater),
        "GreaterThanEqual" => Value::Bool(compare()? != Less),
        "Equal" => Value::Bool(compare()? == Equal),
        _ => return Err(no_field(name, type_name)),
    })
}

fn duration_method(d: i64, name: &str, args: &[Value]) -> Result<Value, String> {
    const SECOND: i64 = crate::gotime::NANOS_PER_SECOND;
    // Go's float division of the whole and fractional parts (exact for
    // what an f64 can hold, as Go's `Hours` is).
    let float_of = |unit: i64| {
        let (whole, frac) = (d / unit, d % unit);
        whole as f64 + frac as f64 / unit as f64
    };
    let one_duration = || -> Result<i64, String> {
        want_args(name, args, 1)?;
        duration_arg(&args[0])
    };
    Ok(match name {
        "String" => {
            want_args(name, args, 0)?;
            Value::str(duration_string(d))
        }
        "Hours" => {
            want_args(name, args, 0)?;
            Value::Float(float_of(3600 * SECOND))
        }
        "Minutes" => {
            want_args(name, args, 0)?;
            Value::Float(float_of(60 * SECOND))
        }
        "Seconds" => {
            want_args(name, args, 0)?;
            Value::Float(float_of(SECOND))
        }
        "Milliseconds" => {
            want_args(name, args, 0)?;
            Value::Int64(d / 1_000_000)
        }
        "Microseconds" => {
            want_args(name, args, 0)?;
            Value::Int64(d / 1_000)
        }
        "Nanoseconds" => {
            want_args(name, args, 0)?;
            Value::Int64(d)
        }
        "Abs" => {
            want_args(name, args, 0)?;
            GoObject::Duration(if d == i64::MIN { i64::MAX } else { d.abs() }).value()
        }
        "Round" => GoObject::Duration(duration_round(d, one_duration()?)).value(),
        "Truncate" => {
            let m = one_duration()?;
            GoObject::Duration(if m <= 0 { d } else { d - d % m }).value()
        }
        _ => return Err(no_field(name, "time.Duration")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(text: &str) -> Value {
        GoObject::Semver {
            version: Version::parse(text).unwrap(),
            original: text.to_owned(),
            pointer: true,
        }
        .value()
    }

    fn call(v: &Value, name: &str, args: &[Value]) -> Result<Value, String> {
        let Value::Go(o) = v else {
            panic!("not an object")
        };
        o.method(name, args)
    }

    #[test]
    fn semver_methods_follow_masterminds() {
        let v = version("v1.2.3-beta.1+b5");
        let w = version("2.0.0");
        assert_eq!(
            call(&v, "Compare", std::slice::from_ref(&w))
                .unwrap()
                .as_int(),
            Some(-1)
        );
        assert!(
            call(&v, "LessThan", std::slice::from_ref(&w))
                .unwrap()
                .truth()
        );
        assert!(
            !call(&v, "GreaterThanEqual", std::slice::from_ref(&w))
                .unwrap()
                .truth()
        );
        // A prerelease is dropped by IncPatch, not passed.
        let inc = call(&v, "IncPatch", &[]).unwrap();
        assert_eq!(inc.to_go_string(), "1.2.3");
        assert_eq!(inc.type_name(), "semver.Version");
        // Not addressable: no pointer methods.
        assert_eq!(
            call(&inc, "Compare", std::slice::from_ref(&w)).unwrap_err(),
            "can't evaluate field Compare in type semver.Version"
        );
        assert_eq!(
            call(&v, "Compare", &[inc]).unwrap_err(),
            "wrong type for value; expected *semver.Version; got semver.Version"
        );
        assert_eq!(
            call(&v, "Compare", &[]).unwrap_err(),
            "wrong number of args for Compare: want 1 got 0"
        );
        assert_eq!(
            call(&v, "Original", &[]).unwrap().to_go_string(),
            "v1.2.3-beta.1+b5"
        );
        assert_eq!(
            call(&v, "SetPrerelease", &[Value::str("01")]).unwrap_err(),
            "error calling SetPrerelease: version segment starts with 0"
        );
        assert_eq!(call(&w, "IncMajor", &[]).unwrap().to_go_string(), "3.0.0");
    }

    #[test]
    fn durations_print_and_convert_as_go() {
        let d = GoObject::Duration(90 * 60 * 1_000_000_000).value();
        assert_eq!(d.to_go_string(), "1h30m0s");
        assert_eq!(call(&d, "Hours", &[]).unwrap().to_go_string(), "1.5");
        let hour = GoObject::Duration(3_600_000_000_000).value();
        assert_eq!(
            call(&d, "Round", std::slice::from_ref(&hour))
                .unwrap()
                .to_go_string(),
            "2h0m0s"
        );
        assert_eq!(
            call(&d, "Truncate", &[hour]).unwrap().to_go_string(),
            "1h0m0s"
        );
        assert_eq!(
            call(&d, "Round", &[Value::Int(60_000_000_000)])
                .unwrap()
                .to_go_string(),
            "1h30m0s"
        );
        assert_eq!(
            call(&d, "Round", &[Value::Int64(5)]).unwrap_err(),
            "wrong type for value; expected time.Duration; got int64"
        );
        assert_eq!(GoObject::Month(3).value().to_go_string(), "March");
        assert_eq!(GoObject::Weekday(2).value().to_go_string(), "Tuesday");
    }
}
