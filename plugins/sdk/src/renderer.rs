//! The renderer world.

use crate::bindings::exports::kiln::plugin::render;
use crate::source::{SourceError, describe};
use crate::yaml::YamlError;
use crate::{AppContext, Manifest, Param};

pub use render::{InputError, RenderError};

/// A manifest renderer. Implement it on a unit struct and export it with
/// [`export_renderer!`](crate::export_renderer).
pub trait Renderer {
    /// Renders the Application: `params` are the operator's parameters for
    /// this plugin in order, `input` the manifests of the previous plugin of
    /// the chain (empty for the first). The result replaces `input`.
    fn render(
        context: AppContext,
        params: Vec<Param>,
        input: Vec<Manifest>,
    ) -> Result<Vec<Manifest>, RenderError>;
}

impl From<SourceError> for RenderError {
    fn from(error: SourceError) -> Self {
        match &error {
            SourceError::NotFound(path)
            | SourceError::IsADirectory(path)
            | SourceError::NotADirectory(path) => RenderError::InvalidInput(InputError {
                file: Some(path.clone()),
                line: None,
                message: describe(&error),
            }),
            _ => RenderError::Failed(describe(&error)),
        }
    }
}

impl From<YamlError> for RenderError {
    fn from(error: YamlError) -> Self {
        RenderError::InvalidInput(InputError {
            file: error.file,
            line: error.line,
            message: error.message,
        })
    }
}

impl RenderError {
    /// An error located in a file (and optionally a line).
    pub fn input(file: impl Into<String>, line: Option<u32>, message: impl Into<String>) -> Self {
        RenderError::InvalidInput(InputError {
            file: Some(file.into()),
            line,
            message: message.into(),
        })
    }
}

/// Exports a [`Renderer`] as the component's `render` interface.
// rustfmt cannot format the `with_types_in` syntax stably.
#[rustfmt::skip]
#[macro_export]
macro_rules! export_renderer {
    ($renderer:ty) => {
        const _: () = {
            struct KilnRendererExport;
            impl $crate::bindings::exports::kiln::plugin::render::Guest for KilnRendererExport {
                fn render(
                    context: $crate::AppContext,
                    params: ::std::vec::Vec<$crate::Param>,
                    input: ::std::vec::Vec<$crate::Manifest>,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::Manifest>, $crate::RenderError>
                {
                    <$renderer as $crate::Renderer>::render(context, params, input)
                }
            }
            $crate::bindings::export!(KilnRendererExport with_types_in $crate::bindings);
        };
    };
}
