//! The random functions, made deterministic: every call draws from its own
//! ChaCha20 stream, derived from the render and the call's place.
//!
//! Helm draws `randAlphaNum`, `uuidv4`, `genCA`'s keys, `encryptAES`'s IVs,
//! ... from the OS, so a chart that generates a password differs from the
//! cluster on every render. Here a render is a pure function of its inputs:
//!
//! - the **render key** is HMAC-SHA256, keyed with the host's secret
//!   ([`crate::render::Options::random_seed`], empty without one), over a
//!   domain tag, the release name, the namespace and the root chart's name;
//! - a **template key** is derived from it and the rendered template's name
//!   (`chart/templates/secret.yaml`, subcharts' paths included);
//! - each call's **stream** is derived from the template key, the call's
//!   site (the file that holds the call and the call as written:
//!   `randAlphaNum 16`, `genCA "ca" 365`) and how many times that site has
//!   run in this template (so iterations of a `range`, or two identical
//!   calls, differ), and seeds a ChaCha20 generator.
//!
//! So editing a template (lines added, other random calls added above a
//! call) leaves a call's value alone unless the edit adds an identical
//! call before it; and without the secret anyone can recompute the values
//! from the repository (documented in `docs/helm.md`). The secret itself
//! never reaches output or errors.
//!
//! Expensive functions (RSA keys, scrypt, bcrypt) are charged against a
//! work budget ([`crate::exec::Limits::max_crypto_work`]) so that a chart cannot keep a render
//! busy for minutes; sizes (`randAlphaNum 1000000000`) are checked against
//! the output budget before anything is generated.

use std::collections::HashMap;
use std::rc::Rc;

use hmac::{Hmac, Mac as _};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore as _, SeedableRng as _};
use sha2::Sha256;

use crate::exec::{FnError, State};
use crate::parse::Pos;
use crate::value::Value;

/// Work units one render may spend on expensive functions by default
/// ([`crate::exec::Limits::max_crypto_work`]): 10,000, about the host's
/// default per-render deadline (10 s). One unit is about a millisecond of
/// work in the sandbox (measured through the component, `docs/helm.md`):
/// an RSA-4096 key costs [`COST_RSA_4096`], an RSA-2048 key (`genCA`,
/// `genSelfSignedCert`, `genSignedCert`) [`COST_RSA_2048`],
/// `derivePassword` (scrypt) [`COST_SCRYPT`], `bcrypt` and `htpasswd`
/// [`COST_BCRYPT`], other keys and signatures [`COST_CHEAP_KEY`]. The
/// call over it fails with an error naming the function, before it works.
pub const DEFAULT_CRYPTO_WORK: u64 = 10_000;
/// Cost of an RSA-4096 key (`genPrivateKey "rsa"`: usually 3 to 7 s in
/// the sandbox, over 20 s for unlucky seeds; 0.5 to 1 s natively).
pub const COST_RSA_4096: u64 = 5_000;
/// Cost of an RSA-2048 key (about 1 s in the sandbox, 0.15 s natively).
pub const COST_RSA_2048: u64 = 1_000;
/// Cost of `derivePassword` (scrypt, N=32768, r=8, p=2: 32 MiB; 0.9 s in
/// the sandbox).
pub const COST_SCRYPT: u64 = 900;
/// Cost of `bcrypt` and `htpasswd` (bcrypt, cost 10; 0.15 s in the
/// sandbox).
pub const COST_BCRYPT: u64 = 150;
/// Cost of an ECDSA or Ed25519 key, or of one signature.
pub const COST_CHEAP_KEY: u64 = 5;

/// Domain tag of the render key (a new version changes every value).
const DOMAIN: &[u8] = b"kiln-helm random functions v1";

type HmacSha256 = Hmac<Sha256>;

/// A call site: the file that holds the call and the call as written.
type Site = (Rc<str>, String);

