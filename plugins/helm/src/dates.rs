//! Sprig's date functions (`now`, `date`, `dateInZone`, `toDate`,
//! `dateModify`, `duration`, `ago`, ...) over template values, with the
//! argument types Sprig's Go signatures accept, and the methods of a
//! `time.Time` templates call (`(now).Unix`, `.Format`).
//!
//! `now` is the render's clock ([`crate::render::Options::now`], given by
//! the host): a render never reads the system time, so `now`, `ago` and the
//! functions that fall back to the current time are functions of the
//! render's inputs. The local zone is UTC.

use std::rc::Rc;

use crate::exec::FnError;
use crate::goobj::{GoObject, duration_arg, no_field, want_args, wrong_type};
use crate::gotime::{self, Location, NANOS_PER_SECOND, Time};
use crate::value::Value;

type R = Result<Value, FnError>;

/// The date functions' names ([`call`] knows them).
pub const NAMES: &[&str] = &[
    "now",
    "date",
    "dateInZone",
    "date_in_zone",
    "htmlDate",
    "htmlDateInZone",
    "toDate",
    "mustToDate",
    "unixEpoch",
    "ago",
    "dateModify",
    "date_modify",
    "mustDateModify",
    "must_date_modify",
    "duration",
    "durationRound",
];

fn arity(name: &str, args: &[Value], want: usize) -> Result<(), FnError> {
    if args.len() != want {
        return Err(FnError::Msg(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        )));
    }
    Ok(())
}

/// A `string` parameter: Go's template refuses any other type.
fn string_arg(v: &Value) -> Result<&str, FnError> {
    match v {
        Value::Str(s) => Ok(s),
        Value::Nil => Err("wrong type for value; expected string; got interface {}".into()),
        other => Err(format!(
            "wrong type for value; expected string; got {}",
            other.type_name()
        )
        .into()),
    }
}

/// A `time.Time` parameter.
fn time_arg(v: &Value) -> Result<&Time, FnError> {
    match v {
        Value::Time(t) => Ok(t),
        Value::Nil => Err("wrong type for value; expected time.Time; got interface {}".into()),
        other => Err(format!(
            "wrong type for value; expected time.Time; got {}",
            other.type_name()
        )
        .into()),
    }
}

fn time(t: Time) -> Value {
    Value::Time(Rc::new(t))
}

/// The render's clock as Go's `time.Now()` (local zone: UTC).
pub fn now(clock: &chrono::DateTime<chrono::Utc>) -> Time {
    Time::unix(clock.timestamp(), i64::from(clock.timestamp_subsec_nanos()))
}

/// Sprig's `dateInZone` reading of its `date interface{}`: a time, or
/// Unix seconds as `int`/`int64`; anything else is the current time.
fn date_of(v: &Value, clock: &Time) -> Time {
    match v {
        Value::Time(t) => (**t).clone(),
        Value::Int(s) | Value::Int64(s) => Time::unix(*s, 0),
        _ => clock.clone(),
    }
}

/// Sprig's `dateInZone`: an unknown zone is UTC (Sprig ignores the error).
fn date_in_zone(layout: &str, date: &Value, zone: &str, clock: &Time) -> Value {
    let loc = Location::load(zone).unwrap_or(Location::Utc);
    let t = date_of(date, clock).with_location(loc);
    Value::str(crate::golayout::format(&t, layout))
}

