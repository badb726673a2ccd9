//! The fast reader against the full reader it stands in for
//! ([`output_json`](super::super::output_json): YAML 1.1 as Helm's install
//! reads it): on every document the corpus charts render, on hand-written
//! edge cases and on generated and mutated documents, it must either say
//! "not sure" or give exactly what the full reader gives (compared as JSON
//! text).

use std::path::Path;

use super::read;

/// What the full reader gives of `doc` (None: an error, or a value JSON
/// cannot hold).
fn slow(doc: &str) -> Option<serde_json::Value> {
    let json = super::super::output_json(&format!("{doc}\n")).ok()?;
    Some(serde_json::from_str(&json).expect("JSON text"))
}

/// Checks `doc`; whether the fast reader read it.
fn agrees(doc: &str) -> bool {
    let Some(fast) = read(doc) else {
        return false;
    };
    // The full reader refuses a few odd texts libyaml (whose parse the
    // fast reader follows) reads: there the fast reader's reading stands,
    // and only the sort's head is compared.
    if crate::yaml11::read_output(&format!("{doc}\n")).is_ok() {
        let slow = slow(doc);
        assert_eq!(
            Some(&fast.json),
            slow.as_ref().map(serde_json::Value::to_string).as_ref(),
            "the fast reader differs on {doc:?}"
        );
        // The values the sort reads, as the value holds them.
        let slow = slow.unwrap();
        let hook = slow
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get("helm.sh/hook"));
        assert_eq!(fast.kind.as_ref(), slow.get("kind"), "{doc:?}");
        assert_eq!(fast.hook.as_ref(), hook, "{doc:?}");
    }
    // And the head the sort reads is the one it read before.
    let ours = super::super::read(doc).unwrap();
    let theirs = super::super::read_with_serde_yaml(doc).unwrap();
    assert_eq!(
        (ours.kind, ours.hook),
        (theirs.kind, theirs.hook),
        "{doc:?}"
    );
    true
}

/// The options a corpus case names (as `tests/oracle.rs` reads them).
fn options(case: &serde_json::Value) -> crate::Options {
    let strings = |key: &str| -> Vec<String> {
        case[key]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let defaults = crate::Options::default();
    crate::Options {
        release_name: case["release"]
            .as_str()
            .map_or(defaults.release_name, str::to_owned),
        namespace: case["namespace"]
            .as_str()
            .map_or(defaults.namespace, str::to_owned),
        value_files: strings("values"),
        set: strings("set"),
        set_string: strings("set_string"),
        kube_version: case["kube_version"].as_str().map(str::to_owned),
        api_versions: strings("api_versions"),
        skip_crds: case["skip_crds"].as_bool().unwrap_or(false),
        ..defaults
    }
}

/// Every document of every corpus chart that renders.
fn corpus_documents() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/helm");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("chart").is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 64, "{} corpus cases", cases.len());
    let mut docs = Vec::new();
    for case_dir in cases {
        let case: serde_json::Value = std::fs::read_to_string(case_dir.join("case.json"))
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(serde_json::json!({}));
        let src = crate::chart::DirSource(case_dir);
        if let Ok(rendered) = crate::render(&src, "chart", &options(&case)) {
            docs.extend(rendered.into_iter().map(|d| d.text));
        }
    }
    docs
}

#[test]
fn every_corpus_document_is_read_as_serde_yaml_reads_it() {
    let docs = corpus_documents();
    let read = docs.iter().filter(|d| agrees(d)).count();
    // Charts render the subset: the fast reader is not a no-op.
    assert!(
        read * 10 >= docs.len() * 9,
        "read {read} of {} corpus documents",
        docs.len()
    );
}

