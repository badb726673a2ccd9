//! `add`, `subtract`, `multiply`, `divide`, `modulo`, `sum` and `round` as
//! Kyverno computes them: an operand is a number, or a string read as a
//! Kubernetes quantity (`'12Ki'`, `'500m'`: milli, not minutes) or else as
//! a Go duration (`'1h30m'`). Numbers combine with numbers, quantities with
//! quantities (or scaled by a number), durations with durations (or scaled
//! by a number); a quantity or a duration comes back as a string in its
//! canonical form (`'25Ki'`, `'1h30m0s'`), a number as a number.

use jmespath::Runtime;
use kiln_gotime::time::{duration_string, parse_duration};
use kiln_quantity::Quantity;
use serde_json::{Value, json};

use super::{define, num};

/// One operand.
#[derive(Debug, Clone)]
enum Operand {
    Scalar(f64),
    Quantity(Quantity),
    /// Nanoseconds.
    Duration(i64),
}

const MISMATCH: &str = "Types mismatch";
const ZERO: &str = "Zero divisor passed";

/// The longest string read as a quantity or a duration: a quantity's
/// digits are computed with exactly, so a megabyte of them would make each
/// operation slow (no real quantity is longer).
const MAX_OPERAND: usize = 256;

fn operand(value: &Value) -> Result<Operand, String> {
    match value {
        Value::Number(n) => Ok(Operand::Scalar(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) if s.len() > MAX_OPERAND => Err(format!(
            "invalid operand: {} bytes, over the {MAX_OPERAND} a quantity or duration may have",
            s.len()
        )),
        Value::String(s) => {
            if let Ok(q) = Quantity::parse(s) {
                Ok(Operand::Quantity(q))
            } else if let Ok(d) = parse_duration(s) {
                Ok(Operand::Duration(d))
            } else {
                Err("invalid operand".into())
            }
        }
        _ => Err("invalid operand".into()),
    }
}

fn operands(a: &[Value]) -> Result<(Operand, Operand), String> {
    Ok((operand(&a[0])?, operand(&a[1])?))
}

fn quantity(q: Quantity) -> Value {
    json!(q.canonical())
}

fn duration(nanos: i64) -> Value {
    json!(duration_string(nanos))
}

/// Go's conversion of a float to an int64 on amd64: out of range (or NaN)
/// is the smallest int64.
fn go_int64(f: f64) -> i64 {
    // [-2^63, 2^63): what an int64 holds (NaN is in no range).
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        f as i64
    } else {
        i64::MIN
    }
}

