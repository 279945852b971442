//! A custom resource's CEL rules evaluated (the rules step of the custom resource strategy,
//! apiextensions-apiserver v0.37.2 `pkg/apiserver/schema/cel/validation.go`): every rule of
//! every node of a [`Schema`] on an object, and on an update its old value, with ratcheting and
//! the request's work bound. The rules themselves are read and compiled in `cel`.

use std::sync::Arc;

use serde_json::Value;

use super::cel::{ENV, REQUEST_BUDGET};
use super::{Cause, Schema, shown};

/// One request's evaluation: the causes, and what is left of its budget.
struct Eval<'a> {
    causes: &'a mut Vec<Cause>,
    budget: u64,
    stopped: bool,
}

impl<'a> Eval<'a> {
    fn new(causes: &'a mut Vec<Cause>) -> Self {
        Eval {
            causes,
            budget: REQUEST_BUDGET,
            stopped: false,
        }
    }
}

/// How much a value weighs in a rule's bound: its JSON size in eighths of a byte's worth of
/// work, at least 1.
fn weight(v: &Value) -> u64 {
    (serde_json::to_vec(v).map_or(0, |b| b.len() as u64) / 8).max(1)
}

/// `v` as the rule sees it (upstream's `UnstructuredToVal`): an integer an `int`, a
/// `number` node's value a `double`, an object a map of strings.
fn typed(v: &Value, s: Option<&Schema>) -> ::cel::Value {
    match v {
        Value::Null => ::cel::Value::Null,
        Value::Bool(b) => ::cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) if s.is_none_or(|s| s.ty != "number") => ::cel::Value::Int(i),
            _ => ::cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(x) => ::cel::Value::String(Arc::new(x.clone())),
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            ::cel::Value::List(Arc::new(a.iter().map(|x| typed(x, items)).collect()))
        }
        Value::Object(m) => ::cel::Value::Map(::cel::objects::Map {
            map: Arc::new(
                m.iter()
                    .map(|(k, x)| {
                        let child = s.and_then(|s| s.properties.get(k).or(s.additional.as_deref()));
                        (
                            ::cel::objects::Key::String(Arc::new(k.clone())),
                            typed(x, child),
                        )
                    })
                    .collect(),
            ),
        }),
    }
}