/// Documents the fast reader must read (and read exactly).
const READ: &[&str] = &[
    "",
    "# only a comment",
    "\n\n",
    "a: 1",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: x\ndata:\n  k: v",
    // Every resolution of a plain scalar.
    "a: 0x1F\nb: -0\nc: 1e3\nd: .5\ne: +.inf\nf: ~\ng: Null\nh: NULL\ni: null\nj: True\nk: FALSE",
    "a: -0x1F\nb: 0o17\nc: -0o17\nd: 0b101\ne: -0b101\nf: +12\ng: 012\nh: -012\ni: +012\nj: 0\nk: 00",
    "a: 1.0\nb: -0.0\nc: 1e400\nd: nan\ne: .NaN\nf: -.inf\ng: .Inf\nh: inf\ni: 1_000\nj: 5.\nk: +.5",
    "b: -9223372036854775808\nd: 0x\ne: 0x-1\nf: +-1",
    "a: yes\nb: no\nc: on\nd: off\ne: y\nf: 'true'\ng: \"1\"\nh: tRue\ni: nULL\nj: 1e\nk: 1.2.3",
    "a: 1:2\nb: 12:30:00\nc: 2024-01-01\nd: 1,000\ne: $1\nf: 0.1e-2\ng: -1E+3\nh: 0x1f\ni: 0X1F",
    // Quoted scalars.
    "a: 'a''b'\nb: \"\\u00e9\\t\"\nc: \"a\\\"b\"\nd: ''\ne: \"\"\nf: 'x # y'\ng: \"x: y\"",
    "a: \"\\0\\a\\b\\n\\v\\f\\r\\e\\ \\/\\\\\\N\\_\\L\\P\\x41\\U0001F600\"",
    "a: \"\\x85\\x9f\\xff\"\nb: 'it''s'\nc: '  padded  '\nd: \"  padded  \"",
    // Keys.
    "\"a b\": 1\n'c:d': 2\ne f: 3\ng.h/i: 4\nk : 5\n\"1\": 6\n'true': 7\n-x: 8\nx-: 9",
    "key:value: 1\na#b: 2\nhttp://x: 3",
    // Values with colons, hashes and spaces.
    "a: key:value\nb: a#b\nc: a #b\nd: http://x:8080/y?q=1#f\ne: a  b\nf: trailing   \ng: x] y}",
    "a: b # comment\n# full line\n  # indented comment\nc: d",
    // Empty values.
    "a:\nb: \nc:   # comment\nd:\n  e:\n",
    // Sequences.
    "- a\n- b\n- 1\n-\n- - x\n  - y\n- k: v\n  l: w\n- [1, 2]\n- {}",
    "a:\n- 1\n- 2\nb:\n  - 3\n  -   4\nc: []\nd: {}\ne: [ ]\nf: { }",
    "a:\n- b: 1\n  c:\n  - d\n  - e\n- f\ng: h",
    "containers:\n  - name: x\n    args:\n      - --flag=1\n      - -v\n    env:\n      - name: A\n        value: \"1\"",
    // Flow collections.
    "a: [a, b, 'c', \"d\", 1, true, ~, [x], {k: v}]\nb: {a: 1, 'b': 2, \"c\": [3]}\nc: [a b, c ]\nd: [a, ]",
    // Block scalars.
    "a: |\n  line 1\n  line 2\nb: 1",
    "a: |-\n  x\n\n  y\n\n\nb: >\n  folded\n  text\n\n  para\n    more\n  end\nc: >-\n  x\n  y",
    "a: |+\n  keep\n\n\nb: |\n    deep\n      deeper\n\n    back",
    "a: |\n  x\n   \n  y\n     \nb: 2",
    "a: >\n  \n  x\n  \ty\n  z\n",
    "- |\n  in a sequence\n- >\n  folded\n- x",
    "a:\n  b: |  # comment\n    text\n  c: d",
    "a: |\n  last",
    "a: |+\n  last",
    "a: |",
    "a: >\n  a\n\n\n  b\n  \n",
    "kind: |\n  Secret",
    "kind: Job\nmetadata:\n  annotations:\n    helm.sh/hook: >\n      pre-install",
    "kind: Job\nmetadata:\n  annotations:\n    helm.sh/hook: pre-install,post-install\n",
    // The sort's values in flows, under quoted keys, and keys written out
    // of order at every level (the JSON is written with them sorted).
    "kind: Job\nmetadata: {annotations: {helm.sh/hook: pre-install}, name: j}",
    "kind: Job\nmetadata:\n  annotations: {helm.sh/hook: post-delete, z: 1}",
    "\"kind\": Job\n'metadata':\n  \"annotations\":\n    'helm.sh/hook': test",
    "z: 1\nmetadata:\n  name: x\n  annotations:\n    z: 1\n    helm.sh/hook: pre-upgrade\n    a: 2\n  labels:\n    b: 1\n    a: 2\nkind: Job\napiVersion: batch/v1",
    "kind: [Job]\nmetadata:\n  annotations:\n    helm.sh/hook: [a, b]",
    "metadata:\n  - annotations:\n      helm.sh/hook: x\nkind: {a: 1}",
    // Non-ASCII and trailing space.
    "a: é\nb: 日本\nc: 😀 \nd: \u{a0}x",
    "a: 1   \nb: 2 # comment\t with a tab",
    "  a: 1\n  b: 2",
];

