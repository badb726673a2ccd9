//! Sprig's crypto functions: keys (`genPrivateKey`), certificates (`genCA`,
//! `genSelfSignedCert`, `genSignedCert` and their `WithKey` forms,
//! `buildCustomCert`), passwords (`derivePassword`, `bcrypt`, `htpasswd`),
//! AES (`encryptAES`, `decryptAES`) and the hashes of Sprig's `crypto.go`.
//!
//! Output has Sprig's shapes: PEM block types, key sizes (RSA 4096 for
//! `genPrivateKey`, 2048 for certificates' own keys), certificate fields,
//! key usages, 128-bit serials, SANs. Randomness comes from the call's
//! stream ([`crate::random`]); certificates are valid from the render's
//! clock ([`crate::exec::Runtime::now`]) for the days asked.
//!
//! Not supported: DSA keys (generating DSA parameters takes seconds, Go's
//! `x509` cannot sign with DSA, and DSA is obsolete) and EC keys on curves
//! other than P-256; both are refused with an error naming the function.

use base64::Engine as _;
use der::asn1::{
    BitString, Ia5String, OctetString, PrintableString, SetOfVec, UtcTime, Utf8StringRef,
};
use der::{Any, Decode as _, Encode as _};
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore as _;
use sha2::Digest as _;
use spki::{AlgorithmIdentifierOwned, ObjectIdentifier, SubjectPublicKeyInfoOwned};
use x509_cert::attr::AttributeTypeAndValue;
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, SubjectAltName,
    SubjectKeyIdentifier,
};
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::{Time, Validity};
use x509_cert::{Certificate, TbsCertificate, Version};

use crate::exec::{FnError, State};
use crate::parse::Pos;
use crate::random::{
    COST_BCRYPT, COST_CHEAP_KEY, COST_RSA_2048, COST_RSA_4096, COST_SCRYPT, int_arg,
};
use crate::value::{Map, Value};

/// The crypto functions this module answers.
pub const NAMES: &[&str] = &[
    "genPrivateKey",
    "genCA",
    "genCAWithKey",
    "genSelfSignedCert",
    "genSelfSignedCertWithKey",
    "genSignedCert",
    "genSignedCertWithKey",
    "buildCustomCert",
    "derivePassword",
    "bcrypt",
    "htpasswd",
    "encryptAES",
    "decryptAES",
    "sha1sum",
    "sha512sum",
];

type R = Result<Value, FnError>;

/// A private key of a kind Kiln can generate and sign with.
#[derive(Clone)]
pub enum PrivateKey {
    /// RSA (PKCS#1 `RSA PRIVATE KEY`).
    Rsa(Box<rsa::RsaPrivateKey>),
    /// ECDSA on P-256 (SEC 1 `EC PRIVATE KEY`).
    Ec(p256::SecretKey),
    /// Ed25519 (PKCS#8 `PRIVATE KEY`).
    Ed25519(Box<ed25519_dalek::SigningKey>),
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The kind only: a key stays out of debug output.
        f.write_str(match self {
            PrivateKey::Rsa(_) => "PrivateKey::Rsa",
            PrivateKey::Ec(_) => "PrivateKey::Ec",
            PrivateKey::Ed25519(_) => "PrivateKey::Ed25519",
        })
    }
}

const OID_CN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
const OID_RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const OID_ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const OID_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const OID_EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const OID_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.15");
const OID_EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
const OID_BASIC_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.19");
const OID_SKI: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.14");
const OID_AKI: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");
const OID_SAN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
const OID_SERVER_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");
const OID_CLIENT_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2");

/// Go's `pem.EncodeToMemory`: 64-column base64 between the boundaries.
pub fn pem(label: &str, der: &[u8]) -> String {
    pem_rfc7468::encode_string(label, pem_rfc7468::LineEnding::LF, der)
        .expect("labels are constants")
}

/// The first PEM block of `text`, as Go's `pem.Decode` finds it: its type
/// and bytes.
pub fn pem_decode(text: &[u8]) -> Option<(String, Vec<u8>)> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    let mut rest = text;
    loop {
        let at = find(rest, BEGIN)?;
        if at != 0 && rest[at - 1] != b'\n' {
            rest = &rest[at + BEGIN.len()..];
            continue;
        }
        let after = &rest[at + BEGIN.len()..];
        let line_end = find(after, b"\n").unwrap_or(after.len());
        let line = trim_cr(&after[..line_end]);
        let Some(label) = line.strip_suffix(b"-----") else {
            rest = after;
            continue;
        };
        let body_start = (line_end + 1).min(after.len());
        let body = &after[body_start..];
        let mut end_marker = b"-----END ".to_vec();
        end_marker.extend_from_slice(label);
        end_marker.extend_from_slice(b"-----");
        let Some(end) = find(body, &end_marker) else {
            rest = after;
            continue;
        };
        let b64: Vec<u8> = body[..end]
            .iter()
            .copied()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64) else {
            rest = after;
            continue;
        };
        return Some((String::from_utf8_lossy(label).into_owned(), bytes));
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn trim_cr(s: &[u8]) -> &[u8] {
    s.strip_suffix(b"\r").unwrap_or(s)
}