/// The random state of one render: its key, the current template's key,
/// how often each call site has run, and the work spent.
#[derive(Clone)]
pub struct Randomness {
    render: [u8; 32],
    /// The current template's key, derived at its first random call (most
    /// templates make none: an HMAC per template would be wasted).
    template: Option<[u8; 32]>,
    /// The current template's name.
    template_name: String,
    sites: HashMap<Site, u64>,
    /// Generators handed out so far ([`Randomness::draws`]).
    draws: u64,
    site: String,
    work: u64,
    /// Master Password keys derived in this render, by a hash of the
    /// master password and user: scrypt is the costly part of
    /// `derivePassword`, and charts derive several passwords from one
    /// master. Bounded by the work budget (each new key is charged).
    master_keys: HashMap<[u8; 32], [u8; 64]>,
}

impl Default for Randomness {
    fn default() -> Self {
        Randomness::new(None, &[])
    }
}

impl std::fmt::Debug for Randomness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys stay out of debug output.
        f.debug_struct("Randomness")
            .field("sites", &self.sites.len())
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

/// HMAC-SHA256 of length-prefixed `parts` under `key`.
fn derive(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        mac.update(&(p.len() as u64).to_be_bytes());
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

impl Randomness {
    /// The state of a render: `secret` is the host's
    /// [`crate::render::Options::random_seed`]; `parts` name the render
    /// (release name, namespace, root chart).
    pub fn new(secret: Option<&str>, parts: &[&str]) -> Self {
        let mut all: Vec<&[u8]> = vec![DOMAIN];
        all.extend(parts.iter().map(|p| p.as_bytes()));
        let render = derive(secret.unwrap_or("").as_bytes(), &all);
        Randomness {
            render,
            // Before any template starts, the render's own key.
            template: Some(render),
            template_name: String::new(),
            sites: HashMap::new(),
            draws: 0,
            site: String::new(),
            work: 0,
            master_keys: HashMap::new(),
        }
    }

    /// Starts rendering template `name`: its own key, sites counted anew.
    pub fn start_template(&mut self, name: &str) {
        self.template = None;
        self.template_name.clear();
        self.template_name.push_str(name);
        self.sites.clear();
    }

    /// Names the call about to run (the executor sets it before calling a
    /// random function): the call as written.
    pub fn set_site(&mut self, call: String) {
        self.site = call;
    }

    /// How many generators [`Randomness::stream`] handed out in this
    /// render: a template call during which it changed drew random numbers
    /// (its text is not memoized, [`crate::incmemo`]).
    pub fn draws(&self) -> u64 {
        self.draws
    }

    /// The generator of one call at `pos`, the call named by
    /// [`Randomness::set_site`] (each run of a site gets its own).
    pub fn stream(&mut self, pos: &Pos) -> ChaCha20Rng {
        let count = self
            .sites
            .entry((pos.name.clone(), self.site.clone()))
            .or_insert(0);
        *count += 1;
        self.draws += 1;
        let template = *self.template.get_or_insert_with(|| {
            derive(&self.render, &[b"template", self.template_name.as_bytes()])
        });
        let seed = derive(
            &template,
            &[
                b"call",
                pos.name.as_bytes(),
                self.site.as_bytes(),
                &count.to_be_bytes(),
            ],
        );
        ChaCha20Rng::from_seed(seed)
    }

    /// The Master Password key of `id` if this render derived it already.
    pub fn master_key(&self, id: &[u8; 32]) -> Option<[u8; 64]> {
        self.master_keys.get(id).copied()
    }

    /// Keeps a derived Master Password key for the rest of the render.
    pub fn keep_master_key(&mut self, id: [u8; 32], key: [u8; 64]) {
        self.master_keys.insert(id, key);
    }

    /// Charges `units` of work, failing past `max` (checked before the
    /// work is done).
    pub fn charge(&mut self, units: u64, max: u64) -> Result<(), FnError> {
        self.work = self.work.saturating_add(units);
        if self.work > max {
            return Err(FnError::Msg(format!(
                "the render's budget of {max} crypto work units is spent \
                 (RSA keys, scrypt and bcrypt; a limit against hostile charts: \
                 raise the helm plugin's cryptoWork parameter, and its timeout, \
                 for a chart that needs more)"
            )));
        }
        Ok(())
    }
}

/// A uniform integer in `0..n` (`n > 0`), without modulo bias.
pub fn below(rng: &mut ChaCha20Rng, n: u64) -> u64 {
    debug_assert!(n > 0);
    let zone = u64::MAX - (u64::MAX % n);
    loop {
        let x = rng.next_u64();
        if x < zone {
            return x % n;
        }
    }
}

/// The random functions this module answers (the crypto ones are in
/// [`crate::crypto::NAMES`]).
pub const NAMES: &[&str] = &[
    "randAlphaNum",
    "randAlpha",
    "randNumeric",
    "randAscii",
    "randInt",
    "randBytes",
    "uuidv4",
];

/// Whether `name` is a random or crypto function.
pub fn exists(name: &str) -> bool {
    NAMES.contains(&name) || crate::crypto::NAMES.contains(&name)
}

fn arity(name: &str, args: &[Value], want: usize) -> Result<(), FnError> {
    if args.len() != want {
        return Err(FnError::Msg(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        )));
    }
    Ok(())
}

