//! The plugin contract: which world a component implements, against which
//! version of `kiln:plugin`, and whether this host accepts it.
//!
//! Inspection only parses the component's outer imports and exports
//! (`wasmparser`), so it is cheap and runs before anything is compiled.

use std::fmt;

use wasmparser::{Encoding, Parser, Payload};

use crate::digest::Digest;

/// The WIT package of the contract.
pub const PACKAGE: &str = "kiln:plugin";

/// The contract version this host speaks (`wit/plugin.wit`).
pub const VERSION: ContractVersion = ContractVersion {
    major: 0,
    minor: 1,
    patch: 2,
};

/// The optional interface a policy exports to report each rule's result
/// (since 0.1.1).
pub const RULES_INTERFACE: &str = "rules";

/// The worlds of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum World {
    /// Exports `kiln:plugin/render`.
    Renderer,
    /// Exports `kiln:plugin/review`.
    Policy,
}

impl World {
    /// The interface a component of this world exports.
    pub fn export_interface(self) -> &'static str {
        match self {
            World::Renderer => "render",
            World::Policy => "review",
        }
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            World::Renderer => "renderer",
            World::Policy => "policy",
        })
    }
}

/// A `MAJOR.MINOR.PATCH` version of the contract package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContractVersion {
    /// Major version.
    pub major: u64,
    /// Minor version.
    pub minor: u64,
    /// Patch version.
    pub patch: u64,
}

impl ContractVersion {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|p| p.parse::<u64>().ok());
        let version = ContractVersion {
            major: parts.next()??,
            minor: parts.next()??,
            patch: parts.next()??,
        };
        parts.next().is_none().then_some(version)
    }

    /// The versioning rule of `wit/plugin.wit`: same major, and while the
    /// major is 0, same minor. Patch releases only add.
    pub fn is_compatible_with(self, host: ContractVersion) -> bool {
        self.major == host.major && (self.major != 0 || self.minor == host.minor)
    }
}

impl fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl serde::Serialize for ContractVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a component says about itself.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ComponentInfo {
    /// The contract world it implements, if it exports one.
    pub world: Option<World>,
    /// The contract version of that export.
    pub contract_version: Option<ContractVersion>,
    /// Whether it also exports `kiln:plugin/rules` (a policy reporting each
    /// rule's result, since 0.1.1).
    pub reports_rules: bool,
    /// Names of the component's imports (interfaces), in order.
    pub imports: Vec<String>,
    /// Names of the component's exports, in order.
    pub exports: Vec<String>,
    /// Digest of the component's bytes.
    pub digest: Digest,
    /// Size in bytes.
    pub size: u64,
}

/// A component could not be inspected.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// A core module was given where a component is needed.
    #[error(
        "this is a core WebAssembly module, not a component; build for wasm32-wasip2 \
         (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    /// The bytes are not WebAssembly.
    #[error("not a WebAssembly component: {0}")]
    Malformed(String),
}

/// Reads a component's outer imports and exports.
pub fn inspect(bytes: &[u8]) -> Result<ComponentInfo, InspectError> {
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| malformed(e.message()))?;
        match payload {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding == Encoding::Module {
                    return Err(InspectError::CoreModule);
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    let import = import.map_err(|e| malformed(e.message()))?;
                    imports.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    let export = export.map_err(|e| malformed(e.message()))?;
                    exports.push(export.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    let contract_exports: Vec<_> = exports.iter().filter_map(|n| contract_export(n)).collect();
    // The world's own export decides; another of the package's (`rules`)
    // only when there is none.
    let contract = contract_exports
        .iter()
        .find(|(world, _)| world.is_some())
        .or(contract_exports.first())
        .copied();
    let reports_rules = exports.iter().any(|name| {
        name.strip_prefix(PACKAGE)
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.split_once('@'))
            .is_some_and(|(interface, _)| interface == RULES_INTERFACE)
    });
    Ok(ComponentInfo {
        world: contract.and_then(|(world, _)| world),
        contract_version: contract.map(|(_, version)| version),
        reports_rules,
        imports,
        exports,
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
    })
}

/// wasmparser's messages can run over several lines with byte dumps; the
/// first clause says it.
fn malformed(message: &str) -> InspectError {
    let first = message.lines().next().unwrap_or(message);
    InspectError::Malformed(
        first
            .split(" - expected")
            .next()
            .unwrap_or(first)
            .to_owned(),
    )
}

/// `kiln:plugin/render@0.1.0` -> (Some(Renderer), 0.1.0). An export of the
/// contract package with an unknown interface gives `None` as world.
fn contract_export(name: &str) -> Option<(Option<World>, ContractVersion)> {
    let rest = name.strip_prefix(PACKAGE)?.strip_prefix('/')?;
    let (interface, version) = rest.split_once('@')?;
    let version = ContractVersion::parse(version)?;
    let world = [World::Renderer, World::Policy]
        .into_iter()
        .find(|w| w.export_interface() == interface);
    Some((world, version))
}

/// Checks that a component implements `expected` in a version this host
/// accepts; the error explains the mismatch to a person.
pub fn check(info: &ComponentInfo, expected: World) -> Result<(), String> {
    match (info.world, info.contract_version) {
        (_, Some(version)) if !version.is_compatible_with(VERSION) => Err(format!(
            "it was built against {PACKAGE}@{version}, this host speaks {PACKAGE}@{VERSION} \
             (accepted: {PACKAGE}@{}.{}.x)",
            VERSION.major, VERSION.minor
        )),
        (Some(world), Some(_)) if world == expected => Ok(()),
        (Some(world), _) => Err(format!(
            "it is a {world}, but was given where a {expected} is expected"
        )),
        (None, _) => Err(format!(
            "it exports no {PACKAGE} world (exports: {}); a {expected} must export {PACKAGE}/{}@{}.{}.x",
            if info.exports.is_empty() {
                "none".to_owned()
            } else {
                info.exports.join(", ")
            },
            expected.export_interface(),
            VERSION.major,
            VERSION.minor,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioning_rule() {
        let v = |s| ContractVersion::parse(s).unwrap();
        assert!(v("0.1.0").is_compatible_with(VERSION));
        assert!(v("0.1.7").is_compatible_with(VERSION));
        assert!(!v("0.2.0").is_compatible_with(VERSION));
        assert!(!v("1.1.0").is_compatible_with(VERSION));
        assert!(v("1.4.0").is_compatible_with(v("1.2.0")));
        assert_eq!(ContractVersion::parse("0.1"), None);
    }

    #[test]
    fn recognizes_exports() {
        assert_eq!(
            contract_export("kiln:plugin/review@0.1.3"),
            Some((
                Some(World::Policy),
                ContractVersion {
                    major: 0,
                    minor: 1,
                    patch: 3
                }
            ))
        );
        assert_eq!(contract_export("wasi:cli/run@0.2.0"), None);
    }

    #[test]
    fn refuses_core_modules_and_garbage() {
        assert!(matches!(
            inspect(b"\0asm\x01\0\0\0"),
            Err(InspectError::CoreModule)
        ));
        assert!(matches!(inspect(b"hello"), Err(InspectError::Malformed(_))));
    }
}
