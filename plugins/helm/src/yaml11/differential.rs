//! The proof of [`super::fast`]: wherever the fast reader is sure, it
//! gives the value the event reader gives (structurally equal, floats to
//! the bit), on the corpus charts' files and `fromYaml` inputs, a table of
//! tricky scalars and thousands of generated and mutated documents.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::{fast, read_events};
use crate::value::Value;

thread_local! {
    /// The texts [`super::read`] was given while [`capture`] runs.
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Records `text` if a capture runs on this thread (called by
/// [`super::read`] in tests).
pub(super) fn record(text: &str) {
    CAPTURED.with(|c| {
        if let Some(texts) = c.borrow_mut().as_mut() {
            texts.push(text.to_owned());
        }
    });
}

/// The texts read as YAML while `f` runs.
fn capture(f: impl FnOnce()) -> Vec<String> {
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    f();
    CAPTURED.with(|c| c.borrow_mut().take().unwrap_or_default())
}

/// Deep structural equality of read values: same variants, same texts and
/// keys in the same order, floats equal to the bit (`-0` is not `0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
        }
        _ => false,
    }
}

/// Whether the fast reader was sure of `text`; panics when it was sure and
/// differs from the event reader (another value, or a value where the
/// event reader fails).
fn check(text: &str) -> bool {
    let Some(fast) = fast::read(text) else {
        return false;
    };
    match read_events(text) {
        Ok(slow) => assert!(
            same(&fast, &slow),
            "fast {fast:?} != events {slow:?} for {text:?}"
        ),
        Err(e) => panic!("fast {fast:?} where the events fail ({e}) for {text:?}"),
    }
    true
}

/// The corpus of the host's `tests/helm/` cases.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/helm")
}

/// Every file under `dir`, recursively, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every text file of the corpus (values files, `Chart.yaml`, templates,
/// expected outputs: all are texts a reader may be given).
#[test]
fn corpus_files_read_alike() {
    let mut paths = Vec::new();
    files(&corpus(), &mut paths);
    let (mut sure, mut total) = (0, 0);
    for p in &paths {
        let Ok(text) = std::fs::read_to_string(p) else {
            continue;
        };
        total += 1;
        sure += usize::from(check(&text));
    }
    assert!(total > 100, "the corpus has files ({total})");
    assert!(
        sure * 4 > total,
        "the fast reader reads most ({sure} of {total})"
    );
}