/// An `int` parameter, as Go's template converts one.
pub fn int_arg(v: &Value) -> Result<i64, FnError> {
    match v {
        Value::Int(i) | Value::Int64(i) => Ok(*i),
        Value::Float(f) if f.fract() == 0.0 => Ok(*f as i64),
        other => Err(FnError::Msg(format!(
            "wrong type for value; expected int; got {}",
            other.type_name()
        ))),
    }
}

/// A count of generated bytes, refused past the output budget before
/// anything is generated.
fn size(st: &State<'_>, name: &str, n: i64, per: u64) -> Result<usize, FnError> {
    let max = st.rt.limits.max_output as u64;
    if n > 0 && (n as u64).saturating_mul(per) > max {
        return Err(FnError::Msg(format!(
            "{name} of {n} would exceed the output budget of {max} bytes \
             (a limit against hostile charts)"
        )));
    }
    Ok(n.max(0) as usize)
}

/// Calls random or crypto function `name`, or `None` when it is neither.
pub fn call(
    st: &mut State<'_>,
    name: &str,
    args: &[Value],
    pos: &Pos,
) -> Option<Result<Value, FnError>> {
    if crate::crypto::NAMES.contains(&name) {
        return Some(crate::crypto::call(st, name, args, pos));
    }
    if !NAMES.contains(&name) {
        return None;
    }
    Some(call_random(st, name, args, pos))
}

fn call_random(st: &mut State<'_>, name: &str, a: &[Value], pos: &Pos) -> Result<Value, FnError> {
    match name {
        "randAlphaNum" | "randAlpha" | "randNumeric" | "randAscii" => {
            arity(name, a, 1)?;
            // Sprig ignores goutils' error for a negative count: "".
            let n = size(st, name, int_arg(&a[0])?, 1)?;
            let set: Vec<char> = match name {
                "randAlphaNum" => ('a'..='z').chain('A'..='Z').chain('0'..='9').collect(),
                "randAlpha" => ('a'..='z').chain('A'..='Z').collect(),
                "randNumeric" => ('0'..='9').collect(),
                _ => (' '..='~').collect(),
            };
            let mut rng = st.rt.random.stream(pos);
            Ok(Value::str(
                (0..n)
                    .map(|_| set[below(&mut rng, set.len() as u64) as usize])
                    .collect::<String>(),
            ))
        }
        "randInt" => {
            arity(name, a, 2)?;
            let (lo, hi) = (int_arg(&a[0])?, int_arg(&a[1])?);
            let span = hi.wrapping_sub(lo);
            if span <= 0 {
                return Err("invalid argument to Intn".into());
            }
            let mut rng = st.rt.random.stream(pos);
            Ok(Value::Int(
                lo.wrapping_add(below(&mut rng, span as u64) as i64),
            ))
        }
        "randBytes" => {
            arity(name, a, 1)?;
            let n = int_arg(&a[0])?;
            if n < 0 {
                return Err("runtime error: makeslice: len out of range".into());
            }
            // Base64 grows 3 bytes into 4.
            let n = size(st, name, n, 2)?;
            let mut buf = vec![0u8; n];
            st.rt.random.stream(pos).fill_bytes(&mut buf);
            use base64::Engine as _;
            Ok(Value::str(
                base64::engine::general_purpose::STANDARD.encode(buf),
            ))
        }
        "uuidv4" => {
            arity(name, a, 0)?;
            let mut b = [0u8; 16];
            st.rt.random.stream(pos).fill_bytes(&mut b);
            Ok(Value::str(uuid_text(b)))
        }
        other => Err(format!("function {other:?} not defined").into()),
    }
}