/// Calls the date function `name` (one of [`NAMES`]); `clock` is the
/// render's `now`.
pub fn call(name: &str, a: &[Value], clock: &chrono::DateTime<chrono::Utc>) -> R {
    let clock = now(clock);
    Ok(match name {
        "now" => {
            arity(name, a, 0)?;
            time(clock)
        }
        "date" => {
            arity(name, a, 2)?;
            date_in_zone(string_arg(&a[0])?, &a[1], "Local", &clock)
        }
        "dateInZone" | "date_in_zone" => {
            arity(name, a, 3)?;
            let layout = string_arg(&a[0])?;
            date_in_zone(layout, &a[1], string_arg(&a[2])?, &clock)
        }
        "htmlDate" => {
            arity(name, a, 1)?;
            date_in_zone("2006-01-02", &a[0], "Local", &clock)
        }
        "htmlDateInZone" => {
            arity(name, a, 2)?;
            date_in_zone("2006-01-02", &a[0], string_arg(&a[1])?, &clock)
        }
        "toDate" | "mustToDate" => {
            arity(name, a, 2)?;
            let parsed = crate::golayout::parse(string_arg(&a[0])?, string_arg(&a[1])?);
            match parsed {
                Ok(t) => time(t),
                Err(e) if name == "mustToDate" => return Err(e.into()),
                Err(_) => time(Time::zero()),
            }
        }
        "unixEpoch" => {
            arity(name, a, 1)?;
            Value::str(time_arg(&a[0])?.unix_seconds().to_string())
        }
        "dateModify" | "date_modify" | "mustDateModify" | "must_date_modify" => {
            arity(name, a, 2)?;
            let text = string_arg(&a[0])?;
            let t = time_arg(&a[1])?;
            match gotime::parse_duration(text) {
                Ok(d) => time(t.add(d)),
                Err(e) if name.starts_with("must") => return Err(e.into()),
                Err(_) => time(t.clone()),
            }
        }
        "ago" => {
            arity(name, a, 1)?;
            let t = match &a[0] {
                Value::Time(t) => (**t).clone(),
                Value::Int(s) | Value::Int64(s) => Time::unix(*s, 0),
                _ => clock.clone(),
            };
            let d = gotime::duration_round(clock.sub(&t), NANOS_PER_SECOND);
            Value::str(gotime::duration_string(d))
        }
        "duration" => {
            arity(name, a, 1)?;
            let n = match &a[0] {
                Value::Str(s) => go_parse_int(s).unwrap_or(0),
                Value::Int64(n) => *n,
                _ => 0,
            };
            Value::str(gotime::duration_string(n.wrapping_mul(NANOS_PER_SECOND)))
        }
        "durationRound" => {
            arity(name, a, 1)?;
            let d = match &a[0] {
                Value::Str(s) => gotime::parse_duration(s).unwrap_or(0),
                Value::Int64(n) => *n,
                Value::Time(t) => clock.sub(t),
                _ => 0,
            };
            Value::str(round_coarse(d))
        }
        other => return Err(format!("function {other:?} not defined").into()),
    })
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional sign and decimal digits.
fn go_parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Sprig's `durationRound`: the largest whole unit (years of 365 days,
/// months of 30) the duration exceeds.
fn round_coarse(d: i64) -> String {
    let u = d.unsigned_abs();
    const SECOND: u64 = NANOS_PER_SECOND as u64;
    for (unit, suffix) in [
        (SECOND * 3600 * 24 * 365, "y"),
        (SECOND * 3600 * 24 * 30, "mo"),
        (SECOND * 3600 * 24, "d"),
        (SECOND * 3600, "h"),
        (SECOND * 60, "m"),
        (SECOND, "s"),
    ] {
        if u > unit {
            return format!("{}{suffix}", u / unit);
        }
    }
    "0s".into()
}

/// A method of a `time.Time` (`(now).Unix`, `$t.Format "2006"`).
pub fn method(t: &Time, name: &str, args: &[Value]) -> Result<Value, String> {
    let no_args = || {
        if args.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "wrong number of args for {name}: want 0 got {}",
                args.len()
            ))
        }
    };
    let (_, _, c) = t.civil();
    Ok(match name {
        "Unix" => {
            no_args()?;
            Value::Int64(t.unix_seconds())
        }
        "UnixMilli" => {
            no_args()?;
            Value::Int64(
                t.unix_seconds()
                    .wrapping_mul(1000)
                    .wrapping_add(i64::from(t.nanosecond() / 1_000_000)),
            )
        }
        "UnixNano" => {
            no_args()?;
            Value::Int64(t.unix_nano())
        }
        "Year" => {
            no_args()?;
            Value::Int(c.year)
        }
        "YearDay" => {
            no_args()?;
            Value::Int(c.yday.into())
        }
        "Day" => {
            no_args()?;
            Value::Int(c.day.into())
        }
        "Hour" => {
            no_args()?;
            Value::Int(c.hour.into())
        }
        "Minute" => {
            no_args()?;
            Value::Int(c.minute.into())
        }
        "Second" => {
            no_args()?;
            Value::Int(c.second.into())
        }
        "Nanosecond" => {
            no_args()?;
            Value::Int(t.nanosecond().into())
        }
        "IsZero" => {
            no_args()?;
            Value::Bool(t.is_zero())
        }
        "UTC" => {
            no_args()?;
            time(t.with_location(Location::Utc))
        }
        "Local" => {
            no_args()?;
            time(t.with_location(Location::Local))
        }
        "String" => {
            no_args()?;
            Value::str(t.go_string())
        }
        "Month" => {
            no_args()?;
            GoObject::Month(c.month.into()).value()
        }
        "Weekday" => {
            no_args()?;
            GoObject::Weekday(c.weekday.into()).value()
        }
        "Location" => {
            no_args()?;
            GoObject::Location(t.location().clone()).value()
        }
        "UnixMicro" => {
            no_args()?;
            Value::Int64(
                t.unix_seconds()
                    .wrapping_mul(1_000_000)
                    .wrapping_add(i64::from(t.nanosecond() / 1_000)),
            )
        }
        "Before" | "After" | "Equal" | "Compare" | "Sub" => {
            want_args(name, args, 1)?;
            let u = match &args[0] {
                Value::Time(u) => u,
                other => return Err(wrong_type("time.Time", other)),
            };
            let d = t.sub(u);
            // Go compares the instants, not the Duration (which saturates).
            let order = (t.unix_seconds(), t.nanosecond()).cmp(&(u.unix_seconds(), u.nanosecond()));
            match name {
                "Before" => Value::Bool(order.is_lt()),
                "After" => Value::Bool(order.is_gt()),
                "Equal" => Value::Bool(order.is_eq()),
                "Compare" => Value::Int(order as i64),
                _ => GoObject::Duration(d).value(),
            }
        }
        "Add" => {
            want_args(name, args, 1)?;
            time(t.add(duration_arg(&args[0])?))
        }
        "Truncate" | "Round" => {
            want_args(name, args, 1)?;
            let d = duration_arg(&args[0])?;
            time(if name == "Truncate" {
                t.truncate(d)
            } else {
                t.round(d)
            })
        }
        "AddDate" => {
            want_args(name, args, 3)?;
            let mut n = [0i64; 3];
            for (slot, arg) in n.iter_mut().zip(args) {
                *slot = match arg {
                    Value::Int(i) => *i,
                    other => return Err(wrong_type("int", other)),
                };
            }
            time(t.add_date(n[0], n[1], n[2]))
        }
        "Format" => {
            let [layout] = args else {
                return Err(format!(
                    "wrong number of args for Format: want 1 got {}",
                    args.len()
                ));
            };
            let Value::Str(layout) = layout else {
                return Err(format!(
                    "wrong type for value; expected string; got {}",
                    layout.type_name()
                ));
            };
            Value::str(crate::golayout::format(t, layout))
        }
        other => return Err(no_field(other, "time.Time")),
    })
}
