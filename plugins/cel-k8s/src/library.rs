//! The Kubernetes CEL libraries this crate provides, and the names of those
//! it does not (refused at compile time by name).
//!
//! Provided: the CEL standard library and macros (`has`, `all`, `exists`,
//! `exists_one`, `map`, `filter`); the strings extension (`charAt`,
//! `indexOf`, `lastIndexOf`, `join`, `lowerAscii`, `upperAscii`, `replace`,
//! `split`, `substring`, `trim`, `format`, `quote`, `reverse`); Kubernetes'
//! list library (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`
//! on lists); its regex library (`find`, `findAll`); the sets extension
//! (`sets.contains`, `sets.equivalent`, `sets.intersects`).

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::extractors::This;
use cel::{Context, Env, ExecutionError, Value};

/// Largest compiled regex (bytes of the compiled program) for `find`,
/// `findAll` and `matches` patterns written in a policy.
pub const MAX_REGEX_SIZE: usize = 1 << 20;

/// Functions of the standard library, the strings extension and this crate
/// that an expression may call (operators aside).
pub const PROVIDED_FUNCTIONS: &[&str] = &[
    // standard library
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "duration",
    "timestamp",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
    "has",
    // strings extension
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "strings.quote",
    "reverse",
    // Kubernetes list and regex libraries, sets extension
    "isSorted",
    "sum",
    "min",
    "max",
    "find",
    "findAll",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
];

/// Kubernetes CEL library functions this crate does not provide: an
/// expression calling one is refused by name (and this list says why).
pub const MISSING_FUNCTIONS: &[(&str, &str)] = &[
    ("quantity", "Kubernetes quantity library"),
    ("isQuantity", "Kubernetes quantity library"),
    ("url", "Kubernetes URL library"),
    ("isURL", "Kubernetes URL library"),
    ("ip", "Kubernetes IP library"),
    ("isIP", "Kubernetes IP library"),
    ("cidr", "Kubernetes CIDR library"),
    ("isCIDR", "Kubernetes CIDR library"),
    ("semver", "Kubernetes semver library"),
    ("isSemver", "Kubernetes semver library"),
    ("containsIP", "Kubernetes CIDR library"),
    ("containsCIDR", "Kubernetes CIDR library"),
    ("isGreaterThan", "Kubernetes quantity library"),
    ("isLessThan", "Kubernetes quantity library"),
    ("compareTo", "Kubernetes quantity library"),
    ("asInteger", "Kubernetes quantity library"),
    ("asApproximateFloat", "Kubernetes quantity library"),
    ("getScheme", "Kubernetes URL library"),
    ("getHost", "Kubernetes URL library"),
    ("getHostname", "Kubernetes URL library"),
    ("getPort", "Kubernetes URL library"),
    ("getEscapedPath", "Kubernetes URL library"),
    ("getQuery", "Kubernetes URL library"),
    ("check", "Kubernetes authorizer library"),
    ("allowed", "Kubernetes authorizer library"),
    ("serviceAccount", "Kubernetes authorizer library"),
    ("optional.of", "CEL optional types"),
    ("optional.none", "CEL optional types"),
    ("optional.ofNonZeroValue", "CEL optional types"),
    ("base64.encode", "CEL encoders extension"),
    ("base64.decode", "CEL encoders extension"),
];

/// Builds the environment: standard library, macros, strings extension and
/// the list member overloads that share names with string ones.
pub fn environment() -> Env {
    let mut env = Env::stdlib().with_optional_support(false);
    // Neither can fail on a fresh standard environment: the names are new.
    env.add_extension(cel::extensions::strings)
        .expect("the strings extension registers on the standard environment");
    env.add_member_overload(
        "indexOf",
        "list.indexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_index_of,
    )
    .expect("list.indexOf is new");
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_last_index_of,
    )
    .expect("list.lastIndexOf is new");
    env
}