impl Schema {
    /// Whether any node has rules.
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
            || self.properties.values().any(Schema::has_rules)
            || self.additional.as_ref().is_some_and(|s| s.has_rules())
            || self.items.as_ref().is_some_and(|s| s.has_rules())
    }

    /// The custom resource strategy's rules step: unless `causes` (the schema's) holds one
    /// that blocks it (`hasBlockingErr`: a type error, a missing or unsupported value, a
    /// value too long or too many), every rule is evaluated on the object `v` (and `old`, on
    /// an update), its causes appended.
    pub fn evaluate_rules(&self, v: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
        if !self.has_rules() {
            return;
        }
        let blocking = [
            "FieldValueNotSupported",
            "FieldValueRequired",
            "FieldValueTooLong",
            "FieldValueTooMany",
            "FieldValueTypeInvalid",
        ];
        if causes.iter().any(|c| blocking.contains(&c.1)) {
            // Upstream's cause has no path: `field.Invalid(nil, …)`, printed `<nil>`.
            causes.push((
                "<nil>".into(),
                "FieldValueInvalid",
                "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
            ));
            return;
        }
        let mut ev = Eval::new(causes);
        let unchanged = old.is_some_and(|o| o == v);
        self.node(v, old, "", unchanged, &mut ev);
    }

    fn node(&self, v: &Value, old: Option<&Value>, path: &str, ratchet: bool, ev: &mut Eval<'_>) {
        if v.is_null() || ev.stopped {
            return;
        }
        if !self.rules.is_empty() {
            self.rules_here(v, old, path, ratchet, ev);
        }
        match v {
            Value::Array(items) => {
                let Some(s) = &self.items else { return };
                let map_list = self.list_type.as_deref() == Some("map");
                let olds = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    // Only a `map` list correlates its items (by their keys).
                    let o = if map_list {
                        olds.and_then(|olds| {
                            olds.iter().find(|o| {
                                self.list_map_keys.iter().all(|k| o.get(k) == item.get(k))
                            })
                        })
                    } else {
                        None
                    };
                    let r = if map_list { o == Some(item) } else { ratchet };
                    s.node(item, o, &format!("{path}[{i}]"), r, ev);
                }
            }
            Value::Object(m) => {
                let olds = old.and_then(Value::as_object);
                for (k, x) in m {
                    let o = olds.and_then(|olds| olds.get(k));
                    let r = o == Some(x);
                    if let Some(s) = &self.additional {
                        s.node(x, o, &format!("{path}[{k}]"), r, ev);
                    } else if let Some(s) = self.properties.get(k) {
                        s.node(x, o, &super::child(path, k), r, ev);
                    }
                }
            }
            _ => {}
        }
    }

    fn rules_here(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        ratchet: bool,
        ev: &mut Eval<'_>,
    ) {
        let this = typed(v, Some(self));
        let before = old.map(|o| typed(o, Some(self)));
        let size = weight(v) + old.map_or(0, weight);
        for rule in &self.rules {
            let c = &rule.compiled;
            if c.uses_old_self && before.is_none() {
                continue;
            }
            let bound = c
                .nodes
                .saturating_mul(size.saturating_add(1).saturating_pow(c.loops.max(1)));
            if bound > ev.budget {
                ev.causes.push((
                    path.to_string(),
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: {}: this embedded server bounds the work of a request's validation rules, and the bound of this one passes what is left (it does not follow upstream's cost model): no further validation rules will be run",
                        kind_shown(v)
                    ),
                ));
                ev.stopped = true;
                return;
            }
            ev.budget -= bound;
            let mut ctx = ::cel::Context::with_env(ENV.clone());
            ctx.add_variable_from_value("self", this.clone());
            if let Some(b) = &before {
                ctx.add_variable_from_value("oldSelf", b.clone());
            }
            let at = match &rule.field_path {
                Some(p) if p.starts_with('[') => format!("{path}{p}"),
                Some(p) => super::child(path, p),
                None => path.to_string(),
            };
            match c.program.execute(&ctx) {
                Ok(::cel::Value::Bool(true)) => {}
                Ok(::cel::Value::Bool(false)) => {
                    if ratchet && !c.uses_old_self {
                        continue; // validation ratcheting: the value did not change
                    }
                    let detail = rule
                        .message_expression
                        .as_ref()
                        .filter(|m| {
                            let b = m.nodes.saturating_mul(
                                size.saturating_add(1).saturating_pow(m.loops.max(1)),
                            );
                            let ok = b <= ev.budget;
                            ev.budget = ev.budget.saturating_sub(b);
                            ok
                        })
                        .and_then(|m| match m.program.execute(&ctx) {
                            Ok(::cel::Value::String(s))
                                if !s.trim().is_empty()
                                    && !s.contains('\n')
                                    && s.len() <= 5_000 =>
                            {
                                Some(s.to_string())
                            }
                            _ => None,
                        })
                        .unwrap_or_else(|| match &rule.message {
                            Some(m) => m.trim().to_string(),
                            None => format!("failed rule: {}", rule.rule.trim()),
                        });
                    ev.causes.push(failure(&at, v, &detail, rule.reason));
                }
                Ok(other) => ev.causes.push((
                    path.to_string(),
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: {}: rule evaluated to {other:?}, not a bool, evaluating rule: {}",
                        kind_shown(v),
                        rule.error_string()
                    ),
                )),
                Err(e) => {
                    let e = e.to_string();
                    let detail = if e.starts_with("No such overload") || e.contains("overload") {
                        format!(
                            "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule.error_string()
                        )
                    } else {
                        format!("{e} evaluating rule: {}", rule.error_string())
                    };
                    ev.causes.push((
                        path.to_string(),
                        "FieldValueInvalid",
                        format!("Invalid value: {}: {detail}", kind_shown(v)),
                    ));
                }
            }
        }
    }
}

