//! The work one rule may do on one object. Most of a rule's cost is bounded
//! by the sizes of its policy and the object; a `foreach` multiplies them
//! (each element gets its own copy of the rule's context, each variable of
//! each element a JMESPath copy of it, and foreach nest up to 8 deep). The engine charges that work here, and a rule over its
//! budget ends in `error` naming the policy and rule (fail closed), well
//! before the plugin's deadline would stop the whole review without saying
//! which rule was to blame.

use std::cell::Cell;

/// Steps one rule may take on one object: JSON nodes copied into foreach
/// element contexts and into JMESPath searches, plus one per copy. A pod's
/// rule over its containers takes thousands; the budget is about a second
/// of work in the sandbox.
pub const MAX_STEPS: u64 = 2_000_000;

thread_local! {
    static LEFT: Cell<u64> = const { Cell::new(MAX_STEPS) };
}

/// Gives the next rule a full budget.
pub fn reset() {
    LEFT.with(|left| left.set(MAX_STEPS));
}

/// Spends `steps`; an error once the budget is spent.
pub fn charge(steps: u64) -> Result<(), String> {
    LEFT.with(|left| match left.get().checked_sub(steps) {
        Some(rest) => {
            left.set(rest);
            Ok(())
        }
        None => {
            left.set(0);
            Err(format!(
                "the rule's evaluation took more than {MAX_STEPS} steps (a foreach over too many elements, or nested too deep): stopped"
            ))
        }
    })
}

/// What copying `value` costs: its JSON nodes, and a step per 64 bytes of
/// its strings and keys, counted up to `limit`.
pub fn weight(value: &serde_json::Value, limit: u64) -> u64 {
    let mut count = 0u64;
    let mut stack = vec![value];
    let bytes = |n: usize| (n / 64) as u64;
    while let Some(v) = stack.pop() {
        count += 1;
        match v {
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    count += bytes(key.len());
                    stack.push(value);
                }
            }
            serde_json::Value::String(text) => count += bytes(text.len()),
            _ => {}
        }
        if count >= limit {
            return limit;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_spent_then_refused_until_reset() {
        reset();
        assert!(charge(MAX_STEPS - 1).is_ok());
        assert!(charge(1).is_ok());
        let error = charge(1).unwrap_err();
        assert!(error.contains("more than"), "{error}");
        reset();
        assert!(charge(5).is_ok());
        assert_eq!(weight(&serde_json::json!({"a": [1, 2, {"b": 3}]}), 100), 6);
        assert_eq!(weight(&serde_json::json!([1, 2, 3, 4]), 3), 3);
        // Long strings weigh what copying them costs.
        assert_eq!(weight(&serde_json::json!("x".repeat(640)), 100), 11);
    }
}
