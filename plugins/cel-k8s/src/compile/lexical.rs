//! A lexical pre-check run before the parser: the parser recurses once per
//! nesting level before it checks its own limit, so a hostile expression of
//! thousands of brackets or unary operators would overflow the stack first.

/// What the scan measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    /// The deepest nesting of brackets (`(`, `[`, `{`) outside string
    /// literals, a run of unary operators (`!`, `-`) counting as that many
    /// levels.
    pub nesting: usize,
    /// Operator tokens outside string literals (a chain of binary operators
    /// nests the parse tree one level per operator).
    pub operators: usize,
}

#[cfg(test)]
fn nesting(source: &str) -> usize {
    shape(source).nesting
}

/// Scans `source` outside its string literals.
pub(super) fn shape(source: &str) -> Shape {
    let bytes = source.as_bytes();
    let (mut depth, mut max, mut run, mut i) = (0usize, 0usize, 0usize, 0usize);
    let mut operators = 0usize;
    let mut in_operator = false;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\'' | b'"' => {
                // Skip a string literal (single or triple quoted).
                let triple = bytes.get(i..i + 3) == Some(&[b, b, b][..]);
                let raw = i > 0 && matches!(bytes[i - 1], b'r' | b'R');
                i += if triple { 3 } else { 1 };
                while i < bytes.len() {
                    if bytes[i] == b'\\' && !raw {
                        i += 2;
                        continue;
                    }
                    if triple {
                        if bytes.get(i..i + 3) == Some(&[b, b, b][..]) {
                            i += 2;
                            break;
                        }
                    } else if bytes[i] == b {
                        break;
                    }
                    i += 1;
                }
                run = 0;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth + run);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'!' | b'-' => {
                run += 1;
                max = max.max(depth + run);
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => run = 0,
        }
        if !matches!(b, b'!' | b'-' | b' ' | b'\t' | b'\n' | b'\r') {
            run = 0;
        }
        let operator = matches!(
            b,
            b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'!' | b'&' | b'|' | b'?'
        );
        if operator && !in_operator {
            operators += 1;
        }
        in_operator = operator;
        i += 1;
    }
    Shape {
        nesting: max,
        operators,
    }
}

#[cfg(test)]
mod tests {
    use super::{nesting, shape};

    #[test]
    fn counts_brackets_and_unary_runs_outside_strings() {
        assert_eq!(nesting("a.b(c[0], {'k': (1)})"), 3);
        assert_eq!(nesting("'((((' + \"[[[\" + '''(((''' "), 0);
        assert_eq!(nesting("!!!!x"), 4);
        assert_eq!(nesting("a - b - c"), 1);
        assert_eq!(nesting("'\\'(' + (x)"), 1);
        assert_eq!(shape("a + b >= c && !d").operators, 4);
        assert_eq!(shape("'+++' + x").operators, 1);
    }
}
