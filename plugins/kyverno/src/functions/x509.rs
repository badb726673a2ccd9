//! `x509_decode`: a PEM certificate or certificate request, as Go's
//! `x509.Certificate` (or `x509.CertificateRequest`) encodes to JSON — the
//! value Kyverno's function returns (`{{ x509_decode(cert).NotAfter }}`,
//! `.Subject.CommonName`, `.DNSNames`, `.PublicKey.N`). As in Kyverno, only
//! RSA keys are decoded (the public key as `{N, E}`, `N` in decimal), and
//! numbers are JSON numbers (a serial number beyond 2^53 is rounded, as
//! Kyverno's round trip through `map[string]any` rounds it). Checked field
//! by field against the expected values of Kyverno's own tests of the
//! function (two certificates and a request). Name constraints are not
//! read (their fields stay null).

use base64::Engine as _;
use der::asn1::{Any, ObjectIdentifier, UintRef};
use der::{Decode, Encode, Tag, Tagged};
use kiln_gotime::layout;
use kiln_gotime::time::{Location, Time};
use num_bigint::BigUint;
use serde_json::{Map, Value, json};
use x509_cert::Certificate;
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName};
use x509_cert::ext::pkix::{
    AuthorityInfoAccessSyntax, AuthorityKeyIdentifier, BasicConstraints, CertificatePolicies,
    CrlDistributionPoints, ExtendedKeyUsage, KeyUsage, SubjectAltName, SubjectKeyIdentifier,
};
use x509_cert::name::Name;
use x509_cert::request::{CertReq, ExtensionReq};
use x509_cert::spki::SubjectPublicKeyInfoOwned;

/// The longest PEM text read: a certificate is a few KiB; the DER reader
/// sorts each SET it reads (quadratic in the values of one name part).
const MAX_PEM: usize = 64 << 10;

/// Decodes the first PEM block of `text`.
pub fn decode(text: &str) -> Result<Value, String> {
    if text.len() > MAX_PEM {
        return Err(format!("the PEM text is over {MAX_PEM} bytes"));
    }
    let (label, der) = first_block(text).ok_or("failed to decode PEM block")?;
    match label {
        "CERTIFICATE" => certificate(&der),
        "CERTIFICATE REQUEST" => request(&der),
        _ => Err("PEM block neither contains a CERTIFICATE or CERTIFICATE REQUEST".into()),
    }
}

