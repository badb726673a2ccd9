//! The random and crypto functions: deterministic per application, chart,
//! template and call; output of Sprig's shapes (keys, certificates parsed
//! and verified with `x509-parser`, independent of the engine); hostile
//! sizes refused by budgets, with errors naming the function.

use std::path::Path;

use chrono::{DateTime, Utc};
use kiln_helm::chart::DirSource;
use kiln_helm::exec::Limits;
use kiln_helm::{Options, render};
use x509_parser::prelude::*;

fn chart(dir: &Path, templates: &[(&str, &str)]) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: rnd\nversion: 0.1.0\n",
    )
    .unwrap();
    for (name, text) in templates {
        std::fs::write(dir.join("templates").join(name), text).unwrap();
    }
}

fn try_render(templates: &[(&str, &str)], opts: &Options) -> Result<Vec<String>, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "kiln-helm-random-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    chart(&dir, templates);
    let result = render(&DirSource(dir.clone()), ".", opts);
    std::fs::remove_dir_all(&dir).unwrap();
    result
        .map(|docs| docs.into_iter().map(|d| d.text).collect())
        .map_err(|e| e.to_string())
}

/// The `data` of the ConfigMap template `body` renders (one template).
fn data(body: &str, opts: &Options) -> serde_json::Map<String, serde_json::Value> {
    let text = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n{body}");
    let docs = try_render(&[("cm.yaml", &text)], opts).unwrap();
    let v: serde_json::Value = serde_yaml::from_str(&docs[0]).unwrap();
    v["data"].as_object().cloned().unwrap_or_default()
}

fn field(d: &serde_json::Map<String, serde_json::Value>, k: &str) -> String {
    d[k].as_str()
        .unwrap_or_else(|| panic!("{k}: {d:?}"))
        .to_owned()
}

fn err(body: &str, opts: &Options) -> String {
    let text = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n{body}");
    try_render(&[("cm.yaml", &text)], opts).expect_err("must be refused")
}

fn seeded(secret: &str) -> Options {
    Options {
        random_seed: Some(secret.into()),
        ..Options::default()
    }
}

const RANDOM: &str = r#"  a: {{ randAlphaNum 24 | quote }}
  u: {{ uuidv4 | quote }}
  k: {{ genPrivateKey "ecdsa" | quote }}
  e: {{ encryptAES "pw" "text" | quote }}
  b: {{ randBytes 12 | quote }}
  i: {{ randInt 0 1000000000 | quote }}
"#;

#[test]
fn same_inputs_render_the_same_and_each_input_changes_it() {
    let base = data(RANDOM, &seeded("s1"));
    assert_eq!(data(RANDOM, &seeded("s1")), base);
    let others = [
        seeded("s2"),
        Options::default(),
        Options {
            release_name: "other".into(),
            ..seeded("s1")
        },
        Options {
            namespace: "other".into(),
            ..seeded("s1")
        },
    ];
    for opts in others {
        let d = data(RANDOM, &opts);
        for k in ["a", "u", "k", "e", "b", "i"] {
            assert_ne!(d[k], base[k], "{k} under {:?}", opts.release_name);
        }
    }
}

#[test]
fn the_template_changes_the_values() {
    let cm = |n: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n}\ndata:\n  a: {{{{ randAlphaNum 24 | quote }}}}\n"
        )
    };
    let docs = try_render(&[("a.yaml", &cm("a")), ("b.yaml", &cm("b"))], &seeded("s")).unwrap();
    let value =
        |d: &str| serde_yaml::from_str::<serde_json::Value>(d).unwrap()["data"]["a"].clone();
    assert_ne!(value(&docs[0]), value(&docs[1]));
}