impl PrivateKey {
    /// Sprig's PEM block of the key (`pemBlockForKey`).
    pub fn to_pem(&self) -> String {
        use rsa::pkcs1::EncodeRsaPrivateKey as _;
        match self {
            PrivateKey::Rsa(k) => pem(
                "RSA PRIVATE KEY",
                k.to_pkcs1_der().expect("RSA keys encode").as_bytes(),
            ),
            PrivateKey::Ec(k) => {
                use p256::elliptic_curve::sec1::ToEncodedPoint as _;
                // Go's `MarshalECPrivateKey`: version 1, the key, the
                // curve's name and the public key.
                let private = k.to_bytes();
                let public = k.public_key().to_encoded_point(false);
                let der = sec1::EcPrivateKey {
                    private_key: &private,
                    parameters: Some(sec1::EcParameters::NamedCurve(OID_P256)),
                    public_key: Some(public.as_bytes()),
                }
                .to_der()
                .expect("P-256 keys encode");
                pem("EC PRIVATE KEY", &der)
            }
            PrivateKey::Ed25519(k) => {
                use pkcs8::EncodePrivateKey as _;
                // Go's PKCS#8 for Ed25519: version 1, no public key.
                let pair = ed25519_dalek::pkcs8::KeypairBytes {
                    secret_key: k.to_bytes(),
                    public_key: None,
                };
                pem(
                    "PRIVATE KEY",
                    pair.to_pkcs8_der().expect("Ed25519 keys encode").as_bytes(),
                )
            }
        }
    }

    /// The public key's `SubjectPublicKeyInfo`.
    fn spki(&self) -> SubjectPublicKeyInfoOwned {
        use pkcs8::EncodePublicKey as _;
        let der = match self {
            PrivateKey::Rsa(k) => k.to_public_key().to_public_key_der(),
            PrivateKey::Ec(k) => k.public_key().to_public_key_der(),
            PrivateKey::Ed25519(k) => k.verifying_key().to_public_key_der(),
        }
        .expect("public keys encode");
        SubjectPublicKeyInfoOwned::from_der(der.as_bytes()).expect("own encoding decodes")
    }

    /// Go's signature algorithm for the key.
    fn signature_algorithm(&self) -> AlgorithmIdentifierOwned {
        match self {
            PrivateKey::Rsa(_) => AlgorithmIdentifierOwned {
                oid: OID_RSA_SHA256,
                parameters: Some(Any::from(der::asn1::Null)),
            },
            PrivateKey::Ec(_) => AlgorithmIdentifierOwned {
                oid: OID_ECDSA_SHA256,
                parameters: None,
            },
            PrivateKey::Ed25519(_) => AlgorithmIdentifierOwned {
                oid: OID_ED25519,
                parameters: None,
            },
        }
    }

    /// The signature of `message` in X.509's encoding.
    fn sign(&self, message: &[u8]) -> Vec<u8> {
        match self {
            PrivateKey::Rsa(k) => {
                use rsa::signature::{SignatureEncoding as _, Signer as _};
                let signer = rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new((**k).clone());
                signer.sign(message).to_vec()
            }
            PrivateKey::Ec(k) => {
                use p256::ecdsa::signature::Signer as _;
                let signer = p256::ecdsa::SigningKey::from(k);
                let sig: p256::ecdsa::Signature = signer.sign(message);
                sig.to_der().as_bytes().to_vec()
            }
            PrivateKey::Ed25519(k) => {
                use ed25519_dalek::Signer as _;
                k.sign(message).to_bytes().to_vec()
            }
        }
    }
}

/// Generates a key of Sprig's `typ` (`genPrivateKey`): `Ok(Err(text))` is
/// Sprig's in-band answer for an unknown type.
fn generate(
    st: &mut State<'_>,
    typ: &str,
    rng: &mut ChaCha20Rng,
) -> Result<Result<PrivateKey, String>, FnError> {
    Ok(Ok(match typ {
        "" | "rsa" => {
            charge(st, COST_RSA_4096)?;
            rsa_key(rng, 4096)?
        }
        "ecdsa" => {
            charge(st, COST_CHEAP_KEY)?;
            PrivateKey::Ec(p256::SecretKey::random(rng))
        }
        "ed25519" => {
            charge(st, COST_CHEAP_KEY)?;
            PrivateKey::Ed25519(Box::new(ed25519_dalek::SigningKey::generate(rng)))
        }
        "dsa" => {
            return Err(FnError::Msg(
                "dsa keys are not supported by Kiln (use rsa, ecdsa or ed25519)".into(),
            ));
        }
        other => return Ok(Err(format!("Unknown type {other}"))),
    }))
}

fn rsa_key(rng: &mut ChaCha20Rng, bits: usize) -> Result<PrivateKey, FnError> {
    rsa::RsaPrivateKey::new(rng, bits)
        .map(|k| PrivateKey::Rsa(Box::new(k)))
        .map_err(|e| FnError::Msg(format!("error generating rsa key: {e}")))
}

