//! CEL validation rules (`x-kubernetes-validations`): read and compiled with the CRD, and
//! evaluated on each write of its objects as kube-apiserver evaluates them.
//!
//! Follows the behaviour of apiextensions-apiserver v0.37.2
//! `pkg/apiserver/schema/cel/validation.go` (rules at any schema node, `self` the node's
//! value; a transition rule, one that reads `oldSelf`, only on an update where the old value
//! exists and correlates; a rule that is false gives one cause at the node, or at its
//! `fieldPath`, of its `reason` (`FieldValueInvalid` by default), with its `message`, its
//! `messageExpression`'s value, or `failed rule: RULE`; an evaluation error gives
//! `ERROR evaluating rule: RULE`; a `null` is never validated; on an update, the error of a
//! rule that is not a transition rule on a value that did not change is dropped
//! (validation ratcheting)) and `pkg/apis/apiextensions/validation/validation.go` (what a
//! CRD's rules must be: a `rule`, a `reason` of the four, a `fieldPath` of the schema, no
//! `oldSelf` under a list that does not correlate items).
//!
//! The expressions are parsed and evaluated by the `cel` crate (chosen by measurement over
//! `cel-interpreter`: it parsed and evaluated correctly more of the rule forms upstream
//! documents, its strings extension included).
//!
//! # Differences from upstream
//! - Rules are not type-checked: cel-go checks each rule against the schema's types when the
//!   CRD is written (an unknown field, a comparison of a string with an int, a rule that is
//!   not a `bool` are refused then); here such a rule is accepted and fails when evaluated
//!   (422, `... evaluating rule: RULE`). A reference to a variable other than `self` and
//!   `oldSelf` (and the type names) is refused when the CRD is written, as upstream.
//! - Only the functions measured to evaluate as cel-go does are accepted (see
//!   [`FUNCTIONS`]): a rule calling another one (Kubernetes' own libraries: `isSorted`,
//!   `quantity`, `url`, `ip`, `cidr`, `format`, `semver`, `sets`; cel-go's lists and
//!   two-variable comprehensions; timestamps and durations) is refused when the CRD is
//!   written (422 naming the function), never evaluated differently.
//! - Upstream's cost model is not followed: upstream estimates each rule's cost from the
//!   schema's bounds when the CRD is written, and refuses one that may cost too much; here
//!   every rule is accepted, and before each evaluation its cost is bounded by the size of
//!   the values it sees (nodes × size^depth of nested comprehensions); a request whose bound
//!   passes [`REQUEST_BUDGET`] is refused (422, saying so). Upstream would have refused the
//!   CRD, or evaluated the rule.
//! - A rule's source is at most [`MAX_RULE_BYTES`] bytes, its brackets at most
//!   [`MAX_NESTING`] deep and its expression tree at most [`MAX_DEPTH`] deep (the parser
//!   and the evaluator recurse); upstream's limits are its cost model's.
//! - A `date-time` string is a string to a rule (upstream: a timestamp); `has()` on a map
//!   is a key test, as upstream.
//! - Ratcheting correlates maps by key and `map` lists by their keys, as upstream, and
//!   treats a value in any other list as its nearest correlated ancestor does.
//!
//! # Invariants
//! 1. Evaluating a rule never recurses deeper than [`MAX_DEPTH`] levels of its expression,
//!    and never runs when its bound passes what is left of the request's budget.

use std::sync::{Arc, LazyLock};

use ::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

use super::{Cause, Schema, shown};

/// The longest rule or messageExpression accepted (keeps I1).
pub(crate) const MAX_RULE_BYTES: usize = 4_096;
/// The deepest nesting of brackets a rule's source may have (keeps I1).
pub(crate) const MAX_NESTING: usize = 32;
/// The deepest expression tree a rule may have (keeps I1).
pub(crate) const MAX_DEPTH: usize = 64;
/// The stack a rule is parsed on: enough for a [`MAX_RULE_BYTES`] rule nested at every
/// character.
const COMPILE_STACK: usize = 64 << 20;
/// The bound on the work of one request's rules (keeps I1).
/// About half a second of evaluation on the machine it was measured on (one unit, about
/// 0.45 µs: a 100-item `all` of `startsWith`).
pub(crate) const REQUEST_BUDGET: u64 = 1_000_000;