/// Documents that may go either way (most must fall back): compared only.
const ODD: &[&str] = &[
    // Integers past int64: go-yaml v2 keeps them exact, the full reader
    // as float64 (the fast reader leaves them to it).
    "a: 18446744073709551615\nc: 9223372036854775808",
    "a: b\na: c",
    "a: [",
    "kind: Foo\n  bad: indent",
    "big: 123456789012345678901234567890",
    "neg: -123456789012345678901234567890",
    "a: &x 1\nb: *x",
    "a: !tag 1",
    "? a\n: b",
    "<<: {a: 1}",
    "1: one",
    "true: yes",
    "~: x",
    "a: b: c",
    "a: b\n  c",
    "a: 'multi\n  line'",
    "a: \"multi\n  line\"",
    "a: \"esc\\\n  aped\"",
    "a:\tb",
    "a: 1\t# tab before a comment",
    "\ta: b",
    "a: b\r\nc: d",
    "a: b\rc: d",
    "\u{feff}a: b",
    "a: b\u{feff}",
    "a: \u{85}",
    "a: \u{2028}",
    "a: \u{7f}",
    "a: \u{1}",
    "%YAML 1.1\n---\na: b",
    "---\na: b",
    "a: b\n---",
    "a: b\n...",
    "--- a",
    "a: |2\n   x",
    "a: |0\n x",
    "a: |\n\tx",
    "a: |\n   \n  x",
    "a: |\nb: 1",
    "a:\n  |\n  x",
    "plain scalar",
    "'quoted'",
    "[a, b]",
    "{a: 1}",
    "- a\nb: 1",
    "a: 1\n- b",
    "a:\n  - b\n  c: d",
    "a: - b",
    "a: -",
    "a: @x",
    "a: `x",
    "a: %x",
    "a: ?x",
    "a: :x",
    "a: ,x",
    "a: [a: b]",
    "a: {a}",
    "a: {a: }",
    "a: [a, b",
    "a: [a] b",
    "a: {a: 1, a: 2}",
    "a: [\"a\"b]",
    "a: \"b\"c",
    "a: 'b'#c",
    "a: \"\\q\"",
    "a: \"\\ud800\"",
    "a: \"\\U00110000\"",
    "a:b",
    "a:",
    ":",
    "-",
    "- - - - - -",
    "a: 'x''",
    "a: \"",
    "a:   ",
    "k: v\n\n\n",
    "k:\n\n  - a\n\n  - b\n",
    "'a' : 1\n\"b\"  :  c",
    "- 'a': 1\n- \"a\\\"b\": c\n- 'x''y': z",
    "a: [a,b]\nb: {a: [1,2], b: {c: d}}\nc: [-1, -a]\nd: [a  b  ]",
    "a: [,]\nb: [a,,b]",
    "a: {\"a\": 1, 'b': 2}",
    "a: {\"a\":1}",
    "a: [a]]",
    "a: [a] # c\nb: {} #c",
    "a: [a]#c",
    "a: [-]",
    "a: [a, - b]",
];

#[test]
fn the_edge_cases_are_read_exactly_or_left_alone() {
    for doc in READ {
        assert!(agrees(doc), "the fast reader left {doc:?} to serde_yaml");
    }
    for doc in ODD {
        agrees(doc);
    }
    // Every document of both tables, also with a final line break, spaces,
    // a comment, or Windows line endings.
    for doc in READ.iter().chain(ODD) {
        for variant in [
            format!("{doc}\n"),
            format!("{doc}  "),
            format!("{doc}\n# end"),
            doc.replace('\n', "\r\n"),
        ] {
            agrees(&variant);
        }
    }
}