/// A number as Go's `%v` prints a float64: the shortest digits that read
/// back, with an exponent (`1e+06`) when it is under -4 or at least 6.
fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let scientific = format!("{f:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        // NaN and the infinities, which no quantity reads.
        return scientific;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        format!("{f}")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

/// A number as a quantity, as Kyverno reads it (`ParseQuantity` of `%v`).
fn factor(f: f64) -> Result<Quantity, String> {
    Quantity::parse(&go_float(f)).map_err(|e| format!("{}: {e}", go_float(f)))
}

fn add(a: &[Value]) -> Result<Value, String> {
    match operands(a)? {
        (Operand::Quantity(x), Operand::Quantity(y)) => {
            Ok(quantity(x.checked_add(&y).map_err(|e| e.to_string())?))
        }
        (Operand::Duration(x), Operand::Duration(y)) => Ok(duration(x.wrapping_add(y))),
        (Operand::Scalar(x), Operand::Scalar(y)) => Ok(num(x + y)),
        _ => Err(MISMATCH.into()),
    }
}

fn subtract(a: &[Value]) -> Result<Value, String> {
    match operands(a)? {
        (Operand::Quantity(x), Operand::Quantity(y)) => {
            Ok(quantity(x.checked_sub(&y).map_err(|e| e.to_string())?))
        }
        (Operand::Duration(x), Operand::Duration(y)) => Ok(duration(x.wrapping_sub(y))),
        (Operand::Scalar(x), Operand::Scalar(y)) => Ok(num(x - y)),
        _ => Err(MISMATCH.into()),
    }
}

fn multiply(a: &[Value]) -> Result<Value, String> {
    let scale_quantity = |q: &Quantity, f: f64| -> Result<Value, String> {
        Ok(quantity(
            q.checked_mul(&factor(f)?).map_err(|e| e.to_string())?,
        ))
    };
    let scale_duration = |d: i64, f: f64| duration(go_int64(d as f64 / 1e9 * f * 1e9));
    match operands(a)? {
        (Operand::Quantity(q), Operand::Scalar(f)) | (Operand::Scalar(f), Operand::Quantity(q)) => {
            scale_quantity(&q, f)
        }
        (Operand::Duration(d), Operand::Scalar(f)) | (Operand::Scalar(f), Operand::Duration(d)) => {
            Ok(scale_duration(d, f))
        }
        (Operand::Scalar(x), Operand::Scalar(y)) => Ok(num(x * y)),
        _ => Err(MISMATCH.into()),
    }
}

fn divide(a: &[Value]) -> Result<Value, String> {
    match operands(a)? {
        (Operand::Quantity(x), Operand::Quantity(y)) => {
            let divisor = y.to_f64();
            if divisor == 0.0 {
                return Err(ZERO.into());
            }
            Ok(num(x.to_f64() / divisor))
        }
        (Operand::Quantity(x), Operand::Scalar(f)) => {
            if f == 0.0 {
                return Err(ZERO.into());
            }
            let divisor = factor(f)?;
            let scale = x.dec_scale().max(divisor.dec_scale());
            let quotient = x
                .div_round_down(&divisor, scale)
                .map_err(|e| e.to_string())?
                .ok_or(ZERO)?;
            Ok(quantity(quotient))
        }
        (Operand::Duration(x), Operand::Duration(y)) => {
            if y == 0 {
                return Err(ZERO.into());
            }
            Ok(num((x as f64 / 1e9) / (y as f64 / 1e9)))
        }
        (Operand::Duration(d), Operand::Scalar(f)) => {
            if f == 0.0 {
                return Err(ZERO.into());
            }
            Ok(duration(go_int64(d as f64 / 1e9 / f * 1e9)))
        }
        (Operand::Scalar(x), Operand::Scalar(y)) => {
            if y == 0.0 {
                return Err(ZERO.into());
            }
            Ok(num(x / y))
        }
        _ => Err(MISMATCH.into()),
    }
}

fn modulo(a: &[Value]) -> Result<Value, String> {
    const NOT_INTEGER: &str = "Non-integer argument(s) passed for modulo";
    let integer = |f: f64| -> Result<i64, String> {
        let i = go_int64(f);
        if f != i as f64 {
            return Err(NOT_INTEGER.into());
        }
        Ok(i)
    };
    match operands(a)? {
        (Operand::Quantity(x), Operand::Quantity(y)) => {
            let (i, j) = (integer(x.to_f64())?, integer(y.to_f64())?);
            if j == 0 {
                return Err(ZERO.into());
            }
            // Go: the smallest int64 modulo -1 is 0.
            let rest = i.checked_rem(j).unwrap_or(0);
            Ok(quantity(Quantity::from_i64(rest).with_format(x.format())))
        }
        (Operand::Duration(x), Operand::Duration(y)) => {
            if y == 0 {
                return Err(ZERO.into());
            }
            Ok(duration(x.checked_rem(y).unwrap_or(0)))
        }
        (Operand::Scalar(x), Operand::Scalar(y)) => {
            let (i, j) = (integer(x)?, integer(y)?);
            if j == 0 {
                return Err(ZERO.into());
            }
            Ok(json!(i.checked_rem(j).unwrap_or(0)))
        }
        _ => Err(MISMATCH.into()),
    }
}

pub(super) fn register(runtime: &mut Runtime) {
    define(runtime, "add", 2, add);
    define(runtime, "subtract", 2, subtract);
    define(runtime, "multiply", 2, multiply);
    define(runtime, "divide", 2, divide);
    define(runtime, "modulo", 2, modulo);
    define(runtime, "sum", 1, |a| {
        let Value::Array(items) = &a[0] else {
            return Err(MISMATCH.into());
        };
        let Some(first) = items.first() else {
            return Err("at least one element in the array is required".into());
        };
        let mut total = first.clone();
        for item in &items[1..] {
            total = add(&[total, item.clone()])?;
        }
        Ok(total)
    });
    define(runtime, "round", 2, |a| {
        let (Value::Number(x), Value::Number(digits)) = (&a[0], &a[1]) else {
            return Err("arguments must be numbers".into());
        };
        let (x, digits) = (
            x.as_f64().unwrap_or(f64::NAN),
            digits.as_f64().unwrap_or(f64::NAN),
        );
        if !digits.is_finite() || digits.trunc() != digits {
            return Err("Non-integer argument(s) passed for round off".into());
        }
        if digits < 0.0 {
            return Err("2 argument is out of bounds".into());
        }
        let shift = 10f64.powi(digits.min(400.0) as i32);
        // Go's math.Round: half away from zero, as Rust's `round`.
        Ok(num((x * shift).round() / shift))
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::go_float;
    use crate::variables::query;

    #[test]
    fn floats_print_as_go_prints_them() {
        for (f, want) in [
            (2.0, "2"),
            (2.5, "2.5"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-3.0, "-3"),
        ] {
            assert_eq!(go_float(f), want, "{f}");
        }
    }

    // The examples of Kyverno's documentation (JMESPath, "Arithmetic"),
    // and the rules of its engine's arithmetic.go.
    #[test]
    fn numbers_quantities_and_durations() {
        let data = json!({"values": [1, 2, 3], "mem": ["1Gi", "512Mi"], "times": ["1h", "30m0s"]});
        let q = |e: &str| query(e, &data).unwrap();
        assert_eq!(q("add(`12`, `13`)"), json!(25));
        assert_eq!(q("add('12Ki', '13Ki')"), json!("25Ki"));
        assert_eq!(q("add('1h', '30m0s')"), json!("1h30m0s"));
        // `30m` is thirty milli-units to Kyverno, not minutes.
        assert!(
            query("add('1h', '30m')", &data)
                .unwrap_err()
                .contains("Types mismatch")
        );
        assert_eq!(q("subtract('12Mi', '2Mi')"), json!("10Mi"));
        assert_eq!(q("subtract(`12`, `13`)"), json!(-1));
        assert_eq!(q("multiply('12Ki', `2`)"), json!("24Ki"));
        assert_eq!(q("multiply(`2`, '250m')"), json!("500m"));
        assert_eq!(q("multiply('1h', `1.5`)"), json!("1h30m0s"));
        assert_eq!(q("multiply(`3`, `4`)"), json!(12));
        assert_eq!(q("divide('12Ki', '4Ki')"), json!(3));
        assert_eq!(q("divide('12Ki', `4`)"), json!("3Ki"));
        assert_eq!(q("divide('1', `3`)"), json!("0"));
        assert_eq!(q("divide('1.0', `3`)"), json!("300m"));
        assert_eq!(q("divide('12h', '4h')"), json!(3));
        // A whole quotient prints as Kyverno prints it: `3`, not `3.0`.
        assert_eq!(
            crate::variables::substitute_str("{{ divide(`6`, `2`) }}x", &data).unwrap(),
            json!("3x")
        );
        let long = format!("'{}'", "1".repeat(300));
        assert!(
            query(&format!("add({long}, '1')"), &data)
                .unwrap_err()
                .contains("over the 256")
        );
        assert_eq!(q("divide('12h', `4`)"), json!("3h0m0s"));
        assert_eq!(q("divide(`10`, `4`)"), json!(2.5));
        assert!(
            query("divide(`1`, `0`)", &data)
                .unwrap_err()
                .contains("Zero divisor")
        );
        assert!(
            query("divide('1Ki', '0')", &data)
                .unwrap_err()
                .contains("Zero divisor")
        );
        assert_eq!(q("modulo(`13`, `2`)"), json!(1));
        assert_eq!(q("modulo('12Ki', '5Ki')"), json!("2Ki"));
        assert_eq!(q("modulo('13s', '2s')"), json!("1s"));
        assert!(
            query("modulo(`1.5`, `1`)", &data)
                .unwrap_err()
                .contains("Non-integer")
        );
        // Go: the smallest int64 modulo -1 is 0.
        assert_eq!(q("modulo(`-9223372036854775808`, `-1`)"), json!(0));
        assert_eq!(q("sum(values)"), json!(6));
        assert_eq!(q("sum(mem)"), json!("1536Mi"));
        assert_eq!(q("sum(times)"), json!("1h30m0s"));
        assert!(query("sum(`[]`)", &data).is_err());
        assert_eq!(q("round(`1.23456`, `2`)"), json!(1.23));
        assert_eq!(q("round(`2.5`, `0`)"), json!(3));
        assert!(query("round(`3.1`, `-1`)", &data).is_err());
        assert!(
            query("add('x', `1`)", &data)
                .unwrap_err()
                .contains("invalid operand")
        );
    }
}