/// Go's `pem.Decode`: the first `-----BEGIN L-----` … `-----END L-----`
/// block, its base64 body decoded (headers are not read).
fn first_block(text: &str) -> Option<(&str, Vec<u8>)> {
    let start = text.find("-----BEGIN ")?;
    let after = &text[start + "-----BEGIN ".len()..];
    let label_end = after.find("-----")?;
    let label = &after[..label_end];
    let body = &after[label_end + 5..];
    let end = body.find(&format!("-----END {label}-----"))?;
    let encoded: String = body[..end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    Some((label, der))
}

fn b64(bytes: &[u8]) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn der_of<T: Encode>(value: &T) -> Result<Vec<u8>, String> {
    value.to_der().map_err(|e| format!("x509: {e}"))
}

fn oid(id: &ObjectIdentifier) -> Value {
    json!(id.arcs().collect::<Vec<u32>>())
}

/// Go's `SignatureAlgorithm` numbering.
fn signature_algorithm(id: &ObjectIdentifier) -> u32 {
    match id.to_string().as_str() {
        "1.2.840.113549.1.1.2" => 1,
        "1.2.840.113549.1.1.4" => 2,
        "1.2.840.113549.1.1.5" => 3,
        "1.2.840.113549.1.1.11" => 4,
        "1.2.840.113549.1.1.12" => 5,
        "1.2.840.113549.1.1.13" => 6,
        "1.2.840.10040.4.3" => 7,
        "2.16.840.1.101.3.4.3.2" => 8,
        "1.2.840.10045.4.1" => 9,
        "1.2.840.10045.4.3.2" => 10,
        "1.2.840.10045.4.3.3" => 11,
        "1.2.840.10045.4.3.4" => 12,
        "1.2.840.113549.1.1.10" => 13,
        "1.3.101.112" => 16,
        _ => 0,
    }
}

/// The RSA public key `{N, E}` (Kyverno's shape); another algorithm is
/// refused as in Kyverno.
fn rsa_key(spki: &SubjectPublicKeyInfoOwned) -> Result<Value, String> {
    if spki.algorithm.oid.to_string() != "1.2.840.113549.1.1.1" {
        return Err("certificate should use rsa algorithm".into());
    }
    let failed = || "failed to parse subject public key info".to_owned();
    let bytes = spki.subject_public_key.as_bytes().ok_or_else(failed)?;
    let (n, e) = der::SliceReader::new(bytes)
        .map_err(|_| failed())
        .and_then(|mut reader| {
            use der::Reader as _;
            reader
                .sequence(|seq| Ok((UintRef::decode(seq)?, UintRef::decode(seq)?)))
                .map_err(|_| failed())
        })?;
    let e = e
        .as_bytes()
        .iter()
        .try_fold(0u64, |acc, b| {
            acc.checked_mul(256).map(|v| v + u64::from(*b))
        })
        .filter(|e| *e <= i32::MAX as u64)
        .ok_or_else(failed)?;
    Ok(json!({"N": BigUint::from_bytes_be(n.as_bytes()).to_string(), "E": e}))
}

/// A DER INTEGER's two's-complement bytes as the nearest f64.
fn integer(bytes: &[u8]) -> f64 {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let magnitude = bytes.iter().fold(0f64, |acc, b| {
        acc * 256.0 + f64::from(if negative { !b } else { *b })
    });
    if negative {
        -(magnitude + 1.0)
    } else {
        magnitude
    }
}

/// An attribute value Go reads as a string, if it is one.
fn string_of(value: &Any) -> Option<String> {
    match value.tag() {
        Tag::PrintableString | Tag::Utf8String | Tag::Ia5String | Tag::TeletexString => {
            String::from_utf8(value.value().to_vec()).ok()
        }
        Tag::BmpString => {
            let units: Vec<u16> = value
                .value()
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// Go's `pkix.Name` filled from an RDN sequence.
fn name(name: &Name) -> Value {
    let mut fields: [(u32, &str, Vec<String>); 7] = [
        (6, "Country", Vec::new()),
        (10, "Organization", Vec::new()),
        (11, "OrganizationalUnit", Vec::new()),
        (7, "Locality", Vec::new()),
        (8, "Province", Vec::new()),
        (9, "StreetAddress", Vec::new()),
        (17, "PostalCode", Vec::new()),
    ];
    let (mut common_name, mut serial_number) = (String::new(), String::new());
    let mut names = Vec::new();
    for rdn in &name.0 {
        for atv in rdn.0.iter() {
            let value = string_of(&atv.value);
            names.push(json!({"Type": oid(&atv.oid), "Value": value}));
            let Some(value) = value else { continue };
            let arcs: Vec<u32> = atv.oid.arcs().collect();
            if let [2, 5, 4, attribute] = arcs[..] {
                match attribute {
                    3 => common_name = value,
                    5 => serial_number = value,
                    _ => {
                        if let Some((_, _, list)) =
                            fields.iter_mut().find(|(id, _, _)| *id == attribute)
                        {
                            list.push(value);
                        }
                    }
                }
            }
        }
    }
    let mut out = Map::new();
    for (_, field, list) in fields {
        out.insert(field.into(), list_or_null(list));
    }
    out.insert("SerialNumber".into(), json!(serial_number));
    out.insert("CommonName".into(), json!(common_name));
    out.insert("Names".into(), list_or_null(names));
    out.insert("ExtraNames".into(), Value::Null);
    Value::Object(out)
}

fn list_or_null<T: Into<Value>>(items: Vec<T>) -> Value {
    if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items.into_iter().map(Into::into).collect())
    }
}

/// Go's time JSON: RFC 3339 with nanoseconds, in UTC.
fn time(seconds: u64) -> Value {
    let t = Time::unix(i64::try_from(seconds).unwrap_or(i64::MAX), 0).with_location(Location::Utc);
    json!(layout::format(&t, "2006-01-02T15:04:05.999999999Z07:00"))
}

/// Go's `*url.URL` as JSON (its exported fields), for a URI name.
fn url(text: &str) -> Value {
    let (rest, fragment) = text.split_once('#').unwrap_or((text, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (scheme, rest) = match rest.split_once(':') {
        Some((scheme, rest))
            if scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic()) =>
        {
            (scheme.to_ascii_lowercase(), rest)
        }
        _ => (String::new(), rest),
    };
    let (user, host, path, opaque) = match rest.strip_prefix("//") {
        Some(authority_path) => {
            let (authority, path) = match authority_path.find('/') {
                Some(i) => (&authority_path[..i], &authority_path[i..]),
                None => (authority_path, ""),
            };
            let (user, host) = match authority.rsplit_once('@') {
                Some((_, host)) => (json!({}), host),
                None => (Value::Null, authority),
            };
            (user, host.to_owned(), path.to_owned(), String::new())
        }
        None if !scheme.is_empty() && !rest.starts_with('/') => {
            (Value::Null, String::new(), String::new(), rest.to_owned())
        }
        None => (Value::Null, String::new(), rest.to_owned(), String::new()),
    };
    json!({
        "Scheme": scheme, "Opaque": opaque, "User": user, "Host": host, "Path": path,
        "RawPath": "", "OmitHost": false, "ForceQuery": false, "RawQuery": query,
        "Fragment": fragment, "RawFragment": "",
    })
}

/// The names of a subject alternative name extension, as Go sorts them.
#[derive(Default)]
struct AltNames {
    dns: Vec<String>,
    email: Vec<String>,
    ip: Vec<String>,
    uri: Vec<Value>,
}

impl AltNames {
    fn read(&mut self, value: &[u8]) -> Result<(), String> {
        let names = SubjectAltName::from_der(value).map_err(|e| format!("x509: {e}"))?;
        for general in names.0 {
            match general {
                GeneralName::DnsName(n) => self.dns.push(n.to_string()),
                GeneralName::Rfc822Name(n) => self.email.push(n.to_string()),
                GeneralName::UniformResourceIdentifier(n) => self.uri.push(url(n.as_str())),
                GeneralName::IpAddress(bytes) => self.ip.push(ip(bytes.as_bytes())?),
                _ => {}
            }
        }
        Ok(())
    }

    fn insert_into(self, out: &mut Map<String, Value>) {
        out.insert("DNSNames".into(), list_or_null(self.dns));
        out.insert("EmailAddresses".into(), list_or_null(self.email));
        out.insert("IPAddresses".into(), list_or_null(self.ip));
        out.insert("URIs".into(), list_or_null(self.uri));
    }
}

fn ip(bytes: &[u8]) -> Result<String, String> {
    match bytes.len() {
        4 => Ok(
            std::net::Ipv4Addr::from(<[u8; 4]>::try_from(bytes).unwrap_or_default()).to_string(),
        ),
        16 => {
            let v6 = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).unwrap_or_default());
            // Go prints an IPv4-mapped address as IPv4.
            Ok(v6
                .to_ipv4_mapped()
                .map_or_else(|| v6.to_string(), |v4| v4.to_string()))
        }
        n => Err(format!("x509: cannot parse IP address of length {n}")),
    }
}

/// Go's `ExtKeyUsage` numbering, by OID.
fn ext_key_usage(id: &ObjectIdentifier) -> Option<u32> {
    Some(match id.to_string().as_str() {
        "2.5.29.37.0" => 0,
        "1.3.6.1.5.5.7.3.1" => 1,
        "1.3.6.1.5.5.7.3.2" => 2,
        "1.3.6.1.5.5.7.3.3" => 3,
        "1.3.6.1.5.5.7.3.4" => 4,
        "1.3.6.1.5.5.7.3.5" => 5,
        "1.3.6.1.5.5.7.3.6" => 6,
        "1.3.6.1.5.5.7.3.7" => 7,
        "1.3.6.1.5.5.7.3.8" => 8,
        "1.3.6.1.5.5.7.3.9" => 9,
        "1.3.6.1.4.1.311.10.3.3" => 10,
        "2.16.840.1.113730.4.1" => 11,
        "1.3.6.1.4.1.311.2.1.22" => 12,
        "1.3.6.1.4.1.311.61.1.1" => 13,
        _ => return None,
    })
}

/// The extensions Go reads (a critical one of another kind is unhandled).
const HANDLED: [&str; 13] = [
    "2.5.29.15",
    "2.5.29.19",
    "2.5.29.17",
    "2.5.29.30",
    "2.5.29.31",
    "2.5.29.35",
    "2.5.29.37",
    "2.5.29.14",
    "2.5.29.32",
    "1.3.6.1.5.5.7.1.1",
    "2.5.29.36",
    "2.5.29.54",
    "2.5.29.33",
];

fn extension_list(extensions: &[Extension]) -> Value {
    list_or_null(
        extensions
            .iter()
            .map(|e| {
                json!({"Id": oid(&e.extn_id), "Critical": e.critical, "Value": b64(e.extn_value.as_bytes())})
            })
            .collect(),
    )
}

/// The fields a certificate and a request share: the raw DER parts, the
/// signature, the RSA key and the subject.
struct Signed<'a> {
    der: &'a [u8],
    spki: &'a SubjectPublicKeyInfoOwned,
    subject: &'a Name,
    signature: &'a der::asn1::BitString,
    algorithm: &'a ObjectIdentifier,
}