/// Sprig's `parsePrivateKeyPEM`, with Go's messages.
pub fn parse_private_key(text: &[u8]) -> Result<PrivateKey, String> {
    let Some((typ, der)) = pem_decode(text) else {
        return Err("no PEM data in input".into());
    };
    if typ == "PRIVATE KEY" {
        return parse_pkcs8(&der).map_err(|e| format!("decoding PEM as PKCS#8: {e}"));
    }
    let Some(kind) = typ.strip_suffix(" PRIVATE KEY") else {
        return Err(format!("no private key data in PEM block of type {typ}"));
    };
    match kind {
        "RSA" => {
            use rsa::pkcs1::DecodeRsaPrivateKey as _;
            rsa::RsaPrivateKey::from_pkcs1_der(&der)
                .map_err(|e| format!("parsing RSA private key from PEM: {e}"))
                .and_then(sized_rsa)
        }
        "EC" => p256::SecretKey::from_sec1_der(&der)
            .map(PrivateKey::Ec)
            .map_err(|_| {
                "parsing EC private key from PEM: not a P-256 key in SEC 1 form \
                 (Kiln supports the P-256 curve only)"
                    .to_owned()
            }),
        "DSA" => Err("DSA private keys are not supported by Kiln".into()),
        _ => Err(format!("invalid private key type {typ}")),
    }
}

/// The RSA key sizes a chart may hand in: Go refuses keys under 1,024
/// bits; above 8,192 bits, signing would cost what the budget cannot see.
const RSA_KEY_BITS: std::ops::RangeInclusive<usize> = 1024..=8192;

fn sized_rsa(key: rsa::RsaPrivateKey) -> Result<PrivateKey, String> {
    use rsa::traits::PublicKeyParts as _;
    let bits = key.size() * 8;
    if !RSA_KEY_BITS.contains(&bits) {
        return Err(format!(
            "crypto/rsa: {bits}-bit keys are not supported here (from {} to {} bits)",
            RSA_KEY_BITS.start(),
            RSA_KEY_BITS.end()
        ));
    }
    Ok(PrivateKey::Rsa(Box::new(key)))
}

fn parse_pkcs8(der: &[u8]) -> Result<PrivateKey, String> {
    use pkcs8::DecodePrivateKey as _;
    let info = pkcs8::PrivateKeyInfo::try_from(der)
        .map_err(|e| format!("x509: failed to parse private key: {e}"))?;
    let oid = info.algorithm.oid;
    if oid == OID_RSA {
        rsa::RsaPrivateKey::from_pkcs8_der(der)
            .map_err(|e| format!("x509: failed to parse RSA private key embedded in PKCS#8: {e}"))
            .and_then(sized_rsa)
    } else if oid == OID_EC {
        p256::SecretKey::from_pkcs8_der(der)
            .map(PrivateKey::Ec)
            .map_err(|_| "x509: failed to parse EC private key embedded in PKCS#8 (Kiln supports the P-256 curve only)".to_owned())
    } else if oid == OID_ED25519 {
        ed25519_dalek::SigningKey::from_pkcs8_der(der)
            .map(|k| PrivateKey::Ed25519(Box::new(k)))
            .map_err(|e| format!("x509: invalid Ed25519 private key: {e}"))
    } else {
        Err(format!(
            "x509: PKCS#8 wrapping contained private key with unknown algorithm: {oid}"
        ))
    }
}

/// What a certificate is for: Sprig's base template, or its CA.
struct Template {
    cn: String,
    ips: Vec<Vec<u8>>,
    dns: Vec<String>,
    days: i64,
    is_ca: bool,
}

/// The issuer of a certificate other than a self-signed one.
struct Issuer {
    subject: Name,
    key_id: Option<Vec<u8>>,
    key: PrivateKey,
}

/// Go's `pkix.Name{CommonName: cn}`: PrintableString when it can be,
/// else UTF8String. Go's choice rejects `*` (a wildcard name such as
/// `*.example.com` is a UTF8String), though its explicit PrintableString
/// allows it.
fn name_of(cn: &str) -> Result<Name, String> {
    if cn.is_empty() {
        return Ok(RdnSequence(Vec::new()));
    }
    let printable = cn
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b));
    let value = if printable {
        Any::encode_from(&PrintableString::new(cn).map_err(|e| e.to_string())?)
    } else {
        Any::encode_from(&Utf8StringRef::new(cn).map_err(|e| e.to_string())?)
    }
    .map_err(|e| e.to_string())?;
    let atv = AttributeTypeAndValue { oid: OID_CN, value };
    let rdn = RelativeDistinguishedName(SetOfVec::try_from(vec![atv]).map_err(|e| e.to_string())?);
    Ok(RdnSequence(vec![rdn]))
}

/// Go's choice of time encoding: UTCTime through 2049, else generalized.
fn time_of(t: chrono::DateTime<chrono::Utc>) -> Result<Time, String> {
    let secs = t.timestamp();
    if secs < 0 {
        return Err("x509: cannot encode a time before 1970".into());
    }
    let d = std::time::Duration::from_secs(secs as u64);
    if t.format("%Y").to_string().parse::<i32>().unwrap_or(0) < 2050 {
        UtcTime::from_unix_duration(d)
            .map(Time::UtcTime)
            .map_err(|e| e.to_string())
    } else {
        der::asn1::GeneralizedTime::from_unix_duration(d)
            .map(Time::GeneralTime)
            .map_err(|_| "asn1: structure error: cannot represent time as GeneralizedTime".into())
    }
}