/// A version-4 UUID of 16 random bytes, as text.
pub fn uuid_text(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: usize, col: usize) -> Pos {
        Pos {
            name: Rc::from("c/templates/a.yaml"),
            line,
            col,
        }
    }

    /// The first draw of call number `site` (its text), at `line`/`col`.
    fn first(r: &mut Randomness, line: usize, site: usize) -> u64 {
        r.set_site(format!("randAlphaNum {site}"));
        r.stream(&pos(line, 1)).next_u64()
    }

    #[test]
    fn same_inputs_same_streams() {
        let mut a = Randomness::new(Some("s"), &["rel", "ns", "c"]);
        let mut b = Randomness::new(Some("s"), &["rel", "ns", "c"]);
        a.start_template("c/templates/a.yaml");
        b.start_template("c/templates/a.yaml");
        assert_eq!(first(&mut a, 3, 7), first(&mut b, 3, 7));
    }

    #[test]
    fn secret_release_namespace_chart_template_change_streams() {
        let base = || {
            let mut r = Randomness::new(Some("s"), &["rel", "ns", "c"]);
            r.start_template("c/templates/a.yaml");
            first(&mut r, 3, 7)
        };
        let v = base();
        for (secret, parts, template) in [
            (Some("t"), ["rel", "ns", "c"], "c/templates/a.yaml"),
            (None, ["rel", "ns", "c"], "c/templates/a.yaml"),
            (Some("s"), ["rel2", "ns", "c"], "c/templates/a.yaml"),
            (Some("s"), ["rel", "ns2", "c"], "c/templates/a.yaml"),
            (Some("s"), ["rel", "ns", "d"], "c/templates/a.yaml"),
            (Some("s"), ["rel", "ns", "c"], "c/templates/b.yaml"),
        ] {
            let mut r = Randomness::new(secret, &parts);
            r.start_template(template);
            assert_ne!(first(&mut r, 3, 7), v, "{secret:?} {parts:?} {template}");
        }
    }

    #[test]
    fn a_site_keeps_its_value_whatever_runs_before_it_or_where_it_moves() {
        let mut a = Randomness::new(None, &["r", "n", "c"]);
        a.start_template("t");
        let alone = first(&mut a, 5, 3);
        let mut b = Randomness::new(None, &["r", "n", "c"]);
        b.start_template("t");
        first(&mut b, 1, 4);
        first(&mut b, 2, 9);
        assert_eq!(first(&mut b, 7, 3), alone);
    }

    #[test]
    fn different_calls_differ() {
        let mut r = Randomness::new(None, &["r", "n", "c"]);
        r.start_template("t");
        assert_ne!(first(&mut r, 5, 3), first(&mut r, 5, 4));
    }

    #[test]
    fn runs_of_one_site_differ() {
        let mut r = Randomness::new(None, &["r", "n", "c"]);
        r.start_template("t");
        let x = first(&mut r, 5, 3);
        assert_ne!(first(&mut r, 5, 3), x);
        // ... and restart with the template.
        r.start_template("t");
        assert_eq!(first(&mut r, 5, 3), x);
    }

    #[test]
    fn budget_refuses_past_the_limit() {
        let mut r = Randomness::default();
        r.charge(100, 100).unwrap();
        let FnError::Msg(m) = r.charge(1, 100).unwrap_err() else {
            panic!()
        };
        assert!(m.contains("budget"), "{m}");
    }

    #[test]
    fn below_is_in_range() {
        let mut rng = ChaCha20Rng::from_seed([7; 32]);
        assert!((0..1000).all(|_| below(&mut rng, 62) < 62));
    }

    #[test]
    fn uuid_has_version_and_variant() {
        let u = uuid_text([0xff; 16]);
        assert_eq!(u, "ffffffff-ffff-4fff-bfff-ffffffffffff");
    }
}