impl Signed<'_> {
    fn fields(&self) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        out.insert("Raw".into(), b64(self.der));
        out.insert("RawSubjectPublicKeyInfo".into(), b64(&der_of(self.spki)?));
        out.insert("RawSubject".into(), b64(&der_of(self.subject)?));
        out.insert("Signature".into(), b64(self.signature.raw_bytes()));
        out.insert(
            "SignatureAlgorithm".into(),
            json!(signature_algorithm(self.algorithm)),
        );
        out.insert("PublicKeyAlgorithm".into(), json!(1));
        out.insert("PublicKey".into(), rsa_key(self.spki)?);
        out.insert("Subject".into(), name(self.subject));
        Ok(out)
    }
}

fn certificate(der: &[u8]) -> Result<Value, String> {
    let cert =
        Certificate::from_der(der).map_err(|e| format!("x509: malformed certificate: {e}"))?;
    let tbs = &cert.tbs_certificate;
    let mut out = Signed {
        der,
        spki: &tbs.subject_public_key_info,
        subject: &tbs.subject,
        signature: &cert.signature,
        algorithm: &cert.signature_algorithm.oid,
    }
    .fields()?;
    out.insert("RawTBSCertificate".into(), b64(&der_of(tbs)?));
    out.insert("RawIssuer".into(), b64(&der_of(&tbs.issuer)?));
    out.insert("Version".into(), json!(tbs.version as u8 + 1));
    out.insert(
        "SerialNumber".into(),
        super::num(integer(tbs.serial_number.as_bytes())),
    );
    out.insert("Issuer".into(), name(&tbs.issuer));
    out.insert(
        "NotBefore".into(),
        time(tbs.validity.not_before.to_unix_duration().as_secs()),
    );
    out.insert(
        "NotAfter".into(),
        time(tbs.validity.not_after.to_unix_duration().as_secs()),
    );
    let extensions = tbs.extensions.as_deref().unwrap_or(&[]);
    let mut key_usage = 0u32;
    let mut basic: Option<(bool, i64)> = None;
    let mut subject_key_id = Value::Null;
    let mut authority_key_id = Value::Null;
    let mut names = AltNames::default();
    let (mut ext_usage, mut unknown_usage) = (Vec::new(), Vec::new());
    let (mut ocsp, mut issuers, mut crl) = (Vec::new(), Vec::new(), Vec::new());
    let (mut policy_ids, mut policies) = (Vec::new(), Vec::new());
    let mut unhandled = Vec::new();
    let malformed = |what: &str, e: der::Error| format!("x509: invalid {what}: {e}");
    for extension in extensions {
        let value = extension.extn_value.as_bytes();
        let id = extension.extn_id.to_string();
        match id.as_str() {
            "2.5.29.15" => {
                let usage = KeyUsage::from_der(value).map_err(|e| malformed("key usage", e))?;
                key_usage = u32::from(usage.0.bits()) & 0x1ff;
            }
            "2.5.29.19" => {
                let constraints = BasicConstraints::from_der(value)
                    .map_err(|e| malformed("basic constraints", e))?;
                basic = Some((
                    constraints.ca,
                    constraints.path_len_constraint.map_or(-1, i64::from),
                ));
            }
            "2.5.29.14" => {
                let id = SubjectKeyIdentifier::from_der(value)
                    .map_err(|e| malformed("subject key identifier", e))?;
                subject_key_id = b64(id.0.as_bytes());
            }
            "2.5.29.35" => {
                let id = AuthorityKeyIdentifier::from_der(value)
                    .map_err(|e| malformed("authority key identifier", e))?;
                if let Some(key) = id.key_identifier {
                    authority_key_id = b64(key.as_bytes());
                }
            }
            "2.5.29.17" => names.read(value)?,
            "2.5.29.37" => {
                let usages = ExtendedKeyUsage::from_der(value)
                    .map_err(|e| malformed("extended key usage", e))?;
                for usage in &usages.0 {
                    match ext_key_usage(usage) {
                        Some(known) => ext_usage.push(json!(known)),
                        None => unknown_usage.push(oid(usage)),
                    }
                }
            }
            "1.3.6.1.5.5.7.1.1" => {
                let access = AuthorityInfoAccessSyntax::from_der(value)
                    .map_err(|e| malformed("authority information access", e))?;
                for description in access.0 {
                    if let GeneralName::UniformResourceIdentifier(uri) = description.access_location
                    {
                        match description.access_method.to_string().as_str() {
                            "1.3.6.1.5.5.7.48.1" => ocsp.push(uri.to_string()),
                            "1.3.6.1.5.5.7.48.2" => issuers.push(uri.to_string()),
                            _ => {}
                        }
                    }
                }
            }
            "2.5.29.31" => {
                let points = CrlDistributionPoints::from_der(value)
                    .map_err(|e| malformed("CRL distribution points", e))?;
                for point in points.0 {
                    if let Some(DistributionPointName::FullName(full)) = point.distribution_point {
                        for general in full {
                            if let GeneralName::UniformResourceIdentifier(uri) = general {
                                crl.push(uri.to_string());
                            }
                        }
                    }
                }
            }
            "2.5.29.32" => {
                let list = CertificatePolicies::from_der(value)
                    .map_err(|e| malformed("certificate policies", e))?;
                for policy in list.0 {
                    policy_ids.push(oid(&policy.policy_identifier));
                    policies.push(json!(policy.policy_identifier.to_string()));
                }
            }
            _ if extension.critical && !HANDLED.contains(&id.as_str()) => {
                unhandled.push(oid(&extension.extn_id));
            }
            _ => {}
        }
    }
    out.insert("KeyUsage".into(), json!(key_usage));
    out.insert("Extensions".into(), extension_list(extensions));
    out.insert("ExtraExtensions".into(), Value::Null);
    out.insert(
        "UnhandledCriticalExtensions".into(),
        list_or_null(unhandled),
    );
    out.insert("ExtKeyUsage".into(), list_or_null(ext_usage));
    out.insert("UnknownExtKeyUsage".into(), list_or_null(unknown_usage));
    let (is_ca, max_path_len) = basic.unwrap_or((false, 0));
    out.insert("BasicConstraintsValid".into(), json!(basic.is_some()));
    out.insert("IsCA".into(), json!(is_ca));
    out.insert("MaxPathLen".into(), json!(max_path_len));
    out.insert(
        "MaxPathLenZero".into(),
        json!(basic.is_some() && max_path_len == 0),
    );
    out.insert("SubjectKeyId".into(), subject_key_id);
    out.insert("AuthorityKeyId".into(), authority_key_id);
    out.insert("OCSPServer".into(), list_or_null(ocsp));
    out.insert("IssuingCertificateURL".into(), list_or_null(issuers));
    names.insert_into(&mut out);
    for field in [
        "PermittedDNSDomains",
        "ExcludedDNSDomains",
        "PermittedIPRanges",
        "ExcludedIPRanges",
        "PermittedEmailAddresses",
        "ExcludedEmailAddresses",
        "PermittedURIDomains",
        "ExcludedURIDomains",
        "PolicyMappings",
    ] {
        out.insert(field.into(), Value::Null);
    }
    out.insert("PermittedDNSDomainsCritical".into(), json!(false));
    out.insert("CRLDistributionPoints".into(), list_or_null(crl));
    out.insert("PolicyIdentifiers".into(), list_or_null(policy_ids));
    out.insert("Policies".into(), list_or_null(policies));
    for (field, zero) in [
        ("InhibitAnyPolicy", "InhibitAnyPolicyZero"),
        ("InhibitPolicyMapping", "InhibitPolicyMappingZero"),
        ("RequireExplicitPolicy", "RequireExplicitPolicyZero"),
    ] {
        out.insert(field.into(), json!(0));
        out.insert(zero.into(), json!(false));
    }
    Ok(Value::Object(out))
}