fn ext(
    oid: ObjectIdentifier,
    critical: bool,
    value: &impl der::Encode,
) -> Result<Extension, String> {
    Ok(Extension {
        extn_id: oid,
        critical,
        extn_value: OctetString::new(value.to_der().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?,
    })
}

/// Go's `x509.CreateCertificate` over Sprig's template: the PEM
/// certificate and the signee's PEM key.
fn create(
    t: &Template,
    signee: &PrivateKey,
    issuer: Option<&Issuer>,
    now: chrono::DateTime<chrono::Utc>,
    rng: &mut ChaCha20Rng,
) -> Result<(String, String), String> {
    let mut serial = [0u8; 16];
    rng.fill_bytes(&mut serial);
    let first = serial.iter().position(|b| *b != 0).unwrap_or(15);
    let serial = SerialNumber::new(&serial[first..]).map_err(|e| e.to_string())?;
    let subject = name_of(&t.cn)?;
    let spki = signee.spki();
    let signer = issuer.map_or(signee, |i| &i.key);
    let issuer_name = issuer.map_or_else(|| subject.clone(), |i| i.subject.clone());

    let not_after = now
        .checked_add_signed(chrono::TimeDelta::try_days(t.days).ok_or("days out of range")?)
        .ok_or("x509: NotAfter out of range")?;
    let validity = Validity {
        not_before: time_of(now)?,
        not_after: time_of(not_after)?,
    };

    let mut exts = Vec::new();
    // KeyUsage: digitalSignature | keyEncipherment (| keyCertSign), as
    // Go's minimal BIT STRING.
    let usage = if t.is_ca {
        BitString::new(2, vec![0b1010_0100])
    } else {
        BitString::new(5, vec![0b1010_0000])
    }
    .map_err(|e| e.to_string())?;
    exts.push(ext(OID_KEY_USAGE, true, &usage)?);
    exts.push(ext(
        OID_EXT_KEY_USAGE,
        false,
        &ExtendedKeyUsage(vec![OID_SERVER_AUTH, OID_CLIENT_AUTH]),
    )?);
    exts.push(ext(
        OID_BASIC_CONSTRAINTS,
        true,
        &BasicConstraints {
            ca: t.is_ca,
            path_len_constraint: None,
        },
    )?);
    // Go gives a CA a subject key id: SHA-256 of the key, truncated to
    // 160 bits (RFC 7093).
    let key_id = sha2::Sha256::digest(spki.subject_public_key.raw_bytes())[..20].to_vec();
    if t.is_ca {
        exts.push(ext(
            OID_SKI,
            false,
            &SubjectKeyIdentifier(OctetString::new(key_id).map_err(|e| e.to_string())?),
        )?);
    }
    if let Some(parent_id) = issuer.and_then(|i| i.key_id.clone())
        && issuer_name != subject
    {
        exts.push(ext(
            OID_AKI,
            false,
            &AuthorityKeyIdentifier {
                key_identifier: Some(OctetString::new(parent_id).map_err(|e| e.to_string())?),
                authority_cert_issuer: None,
                authority_cert_serial_number: None,
            },
        )?);
    }
    if !t.dns.is_empty() || !t.ips.is_empty() {
        let mut names = Vec::new();
        for d in &t.dns {
            let ia5 = Ia5String::new(d)
                .map_err(|_| format!("x509: {d:?} cannot be encoded as an IA5String"))?;
            names.push(GeneralName::DnsName(ia5));
        }
        for ip in &t.ips {
            names.push(GeneralName::IpAddress(
                OctetString::new(ip.clone()).map_err(|e| e.to_string())?,
            ));
        }
        exts.push(ext(OID_SAN, subject.0.is_empty(), &SubjectAltName(names))?);
    }

    let tbs = TbsCertificate {
        version: Version::V3,
        serial_number: serial,
        signature: signer.signature_algorithm(),
        issuer: issuer_name,
        validity,
        subject,
        subject_public_key_info: spki,
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(exts),
    };
    let tbs_der = tbs.to_der().map_err(|e| e.to_string())?;
    let signature = signer.sign(&tbs_der);
    let cert = Certificate {
        tbs_certificate: tbs,
        signature_algorithm: signer.signature_algorithm(),
        signature: BitString::from_bytes(&signature).map_err(|e| e.to_string())?,
    };
    let der = cert.to_der().map_err(|e| e.to_string())?;
    Ok((pem("CERTIFICATE", &der), signee.to_pem()))
}

/// Sprig's `certificate` (`.Cert`, `.Key`).
fn certificate(cert: String, key: String) -> Value {
    let mut m = Map::new();
    m.insert("Cert".into(), Value::str(cert));
    m.insert("Key".into(), Value::str(key));
    Value::map(m)
}

fn arity(name: &str, a: &[Value], want: usize) -> Result<(), FnError> {
    if a.len() != want {
        return Err(FnError::Msg(format!(
            "wrong number of args for {name}: want {want} got {}",
            a.len()
        )));
    }
    Ok(())
}

/// A `string` parameter (Go converts nothing else).
fn string_arg(v: &Value) -> Result<Vec<u8>, FnError> {
    match v {
        Value::Str(s) => Ok(crate::gostr::to_bytes(s).into_owned()),
        other => Err(FnError::Msg(format!(
            "wrong type for value; expected string; got {}",
            other.type_name()
        ))),
    }
}

fn text_arg(v: &Value) -> Result<String, FnError> {
    match v {
        Value::Str(s) => Ok(s.to_string()),
        other => Err(FnError::Msg(format!(
            "wrong type for value; expected string; got {}",
            other.type_name()
        ))),
    }
}

/// A `[]interface{}` parameter: `nil` or a `list`.
fn list_arg(v: &Value) -> Result<Vec<Value>, FnError> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::List(l) => Ok(l.to_vec()),
        other => Err(FnError::Msg(format!(
            "wrong type for value; expected []interface {{}}; got {}",
            other.type_name()
        ))),
    }
}

