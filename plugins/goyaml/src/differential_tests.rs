//! The emitter against the frozen reference emitter, byte for byte.

use serde_json::{Value, json};

use crate::samples::{Generator, hostile_strings};
use crate::{document, reference};

fn assert_same(value: &Value) {
    assert_eq!(
        document(value),
        reference::document(value),
        "differs for {value}"
    );
}

#[test]
fn hostile_strings_print_as_before_as_values_keys_and_list_items() {
    for s in hostile_strings() {
        assert_same(&Value::String(s.clone()));
        assert_same(&json!({ s.clone(): s.clone() }));
        assert_same(&json!([s.clone(), [s.clone()], { "k": [s.clone()] }]));
        // Deeper, so that folding starts at other columns.
        assert_same(&json!({"a": {"bb": {"ccc": {"dddd": s.clone(), "list": [s.clone()]}}}}));
    }
}

#[test]
fn generated_trees_print_as_before() {
    let pool = hostile_strings();
    for case in 0..4000u64 {
        let mut generator = Generator::new(case);
        let value = generator.value(&pool, 1 + case as usize % 5);
        assert_same(&value);
    }
}

#[test]
fn numbers_print_as_before() {
    for n in [
        json!(0),
        json!(-1),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1.5),
        json!(1e21),
        json!(1e-7),
        json!(-0.0),
        json!(123456.0),
        json!(0.0001),
    ] {
        assert_same(&n);
        assert_same(&json!({ "n": [n.clone()] }));
    }
}
