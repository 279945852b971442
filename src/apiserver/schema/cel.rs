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

/// A cause of a 422: the field, the reason, the message (the schema's `Cause`).
type Cause = (String, &'static str, String);

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
pub(super) static ENV: LazyLock<Arc<::cel::Env>> = LazyLock::new(|| {
    let mut env = ::cel::Env::stdlib();
    // The strings extension registers on a fresh standard environment without conflict.
    let _ = env.add_extension(::cel::extensions::strings);
    Arc::new(env)
});

/// A compiled expression and what its walk found.
#[derive(Debug)]
pub(crate) struct Compiled {
    pub(super) program: ::cel::Program,
    /// It reads `oldSelf`.
    pub uses_old_self: bool,
    /// Its nodes.
    pub(super) nodes: u64,
    /// How deep its comprehensions nest.
    pub(super) loops: u32,
}

/// One `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct Rule {
    pub rule: String,
    pub message: Option<String>,
    pub(super) message_expression: Option<Compiled>,
    /// `FieldValueInvalid`, `FieldValueForbidden`, `FieldValueRequired`, `FieldValueDuplicate`.
    pub reason: Option<&'static str>,
    /// Where a failure is reported, under the node (`max`, `a.b`, `labels[k]`).
    pub field_path: Option<String>,
    pub(super) compiled: Compiled,
}

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Compiles `src`, checking its size, its nesting, its identifiers and its functions; the
/// refusal's message otherwise.
pub(super) fn compile(src: &str) -> Result<Compiled, String> {
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
    /// CRD); `field_path` resolves a `fieldPath` under the node (`None` if it names nothing
    /// there), `correlatable` says whether its value correlates with an old one.
    pub fn read(
        raw: &Value,
        path: &str,
        field_path: &dyn Fn(&str) -> Option<String>,
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
            Some(p) => match field_path(p) {
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
    pub(super) fn error_string(&self) -> &str {
        match &self.message {
            Some(m) => m.trim(),
            None => self.rule.trim(),
        }
    }
}
