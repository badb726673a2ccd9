//! The component glue: the request object from the host's input, one
//! manifest per parameter set back.

use kiln_plugin_sdk::{AppContext, Manifest, Param, RenderError, Renderer};

use crate::gotemplate::Budget;
use crate::request::{Request, render};

struct AppSet;

impl Renderer for AppSet {
    fn render(
        _ctx: AppContext,
        params: Vec<Param>,
        input: Vec<Manifest>,
    ) -> Result<Vec<Manifest>, RenderError> {
        if let Some(param) = params.first() {
            return Err(RenderError::InvalidParameters(format!(
                "unknown parameter {:?}: the appset plugin takes none",
                param.key
            )));
        }
        let [manifest] = input.as_slice() else {
            return Err(RenderError::Failed(format!(
                "expected one TemplateRequest as input, got {} manifests",
                input.len()
            )));
        };
        let object: serde_json::Value = serde_json::from_str(&manifest.content)
            .map_err(|e| RenderError::Failed(format!("the TemplateRequest is not JSON: {e}")))?;
        let request = Request::parse(&object).map_err(RenderError::Failed)?;
        let rendered = render(&request, Budget::default()).map_err(RenderError::Failed)?;
        Ok(rendered
            .into_iter()
            .enumerate()
            .map(|(i, value)| Manifest::new(value.to_string(), Some(format!("parameterSets[{i}]"))))
            .collect())
    }
}

kiln_plugin_sdk::export_renderer!(AppSet);
