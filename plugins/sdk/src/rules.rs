//! The `rule-policy` world: a policy made of named rules that reports each
//! rule's result on each object (`kiln:plugin/rules`, since 0.1.1). Its
//! `review` is derived from those results, so a plugin writes one function.

use crate::bindings::exports::kiln::plugin::rules;
use crate::policy::{Finding, ObjectRef, ReviewRequest, Severity};
use crate::{AppContext, Manifest, Param};

pub use rules::{Outcome, RuleResult};

/// A policy of named rules. Implement it on a unit struct and export it with
/// [`export_rule_policy!`](crate::export_rule_policy): the component then
/// exports both `review` (the findings, derived from the results: `fail` is
/// an error, `warn` a warning, `error` fails the review) and `rules`.
pub trait RulePolicy {
    /// Checks the settings; the error explains what is wrong with them.
    fn validate_settings(settings: Vec<Param>) -> Result<(), String>;

    /// The result of every rule on every object it was evaluated for. An
    /// error means the policy could not do its job at all.
    fn review_rules(request: ReviewRequest) -> Result<Vec<RuleResult>, String>;
}

/// `review`, from the results of [`RulePolicy::review_rules`]: as the host
/// derives findings from them, so that both calls say the same.
#[doc(hidden)]
pub fn review<P: RulePolicy>(request: ReviewRequest) -> Result<Vec<Finding>, String> {
    let manifests = request.manifests.clone();
    // Each manifest parsed at most once, and only for a finding.
    let mut parsed: Vec<Option<Option<ObjectRef>>> = vec![None; manifests.len()];
    let mut object = |result: &RuleResult| -> Result<Option<ObjectRef>, String> {
        let Some(index) = result.manifest else {
            return Ok(None);
        };
        let slot = parsed.get_mut(index as usize).ok_or_else(|| {
            format!(
                "rule {} reported a result for manifest {index}, but the set has {}",
                name(result),
                manifests.len()
            )
        })?;
        Ok(slot
            .get_or_insert_with(|| {
                serde_json::from_str(&manifests[index as usize].content)
                    .ok()
                    .and_then(|value| ObjectRef::of(&value))
            })
            .clone())
    };
    let mut findings = Vec::new();
    for result in P::review_rules(request)? {
        let severity = match result.outcome {
            Outcome::Pass | Outcome::Skip => continue,
            Outcome::Fail => Severity::Error,
            Outcome::Warn => Severity::Warning,
            Outcome::Error => {
                let on = object(&result)?
                    .map(|o| {
                        format!(
                            " on {}/{}{}",
                            o.kind,
                            o.namespace.map(|ns| ns + "/").unwrap_or_default(),
                            o.name
                        )
                    })
                    .unwrap_or_default();
                return Err(format!("rule {}{on}: {}", name(&result), result.message));
            }
        };
        findings.push(Finding {
            object: object(&result)?,
            message: format!("[{}] {}", name(&result), result.message),
            field_path: result.field_path,
            severity,
        });
    }
    Ok(findings)
}

/// `POLICY/RULE`, or `POLICY` for a rule without a name.
fn name(result: &RuleResult) -> String {
    if result.rule.is_empty() {
        result.policy.clone()
    } else {
        format!("{}/{}", result.policy, result.rule)
    }
}

/// `rules.review-rules`, calling [`RulePolicy::review_rules`].
#[doc(hidden)]
pub fn review_rules<P: RulePolicy>(
    context: AppContext,
    manifests: Vec<Manifest>,
    settings: Vec<Param>,
) -> Result<Vec<RuleResult>, String> {
    P::review_rules(ReviewRequest {
        context,
        manifests,
        settings,
    })
}

/// Exports a [`RulePolicy`] as the component's `review` and `rules`
/// interfaces.
// rustfmt cannot format the `with_types_in` syntax stably.
#[rustfmt::skip]
#[macro_export]
macro_rules! export_rule_policy {
    ($policy:ty) => {
        const _: () = {
            struct KilnRulePolicyExport;
            impl $crate::bindings::exports::kiln::plugin::review::Guest for KilnRulePolicyExport {
                fn validate_settings(
                    settings: ::std::vec::Vec<$crate::Param>,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    <$policy as $crate::RulePolicy>::validate_settings(settings)
                }
                fn review(
                    request: $crate::ReviewRequest,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::Finding>, ::std::string::String>
                {
                    $crate::__review_from_rules::<$policy>(request)
                }
            }
            impl $crate::bindings::exports::kiln::plugin::rules::Guest for KilnRulePolicyExport {
                fn review_rules(
                    context: $crate::AppContext,
                    manifests: ::std::vec::Vec<$crate::Manifest>,
                    settings: ::std::vec::Vec<$crate::Param>,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::RuleResult>, ::std::string::String>
                {
                    $crate::__review_rules::<$policy>(context, manifests, settings)
                }
            }
            $crate::bindings::export!(KilnRulePolicyExport with_types_in $crate::bindings);
        };
    };
}
