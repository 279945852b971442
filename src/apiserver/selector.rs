//! Label and field selectors, as list and watch requests carry them.
//!
//! Follows apimachinery's `pkg/labels/selector.go` (set-based and equality requirements) and
//! `pkg/fields/selector.go`. The field selectors every resource supports are
//! `metadata.name` and `metadata.namespace`; any other field is a 400, as the server answers
//! for a field the resource does not index.

use serde_json::Value;

use super::errors::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed `labelSelector` and `fieldSelector`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Selector {
    labels: Vec<(String, Op)>,
    fields: Vec<(String, Op)>,
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| ApiError::bad_request(format!("bad set in selector {whole:?}")))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

fn parse_label_req(req: &str) -> Result<(String, Op), ApiError> {
    let r = req.trim();
    let bad = || ApiError::bad_request(format!("unable to parse requirement {r:?}"));
    if let Some(k) = r.strip_prefix('!') {
        return Ok((k.trim().to_string(), Op::DoesNotExist));
    }
    for (tok, f) in [
        (" notin ", Op::NotIn as fn(Vec<String>) -> Op),
        (" in ", Op::In as fn(Vec<String>) -> Op),
    ] {
        if let Some((k, rest)) = r.split_once(tok) {
            return Ok((k.trim().to_string(), f(parse_set(rest, r)?)));
        }
    }
    let (k, op) = if let Some((k, v)) = r.split_once("!=") {
        (k, Op::NotEq(v.trim().to_string()))
    } else if let Some((k, v)) = r.split_once("==") {
        (k, Op::Eq(v.trim().to_string()))
    } else if let Some((k, v)) = r.split_once('=') {
        (k, Op::Eq(v.trim().to_string()))
    } else {
        (r, Op::Exists)
    };
    let k = k.trim();
    if k.is_empty() || k.contains(|c: char| c.is_whitespace() || "()!=".contains(c)) {
        return Err(bad());
    }
    Ok((k.to_string(), op))
}

impl Selector {
    /// Parses the two query parameters; absent or empty means "everything".
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self, ApiError> {
        let mut s = Selector::default();
        for req in labels
            .filter(|l| !l.trim().is_empty())
            .map(split_top)
            .unwrap_or_default()
        {
            s.labels.push(parse_label_req(req)?);
        }
        for req in fields
            .filter(|f| !f.trim().is_empty())
            .map(split_top)
            .unwrap_or_default()
        {
            let (k, op) = if let Some((k, v)) = req.split_once("!=") {
                (k, Op::NotEq(v.trim().to_string()))
            } else if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
                (k, Op::Eq(v.trim().to_string()))
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector {req:?}"
                )));
            };
            let k = k.trim();
            if k != "metadata.name" && k != "metadata.namespace" {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k} (only metadata.name and metadata.namespace)"
                )));
            }
            s.fields.push((k.to_string(), op));
        }
        Ok(s)
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let meta = &obj["metadata"];
        let check = |have: Option<&str>, op: &Op| match op {
            Op::Eq(v) => have == Some(v.as_str()),
            Op::NotEq(v) => have != Some(v.as_str()),
            Op::In(set) => have.is_some_and(|h| set.iter().any(|v| v == h)),
            Op::NotIn(set) => !have.is_some_and(|h| set.iter().any(|v| v == h)),
            Op::Exists => have.is_some(),
            Op::DoesNotExist => have.is_none(),
        };
        self.labels
            .iter()
            .all(|(k, op)| check(meta["labels"][k.as_str()].as_str(), op))
            && self.fields.iter().all(|(k, op)| {
                let field = k.strip_prefix("metadata.").unwrap_or(k);
                check(meta[field].as_str(), op)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "n", "labels": labels}})
    }

    #[test]
    fn equality_set_and_existence_requirements_all_apply() {
        let s = Selector::parse(Some("app=web,tier in (a, b),!legacy,env!=prod"), None).unwrap();
        assert!(s.matches(&obj(json!({"app": "web", "tier": "b"}))));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "c"}))));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "a", "legacy": "1"}))));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "a", "env": "prod"}))));
        assert!(
            Selector::parse(Some("x notin (y)"), None)
                .unwrap()
                .matches(&obj(json!({})))
        );
    }

    #[test]
    fn field_selectors_support_name_and_namespace_only() {
        let s = Selector::parse(None, Some("metadata.name=a,metadata.namespace!=m")).unwrap();
        assert!(s.matches(&obj(json!({}))));
        assert_eq!(
            Selector::parse(None, Some("spec.x=1")).unwrap_err().code,
            400
        );
        assert_eq!(Selector::parse(Some("a b"), None).unwrap_err().code, 400);
    }
}
