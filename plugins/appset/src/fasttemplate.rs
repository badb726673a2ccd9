//! Argo CD's default dialect (valyala/fasttemplate with `{{` and `}}`):
//! `{{ name }}` becomes the string parameter `name` (spaces around the
//! name ignored); a tag that names no string parameter stays as written.

use serde_json::{Map, Value};

/// `text` with its tags replaced from `params`; an error for a `{{`
/// without its `}}`, as fasttemplate gives.
pub fn render(text: &str, params: &Map<String, Value>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(format!(
                "cannot find end tag=\"}}}}\" in the template={text:?} starting from {:?}",
                &rest[start..]
            ));
        };
        let tag = &after[..end];
        match params.get(tag.trim()) {
            Some(Value::String(value)) if !tag.trim().is_empty() => out.push_str(value),
            _ => {
                out.push_str("{{");
                out.push_str(tag);
                out.push_str("}}");
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tags_are_replaced_by_string_parameters_and_others_left() {
        let params = json!({"path.basename": "web", "n": 3, "values.env": "prod"});
        let params = params.as_object().unwrap();
        assert_eq!(
            render("{{path.basename}}-{{ values.env }}", params).unwrap(),
            "web-prod"
        );
        // Unknown, non-string and empty tags stay as written.
        assert_eq!(
            render("{{nope}} {{ n }} {{}}", params).unwrap(),
            "{{nope}} {{ n }} {{}}"
        );
        assert_eq!(render("no tags", params).unwrap(), "no tags");
        assert!(
            render("{{open", params)
                .unwrap_err()
                .contains("cannot find end tag")
        );
    }
}