/// Review finding: libyaml forgets a simple key 1024 characters after its
/// start, in flow context too (where it is not required): a flow mapping key
/// that long is then no key, and `serde_yaml` fails ("did not find expected
/// ',' or '}'"). `MAX_KEY_BYTES` guards only block keys.
#[test]
fn review_long_flow_mapping_keys_are_left_to_serde_yaml() {
    // From the key's first byte to its `:`, 1025 bytes is one too many.
    let long = "k".repeat(1025);
    let spaced = format!("k{}", " ".repeat(1024));
    let wide = "é".repeat(513);
    for doc in [
        format!("a: {{{long}: 1}}"),
        format!("a: {{x: 1, {long}: 2}}"),
        format!("a: {{'{long}': 1}}"),
        format!("a: {{\"{long}\": 1}}"),
        format!("- a: {{{long}: 1}}"),
        format!("a: [{{{long}: 1}}]"),
        format!("a: {{{spaced}: 1}}"),
        format!("a: {{{wide}: 1}}"),
    ] {
        assert!(
            super::super::read_with_serde_yaml(&doc).is_err(),
            "serde_yaml reads {doc:?}"
        );
        assert!(read(&doc).is_none(), "{doc:?}");
    }
}

#[test]
fn what_serde_yaml_refuses_is_left_to_it() {
    for doc in ODD.iter().chain(READ) {
        if slow(doc).is_none() {
            assert!(read(doc).is_none(), "{doc:?}");
        }
    }
}

