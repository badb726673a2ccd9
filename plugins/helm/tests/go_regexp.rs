//! Go's regular expressions, property-tested against Go: patterns
//! generated from Go's RE2 syntax (valid and invalid: classes, escapes,
//! Unicode classes, flags, repetitions, Go's lenient literals, broken
//! groups…) are run by Sprig's regexp functions in one chart, rendered
//! here and by Helm v4.2.3's own engine (`tests/support/go_regexp.py`),
//! and each case must give the same text, or both must refuse the pattern
//! with Go's message.
//!
//! The generator is seeded (`KILN_REGEXP_SEED`, default fixed; the seed is
//! printed) and makes `KILN_REGEXP_CASES` patterns (default 2,000), each with
//! a few generated inputs.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

use kiln_helm::chart::DirSource;
use kiln_helm::{Options, render};
use require::{Tool, require};

/// Every regexp function of Sprig on one pattern (`mustRegexMatch` first:
/// an invalid pattern fails there, with Go's parser's message).
const TEMPLATE: &str = r#"{{- $p := .Values.p }}
{{- $ok := mustRegexMatch $p "" }}
{{- $r := list }}
{{- range .Values.inputs }}
{{- $r = append $r (list (regexFindAll $p . -1) (regexReplaceAll $p . "<${1}|$0|$1x|${name}>") (regexReplaceAllLiteral $p . "$0") (regexSplit $p . -1) (regexSplit $p . 2) (regexFind $p .) (regexMatch $p .) (regexFindAll $p . 1)) }}
{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: rx
data:
  r: {{ toJson $r | quote }}
"#;

/// A small deterministic generator (SplitMix64).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// One atom of a pattern.
    fn atom(&mut self, depth: usize) -> String {
        const LITERALS: &[&str] = &[
            "a", "b", "A", "é", "Σ", "σ", "日", "1", "_", "-", ".", " ", "k", "ſ", "K",
        ];
        const ESCAPES: &[&str] = &[
            r"\d",
            r"\D",
            r"\w",
            r"\W",
            r"\s",
            r"\S",
            r"\b",
            r"\B",
            r"\A",
            r"\z",
            r"\pL",
            r"\PL",
            r"\p{Greek}",
            r"\pN",
            r"\p{Lu}",
            r"\P{Han}",
            r"\p{^Greek}",
            r"\p{lu}",
            r"\p{Letter}",
            r"\p{Old_Italic}",
            r"\p{latin}",
            r"\p{Any}",
            r"\p{Assigned}",
            r"\p{ASCII}",
            r"\p{Cased_Letter}",
            r"\pZ",
            r"\p{Grek}",
            r"\p{SignWriting}",
            r"\.",
            r"\-",
            r"\{",
            r"\x41",
            r"\x{e9}",
            r"\101",
            r"\0",
            r"\n",
            r"\t",
            r"\Qa.b\E",
            r"\Q*",
            // Refused by Go:
            r"\1",
            r"\Z",
            r"\e",
            r"\y",
            r"\p{Nope}",
            r"\x{110000}",
            r"\pX",
            r"\C",
        ];
        const CLASSES: &[&str] = &[
            "[a-c]",
            "[^a]",
            r"[\w-\.]",
            r"[\d-]",
            "[-a]",
            "[a-]",
            "[]a]",
            "[^]a]",
            "[[:alpha:]]",
            "[[:^digit:]1]",
            "[[:word:]]",
            r"[\pL\d]",
            r"[^\PL]",
            "[é-ü]",
            r"[\x{61}-\x{63}]",
            "[.]",
            "[$^]",
            "[a-c&&b]",
            "[[]",
            "[σ]",
            // Refused by Go:
            "[z-a]",
            "[a",
            "[[:nope:]]",
            "[]",
            "[^]",
        ];
        const OTHERS: &[&str] = &[
            "^", "$", ".", "{", "}", "{a}", "{1,x}", "a{,2}", "x{2}{3}", "(?i)", "(?U)", "(?-i)",
            "(?s)", // Refused by Go:
            "*", ")", "(", "a**", "(?P<>a)", "(?<n", "x{1001}", "(?x)a", "(?i",
        ];
        match self.below(if depth > 2 { 4 } else { 7 }) {
            0 | 1 => self.pick(LITERALS).to_owned(),
            2 => self.pick(ESCAPES).to_owned(),
            3 => {
                if self.below(3) == 0 {
                    self.pick(OTHERS).to_owned()
                } else {
                    self.pick(CLASSES).to_owned()
                }
            }
            4 => {
                let open = self.pick(&[
                    "(",
                    "(?:",
                    "(?P<name>",
                    "(?<name>",
                    "(?i)(",
                    "(?i:",
                    "(?s:",
                    "(?m:",
                    "(?U:",
                    "(?-i:",
                    "(?is)(",
                ]);
                format!("{open}{})", self.pattern(depth + 1))
            }
            5 => format!("{}|{}", self.pattern(depth + 1), self.pattern(depth + 1)),
            _ => {
                let op = self.pick(&[
                    "*", "+", "?", "*?", "+?", "??", "{2}", "{1,}", "{0,2}", "{2,3}?", "{3,1}",
                ]);
                format!("{}{op}", self.atom(depth + 1))
            }
        }
    }

    fn pattern(&mut self, depth: usize) -> String {
        let n = 1 + self.below(3);
        let mut p = String::new();
        for _ in 0..n {
            p.push_str(&self.atom(depth));
        }
        if depth == 0 && self.below(5) == 0 {
            p.insert_str(
                0,
                self.pick(&["(?i)", "(?s)", "(?m)", "(?U)", "(?ims)", "^"]),
            );
        }
        p
    }

    fn input(&mut self) -> String {
        const CHARS: &[&str] = &[
            "a", "b", "A", "B", "é", "É", "Σ", "σ", "ς", "日", "1", "9", "_", "-", ".", " ", "\n",
            "{", "}", "k", "K", "ſ", "\u{212A}", "$", "x",
        ];
        (0..self.below(9)).map(|_| self.pick(CHARS)).collect()
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The results our engine renders for `case` (the ConfigMap's `r`), or
/// its error.
fn ours(chart: &Path, case: &serde_json::Value) -> Result<String, String> {
    // A chart of its own (the engine caches what it reads by path).
    let dir = chart.with_file_name(format!("case-{}", std::process::id() ^ rand_id(case)));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::copy(chart.join("Chart.yaml"), dir.join("Chart.yaml")).unwrap();
    std::fs::copy(chart.join("templates/r.yaml"), dir.join("templates/r.yaml")).unwrap();
    std::fs::write(dir.join("values.yaml"), case.to_string()).unwrap();
    let result = render(&DirSource(dir.clone()), ".", &Options::default());
    std::fs::remove_dir_all(&dir).unwrap();
    let docs = result.map_err(|e| e.to_string())?;
    let text: String = docs.iter().map(|d| d.text.as_str()).collect();
    Ok(results(&text))
}

/// A number naming a case's directory.
fn rand_id(case: &serde_json::Value) -> u32 {
    case.to_string().bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

/// The ConfigMap's `r` in a rendered text.
fn results(text: &str) -> String {
    let object: serde_json::Value = serde_yaml::from_str(text).unwrap();
    object["data"]["r"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn generated_patterns_match_as_gos_regexp() {
    let Some(python) = require(Tool::HelmPython) else {
        return;
    };
    let seed = env_number("KILN_REGEXP_SEED", 20_261_207);
    let count = env_number("KILN_REGEXP_CASES", 2000) as usize;
    eprintln!(
        "regexp property test: seed {seed}, {count} patterns (KILN_REGEXP_SEED, KILN_REGEXP_CASES)"
    );
    let mut g = Gen(seed);
    let cases: Vec<serde_json::Value> = (0..count)
        .map(|_| {
            let p = g.pattern(0);
            let inputs: Vec<String> = (0..3).map(|_| g.input()).collect();
            serde_json::json!({"p": p, "inputs": inputs})
        })
        .collect();

    let dir: PathBuf = std::env::temp_dir().join(format!("kiln-go-regexp-{}", std::process::id()));
    let chart = dir.join("chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: rx\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(chart.join("templates/r.yaml"), TEMPLATE).unwrap();
    let cases_path = dir.join("cases.json");
    std::fs::write(&cases_path, serde_json::to_string(&cases).unwrap()).unwrap();
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/support/go_regexp.py");
    let oracle = Command::new(&python)
        .arg(&harness)
        .arg(&chart)
        .arg(&cases_path)
        .output()
        .unwrap();
    assert!(
        oracle.status.success(),
        "the oracle failed: {}",
        String::from_utf8_lossy(&oracle.stderr)
    );
    let answers: Vec<serde_json::Value> = String::from_utf8(oracle.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), cases.len());

    let (mut wrong, mut refused) = (Vec::new(), 0);
    for (case, answer) in cases.iter().zip(&answers) {
        let pattern = case["p"].as_str().unwrap();
        let got = ours(&chart, case);
        match (&answer["error"], got) {
            (serde_json::Value::String(go), Err(e)) => {
                refused += 1;
                let go_message = go
                    .split("error calling mustRegexMatch: ")
                    .nth(1)
                    .unwrap_or(go);
                if !e.contains(go_message) {
                    wrong.push(format!(
                        "{pattern:?}: both refuse, Go says {go_message:?}, we say {e:?}"
                    ));
                }
            }
            (serde_json::Value::String(go), Ok(_)) => {
                wrong.push(format!("{pattern:?}: Go refuses ({go}), we accept"));
            }
            (_, Err(e)) => wrong.push(format!("{pattern:?}: Go accepts, we refuse: {e}")),
            (_, Ok(text)) => {
                let want = results(
                    answer["ok"]["rx/templates/r.yaml"]
                        .as_str()
                        .unwrap_or_default(),
                );
                if text != want {
                    wrong.push(format!(
                        "{pattern:?} on {}:\n    go   {}\n    ours {}",
                        case["inputs"], want, text
                    ));
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        wrong.is_empty(),
        "{} of {} patterns differ from Go's regexp (seed {seed}):\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
    // The generator must reach both sides of the parser.
    assert!(
        refused > count / 20 && refused < count / 2,
        "{refused} of {count} refused"
    );
}