/// Every text the corpus charts read while rendering (values files and
/// `fromYaml`/`fromYamlArray` inputs).
#[test]
fn corpus_render_inputs_read_alike() {
    let mut cases = Vec::new();
    if let Ok(entries) = std::fs::read_dir(corpus()) {
        cases.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
    }
    cases.sort();
    let mut texts = Vec::new();
    for case in cases.iter().filter(|c| c.join("chart").is_dir()) {
        let spec: serde_json::Value = std::fs::read_to_string(case.join("case.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let list = |key: &str| -> Vec<String> {
            spec[key]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let opts = crate::Options {
            value_files: list("values"),
            set: list("set"),
            set_string: list("set_string"),
            ..crate::Options::default()
        };
        let src = crate::chart::DirSource(case.clone());
        texts.extend(capture(|| {
            let _ = crate::render(&src, "chart", &opts);
        }));
    }
    let sure = texts.iter().filter(|t| check(t)).count();
    assert!(texts.len() > 100, "the corpus reads YAML ({})", texts.len());
    assert!(
        sure * 2 > texts.len(),
        "the fast reader reads most ({sure} of {})",
        texts.len()
    );
}

/// Scalars whose resolution or scanning is easy to get wrong.
const TRICKY: &[&str] = &[
    "--log-level=info",
    "---",
    "--- x",
    "-.-",
    "-_",
    "-/",
    "-a:b",
    "y",
    "Y",
    "yes",
    "Yes",
    "YES",
    "yEs",
    "n",
    "N",
    "no",
    "No",
    "NO",
    "nO",
    "true",
    "True",
    "TRUE",
    "tRue",
    "false",
    "False",
    "FALSE",
    "on",
    "On",
    "ON",
    "oN",
    "off",
    "Off",
    "OFF",
    "null",
    "Null",
    "NULL",
    "nULL",
    "~",
    "",
    "017",
    "0o17",
    "0O17",
    "0x1F",
    "0X1f",
    "0b101",
    "0B11",
    "08",
    "09.5",
    "1_000",
    "_1",
    "1__0",
    "-_1",
    "+_1",
    "0x_1F",
    "0x-5",
    "0x+5",
    "1e3",
    "1E3",
    "1e+3",
    "1e-3",
    "1.e3",
    "1.5e3",
    ".5",
    "-.5",
    "+.5",
    "5.",
    "+1",
    "-1",
    "-0",
    "+0",
    "0",
    "00",
    "-0.0",
    "0.0",
    ".inf",
    "-.inf",
    ".Inf",
    ".NaN",
    ".nan",
    "1e400",
    "-1e400",
    "99999999999999999999999999999999999999999",
    "170141183460469231731687303715884105728",
    "9007199254740993",
    "2024-01-01",
    "2024-01-01T10:00:00Z",
    "2001-12-14 21:59:43.10 -5",
    "12:30",
    "190:20:30",
    "1:2",
    "a",
    "a b",
    "a  b",
    "a:b",
    "a::b",
    "http://x.y/z?q=1#f",
    "a#b",
    "a #b",
    "a b # c",
    "key:value",
    "x:",
    "<<",
    "=",
    "-",
    "--",
    "-x",
    "-1-",
    "1-",
    "a,b",
    "a[b]",
    "a{b}",
    "[a]",
    "{a}",
    "[]",
    "{}",
    "[ ]",
    "{ }",
    "'q'",
    "\"q\"",
    "'a''b'",
    "\"a\\\"b\"",
    "\"\\n\\t\\/\\\\\"",
    "\"\\x41\"",
    "\"\\u00e9\"",
    "\"\\e\"",
    "''",
    "\"\"",
    "'",
    "\"",
    "&a x",
    "*a",
    "!!str 1",
    "!x y",
    "|",
    ">",
    "%x",
    "@x",
    "`x",
    "? x",
    ": x",
    "a ",
    "a  ",
    "  a",
    "\u{e9}",
    "a\u{e9}",
    "a\tb",
    "\u{feff}a",
    "a\rb",
    "#",
    " # c",
    "1.0",
    "1.5",
    "0.1",
    "3.14159",
    "6.02e23",
    "1_0.0_1",
    "1.2.3",
    "v1",
    "1Gi",
    "500m",
];

/// Documents built around each tricky scalar, in every position and with
/// odd line ends and marks.
#[test]
fn tricky_scalars_read_alike() {
    let mut sure = 0;
    let mut total = 0;
    for s in TRICKY {
        let docs = [
            format!("k: {s}\n"),
            format!("k: {s}"),
            format!("- {s}\n"),
            format!("{s}\n"),
            format!("{s}: v\n"),
            format!("{s}:\n  a: 1\n"),
            format!("k: '{s}'\n"),
            format!("k: \"{s}\"\n"),
            format!("a:\n  k: {s}\n  z: 2\nb: 1\n"),
            format!("- k: {s}\n  j: 1\n- {s}\n"),
            format!("k: {s}   \n"),
            format!("k: {s} # c\n"),
            format!("k: {s}\r\nj: 1\r\n"),
            format!("\u{feff}k: {s}\n"),
            format!("k: {s}\n  more\n"),
            format!("k: {s}\nk: 2\n"),
            format!("---\nk: {s}\n"),
            format!("k: [{s}]\n"),
            format!("k: {{a: {s}}}\n"),
            format!("k: [a, {s}, b]\n"),
            format!("k: {{{s}: 1, z: [{s}]}}\n"),
            format!("- [{s} ]\n"),
        ];
        for d in &docs {
            total += 1;
            sure += usize::from(check(d));
        }
    }
    assert!(
        sure * 3 > total,
        "the fast reader reads most ({sure} of {total})"
    );
    // The common shapes are read fast (else the proof proves nothing).
    for d in [
        "",
        "# only a comment\n",
        "app.kubernetes.io/name: x\nhelm.sh/chart: y-1.2.3\n",
        "a:\n  b: yes\n  c: 017\nd:\n- 1\n- 'two'\n- \"th\\\"ree\"\ne: {}\nf: []\n",
        "- name: a\n  value: \"1\"\n-\n  x: y\n- # c\n",
        "tags: [platform-common]\nrequests: {cpu: 50m, memory: 64Mi}\n",
    ] {
        assert!(check(d), "read fast: {d:?}");
    }
}

/// A small deterministic generator (SplitMix64) of documents, `clean` ones
/// from the common keys and scalars only.
struct Rng {
    state: u64,
    clean: bool,
}

impl Rng {
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// A key; a clean one not yet in `used` (a clean mapping has no
    /// duplicate keys).
    fn key(&mut self, used: &mut Vec<String>) -> String {
        if !self.clean {
            return self.pick(KEYS).to_owned();
        }
        let mut key = self.pick(COMMON_KEYS).to_owned();
        if used.contains(&key) {
            key = format!("k{}", used.len());
        }
        used.push(key.clone());
        key
    }

    fn scalar(&mut self) -> &'static str {
        self.pick(if self.clean { COMMON } else { TRICKY })
    }
}

/// Keys the fast reader reads.
const COMMON_KEYS: &[&str] = &[
    "a",
    "b",
    "c",
    "name",
    "app.kubernetes.io/name",
    "yes",
    "1",
    "0x1F",
    "\"q k\"",
    "'s k'",
];

/// Scalars the fast reader reads.
const COMMON: &[&str] = &[
    "x",
    "a b",
    "yes",
    "Off",
    "~",
    "017",
    "1.5",
    "-1",
    "1e3",
    "'q'",
    "\"d\\\"q\"",
    "{}",
    "[]",
    "http://a:b",
    "a#b",
    "v # c",
    "''",
    "[a, 1]",
    "{a: b, c: 1}",
    "[x, {y: 017}]",
    "[ 'q', \"d\" ]",
    "[--v=2, -x]",
    "-x",
    "--",
    "{\"k\": [on], 'j': ~}",
];

const KEYS: &[&str] = &[
    "a",
    "b",
    "name",
    "app.kubernetes.io/name",
    "helm.sh/chart",
    "yes",
    "on",
    "1",
    "017",
    "1.0",
    "~",
    "null",
    "\"q k\"",
    "'s k'",
    "\"a:b\"",
    "a:b",
    "<<",
    "&x a",
    "*x",
    "? a",
    "-1",
    "a b",
    "k#h",
    "\"\"",
    "''",
    "x",
    "y",
    "z",
];

/// A block node at `indent`, appended to `out` line by line.
fn block(rng: &mut Rng, out: &mut String, indent: usize, depth: usize) {
    let pad = " ".repeat(indent);
    let n = 1 + rng.below(4);
    let sequence = rng.below(3) == 0;
    let mut used = Vec::new();
    for _ in 0..n {
        if rng.below(8) == 0 {
            out.push_str(&" ".repeat(rng.below(6)));
            out.push_str(if rng.below(2) == 0 { "# note\n" } else { "\n" });
        }
        out.push_str(&pad);
        if sequence {
            out.push('-');
            match rng.below(4) {
                0 if depth < 4 => {
                    out.push('\n');
                    let inner = indent + 1 + rng.below(3);
                    block(rng, out, inner, depth + 1);
                }
                1 => {
                    let gap = 1 + rng.below(2);
                    out.push_str(&" ".repeat(gap));
                    entry(rng, out, indent + 1 + gap, depth, &mut Vec::new());
                }
                _ => {
                    out.push(' ');
                    out.push_str(rng.scalar());
                    out.push('\n');
                }
            }
        } else {
            entry(rng, out, indent, depth, &mut used);
        }
    }
}

/// A mapping entry whose key starts at column `indent` (the cursor is
/// there), and more entries of the same mapping (whose keys are `used`).
fn entry(rng: &mut Rng, out: &mut String, indent: usize, depth: usize, used: &mut Vec<String>) {
    for i in 0..1 + rng.below(3) {
        if i > 0 {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&rng.key(used));
        out.push(':');
        match rng.below(6) {
            0 if depth < 4 => {
                out.push('\n');
                let inner = indent + 1 + rng.below(3);
                block(rng, out, inner, depth + 1);
            }
            1 if depth < 4 => {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                out.push_str("- ");
                out.push_str(rng.scalar());
                out.push('\n');
            }
            2 => out.push_str(if rng.below(2) == 0 { "\n" } else { " # c\n" }),
            _ => {
                out.push(' ');
                out.push_str(rng.scalar());
                out.push_str(if rng.below(5) == 0 { "  \n" } else { "\n" });
            }
        }
    }
}

/// `text` with a few random edits: a character inserted or deleted, a line
/// indented or dedented by one, a line repeated.
fn mutate(rng: &mut Rng, text: &str) -> String {
    const BITS: &[&str] = &[
        ":", " ", "-", "#", "'", "\"", "\n", "\t", "\r", "{", "}", "[", "]", "&", "*", "!", "|",
        ">", "\\", "x", "0", "\u{feff}", "\u{e9}", ",", "?",
    ];
    let mut s = text.to_owned();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(s.len() + 1);
        if !s.is_char_boundary(at) {
            continue;
        }
        match rng.below(4) {
            0 => s.insert_str(at, rng.pick(BITS)),
            1 => {
                if let Some(c) = s[at..].chars().next() {
                    s.replace_range(at..at + c.len_utf8(), "");
                }
            }
            2 => {
                let start = s[..at].rfind('\n').map_or(0, |i| i + 1);
                if rng.below(2) == 0 {
                    s.insert(start, ' ');
                } else if s[start..].starts_with(' ') {
                    s.remove(start);
                }
            }
            _ => {
                let start = s[..at].rfind('\n').map_or(0, |i| i + 1);
                let end = s[at..].find('\n').map_or(s.len(), |i| at + i + 1);
                let line = s[start..end].to_owned();
                s.insert_str(start, &line);
            }
        }
    }
    s
}