/// How many nodes a call of `matches` weighs: the crate compiles its pattern at each call
/// (about 25 times an ordinary node's work, measured).
const MATCHES_WEIGHT: u64 = 50;

/// The functions (and operators) a rule may call: the standard library and cel-go's strings
/// extension (version 2, as kube-apiserver's environment has it), each measured to evaluate
/// as cel-go does.
pub(crate) const FUNCTIONS: &[&str] = &[
    "size",
    "matches",
    "startsWith",
    "endsWith",
    "contains",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "type",
    "dyn",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
];

/// The identifiers a rule may name besides `self` and `oldSelf`: the type names.
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

/// The environment every rule is compiled and evaluated in.
static ENV: LazyLock<Arc<::cel::Env>> = LazyLock::new(|| {
    let mut env = ::cel::Env::stdlib();
    // The strings extension registers on a fresh standard environment without conflict.
    let _ = env.add_extension(::cel::extensions::strings);
    Arc::new(env)
});

/// A compiled expression and what its walk found.
#[derive(Debug)]
pub(crate) struct Compiled {
    program: ::cel::Program,
    /// It reads `oldSelf`.
    pub uses_old_self: bool,
    /// Its nodes.
    nodes: u64,
    /// How deep its comprehensions nest.
    loops: u32,
}

/// One `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct Rule {
    pub rule: String,
    pub message: Option<String>,
    message_expression: Option<Compiled>,
    /// `FieldValueInvalid`, `FieldValueForbidden`, `FieldValueRequired`, `FieldValueDuplicate`.
    pub reason: Option<&'static str>,
    /// Where a failure is reported, under the node (`max`, `a.b`, `labels[k]`).
    pub field_path: Option<String>,
    compiled: Compiled,
}

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Compiles `src`, checking its size, its nesting, its identifiers and its functions; the
/// refusal's message otherwise.
fn compile(src: &str) -> Result<Compiled, String> {
    if src.len() > MAX_RULE_BYTES {
        return Err(format!(
            "this embedded server accepts rules of at most {MAX_RULE_BYTES} bytes"
        ));
    }
    let mut depth = 0usize;
    for c in src.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(format!(
                        "this embedded server accepts rules nested at most {MAX_NESTING} brackets deep"
                    ));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    // The parser recurses once per level of the expression, which a rule's length bounds
    // but brackets alone do not (`!!!!…`, `a + a + …`): it runs on a thread of its own with a
    // stack for the longest rule, and a program deeper than MAX_DEPTH is refused (and
    // dropped) there, so only shallow programs ever reach a server's task. A panic of the
    // parser is a refusal too.
    let owned = src.to_string();
    let outcome = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(COMPILE_STACK)
            .spawn_scoped(scope, move || -> Result<(::cel::Program, Walk), String> {
                let program = ENV
                    .compile(&owned)
                    .map_err(|e| format!("compilation failed: {e}"))?;
                let mut walk = Walk::default();
                walk.expr(program.expression(), &mut Vec::new(), 1, 0)?;
                Ok((program, walk))
            })
            .map(|h| h.join())
    });
    let (program, walk) = match outcome {
        Ok(Ok(done)) => done?,
        Ok(Err(_)) => return Err("compilation failed: the parser gave up on it".into()),
        Err(e) => return Err(format!("compilation failed: no thread to parse it on: {e}")),
    };
    for (target_type, f) in &walk.member_calls {
        if matches!(f.as_str(), "indexOf" | "lastIndexOf") && target_type == "array" {
            return Err(format!(
                "this embedded server does not evaluate the CEL function {f:?} on a list (Kubernetes' list library)"
            ));
        }
    }
    Ok(Compiled {
        program,
        uses_old_self: walk.old_self,
        nodes: walk.nodes,
        loops: walk.loops,
    })
}

/// What a walk of an expression finds (iteratively bounded by [`MAX_DEPTH`]).
#[derive(Default)]
struct Walk {
    nodes: u64,
    loops: u32,
    old_self: bool,
    /// Member calls whose target is known to be a list (a list literal), as (type, function):
    /// `indexOf` and `lastIndexOf` there are Kubernetes' list functions, not the strings
    /// extension's.
    member_calls: Vec<(String, String)>,
}

