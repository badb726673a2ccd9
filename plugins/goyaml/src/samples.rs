//! Inputs for differential tests of the emitter against [`crate::reference`]:
//! hostile strings (every YAML special form, folding, escapes) and a small
//! deterministic generator of JSON trees built from them.

use serde_json::{Map, Value};

/// Strings that exercise every decision of the emitter: special words,
/// number- and timestamp-like text, indicators, leading and trailing
/// spaces, quotes, line breaks, control and non-ASCII characters, the
/// empty string and long texts that fold.
pub fn hostile_strings() -> Vec<String> {
    let fixed = [
        "",
        " ",
        "  ",
        "a",
        "plain",
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "Y",
        "N",
        "true",
        "False",
        "NULL",
        "null",
        "~",
        "-",
        "--",
        "---",
        "---x",
        "...",
        "...x",
        "?",
        "? x",
        "?x",
        ":",
        ": x",
        "x:",
        "x: y",
        "x:y",
        "#",
        "#x",
        "x #y",
        "x#y",
        "x # y",
        "- x",
        "-x",
        "'",
        "'x'",
        "\"",
        "\"x\"",
        "it's",
        "a\"b",
        "a\\b",
        "[x]",
        "{x}",
        "&x",
        "*x",
        "!x",
        "|x",
        ">x",
        "%x",
        "@x",
        "`x",
        ",x",
        "x,",
        " lead",
        "trail ",
        " both ",
        "a  b",
        "tab\there",
        "\t",
        "\tx",
        "x\t",
        "line\nbreak",
        "line\n",
        "\n",
        "\n\n",
        "x\n\n",
        "\nx",
        " \nx",
        "x \ny",
        "x\n y",
        "x\r\ny",
        "x\ry",
        "x\u{85}y",
        "x\u{2028}y",
        "x\u{2029}y",
        "\u{2028}",
        "a\u{a0}b",
        "\u{feff}x",
        "\u{7f}",
        "\u{80}",
        "\u{9f}",
        "\0",
        "\u{7}\u{8}\u{b}\u{c}\u{1b}",
        "\u{1}",
        "é",
        "unicodé ✓",
        "日本語",
        "😀",
        "x😀",
        "\u{fffd}",
        "\u{fffe}",
        "\u{ffff}",
        "\u{10ff82}",
        "\u{e000}",
        "\u{d7ff}",
        "0",
        "1",
        "-1",
        "+1",
        "017",
        "08",
        "0o17",
        "0x1F",
        "-0x1F",
        "0b101",
        "-0b101",
        "1_000",
        "_1",
        "1_",
        "190:20:30",
        "1:20.5",
        "12:30",
        "12:60",
        "1e3",
        "1E3",
        "1e+3",
        "1.5e-3",
        ".5",
        "-.5",
        "+.5",
        "1.",
        "1.0",
        ".inf",
        "-.Inf",
        ".NaN",
        ".nan",
        "+.inf",
        "1e",
        "e3",
        ".e3",
        "0.1.2",
        "1.2.3",
        "v1.2.3",
        "2024-01-01",
        "2024-1-1",
        "2024-01-01T10:00:00Z",
        "2024-01-01t10:00:00+02:00",
        "2024-01-01 10:00:00",
        "2023-02-29",
        "2024-02-29",
        "2024-13-01",
        "1e400",
        "1e-400",
        "9223372036854775808",
        "18446744073709551616",
        "0x",
        "100m",
        "100Mi",
        "1Gi",
        "0.5",
        "8080",
        "80:80",
        "1.2.3.4",
        "10.0.0.0/8",
        "::1",
        "a:b:c",
        "http://example.com:8080/x?y=z#frag",
        "app.kubernetes.io/name",
        "IfNotPresent",
        "<<",
        "=",
        "${VAR}",
        "$(VAR)",
        "%{x}",
        "Infinity",
        "inf",
        "NaN",
        "+",
        "+x",
        "-x-",
        ".",
        ".x",
        "_",
        "x_",
        "0xZZ",
        "1a",
        "1z",
        "1 2",
        "T",
        "t",
        "Z",
        "1T",
        "1t2",
        "2024-01-01T",
        "0:0",
        "0o",
        "0b",
        "1__0",
        "0_17",
        "00",
        "-0",
        "0.",
        "1:2:3:4",
    ];
    let mut out: Vec<String> = fixed.iter().map(|s| (*s).to_owned()).collect();
    let word = "abcdefghij";
    for length in [40, 70, 78, 79, 80, 81, 82, 90, 120, 200, 400] {
        let mut text = String::new();
        while text.len() < length {
            text.push_str(word);
            text.push(' ');
        }
        out.push(text.trim_end().to_owned());
        out.push(format!("{}  {}", "x".repeat(length), "y".repeat(20)));
        out.push(format!("{} {}", "x".repeat(length), "y".repeat(20)));
        out.push(format!("'{} {}", "x".repeat(length), "y'".repeat(20)));
        out.push(format!(
            "\t{} {} {}",
            "x".repeat(length),
            "y".repeat(30),
            "z".repeat(30)
        ));
        out.push(format!(
            " {} {} {} ",
            "x".repeat(length),
            "y".repeat(30),
            "z".repeat(30)
        ));
        out.push(format!(
            "{} é {} ✓ {}",
            "x".repeat(length),
            "ü".repeat(30),
            "z".repeat(30)
        ));
        out.push(format!(
            "{}\n{} {}\n",
            "x".repeat(length),
            "y".repeat(50),
            "z".repeat(50)
        ));
        out.push(format!("a: {}  {} #", "x".repeat(length), "y".repeat(40)));
    }
    out.push("x ".repeat(300));
    out.push(" ".repeat(100));
    out.push("é ".repeat(100));
    out
}