/// Adds this crate's context functions (lists, regex, sets) to `context`.
pub fn add_functions(context: &mut Context<'_, '_>) -> Result<(), cel::DeclarationError> {
    context.add_function("isSorted", is_sorted)?;
    context.add_function("sum", sum)?;
    context.add_function("min", |This(list): This<Arc<Vec<Value>>>| {
        extreme(&list, "min", Ordering::Less)
    })?;
    context.add_function("max", |This(list): This<Arc<Vec<Value>>>| {
        extreme(&list, "max", Ordering::Greater)
    })?;
    context.add_function("find", find)?;
    context.add_function("findAll", find_all)?;
    context.add_function("sets.contains", |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| {
        b.iter().all(|x| a.contains(x))
    })?;
    context.add_function(
        "sets.equivalent",
        |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| {
            b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x))
        },
    )?;
    context.add_function(
        "sets.intersects",
        |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| b.iter().any(|x| a.contains(x)),
    )?;
    Ok(())
}

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn index_in(args: Vec<CowVal<'_, '_>>, last: bool) -> Result<Value, ExecutionError> {
    let name = if last { "lastIndexOf" } else { "indexOf" };
    let [list, needle] = <[CowVal<'_, '_>; 2]>::try_from(args)
        .map_err(|a| ExecutionError::invalid_argument_count(2, a.len()))?;
    let list = Value::try_from(list.as_ref())?;
    let needle = Value::try_from(needle.as_ref())?;
    let Value::List(items) = list else {
        return Err(error(name, "not a list"));
    };
    let found = if last {
        items.iter().rposition(|x| *x == needle)
    } else {
        items.iter().position(|x| *x == needle)
    };
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn boxed<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let val: Box<dyn Val> = Box::try_from(value)?;
    Ok(CowVal::Owned(val))
}

fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boxed(index_in(args, false)?)
}

fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boxed(index_in(args, true)?)
}

fn compare(a: &Value, b: &Value, function: &str) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| error(function, format!("{a:?} and {b:?} cannot be compared")))
}

fn is_sorted(This(list): This<Arc<Vec<Value>>>) -> Result<bool, ExecutionError> {
    for pair in list.windows(2) {
        if compare(&pair[0], &pair[1], "isSorted")? == Ordering::Greater {
            return Ok(false);
        }
    }
    Ok(true)
}

fn sum(This(list): This<Arc<Vec<Value>>>) -> Result<Value, ExecutionError> {
    let mut total = match list.first() {
        None | Some(Value::Int(_)) => Value::Int(0),
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(other) => return Err(error("sum", format!("cannot sum {other:?}"))),
    };
    for item in list.iter() {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(*b)
                    .ok_or_else(|| error("sum", "integer overflow"))?,
            ),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| error("sum", "integer overflow"))?,
            ),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (_, other) => return Err(error("sum", format!("cannot add {other:?}"))),
        };
    }
    Ok(total)
}

fn extreme(list: &[Value], function: &str, wanted: Ordering) -> Result<Value, ExecutionError> {
    let mut best = list
        .first()
        .ok_or_else(|| error(function, "called on an empty list"))?;
    for item in &list[1..] {
        if compare(item, best, function)? == wanted {
            best = item;
        }
    }
    Ok(best.clone())
}

fn regex(pattern: &str, function: &str) -> Result<regex::Regex, ExecutionError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_SIZE)
        .build()
        .map_err(|e| error(function, e))
}

fn find(This(text): This<Arc<String>>, pattern: Arc<String>) -> Result<Value, ExecutionError> {
    let re = regex(&pattern, "find")?;
    Ok(Value::String(Arc::new(
        re.find(&text)
            .map(|m| m.as_str().to_owned())
            .unwrap_or_default(),
    )))
}

fn find_all(
    This(text): This<Arc<String>>,
    cel::extractors::Arguments(args): cel::extractors::Arguments,
) -> Result<Value, ExecutionError> {
    let Some(Value::String(pattern)) = args.first() else {
        return Err(error("findAll", "the pattern must be a string"));
    };
    let re = regex(pattern, "findAll")?;
    let limit = match args.get(1) {
        Some(Value::Int(n)) if *n >= 0 => *n as usize,
        _ => usize::MAX,
    };
    Ok(Value::List(Arc::new(
        re.find_iter(&text)
            .take(limit)
            .map(|m| Value::String(Arc::new(m.as_str().to_owned())))
            .collect(),
    )))
}
