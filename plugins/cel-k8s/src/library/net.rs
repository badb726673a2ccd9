//! Kubernetes' IP and CIDR libraries (`ip`, `isIP`, `ip.isCanonical`,
//! `family`, `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`,
//! `isLinkLocalUnicast`, `isGlobalUnicast`, `cidr`, `isCIDR`, `containsIP`,
//! `containsCIDR`, `ip()` of a CIDR, `prefixLength`, `masked`, `string()` of
//! both), with the API server's semantics (Go's `net/netip`): leading zeros
//! in IPv4 octets, zones and IPv4-mapped IPv6 addresses are refused, with
//! its error messages (`netip`'s own part of them is approximated).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use super::{MAX_PARSED_STRING_BYTES, error, opaque, string_arg};

/// CEL type name of IP addresses.
pub const IP_TYPE_NAME: &str = "net.IP";
/// CEL type name of CIDRs.
pub const CIDR_TYPE_NAME: &str = "net.CIDR";

/// An IP address (never zoned, never IPv4-mapped IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip(pub IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE_NAME
    }
}

/// A CIDR: an address and a prefix length (host bits may be set, as with
/// `netip.Prefix`; `masked()` clears them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address as written.
    pub addr: IpAddr,
    /// The prefix length.
    pub bits: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE_NAME
    }
}

fn too_long(s: &str) -> Option<String> {
    (s.len() > MAX_PARSED_STRING_BYTES).then(|| {
        format!(
            "the string is {} bytes long, more than the limit of {MAX_PARSED_STRING_BYTES}",
            s.len()
        )
    })
}

/// `netip.ParseAddr`: the address, or the reason (without context).
fn parse_addr_inner(raw: &str) -> Result<IpAddr, String> {
    if let Some((addr, zone)) = raw.split_once('%') {
        // Go accepts a zone on IPv6 only; Kubernetes then refuses it.
        return match addr.parse::<Ipv6Addr>() {
            Ok(_) if !zone.is_empty() => Err("zone".into()),
            _ => Err(format!("ParseAddr({raw:?}): unable to parse IP")),
        };
    }
    if raw.contains(':') {
        return raw
            .parse::<Ipv6Addr>()
            .map(IpAddr::V6)
            .map_err(|_| format!("ParseAddr({raw:?}): unable to parse IP"));
    }
    if raw.contains('.') {
        return parse_ipv4(raw)
            .map(IpAddr::V4)
            .map_err(|e| format!("ParseAddr({raw:?}): {e}"));
    }
    Err(format!("ParseAddr({raw:?}): unable to parse IP"))
}

/// Dotted-quad IPv4 as Go reads it (with its messages).
fn parse_ipv4(s: &str) -> Result<Ipv4Addr, &'static str> {
    let fields: Vec<&str> = s.split('.').collect();
    if fields.len() < 4 {
        return Err("IPv4 address too short");
    }
    if fields.len() > 4 {
        return Err("IPv4 address too long");
    }
    let mut octets = [0u8; 4];
    for (i, field) in fields.iter().enumerate() {
        if field.is_empty() {
            return Err("IPv4 field must have at least one digit");
        }
        if !field.bytes().all(|b| b.is_ascii_digit()) {
            return Err("unexpected character");
        }
        if field.len() > 1 && field.starts_with('0') {
            return Err("IPv4 field has octet with leading zero");
        }
        octets[i] = field
            .parse::<u16>()
            .ok()
            .and_then(|v| u8::try_from(v).ok())
            .ok_or("IPv4 field has value >255")?;
    }
    Ok(Ipv4Addr::from(octets))
}

