//! Host-side bindings of the WIT contract (`wit/plugin.wit`).

/// The `renderer` world, and the interfaces both worlds import.
pub(crate) mod renderer {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "renderer",
    });
}

/// The `policy` world; its imports reuse the renderer world's bindings so
/// that one host implementation serves both (`cluster`, since 0.1.2, is
/// the policies' own).
pub(crate) mod policy {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "policy",
        with: {
            "kiln:plugin/types": super::renderer::kiln::plugin::types,
            "kiln:plugin/source": super::renderer::kiln::plugin::source,
            "kiln:plugin/log": super::renderer::kiln::plugin::log,
        },
    });
}

/// The `rule-policy` world (a policy that also exports `rules`, since
/// 0.1.1). Only its `rules` export is used: a component of this world is
/// instantiated through [`policy`] and its `rules` functions looked up beside.
pub(crate) mod rule_policy {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "rule-policy",
        with: {
            "kiln:plugin/types": super::renderer::kiln::plugin::types,
            "kiln:plugin/source": super::renderer::kiln::plugin::source,
            "kiln:plugin/log": super::renderer::kiln::plugin::log,
            "kiln:plugin/cluster": super::policy::kiln::plugin::cluster,
        },
    });
}
