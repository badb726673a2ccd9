//! Which checks apply at which level and version, in Pod Security
//! Admission's order (baseline checks, then restricted ones, each by id),
//! with restricted checks replacing the baseline checks they override.

use super::{Outcome, Pod, containers, identity, pod_level, profiles};
use crate::level::Level;

/// A check's function: `None` when the pod passes.
pub type CheckFn = fn(&Pod<'_>) -> Outcome;

/// One behaviour of a check, from a minor version on (until the next one).
#[derive(Debug, Clone, Copy)]
pub struct Versioned {
    /// The first `v1.N` this behaviour applies to.
    pub minimum: u32,
    /// The check.
    pub check: CheckFn,
    /// Baseline checks this (restricted) behaviour replaces.
    pub overrides: &'static [&'static str],
}

/// A check of the standards.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// Its id, as Pod Security Admission names it (`privileged`, ...).
    pub id: &'static str,
    /// The level it belongs to.
    pub level: Level,
    /// Its behaviours, by increasing minimum version.
    pub versions: &'static [Versioned],
}

impl Check {
    /// The behaviour at minor version `minor`, if the check exists there.
    pub fn at(&self, minor: u32) -> Option<&Versioned> {
        self.versions.iter().rev().find(|v| v.minimum <= minor)
    }
}

const fn v(minimum: u32, check: CheckFn) -> Versioned {
    Versioned {
        minimum,
        check,
        overrides: &[],
    }
}

const fn replacing(minimum: u32, check: CheckFn, overrides: &'static [&'static str]) -> Versioned {
    Versioned {
        minimum,
        check,
        overrides,
    }
}

/// Every check, baseline then restricted, each sorted by id (Go's byte
/// order), which is the order Pod Security Admission reports them in.
pub static CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        versions: &[v(0, profiles::app_armor_profile)],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        versions: &[v(0, containers::capabilities_baseline)],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        versions: &[v(0, pod_level::host_namespaces)],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        versions: &[v(0, pod_level::host_path_volumes)],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        versions: &[v(0, containers::host_ports)],
    },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        versions: &[v(34, containers::host_probes_and_host_lifecycle)],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        versions: &[v(0, containers::privileged)],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        versions: &[
            v(0, containers::proc_mount_1_0),
            v(35, containers::proc_mount_1_35_baseline),
        ],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        versions: &[
            v(0, identity::se_linux_options_1_0),
            v(31, identity::se_linux_options_1_31),
        ],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        versions: &[
            v(0, profiles::seccomp_baseline_1_0),
            v(19, profiles::seccomp_baseline_1_19),
        ],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        versions: &[
            v(0, pod_level::sysctls_1_0),
            v(27, pod_level::sysctls_1_27),
            v(29, pod_level::sysctls_1_29),
            v(32, pod_level::sysctls_1_32),
            v(37, pod_level::sysctls_1_37),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        versions: &[v(0, containers::windows_host_process)],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        versions: &[
            v(8, containers::allow_privilege_escalation_1_8),
            v(25, containers::allow_privilege_escalation_1_25),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        versions: &[
            replacing(
                22,
                containers::capabilities_restricted_1_22,
                &["capabilities_baseline"],
            ),
            replacing(
                25,
                containers::capabilities_restricted_1_25,
                &["capabilities_baseline"],
            ),
        ],
    },
    Check {
        id: "procMount_restricted",
        level: Level::Restricted,
        versions: &[replacing(35, containers::proc_mount_1_0, &["procMount"])],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        versions: &[replacing(
            0,
            pod_level::restricted_volumes,
            &["hostPathVolumes"],
        )],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        versions: &[
            v(0, identity::run_as_non_root_1_0),
            v(35, identity::run_as_non_root_1_35),
        ],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        versions: &[
            v(23, identity::run_as_user_1_23),
            v(35, identity::run_as_user_1_35),
        ],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        versions: &[
            replacing(
                19,
                profiles::seccomp_restricted_1_19,
                &["seccompProfile_baseline"],
            ),
            replacing(
                25,
                profiles::seccomp_restricted_1_25,
                &["seccompProfile_baseline"],
            ),
        ],
    },
];

/// The checks that apply at `level` and minor version `minor` (already
/// clamped to the newest known), with their ids, in reporting order.
pub fn checks_for(level: Level, minor: u32) -> Vec<(&'static str, CheckFn)> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let overridden: Vec<&str> = if level == Level::Restricted {
        CHECKS
            .iter()
            .filter(|c| c.level == Level::Restricted)
            .filter_map(|c| c.at(minor))
            .flat_map(|v| v.overrides.iter().copied())
            .collect()
    } else {
        Vec::new()
    };
    CHECKS
        .iter()
        .filter(|c| c.level <= level)
        .filter(|c| c.level == level || !overridden.contains(&c.id))
        .filter_map(|c| c.at(minor).map(|v| (c.id, v.check)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::level::LATEST_MINOR;

    #[test]
    fn checks_are_in_psa_order() {
        for level in [Level::Baseline, Level::Restricted] {
            let ids: Vec<_> = CHECKS
                .iter()
                .filter(|c| c.level == level)
                .map(|c| c.id)
                .collect();
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            assert_eq!(ids, sorted);
        }
        assert_eq!(CHECKS.len(), 19);
    }

    #[test]
    fn restricted_replaces_what_it_overrides() {
        let ids = |level, minor| -> Vec<&str> {
            checks_for(level, minor).into_iter().map(|c| c.0).collect()
        };
        let latest = ids(Level::Restricted, LATEST_MINOR);
        assert!(!latest.contains(&"hostPathVolumes"));
        assert!(!latest.contains(&"capabilities_baseline"));
        assert!(!latest.contains(&"seccompProfile_baseline"));
        assert!(!latest.contains(&"procMount"));
        assert_eq!(latest.len(), 15);
        // Before v1.19 restricted still checks the seccomp annotations.
        assert!(ids(Level::Restricted, 18).contains(&"seccompProfile_baseline"));
        assert!(ids(Level::Restricted, 21).contains(&"capabilities_baseline"));
        assert!(ids(Level::Restricted, 34).contains(&"procMount"));
        assert!(!ids(Level::Baseline, 33).contains(&"hostProbesAndHostLifecycle"));
        assert!(ids(Level::Privileged, LATEST_MINOR).is_empty());
    }
}