#[test]
fn deep_documents_are_left_to_serde_yaml() {
    for depth in [90, 100, 101, 127, 128, 129, 200, 5000] {
        let mut doc = String::new();
        for level in 0..depth {
            doc.push_str(&" ".repeat(level));
            doc.push_str("a:\n");
        }
        doc.push_str(&" ".repeat(depth));
        doc.push_str("b: 1");
        agrees(&doc);
        assert_eq!(read(&doc).is_some(), depth < 100, "depth {depth}");
        let flow = format!("a: {}{}", "[".repeat(depth), "]".repeat(depth));
        agrees(&flow);
        let seq = format!("{}x", "- ".repeat(depth));
        agrees(&seq);
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const SCALARS: &[&str] = &[
    "a",
    "x y",
    "kind",
    "0x1F",
    "-0",
    "1e3",
    ".5",
    "+.inf",
    "~",
    "Null",
    "\"true\"",
    "'a''b'",
    "\"\\u00e9\\t\"",
    "key:value",
    "a#b",
    "012",
    "-012",
    "+12",
    "0o17",
    "-0x1F",
    "0b101",
    "18446744073709551616",
    "-9223372036854775809",
    "1.0",
    "-0.0",
    "1e400",
    ".NaN",
    "True",
    "yes",
    "http://x:8080/y",
    "[a, b]",
    "{a: 1}",
    "[]",
    "{}",
    "[a, [b, {c: d}], 'e']",
    "é",
    "\"\"",
    "''",
    "--x",
    "-1",
    "1.5",
    "false",
    "null",
    "\"a\\\"b\"",
    "'it''s'",
    "x]",
    "a \"q\"",
];

const KEYS: &[&str] = &[
    "a",
    "b",
    "c",
    "kind",
    "metadata",
    "annotations",
    "helm.sh/hook",
    "\"q\"",
    "'s'",
    "a b",
    "a:b",
    "-k",
    "k.k",
    "\"1\"",
    "x#y",
    "name",
];

const HOOKS: &[&str] = &[
    "pre-install",
    "post-install,pre-upgrade",
    "test",
    "[a, b]",
    "1",
];

/// A document: a block node at `indent`, `depth` levels deep at most.
fn generate(rng: &mut Rng, out: &mut String, indent: usize, depth: usize) {
    let entries = 1 + rng.below(4);
    let sequence = rng.below(3) == 0;
    for entry in 0..entries {
        if rng.below(8) == 0 {
            out.push_str(&" ".repeat(rng.below(6)));
            out.push_str(rng.pick(&["# comment", "", "#"]));
            out.push('\n');
        }
        out.push_str(&" ".repeat(indent));
        if sequence {
            out.push_str("- ");
        } else {
            let key = if entry == 0 && rng.below(3) == 0 {
                "kind"
            } else {
                rng.pick(KEYS)
            };
            out.push_str(key);
            out.push(':');
        }
        value(rng, out, indent, depth, sequence);
    }
}

/// The value after a key's `:` or an entry's `- `, then its line break.
fn value(rng: &mut Rng, out: &mut String, indent: usize, depth: usize, in_sequence: bool) {
    let sep = if in_sequence { "" } else { " " };
    match rng.below(if depth == 0 { 4 } else { 8 }) {
        0 | 1 => {
            out.push_str(sep);
            out.push_str(rng.pick(SCALARS));
            if rng.below(6) == 0 {
                out.push_str(rng.pick(&["  # c", " ", "#c"]));
            }
            out.push('\n');
        }
        2 => {
            out.push_str(sep);
            out.push_str(rng.pick(&["|", "|-", "|+", ">", ">-", ">+"]));
            out.push('\n');
            let inner = indent + 1 + rng.below(3);
            for _ in 0..1 + rng.below(4) {
                match rng.below(6) {
                    0 => {}
                    1 => out.push_str(&" ".repeat(inner + rng.below(3))),
                    _ => {
                        out.push_str(&" ".repeat(inner + usize::from(rng.below(5) == 0)));
                        out.push_str(rng.pick(&[
                            "text",
                            "more text",
                            "a: b",
                            "# not a comment",
                            "x  ",
                        ]));
                    }
                }
                out.push('\n');
            }
        }
        3 => {
            if !in_sequence && rng.below(2) == 0 {
                out.push_str(": ");
                out.push_str(rng.pick(HOOKS));
                out.push('\n');
            } else {
                out.push('\n');
            }
        }
        4 if in_sequence => {
            // A compact mapping or sequence on the entry's line.
            let column = indent + 2;
            let mut nested = String::new();
            generate(rng, &mut nested, column, depth - 1);
            out.push_str(nested.trim_start_matches(' '));
        }
        5 if !in_sequence => {
            // A sequence at its key's indentation.
            out.push('\n');
            for _ in 0..1 + rng.below(3) {
                out.push_str(&" ".repeat(indent));
                out.push_str("- ");
                out.push_str(rng.pick(SCALARS));
                out.push('\n');
            }
        }
        _ => {
            out.push('\n');
            let inner = indent + 1 + rng.below(4);
            generate(rng, out, inner, depth - 1);
        }
    }
}

/// One random edit of `doc`.
fn mutate(rng: &mut Rng, doc: &str) -> String {
    let mut chars: Vec<char> = doc.chars().collect();
    let at = rng.below(chars.len() + 1);
    match rng.below(5) {
        0 if at < chars.len() => {
            chars.remove(at);
        }
        1 => {
            let piece = rng.pick(&[
                " ", "\t", ":", "#", "-", "'", "\"", "\n", "|", ">", "{", "}", "[", "]", ",", "&",
                "*", "!", "?", "%", "@", "`", "\\", "\r", "\u{85}", "\u{feff}", "\n  ", "- ", ": ",
                " #", "---\n", "<<: ",
            ]);
            for (i, c) in piece.chars().enumerate() {
                chars.insert(at + i, c);
            }
        }
        2 => {
            // Change a line's indentation.
            let start = chars[..at]
                .iter()
                .rposition(|&c| c == '\n')
                .map_or(0, |i| i + 1);
            if rng.below(2) == 0 {
                chars.insert(start, ' ');
            } else if chars.get(start) == Some(&' ') {
                chars.remove(start);
            }
        }
        3 => {
            // Duplicate a line.
            let text: String = chars.iter().collect();
            let lines: Vec<&str> = text.split('\n').collect();
            let line = lines[rng.below(lines.len())];
            return format!("{text}\n{line}");
        }
        _ => chars.truncate(at),
    }
    chars.into_iter().collect()
}

#[test]
fn generated_and_mutated_documents_are_read_exactly_or_left_alone() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut generated, mut generated_read, mut mutated_read) = (0, 0, 0);
    let mut mutants = 0;
    for _ in 0..3000 {
        let mut doc = String::new();
        generate(&mut rng, &mut doc, 0, 4);
        if rng.below(2) == 0 {
            doc.pop();
        }
        generated += 1;
        generated_read += usize::from(agrees(&doc));
        for _ in 0..2 {
            let mut mutant = mutate(&mut rng, &doc);
            if rng.below(2) == 0 {
                mutant = mutate(&mut rng, &mutant);
            }
            mutants += 1;
            mutated_read += usize::from(agrees(&mutant));
        }
    }
    // Both kinds exercise the reader, not only its refusals.
    assert!(
        generated_read * 3 >= generated,
        "read {generated_read} of {generated} generated documents"
    );
    assert!(
        mutated_read * 5 >= mutants,
        "read {mutated_read} of {mutants} mutated documents"
    );
}