/// Generated documents and their mutants: the fast reader is not sure, or
/// agrees with the event reader.
#[test]
fn generated_documents_read_alike() {
    let mut rng = Rng {
        state: 0x5EED,
        clean: false,
    };
    let (mut sure, mut total) = (0, 0);
    for case in 0..4000 {
        rng.clean = case % 2 == 0;
        let mut doc = String::new();
        let indent = rng.below(2);
        block(&mut rng, &mut doc, indent, 0);
        total += 2;
        sure += usize::from(check(&doc));
        sure += usize::from(check(&mutate(&mut rng, &doc)));
    }
    assert!(
        sure * 4 > total,
        "the fast reader reads many ({sure} of {total})"
    );
}

/// Nesting past the fast reader's depth goes to the event reader.
#[test]
fn deep_nesting_is_not_read_fast() {
    let mut doc = String::new();
    for i in 0..100 {
        doc.push_str(&" ".repeat(i));
        doc.push_str("a:\n");
    }
    assert!(fast::read(&doc).is_none());
    let seq: String = (0..100).map(|i| format!("{}-\n", " ".repeat(i))).collect();
    assert!(fast::read(&seq).is_none());
    assert!(check("a:\n b:\n  c:\n   - d\n"));
}

#[test]
fn long_keys_read_alike_in_blocks_and_flows() {
    // Around the simple-key limit of the event reader (1024 characters).
    for n in [999, 1000, 1001, 1023, 1024, 1025, 1030] {
        let k = "k".repeat(n);
        for doc in [
            format!("{k}: 1\n"),
            format!("a: {{{k}: 1}}\n"),
            format!("a: {{x: 1, {k}: 2}}\n"),
            format!("a: {{'{k}': 1}}\n"),
            format!("a: [{{{k}: 1}}]\n"),
            format!("a: {{k{}: 1}}\n", " ".repeat(n)),
        ] {
            check(&doc);
        }
    }
}

