//! Label and field selectors, as list and watch requests carry them.
//!
//! Follows apimachinery v0.36.3 `pkg/labels/selector.go` (its lexer, parser and
//! `NewRequirement` checks: keys are qualified names, values are label values, a set is never
//! empty, `>` and `<` take one integer) and `pkg/fields/selector.go`. The field selectors every
//! resource supports are `metadata.name` and `metadata.namespace`; any other field is a 400, as
//! the server answers for a field the resource does not index.
//!
//! A selector is parsed once per request, before the storage lock is taken; matching is linear
//! in the number of requirements (a label is a binary search in the object's sorted labels, set
//! membership a `BTreeSet` lookup), so matching one object costs at most
//! [`MAX_REQUIREMENTS`] lookups.
//!
//! # Differences from upstream
//! - Field selector values may not contain the escapes `\,`, `\=` and `\\` of upstream's field
//!   selector syntax: names and namespaces never contain those characters.
//! - A selector of more than [`MAX_REQUIREMENTS`] requirements, or longer than
//!   [`MAX_SELECTOR_BYTES`], is a 400 that says so. Upstream has no such cap (only the request
//!   line's, 1 MiB of headers); here it bounds the work one object's match can cost, so that a
//!   list streaming through a selector gives other requests a turn after every batch.

use std::collections::BTreeSet;

use super::errors::ApiError;
use super::storage::Meta;
use super::validation::{is_label_value, is_qualified_name};

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// A parsed `labelSelector` and `fieldSelector`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Selector {
    labels: Vec<(String, Op)>,
    fields: Vec<(String, Op)>,
}

/// One lexer token of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Ident(&'a str),
    In,
    NotIn,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
}

fn is_special(c: char) -> bool {
    "!=<>(),".contains(c)
}

/// Splits a label selector into tokens, as upstream's `Lexer` does.
fn lex(s: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if is_special(c) {
            let two = rest.get(..2);
            let (tok, len) = match (c, two) {
                (_, Some("!=")) => (Token::NotEq, 2),
                (_, Some("==")) => (Token::DoubleEq, 2),
                ('!', _) => (Token::Not, 1),
                ('=', _) => (Token::Eq, 1),
                ('>', _) => (Token::Gt, 1),
                ('<', _) => (Token::Lt, 1),
                ('(', _) => (Token::Open, 1),
                (')', _) => (Token::Close, 1),
                _ => (Token::Comma, 1),
            };
            out.push(tok);
            rest = &rest[len..];
            continue;
        }
        let end = rest
            .find(|c: char| c.is_whitespace() || is_special(c))
            .unwrap_or(rest.len());
        out.push(match &rest[..end] {
            "in" => Token::In,
            "notin" => Token::NotIn,
            word => Token::Ident(word),
        });
        rest = &rest[end..];
    }
    out
}

/// The longest selector accepted, each of `labelSelector` and `fieldSelector` (see the
/// differences from upstream).
pub(crate) const MAX_SELECTOR_BYTES: usize = 64 * 1024;

/// The most requirements one selector may have (see the differences from upstream).
pub(crate) const MAX_REQUIREMENTS: usize = 256;

fn too_big(which: &str, why: String) -> ApiError {
    ApiError::bad_request(format!(
        "the {which} is too large for this server: {why} (at most {MAX_REQUIREMENTS} requirements and {MAX_SELECTOR_BYTES} bytes)"
    ))
}

fn unparsable(whole: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("unable to parse label selector {whole:?}: {why}"))
}