fn is_4in6(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// Kubernetes' `parseIPAddr`.
pub fn parse_ip(raw: &str) -> Result<Ip, String> {
    if let Some(e) = too_long(raw) {
        return Err(format!(
            "IP Address parse error during conversion from string: {e}"
        ));
    }
    let addr = match parse_addr_inner(raw) {
        Ok(a) => a,
        Err(e) if e == "zone" => {
            return Err(format!("IP address {raw:?} with zone value is not allowed"));
        }
        Err(e) => {
            return Err(format!(
                "IP Address {raw:?} parse error during conversion from string: {e}"
            ));
        }
    };
    if is_4in6(&addr) {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(Ip(addr))
}

/// `netip.ParsePrefix`.
fn parse_prefix(raw: &str) -> Result<Cidr, String> {
    let Some((addr, bits)) = raw.rsplit_once('/') else {
        return Err(format!("netip.ParsePrefix({raw:?}): no '/'"));
    };
    if addr.contains('%') {
        return Err(format!(
            "netip.ParsePrefix({raw:?}): IPv6 zones cannot be present in a prefix"
        ));
    }
    let addr = parse_addr_inner(addr).map_err(|e| format!("netip.ParsePrefix({raw:?}): {e}"))?;
    let bad_bits = || format!("netip.ParsePrefix({raw:?}): bad bits after slash: {bits:?}");
    if bits.is_empty()
        || !bits.bytes().all(|b| b.is_ascii_digit())
        || (bits.len() > 1 && bits.starts_with('0'))
    {
        return Err(bad_bits());
    }
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let bits: u32 = bits.parse().map_err(|_| bad_bits())?;
    if bits > max {
        return Err(format!(
            "netip.ParsePrefix({raw:?}): prefix length out of range"
        ));
    }
    Ok(Cidr {
        addr,
        bits: bits as u8,
    })
}

/// Kubernetes' `parseCIDR` (its error is wrapped once more by `cidr()`).
pub fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    if let Some(e) = too_long(raw) {
        return Err(format!(
            "network address parse error during conversion from string: {e}"
        ));
    }
    let cidr = parse_prefix(raw)
        .map_err(|e| format!("network address parse error during conversion from string: {e}"))?;
    if is_4in6(&cidr.addr) {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(cidr)
}

fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let m = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(bits))
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(bits))
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

impl Cidr {
    /// The CIDR with its host bits cleared.
    pub fn masked(self) -> Cidr {
        Cidr {
            addr: mask(self.addr, self.bits),
            bits: self.bits,
        }
    }

    /// Whether `ip` is in the network (same family).
    pub fn contains(self, ip: IpAddr) -> bool {
        self.addr.is_ipv4() == ip.is_ipv4() && mask(ip, self.bits) == self.masked().addr
    }

