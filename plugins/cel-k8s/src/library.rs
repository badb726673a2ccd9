//! The Kubernetes CEL libraries this crate provides, and the names of those
//! it does not (refused at compile time by name).
//!
//! Provided: the CEL standard library and macros (`has`, `all`, `exists`,
//! `exists_one`, `map`, `filter`); the strings extension (`charAt`,
//! `indexOf`, `lastIndexOf`, `join`, `lowerAscii`, `upperAscii`, `replace`,
//! `split`, `substring`, `trim`, `format`, `quote`, `reverse`); Kubernetes'
//! list library (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`
//! on lists); its regex library (`find`, `findAll`); the sets extension
//! (`sets.contains`, `sets.equivalent`, `sets.intersects`); Kubernetes'
//! quantity ([`quantity`]), URL ([`url`]) and IP/CIDR ([`net`]) libraries.

pub mod net;
pub mod quantity;
pub mod url;

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, LIST_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::extractors::This;
use cel::{Context, Env, ExecutionError, Value};

/// Largest compiled regex (bytes of the compiled program) for `find`,
/// `findAll` and `matches` patterns written in a policy.
pub const MAX_REGEX_SIZE: usize = 1 << 20;

/// Longest string `quantity`, `url`, `ip`, `cidr` (and their `is…`
/// variants, `ip.isCanonical`, `containsIP`, `containsCIDR`) parse: a longer
/// one is an error (`false` for `is…`), so that a hostile megabyte string
/// costs nothing to refuse.
pub const MAX_PARSED_STRING_BYTES: usize = 4096;

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
    // Kubernetes quantity library
    "quantity",
    "isQuantity",
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    // Kubernetes URL library
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    // Kubernetes IP and CIDR libraries
    "ip",
    "isIP",
    "ip.isCanonical",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "cidr",
    "isCIDR",
    "containsIP",
    "containsCIDR",
    "prefixLength",
    "masked",
];

/// Index in [`PROVIDED_FUNCTIONS`] of the first function of the Kubernetes
/// quantity, URL and IP/CIDR libraries (whose errors are the API server's
/// messages, reported without the interpreter's prefix).
pub const KUBERNETES_LIBRARIES_FROM: usize = PROVIDED_FUNCTIONS.len() - 34;

/// Kubernetes CEL library functions this crate does not provide: an
/// expression calling one is refused by name (and this list says why).
pub const MISSING_FUNCTIONS: &[(&str, &str)] = &[
    ("semver", "Kubernetes semver library"),
    ("isSemver", "Kubernetes semver library"),
    ("major", "Kubernetes semver library"),
    ("minor", "Kubernetes semver library"),
    ("patch", "Kubernetes semver library"),
    ("check", "Kubernetes authorizer library"),
    ("allowed", "Kubernetes authorizer library"),
    ("serviceAccount", "Kubernetes authorizer library"),
    ("optional.of", OPTIONAL_TYPES),
    ("optional.none", OPTIONAL_TYPES),
    ("optional.ofNonZeroValue", OPTIONAL_TYPES),
    ("base64.encode", "CEL encoders extension"),
    ("base64.decode", "CEL encoders extension"),
];
/// The library name of CEL's optional types.
pub const OPTIONAL_TYPES: &str = "CEL optional types";

/// The functions of CEL's optional types, provided by an environment made
/// with them ([`crate::Environment::with_optional_types`]).
pub const OPTIONAL_FUNCTIONS: &[&str] = &[
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
    "value",
    "hasValue",
    "or",
    "orValue",
    "optMap",
    "optFlatMap",
];

/// Builds the environment: standard library, macros, strings extension and
/// the list member overloads that share names with string ones; CEL's
/// optional types when `optional_types` says so.
pub fn environment(optional_types: bool) -> Env {
    let mut env = Env::stdlib().with_optional_support(optional_types);
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
    for (id, name) in [
        ("ip_to_string", net::IP_TYPE_NAME),
        ("cidr_to_string", net::CIDR_TYPE_NAME),
    ] {
        env.add_overload(
            "string",
            id,
            vec![Type::new_opaque_type(name)],
            net_to_string,
        )
        .expect("string() of IPs and CIDRs is new");
    }
    env
}

fn net_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [value] = <[CowVal<'_, '_>; 1]>::try_from(args)
        .map_err(|a| ExecutionError::invalid_argument_count(1, a.len()))?;
    let value = Value::try_from(value.as_ref())?;
    let text = net::to_string(&value).ok_or_else(|| error("string", "not an IP or CIDR"))?;
    boxed(Value::String(Arc::new(text)))
}

/// The value of an opaque CEL value of type `T`.
fn opaque<T: 'static>(value: &Value) -> Option<&T> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<T>(),
        _ => None,
    }
}

/// The string argument (or receiver) of `function`.
fn string_arg(value: &Value, function: &str) -> Result<Arc<String>, ExecutionError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        other => Err(error(
            function,
            format!("no such overload for {other:?}: a string is expected"),
        )),
    }
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
    context.add_function("quantity", quantity::quantity)?;
    context.add_function("isQuantity", quantity::is_quantity)?;
    context.add_function("sign", quantity::sign)?;
    context.add_function("isInteger", quantity::is_integer)?;
    context.add_function("asInteger", quantity::as_integer)?;
    context.add_function("asApproximateFloat", quantity::as_approximate_float)?;
    context.add_function("add", quantity::add)?;
    context.add_function("sub", quantity::sub)?;
    context.add_function("isGreaterThan", quantity::is_greater_than)?;
    context.add_function("isLessThan", quantity::is_less_than)?;
    context.add_function("compareTo", quantity::compare_to)?;
    context.add_function("url", url::url)?;
    context.add_function("isURL", url::is_url)?;
    context.add_function("getScheme", url::get_scheme)?;
    context.add_function("getHost", url::get_host)?;
    context.add_function("getHostname", url::get_hostname)?;
    context.add_function("getPort", url::get_port)?;
    context.add_function("getEscapedPath", url::get_escaped_path)?;
    context.add_function("getQuery", url::get_query)?;
    context.add_function("ip", net::ip)?;
    context.add_function("isIP", net::is_ip)?;
    context.add_function("ip.isCanonical", net::is_canonical)?;
    for property in net::IP_PROPERTIES {
        context.add_function(property, net::ip_property(property))?;
    }
    context.add_function("cidr", net::cidr)?;
    context.add_function("isCIDR", net::is_cidr)?;
    context.add_function("containsIP", net::contains_ip)?;
    context.add_function("containsCIDR", net::contains_cidr)?;
    context.add_function("prefixLength", net::prefix_length)?;
    context.add_function("masked", net::masked)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_libraries_start_with_quantity() {
        assert_eq!(PROVIDED_FUNCTIONS[KUBERNETES_LIBRARIES_FROM], "quantity");
        assert_eq!(PROVIDED_FUNCTIONS.last(), Some(&"masked"));
    }
}