/// The recursive-descent parser over the tokens: `requirement (',' requirement)*`.
struct Parser<'a> {
    toks: Vec<Token<'a>>,
    pos: usize,
    whole: &'a str,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&Token<'a>> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Token<'a>> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn at_end_of_requirement(&self) -> bool {
        matches!(self.peek(), None | Some(Token::Comma))
    }

    fn key(&mut self) -> Result<&'a str, ApiError> {
        match self.next() {
            Some(Token::Ident(k)) => {
                if !is_qualified_name(k) {
                    return Err(unparsable(
                        self.whole,
                        format!("key {k:?} is not a valid label key"),
                    ));
                }
                Ok(k)
            }
            other => Err(unparsable(
                self.whole,
                format!("found {other:?}, expected a key"),
            )),
        }
    }

    fn value(&mut self) -> Result<String, ApiError> {
        let v = match self.peek() {
            // `key=` (and `key in (a,)`) select the empty value.
            None | Some(Token::Comma) | Some(Token::Close) => "",
            Some(Token::Ident(v)) => {
                let v = *v;
                self.pos += 1;
                v
            }
            Some(other) => {
                return Err(unparsable(
                    self.whole,
                    format!("found {other:?}, expected a value"),
                ));
            }
        };
        if !is_label_value(v) {
            return Err(unparsable(
                self.whole,
                format!("value {v:?} is not a valid label value"),
            ));
        }
        Ok(v.to_string())
    }

    fn set(&mut self) -> Result<BTreeSet<String>, ApiError> {
        if self.next() != Some(Token::Open) {
            return Err(unparsable(self.whole, "expected '(' after in/notin"));
        }
        let mut values = BTreeSet::new();
        if self.peek() == Some(&Token::Close) {
            return Err(unparsable(
                self.whole,
                "for 'in' and 'notin' the set of values may not be empty",
            ));
        }
        loop {
            values.insert(self.value()?);
            match self.next() {
                Some(Token::Comma) => continue,
                Some(Token::Close) => return Ok(values),
                other => {
                    return Err(unparsable(
                        self.whole,
                        format!("found {other:?}, expected ',' or ')'"),
                    ));
                }
            }
        }
    }

    fn integer(&mut self) -> Result<i64, ApiError> {
        let v = self.value()?;
        v.parse::<i64>().map_err(|_| {
            unparsable(
                self.whole,
                format!("for '>' and '<' the value must be an integer, not {v:?}"),
            )
        })
    }

    fn requirement(&mut self) -> Result<(String, Op), ApiError> {
        if self.peek() == Some(&Token::Not) {
            self.pos += 1;
            let k = self.key()?;
            return Ok((k.to_string(), Op::DoesNotExist));
        }
        let k = self.key()?.to_string();
        if self.at_end_of_requirement() {
            return Ok((k, Op::Exists));
        }
        let op = match self.next() {
            Some(Token::Eq | Token::DoubleEq) => Op::Eq(self.value()?),
            Some(Token::NotEq) => Op::NotEq(self.value()?),
            Some(Token::In) => Op::In(self.set()?),
            Some(Token::NotIn) => Op::NotIn(self.set()?),
            Some(Token::Gt) => Op::Gt(self.integer()?),
            Some(Token::Lt) => Op::Lt(self.integer()?),
            other => {
                return Err(unparsable(
                    self.whole,
                    format!("found {other:?}, expected an operator"),
                ));
            }
        };
        Ok((k, op))
    }

    fn selector(mut self) -> Result<Vec<(String, Op)>, ApiError> {
        let mut out = Vec::new();
        if self.toks.is_empty() {
            return Ok(out);
        }
        loop {
            out.push(self.requirement()?);
            if out.len() > MAX_REQUIREMENTS {
                return Err(too_big(
                    "label selector",
                    format!("more than {MAX_REQUIREMENTS} requirements"),
                ));
            }
            match self.next() {
                None => return Ok(out),
                Some(Token::Comma) => continue,
                Some(other) => {
                    return Err(unparsable(
                        self.whole,
                        format!("found {other:?}, expected ','"),
                    ));
                }
            }
        }
    }
}

fn parse_fields(s: &str) -> Result<Vec<(String, Op)>, ApiError> {
    let mut out = Vec::new();
    for req in s.split(',') {
        if out.len() == MAX_REQUIREMENTS {
            return Err(too_big(
                "field selector",
                format!("more than {MAX_REQUIREMENTS} requirements"),
            ));
        }
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
        out.push((k.to_string(), op));
    }
    Ok(out)
}

impl Selector {
    /// Parses the two query parameters; absent or empty means "everything".
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self, ApiError> {
        for (which, s) in [("label selector", labels), ("field selector", fields)] {
            if let Some(s) = s
                && s.len() > MAX_SELECTOR_BYTES
            {
                return Err(too_big(which, format!("{} bytes", s.len())));
            }
        }
        let labels = match labels.filter(|l| !l.trim().is_empty()) {
            None => Vec::new(),
            Some(l) => Parser {
                toks: lex(l),
                pos: 0,
                whole: l,
            }
            .selector()?,
        };
        let fields = match fields.filter(|f| !f.trim().is_empty()) {
            None => Vec::new(),
            Some(f) => parse_fields(f)?,
        };
        Ok(Selector { labels, fields })
    }