impl Walk {
    fn expr(
        &mut self,
        e: &IdedExpr,
        bound: &mut Vec<String>,
        depth: usize,
        loops: u32,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "this embedded server accepts expressions at most {MAX_DEPTH} levels deep"
            ));
        }
        self.nodes += 1;
        self.loops = self.loops.max(loops);
        match &e.expr {
            Expr::Unspecified | Expr::Literal(_) => {}
            Expr::Ident(name) => {
                if name == "oldSelf" {
                    self.old_self = true;
                } else if name != "self"
                    && !name.starts_with('@')
                    && !bound.iter().any(|b| b == name)
                    && !TYPE_NAMES.contains(&name.as_str())
                {
                    return Err(format!(
                        "compilation failed: ERROR: <input>: undeclared reference to '{name}' (in container '')"
                    ));
                }
            }
            Expr::Call(call) => {
                let f = call.func_name.as_str();
                if f == "matches" {
                    self.nodes += MATCHES_WEIGHT;
                }
                // A concatenation inside a loop may copy a collection at each step: it
                // counts as one more level of loop.
                if f == "_+_" && loops > 0 {
                    self.loops = self.loops.max(loops + 1);
                }
                let operator = f.starts_with('_') || f.starts_with('@') || f == "!_" || f == "-_";
                // The crate leaves a macro of three arguments unexpanded: cel-go's
                // two-variable comprehensions (`all(k, v, …)`), which it does not evaluate.
                if matches!(f, "all" | "exists" | "exists_one" | "existsOne")
                    && call.target.is_some()
                    && call.args.len() == 3
                {
                    return Err(
                        "this embedded server does not evaluate two-variable comprehensions (cel-go's TwoVarComprehensions)"
                            .into(),
                    );
                }
                if !operator && !FUNCTIONS.contains(&f) {
                    return Err(format!(
                        "this embedded server does not evaluate the CEL function {f:?} (of Kubernetes' CEL libraries or cel-go's extensions it has not been measured to evaluate as cel-go does)"
                    ));
                }
                if let Some(t) = &call.target {
                    if let Expr::List(_) = t.expr {
                        self.member_calls.push(("array".into(), f.into()));
                    }
                    self.expr(t, bound, depth + 1, loops)?;
                }
                for a in &call.args {
                    self.expr(a, bound, depth + 1, loops)?;
                }
            }
            Expr::Comprehension(c) => {
                if c.iter_var2.is_some() {
                    return Err(
                        "this embedded server does not evaluate two-variable comprehensions (cel-go's TwoVarComprehensions)"
                            .into(),
                    );
                }
                self.expr(&c.iter_range, bound, depth + 1, loops)?;
                self.expr(&c.accu_init, bound, depth + 1, loops)?;
                let n = bound.len();
                bound.push(c.iter_var.clone());
                bound.push(c.accu_var.clone());
                for part in [&c.loop_cond, &c.loop_step] {
                    self.expr(part, bound, depth + 1, loops + 1)?;
                }
                self.expr(&c.result, bound, depth + 1, loops)?;
                bound.truncate(n);
            }
            Expr::List(l) => {
                for x in &l.elements {
                    self.expr(x, bound, depth + 1, loops)?;
                }
            }
            Expr::Map(m) => {
                for entry in &m.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            self.expr(&me.key, bound, depth + 1, loops)?;
                            self.expr(&me.value, bound, depth + 1, loops)?;
                        }
                        EntryExpr::StructField(sf) => {
                            self.expr(&sf.value, bound, depth + 1, loops)?;
                        }
                    }
                }
            }
            Expr::Select(s) => self.expr(&s.operand, bound, depth + 1, loops)?,
            Expr::Struct(_) => {
                return Err("this embedded server does not evaluate message literals".into());
            }
        }
        Ok(())
    }
}