/// A value as a rule's cause shows it: an object or array as its type (upstream prints
/// the schema's type there), a scalar itself.
fn kind_shown(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => shown(other),
    }
}

/// `fieldErrorForReason`: the cause of a rule that is false.
fn failure(path: &str, v: &Value, detail: &str, reason: Option<&'static str>) -> Cause {
    match reason {
        Some("FieldValueForbidden") => (
            path.to_string(),
            "FieldValueForbidden",
            format!("Forbidden: {detail}"),
        ),
        Some("FieldValueRequired") => (
            path.to_string(),
            "FieldValueRequired",
            format!("Required value: {detail}"),
        ),
        Some("FieldValueDuplicate") => (
            path.to_string(),
            "FieldValueDuplicate",
            format!("Duplicate value: {}", shown(v)),
        ),
        _ => {
            // An object's or a list's value is omitted (`field.OmitValueType`).
            let message = match v {
                Value::Object(_) | Value::Array(_) => format!("Invalid value: {detail}"),
                other => format!("Invalid value: {}: {detail}", shown(other)),
            };
            (path.to_string(), "FieldValueInvalid", message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{cel::compile, normalise_field_path};
    use super::*;
    use serde_json::json;

    fn read(raw: Value) -> (Schema, Vec<Cause>) {
        let mut causes = Vec::new();
        let s = Schema::read(&raw, "s", &mut causes);
        (s, causes)
    }

    fn run(s: &Schema, v: Value, old: Option<Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        s.evaluate_rules(&v, old.as_ref(), &mut causes);
        causes
    }

    #[test]
    fn integers_are_ints_and_a_number_nodes_values_doubles() {
        // With the crate's own serde conversion a JSON `3` is a uint, and `3 + 1` fails.
        let (s, causes) = read(json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "d": {"type": "number"}},
            "x-kubernetes-validations": [
                {"rule": "self.n + 1 == 4 && self.n - 5 == -2"},
                {"rule": "self.d / 2.0 == 0.5 && type(self.d) == double"}]}));
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(run(&s, json!({"n": 3, "d": 1}), None), []);
        let failed = run(&s, json!({"n": 4, "d": 1}), None);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(
            failed[0].2.contains("failed rule: self.n + 1 == 4"),
            "{failed:?}"
        );
    }

    #[test]
    fn an_unchanged_value_is_ratcheted_unless_the_rule_is_a_transition_rule() {
        let (s, causes) = read(json!({"type": "object", "properties": {
            "a": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3"}]},
            "b": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}));
        assert!(causes.is_empty(), "{causes:?}");
        let old = json!({"a": "long", "b": "x"});
        // `a` did not change: its failure is dropped on an update, kept on a create.
        assert_eq!(
            run(&s, json!({"a": "long", "b": "x"}), Some(old.clone())),
            []
        );
        assert_eq!(run(&s, json!({"a": "long", "b": "x"}), None).len(), 1);
        let changed = run(&s, json!({"a": "longer", "b": "y"}), Some(old));
        let fields: Vec<&str> = changed.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(fields, ["a", "b"], "{changed:?}");
    }

    #[test]
    fn a_field_path_names_a_property_or_a_key() {
        let (s, _) = read(json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}}}}));
        assert_eq!(normalise_field_path(".a.b", &s).as_deref(), Some("a.b"));
        assert_eq!(normalise_field_path(".m['k']", &s).as_deref(), Some("m[k]"));
        assert_eq!(normalise_field_path(".a.nope", &s), None);
        assert_eq!(normalise_field_path("a", &s), None);
    }

    #[test]
    fn a_rule_too_deep_too_long_or_too_nested_is_refused() {
        for (rule, says) in [
            (format!("{}1", "1 + ".repeat(1_000)), "levels deep"),
            (
                format!("{}1{}", "(".repeat(40), ")".repeat(40)),
                "brackets deep",
            ),
            ("1 == ".repeat(2_000), "bytes"),
        ] {
            let err = compile(&rule).expect_err("refused");
            assert!(err.contains(says), "{err}");
        }
    }
}
