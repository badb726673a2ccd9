//! The plugin's settings, as a project writes them:
//!
//! - `policy` (repeatable, required): a file or directory of Kyverno
//!   policies and exceptions in the policy source;
//! - `failureAction` (repeatable): `POLICY=Enforce` or `POLICY=Audit`
//!   (`POLICY` may hold wildcards: `*=Audit` for every policy), the action
//!   of the named policies' failures whatever they say themselves, for a
//!   project that wants to roll a policy out in audit first, or to enforce
//!   one its authors ship in audit. The first that names a policy wins.
//! - `now`: the review's time (RFC 3339), which `time_now`, `time_now_utc`
//!   and `time_since` with no end read (a plugin reads no clock); without
//!   it they fail, naming the setting. `kiln policy test` gives it.

use crate::model::PolicySet;
use crate::review::Outcome;
use crate::wildcard;

/// Parsed settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Files or directories of policies, in order.
    pub paths: Vec<String>,
    /// `(policy pattern, enforce)`, in order.
    pub actions: Vec<(String, bool)>,
    /// The review's time: Unix seconds and nanoseconds.
    pub now: Option<(i64, i64)>,
}

const KNOWN: &str = "known: policy, a file or directory of Kyverno policies; failureAction, POLICY=Enforce or POLICY=Audit; now, the review's time (RFC 3339)";

impl Settings {
    /// Parses `(key, value)` pairs; the error names the setting.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, String> {
        let mut settings = Settings::default();
        for (key, value) in pairs {
            match key {
                "policy" if value.is_empty() => {
                    return Err(
                        "setting `policy` is empty: name a file or directory of Kyverno policies"
                            .into(),
                    );
                }
                "policy" => settings.paths.push(value.to_owned()),
                "failureAction" => {
                    let (policy, action) = value.rsplit_once('=').ok_or_else(|| {
                        format!("setting `failureAction={value}`: expected POLICY=Enforce or POLICY=Audit")
                    })?;
                    let enforce = match action {
                        "Enforce" => true,
                        "Audit" => false,
                        other => {
                            return Err(format!(
                                "setting `failureAction={value}`: `{other}` is not Enforce or Audit"
                            ));
                        }
                    };
                    if policy.is_empty() {
                        return Err(format!(
                            "setting `failureAction={value}`: name a policy (or `*`)"
                        ));
                    }
                    settings.actions.push((policy.to_owned(), enforce));
                }
                "now" => {
                    let now = crate::functions::time::parse_now(value)
                        .map_err(|e| format!("setting `now={value}`: {e}"))?;
                    settings.now = Some(now);
                }
                other => return Err(format!("unknown setting `{other}` ({KNOWN})")),
            }
        }
        if settings.paths.is_empty() {
            return Err(format!("setting `policy` is required ({KNOWN})"));
        }
        Ok(settings)
    }

    /// Checks that every `failureAction` names a policy of `set` (a typo
    /// would otherwise leave the policy's own action in force unnoticed).
    pub fn check_actions(&self, set: &PolicySet) -> Result<(), String> {
        let names: Vec<&str> = set
            .policies
            .iter()
            .map(|p| p.metadata.name.as_str())
            .chain(set.validating.iter().map(|p| p.name.as_str()))
            .collect();
        for (pattern, enforce) in &self.actions {
            if !names.iter().any(|name| wildcard::matches(pattern, name)) {
                return Err(format!(
                    "setting `failureAction={pattern}={}`: no policy named `{pattern}` among those loaded",
                    if *enforce { "Enforce" } else { "Audit" }
                ));
            }
        }
        Ok(())
    }

    /// Applies the `failureAction` settings to a review's outcomes.
    pub fn apply(&self, outcomes: &mut [Outcome]) {
        if self.actions.is_empty() {
            return;
        }
        for outcome in outcomes {
            if let Some((_, enforce)) = self
                .actions
                .iter()
                .find(|(pattern, _)| wildcard::matches(pattern, &outcome.policy))
            {
                outcome.enforce = *enforce;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Status;

    #[test]
    fn settings_name_policies_and_actions() {
        let timed =
            Settings::parse([("policy", "p"), ("now", "2024-05-06T07:08:09.5+02:00")]).unwrap();
        assert_eq!(timed.now, Some((1_714_972_089, 500_000_000)));
        let settings = Settings::parse([
            ("policy", "kyverno/"),
            ("failureAction", "disallow-*=Enforce"),
            ("failureAction", "*=Audit"),
        ])
        .unwrap();
        assert_eq!(settings.paths, ["kyverno/"]);
        let outcome = |policy: &str| Outcome {
            policy: policy.into(),
            rule: "r".into(),
            object: 0,
            status: Status::Fail,
            enforce: false,
            message: String::new(),
        };
        let mut outcomes = vec![outcome("disallow-privileged"), outcome("require-labels")];
        outcomes[1].enforce = true;
        settings.apply(&mut outcomes);
        assert!(outcomes[0].enforce);
        assert!(!outcomes[1].enforce, "the first action naming it wins");
    }

    #[test]
    fn an_action_naming_no_loaded_policy_is_an_error() {
        let text = "apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: disallow-privileged}
spec:
  rules: []
";
        let set = PolicySet::of(crate::model::documents("p.yaml", text).unwrap());
        let settings = |pattern: &str| {
            Settings::parse([("policy", "p.yaml"), ("failureAction", pattern)]).unwrap()
        };
        assert!(settings("disallow-*=Enforce").check_actions(&set).is_ok());
        let error = settings("disalow-privileged=Audit")
            .check_actions(&set)
            .unwrap_err();
        assert!(
            error.contains("no policy named `disalow-privileged`"),
            "{error}"
        );
    }

    #[test]
    fn bad_settings_are_refused_naming_them() {
        for (pairs, says) in [
            (vec![], "`policy` is required"),
            (vec![("policy", "")], "`policy` is empty"),
            (
                vec![("policy", "p"), ("failureAction", "Enforce")],
                "POLICY=Enforce",
            ),
            (vec![("policy", "p"), ("failureAction", "p=Warn")], "`Warn`"),
            (
                vec![("policy", "p"), ("failureAction", "=Audit")],
                "name a policy",
            ),
            (
                vec![("policy", "p"), ("mode", "x")],
                "unknown setting `mode`",
            ),
            (
                vec![("policy", "p"), ("now", "yesterday")],
                "setting `now=yesterday`: parsing time",
            ),
        ] {
            let error = Settings::parse(pairs.iter().copied()).unwrap_err();
            assert!(error.contains(says), "{says}: {error}");
        }
    }
}