/// Sprig's `getNetIPs`: Go's `net.ParseIP`, IPv4 as 4 bytes.
fn ips_of(v: &Value) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for ip in list_arg(v).map_err(fn_text)? {
        let Value::Str(s) = &ip else {
            return Err(format!(
                "error parsing ip: {} is not a string",
                ip.to_go_string()
            ));
        };
        let parsed: std::net::IpAddr = s.parse().map_err(|_| format!("error parsing ip: {s}"))?;
        out.push(match parsed {
            std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.octets().to_vec(),
                None => v6.octets().to_vec(),
            },
        });
    }
    Ok(out)
}

/// Sprig's `getAlternateDNSStrs`.
fn dns_of(v: &Value) -> Result<Vec<String>, String> {
    list_arg(v)
        .map_err(fn_text)?
        .into_iter()
        .map(|d| match d {
            Value::Str(s) => Ok(s.to_string()),
            other => Err(format!(
                "error processing alternate dns name: {} is not a string",
                other.to_go_string()
            )),
        })
        .collect()
}

fn fn_text(e: FnError) -> String {
    match e {
        FnError::Msg(m) | FnError::Helm(m) => m,
        FnError::Nested(e) => e.to_string(),
    }
}

/// The `.Cert` and `.Key` of a `certificate` argument.
fn certificate_arg(v: &Value) -> Result<(String, String), FnError> {
    let wrong = || {
        FnError::Msg(format!(
            "wrong type for value; expected sprig.certificate; got {}",
            v.type_name()
        ))
    };
    let m = v.as_map().ok_or_else(wrong)?;
    let field = |k: &str| match m.get(k) {
        Some(Value::Str(s)) => Ok(s.to_string()),
        Some(Value::Nil) | None => Ok(String::new()),
        Some(_) => Err(wrong()),
    };
    Ok((field("Cert")?, field("Key")?))
}

/// The issuer of `genSignedCert`: the CA's subject, key id and key.
fn issuer_of(ca_cert: &str, ca_key: &str) -> Result<Issuer, String> {
    let Some((_, der)) = pem_decode(ca_cert.as_bytes()) else {
        return Err("unable to decode certificate".into());
    };
    let cert = Certificate::from_der(&der)
        .map_err(|e| format!("error parsing certificate: decodedSignerCert.Bytes: {e}"))?;
    let key = parse_private_key(ca_key.as_bytes())
        .map_err(|e| format!("error parsing private key: {e}"))?;
    let key_id = cert
        .tbs_certificate
        .extensions
        .iter()
        .flatten()
        .find(|e| e.extn_id == OID_SKI)
        .and_then(|e| OctetString::from_der(e.extn_value.as_bytes()).ok())
        .map(|o| o.as_bytes().to_vec());
    Ok(Issuer {
        subject: cert.tbs_certificate.subject,
        key_id,
        key,
    })
}

/// Charges `units` of crypto work to the render.
/// The key of a certificate: the PEM the `…WithKey` form was given, or a
/// new RSA-2048 key (charged) from the call's stream.
fn key_or_new(
    st: &mut State<'_>,
    pem: Option<&Value>,
    rng: &mut ChaCha20Rng,
) -> Result<PrivateKey, FnError> {
    match pem {
        Some(pem) => parse_private_key(&string_arg(pem)?)
            .map_err(|e| FnError::Msg(format!("parsing private key: {e}"))),
        None => {
            charge(st, COST_RSA_2048)?;
            rsa_key(rng, 2048)
        }
    }
}

/// Signs the certificate `t` for `key` (self-signed without `issuer`) at
/// the render's clock: Sprig's certificate object.
fn issue(
    st: &mut State<'_>,
    t: &Template,
    key: &PrivateKey,
    issuer: Option<&Issuer>,
    rng: &mut ChaCha20Rng,
) -> R {
    charge(st, COST_CHEAP_KEY)?;
    let (cert, key) = create(t, key, issuer, st.rt.now, rng)
        .map_err(|e| FnError::Msg(format!("error creating certificate: {e}")))?;
    Ok(certificate(cert, key))
}

fn charge(st: &mut State<'_>, units: u64) -> Result<(), FnError> {
    let max = st.rt.limits.max_crypto_work;
    st.rt.random.charge(units, max)
}