#[test]
fn the_secret_never_appears_in_output_or_errors() {
    let secret = "hunter2-very-secret";
    let d = data(RANDOM, &seeded(secret));
    assert!(!format!("{d:?}").contains(secret));
    let e = err(r#"  x: {{ genCAWithKey "ca" 1 "junk" }}"#, &seeded(secret));
    assert!(!e.contains(secret), "{e}");
}

#[test]
fn added_lines_and_other_calls_leave_a_value_alone() {
    let alone = data("  a: {{ randAlphaNum 24 | quote }}\n", &seeded("s"));
    let edited = data(
        "  u: {{ uuidv4 | quote }}\n  # a comment\n  b: {{ randAlpha 5 | quote }}\n  k: {{ randAlphaNum 10 | quote }}\n  a: {{ randAlphaNum 24 | quote }}\n",
        &seeded("s"),
    );
    assert_eq!(edited["a"], alone["a"]);
}

#[test]
fn iterations_and_repeated_calls_differ() {
    let d = data(
        "{{- range $i := until 50 }}\n  k{{ $i }}: {{ randAlphaNum 16 | quote }}\n{{- end }}\n  x: {{ randAlphaNum 16 | quote }}\n  y: {{ randAlphaNum 16 | quote }}\n",
        &seeded("s"),
    );
    let mut values: Vec<&serde_json::Value> = d.values().collect();
    values.sort_by_key(|v| v.to_string());
    values.dedup();
    assert_eq!(values.len(), 52);
}

#[test]
fn random_strings_have_sprigs_shapes() {
    let d = data(
        r#"  an: {{ randAlphaNum 100 | quote }}
  al: {{ randAlpha 100 | quote }}
  nu: {{ randNumeric 100 | quote }}
  as: {{ randAscii 100 | quote }}
  neg: {{ randAlphaNum -3 | quote }}
  u: {{ uuidv4 | quote }}
  b: {{ randBytes 33 | quote }}
  i: {{ randInt 5 8 | quote }}
"#,
        &Options::default(),
    );
    let check = |k: &str, ok: fn(char) -> bool| {
        let v = field(&d, k);
        assert_eq!(v.len(), 100, "{k}");
        assert!(v.chars().all(ok), "{k}: {v}");
    };
    check("an", |c| c.is_ascii_alphanumeric());
    check("al", |c| c.is_ascii_alphabetic());
    check("nu", |c| c.is_ascii_digit());
    check("as", |c| (' '..='~').contains(&c));
    assert_eq!(field(&d, "neg"), "");
    let u = field(&d, "u");
    let re = regex_lite::Regex::new(
        "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
    )
    .unwrap();
    assert!(re.is_match(&u), "{u}");
    use base64::Engine as _;
    let b = base64::engine::general_purpose::STANDARD
        .decode(field(&d, "b"))
        .unwrap();
    assert_eq!(b.len(), 33);
    let i: i64 = field(&d, "i").parse().unwrap();
    assert!((5..8).contains(&i));
}

/// The DER of the first PEM block of `text`, whose type must be `label`.
fn pem_der(text: &str, label: &str) -> Vec<u8> {
    let (rest, pem) = x509_parser::pem::parse_x509_pem(text.as_bytes()).expect("PEM");
    assert_eq!(pem.label, label);
    assert!(rest.is_empty(), "one block, nothing after it");
    assert!(text.ends_with("-----\n"));
    pem.contents
}

/// The public key (SubjectPublicKeyInfo DER) of a PEM private key, decoded
/// with RustCrypto's parsers directly.
fn public_of(key_pem: &str) -> Vec<u8> {
    use pkcs8::EncodePublicKey as _;
    let (rest, pem) = x509_parser::pem::parse_x509_pem(key_pem.as_bytes()).unwrap();
    assert!(rest.is_empty());
    let der = pem.contents;
    match pem.label.as_str() {
        "RSA PRIVATE KEY" => {
            use rsa::pkcs1::DecodeRsaPrivateKey as _;
            let k = rsa::RsaPrivateKey::from_pkcs1_der(&der).unwrap();
            k.to_public_key().to_public_key_der().unwrap().into_vec()
        }
        "EC PRIVATE KEY" => p256::SecretKey::from_sec1_der(&der)
            .unwrap()
            .public_key()
            .to_public_key_der()
            .unwrap()
            .into_vec(),
        "PRIVATE KEY" => {
            use pkcs8::DecodePrivateKey as _;
            ed25519_dalek::SigningKey::from_pkcs8_der(&der)
                .unwrap()
                .verifying_key()
                .to_public_key_der()
                .unwrap()
                .into_vec()
        }
        other => panic!("unexpected PEM block {other}"),
    }
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-04T05:06:07Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn at_now() -> Options {
    Options {
        now: now(),
        ..seeded("s")
    }
}

fn cn(cert: &X509Certificate<'_>) -> String {
    cert.subject()
        .iter_common_name()
        .next()
        .map(|a| a.as_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn key_usage(cert: &X509Certificate<'_>) -> (bool, bool, bool) {
    let ku = cert.key_usage().unwrap().expect("key usage").value;
    (
        ku.digital_signature(),
        ku.key_encipherment(),
        ku.key_cert_sign(),
    )
}

fn server_and_client_auth(cert: &X509Certificate<'_>) -> bool {
    let eku = cert.extended_key_usage().unwrap().expect("EKU").value;
    eku.server_auth && eku.client_auth && !eku.any
}

#[test]
fn gen_private_key_gives_sprigs_blocks_and_sizes() {
    let d = data(
        r#"  rsa: {{ genPrivateKey "rsa" | quote }}
  ec: {{ genPrivateKey "ecdsa" | quote }}
  ed: {{ genPrivateKey "ed25519" | quote }}
  other: {{ genPrivateKey "foo" | quote }}
"#,
        &seeded("s"),
    );
    use rsa::pkcs1::DecodeRsaPrivateKey as _;
    use rsa::traits::PublicKeyParts as _;
    let rsa =
        rsa::RsaPrivateKey::from_pkcs1_der(&pem_der(&field(&d, "rsa"), "RSA PRIVATE KEY")).unwrap();
    assert_eq!(rsa.size() * 8, 4096);
    assert_eq!(rsa.e(), &rsa::BigUint::from(65537u32));
    rsa.validate().unwrap();
    let ec = pem_der(&field(&d, "ec"), "EC PRIVATE KEY");
    p256::SecretKey::from_sec1_der(&ec).unwrap();
    // Go's SEC 1 form names the curve: 121 bytes.
    assert_eq!(ec.len(), 121);
    let parsed = sec1::EcPrivateKey::try_from(ec.as_slice()).unwrap();
    assert_eq!(
        parsed
            .parameters
            .and_then(|p| p.named_curve())
            .map(|o| o.to_string()),
        Some("1.2.840.10045.3.1.7".to_owned())
    );
    let ed = pem_der(&field(&d, "ed"), "PRIVATE KEY");
    use pkcs8::DecodePrivateKey as _;
    ed25519_dalek::SigningKey::from_pkcs8_der(&ed).unwrap();
    // Go's PKCS#8 v1 for Ed25519: 48 bytes, no public key.
    assert_eq!(ed.len(), 48);
    assert_eq!(field(&d, "other"), "Unknown type foo");
}

#[test]
fn gen_private_key_of_no_type_is_rsa_4096() {
    let d = data("  k: {{ genPrivateKey \"\" | quote }}\n", &seeded("s"));
    use rsa::pkcs1::DecodeRsaPrivateKey as _;
    use rsa::traits::PublicKeyParts as _;
    let k =
        rsa::RsaPrivateKey::from_pkcs1_der(&pem_der(&field(&d, "k"), "RSA PRIVATE KEY")).unwrap();
    assert_eq!(k.size() * 8, 4096);
}

#[test]
fn gen_ca_is_a_self_signed_ca_valid_from_the_renders_clock() {
    let d = data(
        "{{- $ca := genCA \"my-ca\" 365 }}\n  cert: {{ $ca.Cert | quote }}\n  key: {{ $ca.Key | quote }}\n",
        &at_now(),
    );
    let der = pem_der(&field(&d, "cert"), "CERTIFICATE");
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    assert_eq!(cert.version(), X509Version::V3);
    assert_eq!(cn(&cert), "my-ca");
    assert_eq!(cert.subject().to_string(), cert.issuer().to_string());
    assert!(cert.is_ca());
    assert_eq!(cert.validity().not_before.timestamp(), now().timestamp());
    assert_eq!(
        cert.validity().not_after.timestamp(),
        now().timestamp() + 365 * 86400
    );
    assert_eq!(key_usage(&cert), (true, true, true));
    assert!(server_and_client_auth(&cert));
    assert!(cert.key_usage().unwrap().unwrap().critical);
    assert!(cert.basic_constraints().unwrap().unwrap().critical);
    assert!(
        cert.get_extension_unique(&x509_parser::oid_registry::OID_X509_EXT_SUBJECT_KEY_IDENTIFIER)
            .unwrap()
            .is_some()
    );
    // A positive serial of at most 128 bits.
    assert!(cert.serial.bits() <= 128 && cert.serial.bits() > 64);
    cert.verify_signature(None)
        .expect("self-signed signature verifies");
    assert_eq!(
        cert.signature_algorithm.algorithm,
        x509_parser::oid_registry::OID_PKCS1_SHA256WITHRSA
    );
    // The key is the certificate's, RSA 2048 in PKCS#1.
    let key = field(&d, "key");
    assert!(key.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
    assert_eq!(public_of(&key), cert.public_key().raw);
    assert_eq!(cert.public_key().parsed().unwrap().key_size(), 2048);
}

#[test]
fn gen_signed_cert_verifies_against_its_ca_with_the_sans_asked() {
    let d = data(
        r#"{{- $ca := genCA "the-ca" 30 }}
{{- $c := genSignedCert "svc.example" (list "10.0.0.1" "::1" "::ffff:192.168.1.2") (list "svc.example" "*.svc.example") 7 $ca }}
  ca: {{ $ca.Cert | quote }}
  cert: {{ $c.Cert | quote }}
  key: {{ $c.Key | quote }}
"#,
        &at_now(),
    );
    let ca_der = pem_der(&field(&d, "ca"), "CERTIFICATE");
    let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
    let der = pem_der(&field(&d, "cert"), "CERTIFICATE");
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    cert.verify_signature(Some(ca.public_key()))
        .expect("signed by the CA");
    assert!(cert.verify_signature(None).is_err(), "not self-signed");
    assert_eq!(cn(&cert), "svc.example");
    assert_eq!(cert.issuer().to_string(), ca.subject().to_string());
    assert!(!cert.is_ca());
    assert_eq!(key_usage(&cert), (true, true, false));
    assert!(server_and_client_auth(&cert));
    assert_eq!(
        cert.validity().not_after.timestamp(),
        now().timestamp() + 7 * 86400
    );
    let san = cert
        .subject_alternative_name()
        .unwrap()
        .expect("SANs")
        .value;
    let names: Vec<String> = san
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(d) => format!("dns:{d}"),
            GeneralName::IPAddress(ip) => format!("ip:{ip:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        names,
        [
            "dns:svc.example",
            "dns:*.svc.example",
            "ip:[10, 0, 0, 1]",
            "ip:[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]",
            "ip:[192, 168, 1, 2]",
        ]
    );
    // The authority key id is the CA's subject key id.
    let ski = ca
        .get_extension_unique(&x509_parser::oid_registry::OID_X509_EXT_SUBJECT_KEY_IDENTIFIER)
        .unwrap()
        .unwrap();
    let ParsedExtension::SubjectKeyIdentifier(ski) = ski.parsed_extension() else {
        panic!()
    };
    let aki = cert
        .get_extension_unique(&x509_parser::oid_registry::OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER)
        .unwrap()
        .unwrap();
    let ParsedExtension::AuthorityKeyIdentifier(aki) = aki.parsed_extension() else {
        panic!()
    };
    assert_eq!(aki.key_identifier.as_ref().unwrap().0, ski.0);
    assert_eq!(public_of(&field(&d, "key")), cert.public_key().raw);
}

#[test]
fn with_key_forms_use_the_key_given() {
    let d = data(
        r#"{{- $ec := genPrivateKey "ecdsa" }}
{{- $ed := genPrivateKey "ed25519" }}
{{- $ca := genCAWithKey "ec-ca" 10 $ec }}
{{- $self := genSelfSignedCertWithKey "self" nil (list "a.example") 10 $ed }}
{{- $leaf := genSignedCertWithKey "leaf" nil nil 10 $ca $ed }}
  ec: {{ $ec | quote }}
  ed: {{ $ed | quote }}
  ca: {{ $ca.Cert | quote }}
  cakey: {{ $ca.Key | quote }}
  self: {{ $self.Cert | quote }}
  leaf: {{ $leaf.Cert | quote }}
  leafkey: {{ $leaf.Key | quote }}
"#,
        &at_now(),
    );
    let parse = |k: &str| pem_der(&field(&d, k), "CERTIFICATE");
    let (ca_der, self_der, leaf_der) = (parse("ca"), parse("self"), parse("leaf"));
    let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
    let (_, selfc) = X509Certificate::from_der(&self_der).unwrap();
    let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
    assert_eq!(field(&d, "cakey"), field(&d, "ec"));
    assert_eq!(field(&d, "leafkey"), field(&d, "ed"));
    assert_eq!(public_of(&field(&d, "ec")), ca.public_key().raw);
    assert_eq!(public_of(&field(&d, "ed")), selfc.public_key().raw);
    assert_eq!(public_of(&field(&d, "ed")), leaf.public_key().raw);
    ca.verify_signature(None).unwrap();
    assert_eq!(
        ca.signature_algorithm.algorithm,
        x509_parser::oid_registry::OID_SIG_ECDSA_WITH_SHA256
    );
    selfc.verify_signature(None).unwrap();
    assert_eq!(
        selfc.signature_algorithm.algorithm,
        x509_parser::oid_registry::OID_SIG_ED25519
    );
    assert!(!selfc.is_ca());
    leaf.verify_signature(Some(ca.public_key())).unwrap();
    assert!(leaf.subject_alternative_name().unwrap().is_none());
}

#[test]
fn build_custom_cert_and_aes_and_passwords() {
    let d = data(
        r#"{{- $ca := genCAWithKey "x" 1 (genPrivateKey "ecdsa") }}
{{- $c := buildCustomCert ($ca.Cert | b64enc) ($ca.Key | b64enc) }}
  same: {{ eq $c.Cert $ca.Cert | quote }}
  aes: {{ encryptAES "secretkey" "plain text" | decryptAES "secretkey" | quote }}
  empty: {{ encryptAES "k" "" | quote }}
  pw: {{ derivePassword 3 "long" "kiln-master" "alice" "kiln.example" | quote }}
  bc: {{ bcrypt "hello" | quote }}
  ht: {{ htpasswd "user" "hello" | quote }}
  hc: {{ htpasswd "us:er" "hello" | quote }}
"#,
        &seeded("s"),
    );
    assert_eq!(field(&d, "same"), "true");
    assert_eq!(field(&d, "aes"), "plain text");
    assert_eq!(field(&d, "empty"), "");
    // What Helm v4.2.3 derives (the corpus's case 75 checks more).
    assert_eq!(field(&d, "pw"), "VohuXamu9_Xida");
    let bc = field(&d, "bc");
    assert!(bc.starts_with("$2a$10$") && bc.len() == 60, "{bc}");
    assert!(bcrypt::verify("hello", &bc).unwrap());
    let ht = field(&d, "ht");
    assert!(bcrypt::verify("hello", ht.strip_prefix("user:").unwrap()).unwrap());
    assert_eq!(field(&d, "hc"), "invalid username: us:er");
}

#[test]
fn hostile_sizes_are_refused_before_the_work() {
    let e = err("  a: {{ randAlphaNum 1000000000 }}\n", &Options::default());
    assert!(e.contains("error calling randAlphaNum"), "{e}");
    assert!(e.contains("output budget"), "{e}");
    let e = err("  a: {{ randBytes 1000000000 }}\n", &Options::default());
    assert!(
        e.contains("error calling randBytes") && e.contains("output budget"),
        "{e}"
    );
    let e = err("  a: {{ randBytes -1 }}\n", &Options::default());
    assert!(
        e.contains("error calling randBytes: runtime error: makeslice: len out of range"),
        "{e}"
    );
    let small = Options {
        limits: Limits {
            max_crypto_work: 1_000,
            ..Limits::default()
        },
        ..Options::default()
    };
    let e = err(
        "{{- range until 1000 }}\n  - {{ genPrivateKey \"rsa\" }}\n{{- end }}\n",
        &small,
    );
    assert!(e.contains("error calling genPrivateKey"), "{e}");
    assert!(e.contains("budget of 1000 crypto work units"), "{e}");
    let e = err(
        "{{- range until 1000 }}\n  - {{ derivePassword 1 \"long\" \"p\" (toString .) \"s\" }}\n{{- end }}\n",
        &small,
    );
    assert!(
        e.contains("error calling derivePassword") && e.contains("crypto work units"),
        "{e}"
    );
}

#[test]
fn passwords_of_one_master_password_and_user_cost_one_key_derivation() {
    // Room for one scrypt only: twenty sites of one master and user
    // render; a second user does not.
    let one = Options {
        limits: Limits {
            max_crypto_work: 1_000,
            ..Limits::default()
        },
        ..Options::default()
    };
    let d = data(
        "{{- range until 20 }}\n  s{{ . }}: {{ derivePassword 1 \"long\" \"master\" \"alice\" (printf \"site%d\" .) | quote }}\n{{- end }}\n",
        &one,
    );
    assert_eq!(d.len(), 20);
    assert_ne!(field(&d, "s0"), field(&d, "s1"));
    let e = err(
        "  a: {{ derivePassword 1 \"long\" \"master\" \"alice\" \"x\" }}\n  b: {{ derivePassword 1 \"long\" \"master\" \"bob\" \"x\" }}\n",
        &one,
    );
    assert!(e.contains("crypto work units"), "{e}");
}

#[test]
fn rsa_keys_handed_in_are_held_to_sizes_go_signs_with() {
    use rand_core::SeedableRng as _;
    use rsa::pkcs1::EncodeRsaPrivateKey as _;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let small = rsa::RsaPrivateKey::new(&mut rng, 512).unwrap();
    let der = small.to_pkcs1_der().unwrap();
    let pem = pem_rfc7468::encode_string(
        "RSA PRIVATE KEY",
        pem_rfc7468::LineEnding::LF,
        der.as_bytes(),
    )
    .unwrap();
    let e = err(
        &format!("  a: {{{{ genCAWithKey \"x\" 1 {:?} }}}}\n", pem.as_str()),
        &Options::default(),
    );
    assert!(e.contains("512-bit keys are not supported"), "{e}");
}

#[test]
fn bad_arguments_are_errors_naming_the_function() {
    let opts = Options::default();
    for (body, want) in [
        (
            r#"{{ genPrivateKey "dsa" }}"#,
            "error calling genPrivateKey: dsa keys are not supported",
        ),
        (
            r#"{{ genCAWithKey "x" 1 "not a pem" }}"#,
            "error calling genCAWithKey: parsing private key: no PEM data in input",
        ),
        (
            r#"{{ genCAWithKey "x" 1 "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n" }}"#,
            "error calling genCAWithKey: parsing private key: parsing RSA private key from PEM: ",
        ),
        (
            r#"{{ genSelfSignedCertWithKey "x" nil nil 1 "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" }}"#,
            "parsing private key: no private key data in PEM block of type CERTIFICATE",
        ),
        (
            r#"{{ genSelfSignedCert "x" (list "300.1.1.1") nil 1 }}"#,
            "error calling genSelfSignedCert: error parsing ip: 300.1.1.1",
        ),
        (
            r#"{{ genSelfSignedCert "x" (list "10.0.0.0/8") nil 1 }}"#,
            "error parsing ip: 10.0.0.0/8",
        ),
        (
            r#"{{ genSelfSignedCert "x" (list 1) nil 1 }}"#,
            "error parsing ip: 1 is not a string",
        ),
        (
            r#"{{ genSelfSignedCert "x" nil (list 2) 1 }}"#,
            "error processing alternate dns name: 2 is not a string",
        ),
        (
            r#"{{ genSelfSignedCert "x" (splitList "," "1.2.3.4") nil 1 }}"#,
            "wrong type for value; expected []interface {}; got []string",
        ),
        (
            r#"{{ genSignedCert "x" nil nil 1 (dict "Cert" "junk" "Key" "junk") }}"#,
            "error calling genSignedCert: unable to decode certificate",
        ),
        (
            r#"{{ genSignedCert "x" nil nil 1 "ca" }}"#,
            "expected sprig.certificate; got string",
        ),
        (
            r#"{{ buildCustomCert "%%%" "" }}"#,
            "error calling buildCustomCert: unable to decode base64 certificate",
        ),
        (
            r#"{{ decryptAES "k" "AAAA" }}"#,
            "error calling decryptAES: runtime error: slice bounds out of range [:16] with capacity 3",
        ),
        (
            r#"{{ randInt 5 5 }}"#,
            "error calling randInt: invalid argument to Intn",
        ),
        (
            r#"{{ genCA "x" "365" }}"#,
            "error calling genCA: wrong type for value; expected int; got string",
        ),
    ] {
        let e = err(&format!("  a: {body}\n"), &opts);
        assert!(e.contains(want), "{body}\n  got: {e}\n  want: {want}");
    }
}

#[test]
fn encrypt_aes_gives_another_iv_to_another_plaintext_at_the_same_call() {
    use base64::Engine as _;
    let with = |secret: &str| Options {
        set: vec![format!("secret={secret}")],
        ..seeded("s")
    };
    let body = "  c: {{ encryptAES \"key\" .Values.secret | quote }}\n  p: {{ encryptAES \"key\" .Values.secret | decryptAES \"key\" | quote }}\n";
    let iv = |d: &serde_json::Map<String, serde_json::Value>| {
        base64::engine::general_purpose::STANDARD
            .decode(field(d, "c"))
            .unwrap()[..16]
            .to_vec()
    };
    let one = data(body, &with("0123456789abcdef-one"));
    let two = data(body, &with("0123456789abcdef-two"));
    assert_eq!(field(&one, "p"), "0123456789abcdef-one");
    assert_eq!(field(&two, "p"), "0123456789abcdef-two");
    assert_ne!(iv(&one), iv(&two), "the same IV for two plaintexts");
    assert_eq!(
        data(body, &with("0123456789abcdef-one")),
        one,
        "not deterministic"
    );
}

/// Values pinned from the engine that derived each template's key as the
/// template started: deriving it at the template's first random call
/// (templates without one derive none), or skipping the frees at the end
/// of a render as the plugin does (`free_memory: false`, with a document
/// left to read or not), changes no document.
#[test]
fn lazy_template_keys_and_skipped_frees_change_no_document() {
    let cm = |name: &str, data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{data}")
    };
    let a = cm(
        "a",
        "  x: {{ randAlphaNum 12 | quote }}\n  y: {{ randAlphaNum 12 | quote }}\n",
    );
    let b = cm("b", "  n: {{ len \"abc\" | quote }}\n");
    let c = cm("c", "  x: {{ randAlphaNum 12 | quote }}\n");
    // A key that is not a string: a document the plugin reads into JSON
    // after the render (the render's memory is then freed all the same).
    let d = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\ndata:\n  1: one\n";
    let templates = [
        ("a.yaml", a.as_str()),
        ("b.yaml", &b),
        ("c.yaml", &c),
        ("d.yaml", d),
    ];
    let freed = try_render(&templates, &Options::default()).unwrap();
    let kept = try_render(
        &templates,
        &Options {
            free_memory: false,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(freed, kept);
    assert_eq!(freed.len(), 4);
    assert!(freed[3].contains("\n  1: one"), "{}", freed[3]);
    let values: Vec<String> = freed[..3]
        .iter()
        .flat_map(|doc| {
            let v: serde_json::Value = serde_yaml::from_str(doc).unwrap();
            v["data"]
                .as_object()
                .unwrap()
                .values()
                .map(|x| x.as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        values,
        ["4NK4B13SZ6ar", "8FKoWitRBbrf", "3", "lvickcLGtNBo"]
    );
}