/// A flow mapping's implicit key longer than the event reader's
/// simple-key window (1024 characters) is an error for the event reader
/// ("did not find expected ',' or '}'"): the fast reader leaves it alone.
#[test]
fn long_flow_mapping_keys_are_not_read_fast() {
    for text in [
        format!("{{{}: 1}}", "k".repeat(1030)),
        format!("a: {{{}: 1}}", "k".repeat(1500)),
        format!("a: {{\"{}\": 1}}", "q".repeat(1500)),
        format!("a: [{{b: 1, {}: 1}}]", "k".repeat(1500)),
    ] {
        assert!(read_events(&text).is_err(), "the event reader refuses it");
        assert!(
            fast::read(&text).is_none(),
            "the fast reader reads a {}-byte flow key the event reader refuses",
            text.len()
        );
    }
}

/// A quoted scalar over several lines at column `indent` + 2 (the value of
/// a key or an entry at `indent`): words, blank lines, `''`, spaces at
/// both ends of lines, `#` inside, continuation lines sometimes not
/// indented past the entry, and sometimes something after the quote.
fn multi_line_quoted(rng: &mut Rng, indent: usize) -> String {
    const WORDS: &[&str] = &[
        "a", "{{", "}}", "x.y", "#", "# c", "''", "b c", "-", "- d", ":", "k: v", "\"", "1", "'",
        "\\",
    ];
    let single = rng.below(3) != 0;
    let mut out = String::from(if single { "'" } else { "\"" });
    let lines = 2 + rng.below(4);
    for line in 0..lines {
        if line > 0 {
            out.push('\n');
            if rng.below(6) == 0 {
                // A blank line, perhaps with spaces.
                out.push_str(&" ".repeat(rng.below(4)));
                out.push('\n');
            }
            let pad = if rng.below(12) == 0 {
                rng.below(indent + 1)
            } else {
                indent + 1 + rng.below(4)
            };
            out.push_str(&" ".repeat(pad));
        }
        for w in 0..1 + rng.below(4) {
            if w > 0 || rng.below(5) == 0 {
                out.push(' ');
            }
            let word = rng.pick(WORDS);
            // A lone quote of the scalar's own kind would close it.
            match (single, word) {
                (true, "'") => out.push_str("''"),
                (false, "\"") | (false, "\\") => out.push('q'),
                _ => out.push_str(word),
            }
        }
        if rng.below(5) == 0 {
            out.push_str("  ");
        }
    }
    out.push(if single { '\'' } else { '"' });
    match rng.below(8) {
        0 => out.push_str(" # after"),
        1 => out.push_str(" x"),
        2 => out.push_str(": y"),
        _ => {}
    }
    out
}