/// Calls crypto function `name`.
pub fn call(st: &mut State<'_>, name: &str, a: &[Value], pos: &Pos) -> R {
    match name {
        "sha1sum" => {
            arity(name, a, 1)?;
            Ok(Value::str(hex(&sha1::Sha1::digest(string_arg(&a[0])?))))
        }
        "sha512sum" => {
            arity(name, a, 1)?;
            Ok(Value::str(hex(&sha2::Sha512::digest(string_arg(&a[0])?))))
        }
        "genPrivateKey" => {
            arity(name, a, 1)?;
            let typ = text_arg(&a[0])?;
            let mut rng = st.rt.random.stream(pos);
            Ok(Value::str(match generate(st, &typ, &mut rng)? {
                Ok(k) => k.to_pem(),
                Err(text) => text,
            }))
        }
        "genCA" | "genCAWithKey" => {
            arity(name, a, if name == "genCA" { 2 } else { 3 })?;
            let cn = text_arg(&a[0])?;
            let days = int_arg(&a[1])?;
            let mut rng = st.rt.random.stream(pos);
            let key = key_or_new(st, (name == "genCAWithKey").then(|| &a[2]), &mut rng)?;
            let t = Template {
                cn,
                ips: Vec::new(),
                dns: Vec::new(),
                days,
                is_ca: true,
            };
            issue(st, &t, &key, None, &mut rng)
        }
        "genSelfSignedCert" | "genSelfSignedCertWithKey" => {
            let with_key = name.ends_with("WithKey");
            arity(name, a, if with_key { 5 } else { 4 })?;
            let cn = text_arg(&a[0])?;
            let ips = ips_of(&a[1]).map_err(FnError::Msg)?;
            let dns = dns_of(&a[2]).map_err(FnError::Msg)?;
            let days = int_arg(&a[3])?;
            let mut rng = st.rt.random.stream(pos);
            let key = key_or_new(st, with_key.then(|| &a[4]), &mut rng)?;
            let t = Template {
                cn,
                ips,
                dns,
                days,
                is_ca: false,
            };
            issue(st, &t, &key, None, &mut rng)
        }
        "genSignedCert" | "genSignedCertWithKey" => {
            let with_key = name.ends_with("WithKey");
            arity(name, a, if with_key { 6 } else { 5 })?;
            let cn = text_arg(&a[0])?;
            let ips = ips_of(&a[1]).map_err(FnError::Msg)?;
            let dns = dns_of(&a[2]).map_err(FnError::Msg)?;
            let days = int_arg(&a[3])?;
            let (ca_cert, ca_key) = certificate_arg(&a[4])?;
            let mut rng = st.rt.random.stream(pos);
            let key = key_or_new(st, with_key.then(|| &a[5]), &mut rng)?;
            let issuer = issuer_of(&ca_cert, &ca_key).map_err(FnError::Msg)?;
            let t = Template {
                cn,
                ips,
                dns,
                days,
                is_ca: false,
            };
            issue(st, &t, &key, Some(&issuer), &mut rng)
        }
        "buildCustomCert" => {
            arity(name, a, 2)?;
            let b64 = base64::engine::general_purpose::STANDARD;
            let cert = b64
                .decode(string_arg(&a[0])?)
                .map_err(|_| "unable to decode base64 certificate")?;
            let key = b64
                .decode(string_arg(&a[1])?)
                .map_err(|_| "unable to decode base64 private key")?;
            let Some((_, der)) = pem_decode(&cert) else {
                return Err("unable to decode certificate".into());
            };
            Certificate::from_der(&der)
                .map_err(|e| format!("error parsing certificate: decodedCert.Bytes: {e}"))?;
            parse_private_key(&key).map_err(|e| format!("error parsing private key: {e}"))?;
            Ok(certificate(
                crate::gostr::from_bytes(&cert).into_owned(),
                crate::gostr::from_bytes(&key).into_owned(),
            ))
        }
        "derivePassword" => {
            arity(name, a, 5)?;
            let counter = match &a[0] {
                Value::Int(i) if (0..=i64::from(u32::MAX)).contains(i) => *i as u32,
                other => {
                    return Err(FnError::Msg(format!(
                        "wrong type for value; expected uint32; got {}",
                        other.type_name()
                    )));
                }
            };
            let typ = text_arg(&a[1])?;
            let (password, user, site) =
                (string_arg(&a[2])?, string_arg(&a[3])?, string_arg(&a[4])?);
            let Some(templates) = password_templates(&typ) else {
                return Ok(Value::str(format!("cannot find password template {typ}")));
            };
            let id = master_key_id(&password, &user);
            let key = match st.rt.random.master_key(&id) {
                Some(key) => key,
                None => {
                    charge(st, COST_SCRYPT)?;
                    let key = master_key(&password, &user);
                    st.rt.random.keep_master_key(id, key);
                    key
                }
            };
            Ok(Value::str(site_password(&key, counter, templates, &site)))
        }
        "bcrypt" => {
            arity(name, a, 1)?;
            let password = string_arg(&a[0])?;
            charge(st, COST_BCRYPT)?;
            let mut rng = st.rt.random.stream(pos);
            Ok(Value::str(bcrypt_text(&password, &mut rng)))
        }
        "htpasswd" => {
            // Sprig v3.3.0 (Helm's): bcrypt only.
            arity(name, a, 2)?;
            let user = text_arg(&a[0])?;
            let password = string_arg(&a[1])?;
            if user.contains(':') {
                return Ok(Value::str(format!("invalid username: {user}")));
            }
            charge(st, COST_BCRYPT)?;
            let mut rng = st.rt.random.stream(pos);
            Ok(Value::str(format!(
                "{user}:{}",
                bcrypt_text(&password, &mut rng)
            )))
        }
        "encryptAES" => {
            arity(name, a, 2)?;
            let (password, plain) = (string_arg(&a[0])?, string_arg(&a[1])?);
            if plain.is_empty() {
                return Ok(Value::str(""));
            }
            let max = st.rt.limits.max_output;
            if plain.len() > max / 2 {
                return Err(FnError::Msg(format!(
                    "encryptAES of {} bytes would exceed the output budget of {max} bytes \
                     (a limit against hostile charts)",
                    plain.len()
                )));
            }
            let mut stream_key = [0u8; 32];
            st.rt.random.stream(pos).fill_bytes(&mut stream_key);
            let iv = aes_iv(&stream_key, &password, &plain);
            Ok(Value::str(encrypt_aes(&password, &plain, iv)))
        }
        "decryptAES" => {
            arity(name, a, 2)?;
            let (password, crypt) = (string_arg(&a[0])?, string_arg(&a[1])?);
            decrypt_aes(&password, &crypt)
                .map(|b| Value::str(crate::gostr::from_bytes(&b)))
                .map_err(FnError::Msg)
        }
        other => Err(format!("function {other:?} not defined").into()),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Go's `bcrypt.GenerateFromPassword` at the default cost (10), with a
/// salt from the stream; Sprig's in-band error text.
fn bcrypt_text(password: &[u8], rng: &mut ChaCha20Rng) -> String {
    if password.len() > 72 {
        return "failed to encrypt string with bcrypt: bcrypt: password length exceeds 72 bytes"
            .into();
    }
    let mut salt = [0u8; 16];
    rng.fill_bytes(&mut salt);
    match bcrypt::hash_with_salt(password, 10, salt) {
        Ok(parts) => parts.format_for_version(bcrypt::Version::TwoA),
        Err(e) => format!("failed to encrypt string with bcrypt: {e}"),
    }
}

/// The AES-256 key Sprig makes of a password: its bytes, zero-padded or
/// cut to 32.
fn aes_key(password: &[u8]) -> [u8; 32] {
    let mut key = [0u8; 32];
    let n = password.len().min(32);
    key[..n].copy_from_slice(&password[..n]);
    key
}

/// Sprig's `encryptAES`: base64 of IV and AES-256-CBC with PKCS#7 padding.
/// The IV of an `encryptAES` call: keyed by the call's stream, and a
/// function of the password and the plaintext too. The same inputs give
/// the same ciphertext (no drift at every refresh); another plaintext at
/// the same call site (the next revision's) gets another IV, so CBC does
/// not show which leading blocks two revisions share.
fn aes_iv(stream_key: &[u8; 32], password: &[u8], plain: &[u8]) -> [u8; 16] {
    use hmac::Mac as _;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(stream_key).expect("any key length");
    for part in [password, plain] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    let tag = mac.finalize().into_bytes();
    tag[..16].try_into().expect("32-byte tag")
}

pub fn encrypt_aes(password: &[u8], plain: &[u8], iv: [u8; 16]) -> String {
    use cbc::cipher::{BlockEncryptMut as _, KeyIvInit as _, block_padding::Pkcs7};
    let enc = cbc::Encryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv.into());
    let mut out = iv.to_vec();
    out.extend(enc.encrypt_padded_vec_mut::<Pkcs7>(plain));
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// Sprig's `decryptAES`, with the panics Go's template reports as errors.
pub fn decrypt_aes(password: &[u8], crypt64: &[u8]) -> Result<Vec<u8>, String> {
    use cbc::cipher::{BlockDecryptMut as _, KeyIvInit as _, block_padding::NoPadding};
    if crypt64.is_empty() {
        return Ok(Vec::new());
    }
    let crypt = base64::engine::general_purpose::STANDARD
        .decode(crypt64)
        .map_err(|e| match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => {
                format!("illegal base64 data at input byte {at}")
            }
            _ => format!("illegal base64 data at input byte {}", crypt64.len()),
        })?;
    if crypt.len() < 16 {
        return Err(format!(
            "runtime error: slice bounds out of range [:16] with capacity {}",
            crypt.len()
        ));
    }
    let (iv, body) = crypt.split_at(16);
    if body.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    if body.is_empty() {
        return Err("runtime error: index out of range [-1]".into());
    }
    let iv: [u8; 16] = iv.try_into().expect("16 bytes");
    let dec = cbc::Decryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv.into());
    let mut plain = dec
        .decrypt_padded_vec_mut::<NoPadding>(body)
        .map_err(|e| e.to_string())?;
    let pad = usize::from(plain[plain.len() - 1]);
    if pad > plain.len() {
        return Err(format!(
            "runtime error: slice bounds out of range [:{}]",
            plain.len() as i64 - pad as i64
        ));
    }
    plain.truncate(plain.len() - pad);
    Ok(plain)
}