/// A deterministic pseudo-random generator (xorshift64*), so that failing
/// cases can be reproduced from their index.
pub struct Generator {
    state: u64,
}

impl Generator {
    /// A generator from a seed (any value; 0 is replaced).
    pub fn new(seed: u64) -> Generator {
        Generator {
            state: seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    /// The next number.
    pub fn number(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.number() % n as u64) as usize
        }
    }

    /// A string: one of `pool`, or a few of them glued with fragments that
    /// make YAML special forms.
    pub fn string(&mut self, pool: &[String]) -> String {
        const GLUE: &[&str] = &[
            " ", ": ", " #", "-", "'", "\"", "\n", "\t", "é", "_", ".", "0", "1", ":", "#", "  ",
        ];
        let pick = |g: &mut Generator| pool.get(g.below(pool.len())).cloned().unwrap_or_default();
        if self.below(3) > 0 {
            return pick(self);
        }
        let mut text = pick(self);
        for _ in 0..self.below(4) {
            text.push_str(
                GLUE.get(self.below(GLUE.len()))
                    .copied()
                    .unwrap_or_default(),
            );
            text.push_str(&pick(self));
        }
        text
    }

    /// A JSON tree at most `depth` levels deep, its strings from `pool`.
    pub fn value(&mut self, pool: &[String], depth: usize) -> Value {
        let choice = if depth == 0 {
            self.below(6)
        } else {
            self.below(10)
        };
        match choice {
            0 => Value::Null,
            1 => Value::Bool(self.below(2) == 1),
            2 => {
                let n = self.number() as i64 >> self.below(64);
                Value::from(n)
            }
            3 => {
                let f = f64::from_bits(self.number());
                let f = if f.is_finite() {
                    f
                } else {
                    self.below(1000) as f64 / 8.0
                };
                serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
            4 | 5 => Value::String(self.string(pool)),
            6 | 7 => {
                let len = self.below(5);
                Value::Array((0..len).map(|_| self.value(pool, depth - 1)).collect())
            }
            _ => {
                let len = self.below(6);
                let mut map = Map::new();
                for _ in 0..len {
                    let key = self.string(pool);
                    let value = self.value(pool, depth - 1);
                    map.insert(key, value);
                }
                Value::Object(map)
            }
        }
    }
}
