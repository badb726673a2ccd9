//! Kubernetes resource quantities (`500m`, `1Gi`, `1e3`) read and printed the
//! way the API server does (apimachinery's `resource.Quantity`): a quantity
//! the server stores is always printed in its canonical form, so `cpu: 0.5`
//! is read back as `500m` and `1024Mi` as `1Gi`.
//!
//! The rules, from apimachinery's `pkg/api/resource` (quantity.go, amount.go,
//! suffix.go):
//!
//! - the text is `[+-]digits[.digits][suffix]`; leading zeros are ignored and
//!   `1.` is accepted; the suffix is a decimal SI one (`n u m k M G T P E`,
//!   or none), a binary one (`Ki Mi Gi Ti Pi Ei`) or a decimal exponent
//!   (`e3`, `E-2`). The suffix chooses the printed format;
//! - values are exact, then rounded *up* (away from zero) to nano units;
//!   binary values are capped at 2^63-1;
//! - printing: zero is `0`; a binary value is printed with the largest
//!   binary suffix that divides it, unless it is under 1024 in magnitude or
//!   not an integer, in which case it is printed as a decimal SI value; a
//!   decimal value is printed with the smallest mantissa whose exponent is a
//!   multiple of three (`1500` stays `1500`, `2000` becomes `2k`, `0.5`
//!   becomes `500m`), with the SI suffix of that exponent or `eN`.
//!
//! A decimal SI exponent above 18 (`1000E`) has no suffix in apimachinery's
//! table, which then prints the mantissa alone (`1000E` reads back as `1`);
//! this crate does the same, so that it predicts what the server stores.

use std::fmt;

use num_bigint::BigUint;
use num_traits::{One, ToPrimitive, Zero};

/// Why a text is not a quantity. The messages are apimachinery's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// The text does not have a quantity's shape.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// The suffix is none of the known ones.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// How a quantity is printed, chosen by the suffix it was written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `e3`, `E-2`.
    DecimalExponent,
    /// `Ki`, `Mi`, … `Ei`.
    BinarySI,
    /// `n`, `u`, `m`, none, `k`, `M`, … `E`.
    DecimalSI,
}

/// A parsed quantity: `±mantissa × 10^exponent`, and its format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    mantissa: BigUint,
    exponent: i64,
    format: Format,
}

/// The largest binary quantity apimachinery keeps (2^63-1).
const BINARY_MAX: i64 = i64::MAX;

/// Decimal SI suffixes by exponent, from 10^-9 to 10^18.
const DECIMAL_SUFFIXES: [(i64, &str); 10] = [
    (-9, "n"),
    (-6, "u"),
    (-3, "m"),
    (0, ""),
    (3, "k"),
    (6, "M"),
    (9, "G"),
    (12, "T"),
    (15, "P"),
    (18, "E"),
];

/// Binary suffixes by power of 1024.
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The parts of a quantity's text: sign, integer digits, fraction digits,
/// suffix.
struct Parts<'a> {
    negative: bool,
    integer: &'a str,
    fraction: &'a str,
    suffix: &'a str,
}

fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    let mut negative = false;
    match bytes.first() {
        Some(b'-') => {
            negative = true;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    let digits_from = |start: usize| {
        start
            + bytes[start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
    };
    let end = digits_from(pos);
    let integer = &text[pos..end];
    pos = end;
    let mut fraction = "";
    if bytes.get(pos) == Some(&b'.') {
        let end = digits_from(pos + 1);
        fraction = &text[pos + 1..end];
        pos = end;
    }
    let suffix_start = pos;
    pos += bytes[pos..]
        .iter()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    if matches!(bytes.get(pos), Some(b'-' | b'+')) {
        pos += 1;
    }
    pos = digits_from(pos);
    if pos != bytes.len() {
        return Err(QuantityError::Format);
    }
    Ok(Parts {
        negative,
        integer,
        fraction,
        suffix: &text[suffix_start..],
    })
}

/// What a suffix means: base (10 or 2), exponent, format.
fn interpret(suffix: &str) -> Result<(u32, i64, Format), QuantityError> {
    if let Some(&(exponent, _)) = DECIMAL_SUFFIXES.iter().find(|(_, s)| *s == suffix) {
        return Ok((10, exponent, Format::DecimalSI));
    }
    if let Some(power) = BINARY_SUFFIXES[1..].iter().position(|s| *s == suffix) {
        return Ok((2, 10 * (power as i64 + 1), Format::BinarySI));
    }
    let mut chars = suffix.chars();
    if suffix.len() > 1 && matches!(chars.next(), Some('e' | 'E')) {
        let exponent: i64 = chars.as_str().parse().map_err(|_| QuantityError::Suffix)?;
        // apimachinery keeps the exponent in an int32.
        return Ok((10, i64::from(exponent as i32), Format::DecimalExponent));
    }
    Err(QuantityError::Suffix)
}

fn pow10(exponent: u64) -> BigUint {
    BigUint::from(10u32).pow(u32::try_from(exponent).unwrap_or(u32::MAX))
}

impl Quantity {
    /// Parses a quantity as the API server does (surrounding whitespace, as
    /// a JSON string may carry, is ignored).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(QuantityError::Format);
        }
        let parts = split(text)?;
        let (base, exponent, mut format) = interpret(parts.suffix)?;
        let digits = format!("{}{}", parts.integer, parts.fraction);
        let mut mantissa = if digits.is_empty() {
            BigUint::zero()
        } else {
            BigUint::parse_bytes(digits.as_bytes(), 10).ok_or(QuantityError::Format)?
        };
        let mut scale = -(parts.fraction.len() as i64);
        if base == 10 {
            scale += exponent;
        } else {
            mantissa <<= exponent as usize;
        }
        let mut quantity = Self {
            negative: parts.negative,
            mantissa,
            exponent: scale,
            format,
        };
        // Round up to nano units: whoever asks for a little gets some.
        quantity.round_up(-9);
        if format == Format::BinarySI {
            let limit = BigUint::from(BINARY_MAX as u64) * quantity.unit();
            if quantity.mantissa > limit {
                quantity.mantissa = BigUint::from(BINARY_MAX as u64);
                quantity.exponent = 0;
            }
            if quantity.integer_part().is_zero() && !quantity.mantissa.is_zero() {
                format = Format::DecimalSI;
            }
            quantity.format = format;
        }
        Ok(quantity)
    }

    /// Rounds the magnitude up to a multiple of `10^exponent` (apimachinery
    /// `Quantity.RoundUp`; the API server rounds resource lists to milli
    /// units: `SetDefaults_ResourceList`).
    pub fn round_up(&mut self, exponent: i64) {
        if self.exponent >= exponent {
            return;
        }
        let drop = self.exponent.abs_diff(exponent);
        let text = self.mantissa.to_str_radix(10);
        let kept = text
            .len()
            .saturating_sub(usize::try_from(drop).unwrap_or(usize::MAX));
        let rest_nonzero = text[kept..].bytes().any(|b| b != b'0');
        self.mantissa = if kept == 0 {
            BigUint::zero()
        } else {
            BigUint::parse_bytes(&text.as_bytes()[..kept], 10).unwrap_or_default()
        };
        if rest_nonzero {
            self.mantissa += 1u32;
        }
        self.exponent = exponent;
    }

    /// The format the quantity was written in (after apimachinery's
    /// adjustments: a binary value under 1 is decimal).
    pub fn format(&self) -> Format {
        self.format
    }

    /// True for zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa.is_zero()
    }

    /// `10^-exponent` for a negative exponent, else 1: what the mantissa is
    /// divided by to get the value (binary values never have a positive
    /// exponent).
    fn unit(&self) -> BigUint {
        if self.exponent < 0 {
            pow10(self.exponent.unsigned_abs())
        } else {
            BigUint::one()
        }
    }

    fn integer_part(&self) -> BigUint {
        &self.mantissa / self.unit()
    }

    fn is_integer(&self) -> bool {
        (&self.mantissa % self.unit()).is_zero()
    }

    /// The canonical text: what the API server stores and returns.
    pub fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let sign = if self.negative { "-" } else { "" };
        let binary = self.format == Format::BinarySI
            && self.integer_part() >= BigUint::from(1024u32)
            && self.is_integer();
        if binary {
            let mut value = self.integer_part();
            let mut power = 0;
            let step = BigUint::from(1024u32);
            while value >= step && (&value % &step).is_zero() && power + 1 < BINARY_SUFFIXES.len() {
                value /= &step;
                power += 1;
            }
            return format!("{sign}{value}{}", BINARY_SUFFIXES[power]);
        }
        let mut mantissa = self.mantissa.clone();
        let mut exponent = self.exponent;
        let ten = BigUint::from(10u32);
        while mantissa >= ten && (&mantissa % &ten).is_zero() {
            mantissa /= &ten;
            exponent += 1;
        }
        match exponent.rem_euclid(3) {
            1 => {
                mantissa *= 10u32;
                exponent -= 1;
            }
            2 => {
                mantissa *= 100u32;
                exponent -= 2;
            }
            _ => {}
        }
        let suffix = match self.format {
            Format::DecimalExponent if exponent == 0 => String::new(),
            Format::DecimalExponent => format!("e{exponent}"),
            // apimachinery prints no suffix where its table has none.
            _ => DECIMAL_SUFFIXES
                .iter()
                .find(|(e, _)| *e == exponent)
                .map(|(_, s)| (*s).to_owned())
                .unwrap_or_default(),
        };
        format!("{sign}{mantissa}{suffix}")
    }

    /// The value in whole units rounded up, when it fits in an `i64`
    /// (for comparisons in validation).
    pub fn ceil_i64(&self) -> Option<i64> {
        let mut whole = if self.exponent >= 0 {
            &self.mantissa * pow10(self.exponent.unsigned_abs())
        } else {
            self.integer_part()
        };
        if !self.is_integer() && !self.negative {
            whole += 1u32;
        }
        let whole = whole.to_i64()?;
        Some(if self.negative { -whole } else { whole })
    }
}