/// Master Password's templates by name (Sprig's `passwordTypeTemplates`).
fn password_templates(typ: &str) -> Option<&'static [&'static str]> {
    Some(match typ {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

/// Master Password's character classes.
fn template_characters(class: u8) -> &'static [u8] {
    match class {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

/// Master Password's namespace (Sprig's `derivePassword`).
const MASTER_PASSWORD_SEED: &[u8] = b"com.lyndir.masterpassword";

/// What identifies a Master Password key within a render (the key itself
/// is never kept by its inputs).
fn master_key_id(password: &[u8], user: &[u8]) -> [u8; 32] {
    let mut hash = sha2::Sha256::new();
    for part in [password, user] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.finalize().into()
}

/// Master Password's key: scrypt of the password salted with the user.
fn master_key(password: &[u8], user: &[u8]) -> [u8; 64] {
    let mut salt = MASTER_PASSWORD_SEED.to_vec();
    salt.extend((user.len() as u32).to_be_bytes());
    salt.extend(user);
    let mut key = [0u8; 64];
    let params = scrypt::Params::new(15, 8, 2, 64).expect("constant scrypt parameters");
    scrypt::scrypt(password, &salt, &params, &mut key).expect("64-byte output");
    key
}

/// Master Password (Sprig's `derivePassword`) of a site: HMAC-SHA256 of
/// the site and counter under the key, characters of a template.
fn site_password(key: &[u8; 64], counter: u32, templates: &[&str], site: &[u8]) -> String {
    use hmac::Mac as _;
    const SEED: &[u8] = MASTER_PASSWORD_SEED;
    let mut message = SEED.to_vec();
    message.extend((site.len() as u32).to_be_bytes());
    message.extend(site);
    message.extend(counter.to_be_bytes());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
    mac.update(&message);
    let seed = mac.finalize().into_bytes();
    let template = templates[usize::from(seed[0]) % templates.len()].as_bytes();
    template
        .iter()
        .enumerate()
        .map(|(i, class)| {
            let chars = template_characters(*class);
            char::from(chars[usize::from(seed[i + 1]) % chars.len()])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_common_name_is_a_printable_string_unless_go_would_not_choose_one() {
        // The tag of the name's only value: 0x13 PrintableString, 0x0c
        // UTF8String (Go's asn1 picks UTF8String for `*`, which its
        // automatic PrintableString rejects).
        let tag = |cn: &str| {
            let name = name_of(cn).unwrap();
            let atv = name.0[0].0.iter().next().unwrap();
            der::Tagged::tag(&atv.value).octet()
        };
        assert_eq!(tag("example.com"), 0x13);
        assert_eq!(tag("release-name (ca) +1=2?"), 0x13);
        assert_eq!(tag("*.cluster-hubble-grpc.cilium.io"), 0x0c);
        assert_eq!(tag("a&b"), 0x0c);
        assert_eq!(tag("café"), 0x0c);
        assert!(name_of("").unwrap().0.is_empty());
    }

    #[test]
    fn aes_round_trip_and_helms_padding() {
        let c = encrypt_aes(b"secret", b"hello world", [9; 16]);
        assert_eq!(
            decrypt_aes(b"secret", c.as_bytes()).unwrap(),
            b"hello world"
        );
        // 16 bytes of plaintext get a whole block of padding.
        let c = encrypt_aes(b"k", &[b'x'; 16], [1; 16]);
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&c)
            .unwrap();
        assert_eq!(raw.len(), 16 + 32);
    }

    #[test]
    fn decrypt_aes_reports_gos_panics() {
        let short = base64::engine::general_purpose::STANDARD.encode([1, 2, 3]);
        assert_eq!(
            decrypt_aes(b"k", short.as_bytes()).unwrap_err(),
            "runtime error: slice bounds out of range [:16] with capacity 3"
        );
        let ragged = base64::engine::general_purpose::STANDARD.encode([0; 20]);
        assert_eq!(
            decrypt_aes(b"k", ragged.as_bytes()).unwrap_err(),
            "crypto/cipher: input not full blocks"
        );
        let iv_only = base64::engine::general_purpose::STANDARD.encode([0; 16]);
        assert_eq!(
            decrypt_aes(b"k", iv_only.as_bytes()).unwrap_err(),
            "runtime error: index out of range [-1]"
        );
        assert!(
            decrypt_aes(b"k", b"!!!!")
                .unwrap_err()
                .starts_with("illegal base64")
        );
    }

    #[test]
    fn pem_decode_finds_the_first_block_like_go() {
        let text = b"junk\n-----BEGIN FOO-----\nAAEC\n-----END FOO-----\nmore";
        assert_eq!(pem_decode(text), Some(("FOO".into(), vec![0, 1, 2])));
        assert_eq!(pem_decode(b"no pem here"), None);
        assert_eq!(pem_decode(b"-----BEGIN FOO-----\nAAEC\n"), None);
    }

    #[test]
    fn private_key_parsing_errors_as_sprig_words_them() {
        assert_eq!(
            parse_private_key(b"nothing").unwrap_err(),
            "no PEM data in input"
        );
        let cert = pem("CERTIFICATE", &[1, 2, 3]);
        assert_eq!(
            parse_private_key(cert.as_bytes()).unwrap_err(),
            "no private key data in PEM block of type CERTIFICATE"
        );
        let bad = pem("RSA PRIVATE KEY", &[1, 2, 3]);
        assert!(
            parse_private_key(bad.as_bytes())
                .unwrap_err()
                .starts_with("parsing RSA private key from PEM: ")
        );
        let other = pem("FOO PRIVATE KEY", &[1]);
        assert_eq!(
            parse_private_key(other.as_bytes()).unwrap_err(),
            "invalid private key type FOO PRIVATE KEY"
        );
    }

    #[test]
    fn keys_round_trip_through_their_pem() {
        use rand_core::SeedableRng as _;
        let mut rng = ChaCha20Rng::from_seed([3; 32]);
        for key in [
            PrivateKey::Ec(p256::SecretKey::random(&mut rng)),
            PrivateKey::Ed25519(Box::new(ed25519_dalek::SigningKey::generate(&mut rng))),
        ] {
            let text = key.to_pem();
            let again = parse_private_key(text.as_bytes()).unwrap();
            assert_eq!(again.to_pem(), text);
        }
    }
}