/// Quoted scalars folded over lines (what `toYaml` writes for long
/// strings) as mapping values and sequence items, and their mutants: the
/// fast reader is not sure, or agrees with the event reader; it reads the
/// usual shapes.
#[test]
fn multi_line_quoted_scalars_read_alike() {
    let mut rng = Rng {
        state: 0xF01D,
        clean: true,
    };
    let (mut sure, mut total) = (0, 0);
    for _ in 0..6000 {
        let indent = 2 * rng.below(3);
        let pad = " ".repeat(indent);
        let mut doc = String::new();
        if indent > 0 {
            doc.push_str("top:\n");
        }
        if rng.below(2) == 0 {
            doc.push_str(&format!(
                "{pad}k: {}\n",
                multi_line_quoted(&mut rng, indent)
            ));
        } else {
            doc.push_str(&format!("{pad}- {}\n", multi_line_quoted(&mut rng, indent)));
            doc.push_str(&format!("{pad}- b\n"));
        }
        if doc.contains(&format!("{pad}k:")) {
            doc.push_str(&format!("{pad}after: 1\n"));
        }
        total += 2;
        sure += usize::from(check(&doc));
        sure += usize::from(check(&mutate(&mut rng, &doc)));
    }
    assert!(sure * 3 > total, "read fast: {sure} of {total}");
    // toYaml's own folding of a long string, read back.
    let folded = "templates:\n  default.tmpl: '{{ \"{{\" }} define \"slack.title\" {{ \"}}\" }}[{{ \"{{\" }} .Status {{\n    \"}}\" }}]{{ \"{{\" }} end {{ \"}}\" }}'\nnext: 1\n";
    assert!(check(folded), "the fast reader reads toYaml's folding");
    // Edges of the folding, each read fast and alike.
    for doc in [
        "k: \"   \n  b\"\n",
        "k: \"a\n   \"\n",
        "k: 'a''''\n b'\n",
        "k: 'a\n\n\n  b  \n  c'\n",
        "k: '# not a comment\n  # nor this'\n",
        "- 'a\n  b'\n- c\n",
    ] {
        assert!(check(doc), "{doc:?} is read fast");
    }
}