    /// Whether `other` is a subnet of this network (same family).
    pub fn contains_cidr(self, other: Cidr) -> bool {
        self.bits <= other.bits && self.contains(other.addr)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

fn is_link_local_multicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn is_link_local_unicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `IsGlobalUnicast`: private and unique-local addresses count.
fn is_global_unicast(addr: IpAddr) -> bool {
    if let IpAddr::V4(v4) = addr
        && (v4.is_unspecified() || v4.is_broadcast())
    {
        return false;
    }
    !addr.is_unspecified()
        && !addr.is_loopback()
        && !addr.is_multicast()
        && !is_link_local_unicast(addr)
}

fn ip_of(value: &Value, function: &str) -> Result<Ip, ExecutionError> {
    opaque::<Ip>(value)
        .copied()
        .ok_or_else(|| error(function, format!("no such overload for {value:?}")))
}

fn cidr_of(value: &Value, function: &str) -> Result<Cidr, ExecutionError> {
    opaque::<Cidr>(value)
        .copied()
        .ok_or_else(|| error(function, format!("no such overload for {value:?}")))
}

/// `ip(string)`, and `cidr.ip()`.
pub fn ip(
    cel::extractors::This(this): cel::extractors::This<Value>,
) -> Result<Value, ExecutionError> {
    if let Some(cidr) = opaque::<Cidr>(&this) {
        return Ok(Value::Opaque(Arc::new(Ip(cidr.addr))));
    }
    let raw = string_arg(&this, "ip")?;
    let ip = parse_ip(&raw).map_err(|e| error("ip", e))?;
    Ok(Value::Opaque(Arc::new(ip)))
}

/// `isIP(string)`.
pub fn is_ip(raw: Arc<String>) -> bool {
    parse_ip(&raw).is_ok()
}

/// `ip.isCanonical(string)`.
pub fn is_canonical(raw: Arc<String>) -> Result<bool, ExecutionError> {
    let ip = parse_ip(&raw).map_err(|e| error("ip.isCanonical", e))?;
    Ok(ip.0.to_string() == *raw)
}

/// A unary predicate or property of an IP address.
pub fn ip_property(
    function: &'static str,
) -> impl Fn(cel::extractors::This<Value>) -> Result<Value, ExecutionError> + Send + Sync + 'static
{
    move |cel::extractors::This(this): cel::extractors::This<Value>| {
        let Ip(addr) = ip_of(&this, function)?;
        Ok(match function {
            "family" => Value::Int(if addr.is_ipv4() { 4 } else { 6 }),
            "isUnspecified" => Value::Bool(addr.is_unspecified()),
            "isLoopback" => Value::Bool(addr.is_loopback()),
            "isLinkLocalMulticast" => Value::Bool(is_link_local_multicast(addr)),
            "isLinkLocalUnicast" => Value::Bool(is_link_local_unicast(addr)),
            "isGlobalUnicast" => Value::Bool(is_global_unicast(addr)),
            _ => return Err(error(function, "unknown IP property")),
        })
    }
}

/// The IP functions that are properties of an address.
pub const IP_PROPERTIES: &[&str] = &[
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
];

/// `cidr(string)`.
pub fn cidr(raw: Arc<String>) -> Result<Value, ExecutionError> {
    let cidr = parse_cidr(&raw).map_err(|e| {
        error(
            "cidr",
            format!("network address parse error during conversion from string: {e}"),
        )
    })?;
    Ok(Value::Opaque(Arc::new(cidr)))
}

/// `isCIDR(string)`.
pub fn is_cidr(raw: Arc<String>) -> bool {
    parse_cidr(&raw).is_ok()
}

/// `cidr.containsIP(ip | string)`.
pub fn contains_ip(
    cel::extractors::This(this): cel::extractors::This<Value>,
    other: Value,
) -> Result<bool, ExecutionError> {
    let cidr = cidr_of(&this, "containsIP")?;
    let ip = match &other {
        Value::String(s) => parse_ip(s).map_err(|e| error("containsIP", e))?,
        v => ip_of(v, "containsIP")?,
    };
    Ok(cidr.contains(ip.0))
}

/// `cidr.containsCIDR(cidr | string)`.
pub fn contains_cidr(
    cel::extractors::This(this): cel::extractors::This<Value>,
    other: Value,
) -> Result<bool, ExecutionError> {
    let cidr = cidr_of(&this, "containsCIDR")?;
    let other = match &other {
        Value::String(s) => parse_cidr(s).map_err(|e| {
            error(
                "containsCIDR",
                format!("network address parse error during conversion from string: {e}"),
            )
        })?,
        v => cidr_of(v, "containsCIDR")?,
    };
    Ok(cidr.contains_cidr(other))
}

/// `cidr.prefixLength()`.
pub fn prefix_length(
    cel::extractors::This(this): cel::extractors::This<Value>,
) -> Result<i64, ExecutionError> {
    Ok(i64::from(cidr_of(&this, "prefixLength")?.bits))
}

/// `cidr.masked()`.
pub fn masked(
    cel::extractors::This(this): cel::extractors::This<Value>,
) -> Result<Value, ExecutionError> {
    Ok(Value::Opaque(Arc::new(cidr_of(&this, "masked")?.masked())))
}

/// `string(ip)` and `string(cidr)`, when `value` is one.
pub fn to_string(value: &Value) -> Option<String> {
    opaque::<Ip>(value)
        .map(|ip| ip.0.to_string())
        .or_else(|| opaque::<Cidr>(value).map(|c| c.to_string()))
}