fn request(der: &[u8]) -> Result<Value, String> {
    let csr =
        CertReq::from_der(der).map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    let info = &csr.info;
    let mut out = Signed {
        der,
        spki: &info.public_key,
        subject: &info.subject,
        signature: &csr.signature,
        algorithm: &csr.algorithm.oid,
    }
    .fields()?;
    out.insert("RawTBSCertificateRequest".into(), b64(&der_of(info)?));
    out.insert("Version".into(), json!(0));
    // Go's deprecated `Attributes`: each extension request with its own
    // values (each an id and a value); other attributes are left out, as
    // Go leaves out those it cannot read as such lists.
    let mut extensions = Vec::new();
    let mut attributes = Vec::new();
    for attribute in info.attributes.iter() {
        if attribute.oid.to_string() != "1.2.840.113549.1.9.14" {
            continue;
        }
        let mut values = Vec::new();
        for value in attribute.values.iter() {
            let bytes = der_of(value)?;
            let requested = ExtensionReq::from_der(&bytes)
                .map_err(|e| format!("x509: invalid extension request: {e}"))?;
            values.push(Value::Array(
                requested
                    .0
                    .iter()
                    .map(
                        |e| json!({"Type": oid(&e.extn_id), "Value": b64(e.extn_value.as_bytes())}),
                    )
                    .collect(),
            ));
            extensions.extend(requested.0);
        }
        attributes.push(json!({"Type": oid(&attribute.oid), "Value": values}));
    }
    let mut names = AltNames::default();
    for extension in &extensions {
        if extension.extn_id.to_string() == "2.5.29.17" {
            names.read(extension.extn_value.as_bytes())?;
        }
    }
    out.insert("Attributes".into(), list_or_null(attributes));
    out.insert("Extensions".into(), extension_list(&extensions));
    out.insert("ExtraExtensions".into(), Value::Null);
    names.insert_into(&mut out);
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use serde_json::json;

    use super::decode;
    use crate::variables::query;

    // Certificates made for these tests (openssl req -x509, RSA 2048):
    // every field Kyverno's policies read, checked against `openssl x509
    // -text`.
    const CERT: &str = include_str!("../../tests/data/x509/cert.pem");
    const CSR: &str = include_str!("../../tests/data/x509/csr.pem");
    const EC: &str = include_str!("../../tests/data/x509/ec-cert.pem");

    #[test]
    fn a_certificate_reads_as_go_encodes_it() {
        let c = decode(CERT).unwrap();
        assert_eq!(c["Version"], json!(3));
        assert_eq!(c["SerialNumber"], json!(78_187_493_520_i64));
        assert_eq!(c["SignatureAlgorithm"], json!(4));
        assert_eq!(c["PublicKeyAlgorithm"], json!(1));
        assert_eq!(c["PublicKey"]["E"], json!(65537));
        assert!(
            c["PublicKey"]["N"]
                .as_str()
                .unwrap()
                .starts_with("2254885832517566819709147008068188900059"),
            "{}",
            c["PublicKey"]["N"]
        );
        assert_eq!(c["Subject"]["CommonName"], json!("web.kiln.test"));
        assert_eq!(c["Subject"]["Country"], json!(["DE"]));
        assert_eq!(c["Subject"]["Organization"], json!(["Kiln Test"]));
        assert_eq!(c["Subject"]["OrganizationalUnit"], json!(["Policies"]));
        assert_eq!(c["Subject"]["Locality"], json!(null));
        assert_eq!(c["Subject"]["SerialNumber"], json!(""));
        assert_eq!(
            c["Subject"]["Names"][3],
            json!({"Type": [2, 5, 4, 3], "Value": "web.kiln.test"})
        );
        assert_eq!(c["Issuer"], c["Subject"]);
        assert_eq!(c["NotBefore"], json!("2026-12-07T22:22:10Z"));
        assert_eq!(c["NotAfter"], json!("2036-12-04T22:22:10Z"));
        // digitalSignature | keyEncipherment | keyCertSign.
        assert_eq!(c["KeyUsage"], json!(1 + 4 + 32));
        assert_eq!(c["ExtKeyUsage"], json!([1, 2]));
        assert_eq!(c["UnknownExtKeyUsage"], json!(null));
        assert_eq!(c["BasicConstraintsValid"], json!(true));
        assert_eq!(c["IsCA"], json!(true));
        assert_eq!(c["MaxPathLen"], json!(1));
        assert_eq!(c["MaxPathLenZero"], json!(false));
        assert_eq!(c["DNSNames"], json!(["web.kiln.test", "*.web.kiln.test"]));
        assert_eq!(c["IPAddresses"], json!(["10.1.2.3"]));
        assert_eq!(c["EmailAddresses"], json!(["ops@kiln.test"]));
        assert_eq!(c["URIs"][0]["Scheme"], json!("https"));
        assert_eq!(c["URIs"][0]["Host"], json!("kiln.test"));
        assert_eq!(c["URIs"][0]["Path"], json!("/web"));
        assert_eq!(c["URIs"][0]["RawQuery"], json!("x=1"));
        assert_eq!(c["URIs"][0]["User"], json!(null));
        let ski = base64::engine::general_purpose::STANDARD.encode([
            0x41, 0x40, 0x4A, 0x46, 0x80, 0x5C, 0x9B, 0x2F, 0xA6, 0x8E, 0xFF, 0x4D, 0x29, 0x55,
            0x89, 0x18, 0x93, 0x3D, 0xE5, 0xA5,
        ]);
        assert_eq!(c["SubjectKeyId"], json!(ski));
        assert_eq!(c["AuthorityKeyId"], json!(null));
        assert_eq!(c["OCSPServer"], json!(["http://ocsp.kiln.test"]));
        assert_eq!(c["IssuingCertificateURL"], json!(null));
        assert_eq!(
            c["CRLDistributionPoints"],
            json!(["http://crl.kiln.test/ca.crl"])
        );
        assert_eq!(c["PolicyIdentifiers"], json!([[2, 23, 140, 1, 2, 1]]));
        assert_eq!(c["Policies"], json!(["2.23.140.1.2.1"]));
        assert_eq!(c["UnhandledCriticalExtensions"], json!(null));
        let extensions = c["Extensions"].as_array().unwrap();
        assert_eq!(extensions.len(), 8);
        assert_eq!(extensions[0]["Id"], json!([2, 5, 29, 19]));
        assert_eq!(extensions[0]["Critical"], json!(true));
        // The raw DER, as the PEM body holds it.
        let body: String = CERT.lines().filter(|l| !l.starts_with("-----")).collect();
        assert_eq!(c["Raw"], json!(body));
    }

    #[test]
    fn a_request_and_what_is_refused() {
        let r = decode(CSR).unwrap();
        assert_eq!(r["Version"], json!(0));
        assert_eq!(r["Subject"]["CommonName"], json!("web.kiln.test"));
        assert_eq!(r["SignatureAlgorithm"], json!(4));
        assert_eq!(r["DNSNames"], json!(["web.kiln.test", "*.web.kiln.test"]));
        assert_eq!(r["PublicKey"], decode(CERT).unwrap()["PublicKey"]);
        assert!(r["Extensions"].as_array().is_some_and(|e| !e.is_empty()));
        // Only RSA keys, as in Kyverno.
        assert_eq!(
            decode(EC).unwrap_err(),
            "certificate should use rsa algorithm"
        );
        assert_eq!(decode("nope").unwrap_err(), "failed to decode PEM block");
        let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(decode(key).unwrap_err().contains("neither"));
        let broken = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert!(decode(broken).unwrap_err().starts_with("x509:"));
        // Through JMESPath, as policies call it.
        let data = json!({"cert": CERT});
        assert_eq!(
            query("x509_decode(cert).Subject.CommonName", &data).unwrap(),
            json!("web.kiln.test")
        );
    }
}