/// Arithmetic on quantities aligns exponents: two quantities whose
/// exponents are further apart than this many decimal places are not added
/// (the result would be a number of that many digits).
pub const MAX_EXPONENT_SPREAD: u64 = 1_000;

/// Why two quantities cannot be added or subtracted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the quantities' exponents are more than {MAX_EXPONENT_SPREAD} apart")]
pub struct SpreadError;

impl Quantity {
    /// An integer quantity in the decimal SI format (apimachinery
    /// `NewQuantity(value, DecimalSI)`).
    pub fn from_i64(value: i64) -> Self {
        Self {
            negative: value < 0,
            mantissa: BigUint::from(value.unsigned_abs()),
            exponent: 0,
            format: Format::DecimalSI,
        }
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        match (self.mantissa.is_zero(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// Whether the value is a whole number.
    pub fn is_whole(&self) -> bool {
        self.exponent >= 0 || self.is_integer()
    }

    /// The value as an `i64` when it is a whole number in range
    /// (apimachinery `AsInt64`).
    pub fn to_i64(&self) -> Option<i64> {
        if !self.is_whole() {
            return None;
        }
        let magnitude = if self.exponent >= 0 {
            if self.mantissa.is_zero() {
                return Some(0);
            }
            if self.exponent > 19 {
                return None;
            }
            &self.mantissa * pow10(self.exponent.unsigned_abs())
        } else {
            self.integer_part()
        };
        let magnitude = magnitude.to_u64()?;
        if self.negative {
            0i64.checked_sub_unsigned(magnitude)
        } else {
            i64::try_from(magnitude).ok()
        }
    }

    /// The value as the nearest `f64` (saturating at the largest finite
    /// values, as apimachinery's `AsApproximateFloat64`).
    pub fn to_f64(&self) -> f64 {
        let mantissa = self.mantissa.to_f64().unwrap_or(f64::MAX);
        let exponent = i32::try_from(self.exponent).unwrap_or(if self.exponent < 0 {
            i32::MIN
        } else {
            i32::MAX
        });
        let mut value = mantissa * 10f64.powi(exponent);
        if mantissa == 0.0 {
            value = 0.0;
        } else if value.is_infinite() || value.is_nan() {
            value = f64::MAX;
        }
        if self.negative { -value } else { value }
    }

    /// Compares the values (not their formats), without building numbers of
    /// the exponents' size.
    pub fn cmp_value(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let (a, b) = (self.sign(), other.sign());
        if a != b {
            return a.cmp(&b);
        }
        if a == 0 {
            return Ordering::Equal;
        }
        let magnitude = Self::cmp_magnitude(self, other);
        if a < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    fn cmp_magnitude(a: &Self, b: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        // Compare the positions of the leading digits first.
        let digits = |q: &Self| q.mantissa.to_str_radix(10).len() as i128 + i128::from(q.exponent);
        match digits(a).cmp(&digits(b)) {
            Ordering::Equal => {}
            other => return other,
        }
        // Same magnitude order: the exponents differ by less than the
        // mantissas' lengths, so aligning them is bounded by the text.
        let (sa, sb) = (a.mantissa.clone(), b.mantissa.clone());
        if a.exponent >= b.exponent {
            (sa * pow10(a.exponent.abs_diff(b.exponent))).cmp(&sb)
        } else {
            sa.cmp(&(sb * pow10(a.exponent.abs_diff(b.exponent))))
        }
    }

    /// `self + other` (exact; keeps `self`'s format, as apimachinery `Add`).
    pub fn checked_add(&self, other: &Self) -> Result<Self, SpreadError> {
        if other.is_zero() {
            return Ok(self.clone());
        }
        if self.exponent.abs_diff(other.exponent) > MAX_EXPONENT_SPREAD {
            return Err(SpreadError);
        }
        let exponent = self.exponent.min(other.exponent);
        let align = |q: &Self| &q.mantissa * pow10(q.exponent.abs_diff(exponent));
        let (a, b) = (align(self), align(other));
        let (negative, mantissa) = if self.negative == other.negative {
            (self.negative, a + b)
        } else if a >= b {
            (self.negative, a - b)
        } else {
            (other.negative, b - a)
        };
        let format = if self.is_zero() {
            other.format
        } else {
            self.format
        };
        Ok(Self {
            negative: negative && !mantissa.is_zero(),
            mantissa,
            exponent,
            format,
        })
    }

    /// `self - other`.
    pub fn checked_sub(&self, other: &Self) -> Result<Self, SpreadError> {
        let mut negated = other.clone();
        negated.negative = !negated.negative && !negated.mantissa.is_zero();
        self.checked_add(&negated)
    }

    /// The same value printed in `format` (apimachinery builds a result in
    /// the format of its first operand).
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = format;
        self.normalize_binary()
    }

    /// The scale of the value as apimachinery's `AsDec` gives it: the
    /// number of decimal places it was written with (negative for a
    /// power of ten: `1k` is 1 at scale -3).
    pub fn dec_scale(&self) -> i64 {
        -self.exponent
    }

    /// `self × other`, exact, in `self`'s format (apimachinery
    /// `NewDecimalQuantity(x.AsDec() × y.AsDec(), x.Format)`).
    pub fn checked_mul(&self, other: &Self) -> Result<Self, SpreadError> {
        let exponent = self.exponent.saturating_add(other.exponent);
        if exponent.unsigned_abs() > MAX_EXPONENT_SPREAD {
            return Err(SpreadError);
        }
        let mantissa = &self.mantissa * &other.mantissa;
        Ok(Self {
            negative: (self.negative != other.negative) && !mantissa.is_zero(),
            mantissa,
            exponent,
            format: self.format,
        }
        .normalize_binary())
    }

    /// `self ÷ other` rounded toward zero to `scale` decimal places, in
    /// `self`'s format (inf.Dec's `QuoRound(x, y, scale, RoundDown)`);
    /// `None` for a zero divisor.
    pub fn div_round_down(&self, other: &Self, scale: i64) -> Result<Option<Self>, SpreadError> {
        if other.is_zero() {
            return Ok(None);
        }
        // (m1 / m2) × 10^(e1 - e2 + scale), truncated, is the result's
        // mantissa at exponent -scale.
        let shift = self
            .exponent
            .saturating_sub(other.exponent)
            .saturating_add(scale);
        if shift.unsigned_abs() > MAX_EXPONENT_SPREAD || scale.unsigned_abs() > MAX_EXPONENT_SPREAD
        {
            return Err(SpreadError);
        }
        let (numerator, denominator) = if shift >= 0 {
            (
                &self.mantissa * pow10(shift.unsigned_abs()),
                other.mantissa.clone(),
            )
        } else {
            (
                self.mantissa.clone(),
                &other.mantissa * pow10(shift.unsigned_abs()),
            )
        };
        let mantissa = numerator / denominator;
        Ok(Some(
            Self {
                negative: (self.negative != other.negative) && !mantissa.is_zero(),
                mantissa,
                exponent: -scale,
                format: self.format,
            }
            .normalize_binary(),
        ))
    }

    /// A binary value is kept with an exponent of at most zero (its
    /// printing reads the integer part from the mantissa).
    fn normalize_binary(mut self) -> Self {
        if self.format == Format::BinarySI && self.exponent > 0 {
            self.mantissa *= pow10(self.exponent.unsigned_abs());
            self.exponent = 0;
        }
        self
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Maps whose values are quantities (`ResourceList`s) in Kubernetes'
/// built-in kinds: `resources.limits`/`requests` (containers, PVCs, pod
/// overhead), ResourceQuota `hard`, node `capacity`/`allocatable`, and
/// LimitRange items' `max`, `min`, `default`, `defaultRequest` and
/// `maxLimitRequestRatio`.
pub const QUANTITY_MAPS: [&str; 11] = [
    "limits",
    "requests",
    "capacity",
    "hard",
    "allocatable",
    "overhead",
    "max",
    "min",
    "default",
    "defaultRequest",
    "maxLimitRequestRatio",
];

/// True when a built-in kind's field `field`, in an object that is the
/// value of field `parent`, is a single quantity rather than a value of a
/// resource list: `sizeLimit` (emptyDir volumes), `divisor` of a
/// `resourceFieldRef` (downward API), the `value`/`averageValue` of an
/// autoscaling/v2 metric `target` or `current`, and CSIStorageCapacity's
/// `maximumVolumeSize`. These are stored canonically but not rounded.
pub fn single_quantity(parent: Option<&str>, field: &str) -> bool {
    match field {
        "sizeLimit" | "maximumVolumeSize" => true,
        "divisor" => parent == Some("resourceFieldRef"),
        "value" | "averageValue" => matches!(parent, Some("target" | "current")),
        _ => false,
    }
}

/// True when a built-in kind's field `field`, in an object that is the
/// value of field `parent`, holds a quantity: the values of
/// [`QUANTITY_MAPS`] and the [`single_quantity`] fields. A knowledge of
/// field names, for where no schema is at hand.
pub fn held_at(parent: Option<&str>, field: &str) -> bool {
    single_quantity(parent, field) || parent.is_some_and(|p| QUANTITY_MAPS.contains(&p))
}

/// The canonical form of a quantity's text.
pub fn canonical(text: &str) -> Result<String, QuantityError> {
    Quantity::parse(text).map(|q| q.canonical())
}

/// The canonical form of a quantity in a resource list (`limits`,
/// `requests`, …): rounded up to milli units first, as the API server's
/// `SetDefaults_ResourceList` does (`cpu: 0.0001` is stored as `1m`).
pub fn canonical_resource(text: &str) -> Result<String, QuantityError> {
    let mut quantity = Quantity::parse(text)?;
    quantity.round_up(-3);
    Ok(quantity.canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(text: &str) -> String {
        canonical(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn quantity_fields_by_name() {
        assert!(held_at(Some("limits"), "cpu"));
        assert!(held_at(Some("defaultRequest"), "memory"));
        assert!(held_at(Some("target"), "averageValue"));
        assert!(held_at(Some("current"), "value"));
        assert!(held_at(Some("resourceFieldRef"), "divisor"));
        assert!(held_at(None, "sizeLimit"));
        assert!(!held_at(Some("env"), "value"));
        assert!(!held_at(Some("spec"), "divisor"));
        assert!(!single_quantity(Some("limits"), "cpu"));
        assert!(single_quantity(Some("target"), "value"));
    }

    #[test]
    fn decimal_values_take_the_smallest_mantissa_with_an_si_suffix() {
        for (input, expected) in [
            ("0.5", "500m"),
            ("1", "1"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("2000", "2k"),
            ("1500", "1500"),
            ("1000M", "1G"),
            ("100.035k", "100035"),
            ("0.1", "100m"),
            ("10", "10"),
            ("1E", "1E"),
            ("1.0E", "1E"),
            ("1000000000000000000", "1E"),
            ("1000000000000000000.0", "1E"),
            ("12345678901234567890123", "12345678901234567890123"),
            ("007", "7"),
            ("+5", "5"),
            ("-5", "-5"),
            ("-0.5", "-500m"),
            ("1.G", "1G"),
            (" 250m ", "250m"),
        ] {
            assert_eq!(c(input), expected, "{input}");
        }
    }

    #[test]
    fn binary_values_keep_the_largest_binary_suffix() {
        for (input, expected) in [
            ("1Gi", "1Gi"),
            ("1Ki", "1Ki"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Gi", "1536Mi"),
            ("1000Ki", "1000Ki"),
            // Under 1024, or not an integer: printed as decimal SI.
            ("1.5Ki", "1536"),
            ("0.5Ki", "512"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            ("0.1Gi", "107374182400m"),
            ("-2Ki", "-2Ki"),
        ] {
            assert_eq!(c(input), expected, "{input}");
        }
    }

    #[test]
    fn values_round_up_to_nano_units() {
        assert_eq!(c(".000000000001Ki"), "2n");
        assert_eq!(c("0.0000000001"), "1n");
        assert_eq!(c("1.0000000001"), "1000000001n");
        assert_eq!(c("-0.0000000001"), "-1n");
        assert_eq!(c("1e-20"), "1e-9");
        assert_eq!(c("0.1n"), "1n");
    }

    #[test]
    fn decimal_exponents_stay_exponents() {
        for (input, expected) in [
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("1.5e3", "1500"),
            ("10e3", "10e3"),
            ("1e0", "1"),
            ("1e-3", "1e-3"),
            ("1e+6", "1e6"),
        ] {
            assert_eq!(c(input), expected, "{input}");
        }
    }

    #[test]
    fn zero_in_every_spelling_is_zero() {
        for input in ["0", "0.0", "0Gi", "-0", "000", "0m", "+", "-", ".", "0e5"] {
            assert_eq!(c(input), "0", "{input}");
        }
    }

    #[test]
    fn binary_values_are_capped_at_2_63() {
        assert_eq!(c("8Ei"), "9223372036854775807");
        assert_eq!(c("100000000Ei"), "9223372036854775807");
    }

    #[test]
    fn apimachinery_prints_no_suffix_beyond_exa() {
        assert_eq!(c("1000E"), "1");
    }

    #[test]
    fn malformed_quantities_are_refused_with_apimachinery_messages() {
        for input in [
            "", "abc", "1.5.3", "1 Gi", "1Gb", "--1", "1e", "1mi", "1m3", "0x10", "1e1.5",
        ] {
            let error = canonical(input).expect_err(input);
            assert!(
                matches!(error, QuantityError::Format | QuantityError::Suffix),
                "{input}: {error}"
            );
        }
        assert_eq!(canonical("1Gb"), Err(QuantityError::Format));
        assert_eq!(canonical("1mi"), Err(QuantityError::Suffix));
        assert_eq!(canonical("1.5.3"), Err(QuantityError::Format));
        assert!(
            QuantityError::Format
                .to_string()
                .starts_with("quantities must match")
        );
    }

    #[test]
    fn huge_exponents_do_not_explode() {
        assert_eq!(c("1e999999"), "1e999999");
        assert_eq!(c("1e-999999999"), "1e-9");
        // apimachinery keeps the exponent in an int32: 2^32 wraps to 0.
        assert_eq!(c("1e4294967296"), "1");
    }

    #[test]
    fn values_beyond_64_bits_keep_every_digit() {
        // Input/canonical pairs from apimachinery's own test table.
        for (input, expected) in [
            ("999999999999999999.1", "999999999999999999100m"),
            ("-9999999999999999999.0", "-9999999999999999999"),
            ("9999999999999999999000m", "9999999999999999999"),
            ("1.0000000000000000001E", "1000000000000000000100m"),
            ("-1.000000000000000001E", "-1000000000000000001"),
            ("10000000000000000000", "10E"),
            ("-10.0E", "-10E"),
            ("10000000000000000000000m", "10E"),
            ("10.000000000000000001E", "10000000000000000001"),
            ("-9223372036854775809000m", "-9223372036854775809"),
        ] {
            assert_eq!(c(input), expected, "{input}");
        }
    }

    #[test]
    fn resource_lists_round_up_to_milli_units() {
        assert_eq!(canonical_resource("0.0001").unwrap(), "1m");
        assert_eq!(canonical_resource("100n").unwrap(), "1m");
        assert_eq!(canonical_resource("1.0001").unwrap(), "1001m");
        assert_eq!(canonical_resource("0.5").unwrap(), "500m");
        assert_eq!(canonical_resource("1Gi").unwrap(), "1Gi");
        assert_eq!(canonical("100n").unwrap(), "100n");
    }

    #[test]
    fn whole_units_round_up() {
        assert_eq!(Quantity::parse("1500m").unwrap().ceil_i64(), Some(2));
        assert_eq!(Quantity::parse("1Ki").unwrap().ceil_i64(), Some(1024));
        assert_eq!(Quantity::parse("-1").unwrap().ceil_i64(), Some(-1));
    }

    #[test]
    fn products_and_quotients_are_exact_in_the_first_format() {
        let q = |t: &str| Quantity::parse(t).unwrap();
        let mul = |a: &str, b: &str| q(a).checked_mul(&q(b)).unwrap().canonical();
        assert_eq!(mul("12Ki", "2"), "24Ki");
        assert_eq!(mul("250m", "2"), "500m");
        assert_eq!(mul("1Gi", "1.5"), "1536Mi");
        assert_eq!(mul("-2", "3"), "-6");
        // A binary value scaled by a power of ten stays exact.
        assert_eq!(mul("1Ki", "1e+03"), "1000Ki");
        let div = |a: &str, b: &str, scale: i64| {
            q(a).div_round_down(&q(b), scale)
                .unwrap()
                .map(|r| r.canonical())
        };
        assert_eq!(div("12Ki", "4", 0).as_deref(), Some("3Ki"));
        // Rounded toward zero at the scale.
        assert_eq!(div("1", "3", 0).as_deref(), Some("0"));
        assert_eq!(div("1.0", "3", 1).as_deref(), Some("300m"));
        assert_eq!(div("-1.0", "3", 1).as_deref(), Some("-300m"));
        assert_eq!(div("1", "0", 0), None);
        assert_eq!(q("1k").dec_scale(), -3);
        assert_eq!(q("1.25").dec_scale(), 2);
        // Exponents far apart are refused, not computed digit by digit.
        assert!(q("1e900").checked_mul(&q("1e900")).is_err());
        assert!(q("1").div_round_down(&q("3"), 2000).is_err());
    }
}