impl Rule {
    /// Reads entry `i` of a node's `x-kubernetes-validations` at `path` (the node's, in the
    /// CRD); `schema` is the node, `correlatable` whether its value correlates with an old one.
    pub fn read(
        raw: &Value,
        path: &str,
        schema: &Schema,
        correlatable: bool,
        causes: &mut Vec<Cause>,
    ) -> Option<Rule> {
        let at = |f: &str| format!("{path}.{f}");
        let rule = raw["rule"].as_str().unwrap_or_default().to_string();
        let before = causes.len();
        if rule.trim().is_empty() {
            causes.push((
                at("rule"),
                "FieldValueRequired",
                "Required value: rule is not specified".into(),
            ));
        }
        let message = raw["message"].as_str().map(str::to_string);
        if let Some(m) = &message {
            if m.trim().is_empty() {
                causes.push((
                    at("message"),
                    "FieldValueInvalid",
                    format!("Invalid value: {m:?}: must be non-empty if specified"),
                ));
            } else if m.contains('\n') {
                causes.push((
                    at("message"),
                    "FieldValueInvalid",
                    format!("Invalid value: {m:?}: must not contain line breaks"),
                ));
            }
        } else if rule.contains('\n') {
            causes.push((
                at("message"),
                "FieldValueRequired",
                "Required value: message must be specified if rule contains line breaks".into(),
            ));
        }
        let reason = match raw["reason"].as_str() {
            None => None,
            Some(r) => match REASONS.iter().find(|x| **x == r) {
                Some(x) => Some(*x),
                None => {
                    causes.push((
                        at("reason"),
                        "FieldValueNotSupported",
                        format!(
                            r#"Unsupported value: {r:?}: supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
                        ),
                    ));
                    None
                }
            },
        };
        let field_path = match raw["fieldPath"].as_str() {
            None => None,
            Some(p) => match normalise_field_path(p, schema) {
                Some(n) => Some(n),
                None => {
                    causes.push((
                        at("fieldPath"),
                        "FieldValueInvalid",
                        format!("Invalid value: {p:?}: must be a valid path"),
                    ));
                    None
                }
            },
        };
        let message_expression = match raw["messageExpression"].as_str() {
            None => None,
            Some(m) if m.trim().is_empty() => {
                causes.push((
                    at("messageExpression"),
                    "FieldValueRequired",
                    "Required value: messageExpression must be non-empty if specified".into(),
                ));
                None
            }
            Some(m) => match compile(m) {
                Ok(c) => Some(c),
                Err(e) => {
                    causes.push((
                        at("messageExpression"),
                        "FieldValueInvalid",
                        format!("Invalid value: {m:?}: messageExpression {e}"),
                    ));
                    None
                }
            },
        };
        if causes.len() > before {
            return None;
        }
        let compiled = match compile(&rule) {
            Ok(c) => c,
            Err(e) => {
                causes.push((
                    at("rule"),
                    "FieldValueInvalid",
                    format!("Invalid value: {rule:?}: {e}"),
                ));
                return None;
            }
        };
        if compiled.uses_old_self && !correlatable {
            causes.push((
                at("rule"),
                "FieldValueInvalid",
                format!(
                    "Invalid value: {rule:?}: oldSelf cannot be used on the uncorrelatable portion of the schema within {path}"
                ),
            ));
            return None;
        }
        Some(Rule {
            rule,
            message,
            message_expression,
            reason,
            field_path,
            compiled,
        })
    }

    /// `ruleErrorString`: the message if there is one, else the rule.
    fn error_string(&self) -> &str {
        match &self.message {
            Some(m) => m.trim(),
            None => self.rule.trim(),
        }
    }
}

/// A `fieldPath` (`.a.b`, `.a['k']`) as `field.Path` prints it under the node, if every step
/// names a property (or a key of a map) of the schema.
fn normalise_field_path(p: &str, schema: &Schema) -> Option<String> {
    let mut out = String::new();
    let mut s = schema;
    let mut rest = p;
    while !rest.is_empty() {
        let (name, next) = if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            (&r[..end], &r[end + 2..])
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (&r[..end], &r[end..])
        } else {
            return None;
        };
        if name.is_empty() {
            return None;
        }
        if let Some(child) = s.properties.get(name) {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
            s = child;
        } else if let Some(add) = &s.additional {
            out.push_str(&format!("[{name}]"));
            s = add;
        } else {
            return None;
        }
        rest = next;
    }
    (!out.is_empty()).then_some(out)
}

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