    /// What matching one object costs, in requirement checks (at least 1).
    pub fn cost(&self) -> usize {
        1 + self.labels.len() + self.fields.len()
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, meta: &Meta) -> bool {
        let check = |have: Option<&str>, op: &Op| match op {
            Op::Eq(v) => have == Some(v.as_str()),
            Op::NotEq(v) => have != Some(v.as_str()),
            Op::In(set) => have.is_some_and(|h| set.contains(h)),
            Op::NotIn(set) => !have.is_some_and(|h| set.contains(h)),
            Op::Exists => have.is_some(),
            Op::DoesNotExist => have.is_none(),
            Op::Gt(n) => have
                .and_then(|h| h.parse::<i64>().ok())
                .is_some_and(|h| h > *n),
            Op::Lt(n) => have
                .and_then(|h| h.parse::<i64>().ok())
                .is_some_and(|h| h < *n),
        };
        self.labels.iter().all(|(k, op)| check(meta.label(k), op))
            && self.fields.iter().all(|(k, op)| {
                let have = match k.as_str() {
                    "metadata.name" => &meta.name,
                    _ => &meta.namespace,
                };
                check(Some(have), op)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn obj(labels: Value) -> Meta {
        let v = json!({"metadata": {"name": "a", "namespace": "n", "labels": labels}});
        let stored = crate::apiserver::storage::Stored::for_test(v, 1);
        std::sync::Arc::try_unwrap(stored).unwrap().meta
    }

    fn sel(s: &str) -> Selector {
        Selector::parse(Some(s), None).unwrap()
    }

    #[test]
    fn equality_set_and_existence_requirements_all_apply() {
        let s = sel("app=web,tier in (a, b),!legacy,env!=prod");
        assert!(s.matches(&obj(json!({"app": "web", "tier": "b"}))));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "c"}))));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "a", "legacy": "1"}))));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "a", "env": "prod"}))));
        assert!(sel("x notin (y)").matches(&obj(json!({}))));
        assert!(sel("x in(y)").matches(&obj(json!({"x": "y"}))));
        assert!(sel("x==y,z").matches(&obj(json!({"x": "y", "z": ""}))));
        assert!(sel("x=").matches(&obj(json!({"x": ""}))));
    }

    #[test]
    fn greater_and_less_than_compare_integers() {
        assert!(sel("n>2,n<10").matches(&obj(json!({"n": "5"}))));
        assert!(!sel("n>2").matches(&obj(json!({"n": "2"}))));
        assert!(!sel("n>2").matches(&obj(json!({"n": "x"}))));
        assert!(!sel("n<2").matches(&obj(json!({}))));
    }

    #[test]
    fn malformed_selectors_are_400_with_upstreams_rules() {
        for bad in [
            "a b",
            "x in ()",
            "x in (a",
            "x>y",
            "x>-1",
            "a,",
            ",a",
            "!",
            "a=b=c",
            "bad key=1",
            "k=-bad-",
            &format!("k={}", "v".repeat(64)),
            &format!("{}=v", "k".repeat(64)),
            "a/b/c",
            "(",
            ")))(((",
        ] {
            let e = Selector::parse(Some(bad), None).unwrap_err();
            assert_eq!(e.code, 400, "{bad}");
        }
    }

    #[test]
    fn selectors_over_the_caps_are_400_and_say_why() {
        let many = (0..=MAX_REQUIREMENTS)
            .map(|i| format!("k{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let e = Selector::parse(Some(&many), None).unwrap_err();
        assert!(e.message.contains("requirements"), "{}", e.message);
        let fields = vec!["metadata.name=a"; MAX_REQUIREMENTS + 1].join(",");
        assert_eq!(Selector::parse(None, Some(&fields)).unwrap_err().code, 400);
        let long = format!("k in ({})", vec!["v"; MAX_SELECTOR_BYTES / 2].join(","));
        let e = Selector::parse(Some(&long), None).unwrap_err();
        assert!(e.message.contains("bytes"), "{}", e.message);
        let at_cap = (0..MAX_REQUIREMENTS)
            .map(|i| format!("k{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(Selector::parse(Some(&at_cap), None).is_ok());
    }

    #[test]
    fn field_selectors_support_name_and_namespace_only() {
        let s = Selector::parse(None, Some("metadata.name=a,metadata.namespace!=m")).unwrap();
        assert!(s.matches(&obj(json!({}))));
        assert_eq!(
            Selector::parse(None, Some("spec.x=1")).unwrap_err().code,
            400
        );
    }
}

/// Requirement checks a task may run before it gives other tasks a turn.
pub(crate) const CHECKS_PER_TURN: usize = 4096;

/// Counts the matching work of one request and yields to the runtime whenever it has done
/// [`CHECKS_PER_TURN`] requirement checks, so that one request's selector cannot hold a worker
/// thread for long whatever the number of objects. Without a selector there is nothing to
/// count and it never yields.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    spent: usize,
}

impl Turns {
    /// Charges one match of `selector`; yields if the turn is used up.
    pub async fn matched(&mut self, selector: &Selector) {
        if selector.is_empty() {
            return;
        }
        self.spent += selector.cost();
        if self.spent >= CHECKS_PER_TURN {
            self.spent = 0;
            tokio::task::yield_now().await;
        }
    }
}
