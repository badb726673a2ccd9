//! Kubernetes' quantity library (`quantity`, `isQuantity`, `sign`,
//! `isInteger`, `asInteger`, `asApproximateFloat`, `add`, `sub`,
//! `isGreaterThan`, `isLessThan`, `compareTo`), on `kiln-quantity`'s
//! parser (apimachinery's rules and error messages).

use std::cmp::Ordering;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::Opaque;
use cel::{ExecutionError, Value};
use kiln_quantity::Quantity;

use super::{MAX_PARSED_STRING_BYTES, error, opaque, string_arg};

/// CEL type name of quantities.
pub const TYPE_NAME: &str = "kubernetes.Quantity";

/// A quantity value; equal when the numbers are (`1` == `1000m`).
#[derive(Debug, Clone)]
pub struct QuantityValue(pub Quantity);

impl PartialEq for QuantityValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp_value(&other.0) == Ordering::Equal
    }
}

impl Eq for QuantityValue {}

impl Opaque for QuantityValue {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// apimachinery's `ParseQuantity` (no surrounding whitespace accepted),
/// refusing strings longer than [`MAX_PARSED_STRING_BYTES`].
pub fn parse(raw: &str) -> Result<Quantity, String> {
    if raw.len() > MAX_PARSED_STRING_BYTES {
        return Err(format!(
            "the string is {} bytes long, more than the limit of {MAX_PARSED_STRING_BYTES}",
            raw.len()
        ));
    }
    if raw.trim() != raw {
        return Err(kiln_quantity::QuantityError::Format.to_string());
    }
    Quantity::parse(raw).map_err(|e| e.to_string())
}

fn of(value: &Value, function: &str) -> Result<Quantity, ExecutionError> {
    opaque::<QuantityValue>(value)
        .map(|q| q.0.clone())
        .ok_or_else(|| error(function, format!("no such overload for {value:?}")))
}

fn wrap(q: Quantity) -> Value {
    Value::Opaque(Arc::new(QuantityValue(q)))
}

/// `quantity(string)`.
pub fn quantity(This(this): This<Value>) -> Result<Value, ExecutionError> {
    let raw = string_arg(&this, "quantity")?;
    parse(&raw).map(wrap).map_err(|e| error("quantity", e))
}

/// `isQuantity(string)`.
pub fn is_quantity(raw: Arc<String>) -> bool {
    parse(&raw).is_ok()
}

/// `q.sign()`.
pub fn sign(This(this): This<Value>) -> Result<i64, ExecutionError> {
    Ok(of(&this, "sign")?.sign())
}

/// `q.isInteger()`: whether `asInteger` succeeds.
pub fn is_integer(This(this): This<Value>) -> Result<bool, ExecutionError> {
    Ok(of(&this, "isInteger")?.to_i64().is_some())
}

/// `q.asInteger()`.
pub fn as_integer(This(this): This<Value>) -> Result<i64, ExecutionError> {
    of(&this, "asInteger")?
        .to_i64()
        .ok_or_else(|| error("asInteger", "cannot convert value to integer"))
}

/// `q.asApproximateFloat()`.
pub fn as_approximate_float(This(this): This<Value>) -> Result<f64, ExecutionError> {
    Ok(of(&this, "asApproximateFloat")?.to_f64())
}

fn operand(value: &Value, function: &str) -> Result<Quantity, ExecutionError> {
    match value {
        Value::Int(i) => Ok(Quantity::from_i64(*i)),
        other => of(other, function),
    }
}

/// `q.add(quantity | int)`.
pub fn add(This(this): This<Value>, other: Value) -> Result<Value, ExecutionError> {
    let sum = of(&this, "add")?
        .checked_add(&operand(&other, "add")?)
        .map_err(|e| error("add", e))?;
    Ok(wrap(sum))
}

/// `q.sub(quantity | int)`.
pub fn sub(This(this): This<Value>, other: Value) -> Result<Value, ExecutionError> {
    let difference = of(&this, "sub")?
        .checked_sub(&operand(&other, "sub")?)
        .map_err(|e| error("sub", e))?;
    Ok(wrap(difference))
}

fn compare(this: &Value, other: &Value, function: &str) -> Result<Ordering, ExecutionError> {
    Ok(of(this, function)?.cmp_value(&of(other, function)?))
}

/// `q.isGreaterThan(quantity)`.
pub fn is_greater_than(This(this): This<Value>, other: Value) -> Result<bool, ExecutionError> {
    Ok(compare(&this, &other, "isGreaterThan")? == Ordering::Greater)
}

/// `q.isLessThan(quantity)`.
pub fn is_less_than(This(this): This<Value>, other: Value) -> Result<bool, ExecutionError> {
    Ok(compare(&this, &other, "isLessThan")? == Ordering::Less)
}

/// `q.compareTo(quantity)`: -1, 0 or 1.
pub fn compare_to(This(this): This<Value>, other: Value) -> Result<i64, ExecutionError> {
    Ok(match compare(&this, &other, "compareTo")? {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}
