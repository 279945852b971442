//! Every difference the conformance suite finds between the embedded API server and
//! kube-apiserver v1.37.2, with its reason and the fix proposed for the embedded server: one
//! table, which the appendix "The embedded server beside kube-apiserver" prints. The suite
//! fails on a finding no entry covers, and on an entry that covers no finding of a run.
//!
//! An entry covers findings by pattern: the scenarios and steps it names (none: any), and a
//! path pattern whose `*` matches one segment and `**` any number of them (`**/details/group`
//! matches a Status's `details.group` anywhere).

use super::findings::Finding;

/// One known difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    /// A short name for the table.
    pub what: &'static str,
    /// The scenarios it occurs in (empty: any).
    pub scenarios: &'static [&'static str],
    /// The steps (empty: any).
    pub steps: &'static [&'static str],
    /// The paths, as patterns (`(code)`, `(kind)`, `/0/type`, `**/message`).
    pub paths: &'static [&'static str],
    /// Only on this real server (`kube-apiserver`, `kube-apiserver --watch-cache=false`);
    /// `None`: on either.
    pub server: Option<&'static str>,
    /// What the embedded server answers, in words.
    pub embedded: &'static str,
    /// What kube-apiserver answers, in words.
    pub real: &'static str,
    /// Why they differ.
    pub reason: &'static str,
    /// What the embedded server should do.
    pub fix: &'static str,
}

impl Difference {
    /// Whether this entry covers `f`.
    pub fn covers(&self, f: &Finding) -> bool {
        (self.scenarios.is_empty() || self.scenarios.contains(&f.scenario.as_str()))
            && (self.steps.is_empty() || self.steps.contains(&f.step.as_str()))
            && self.server.is_none_or(|s| s == f.server)
            && self.paths.iter().any(|p| path_matches(p, &f.path))
    }
}

impl Difference {
    /// Whether this entry names `step` of `scenario` (for a run without a real server, which
    /// only sees the embedded server's unmet expectations).
    pub fn names(&self, scenario: &str, step: &str) -> bool {
        self.scenarios.contains(&scenario) && (self.steps.is_empty() || self.steps.contains(&step))
    }
}

/// Whether `path` matches `pattern` (`*` one segment, `**` any number, `(code)` itself).
pub fn path_matches(pattern: &str, path: &str) -> bool {
    fn go(p: &[&str], s: &[&str]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(&"**"), _) => go(&p[1..], s) || (!s.is_empty() && go(p, &s[1..])),
            (Some(&"*"), Some(_)) => go(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let split = |x: &str| -> Vec<String> {
        x.trim_start_matches('/')
            .split('/')
            .map(str::to_owned)
            .collect()
    };
    let (p, s) = (split(pattern), split(path));
    let p: Vec<&str> = p.iter().map(String::as_str).collect();
    let s: Vec<&str> = s.iter().map(String::as_str).collect();
    go(&p, &s)
}

/// The findings no entry of `known` covers, and the entries that cover none of `findings`
/// (among those that could occur on `servers`).
pub fn reconcile<'a>(
    known: &'a [Difference],
    findings: &'a [Finding],
    servers: &[&str],
) -> (Vec<&'a Finding>, Vec<&'a Difference>) {
    let uncovered = findings
        .iter()
        .filter(|f| !known.iter().any(|d| d.covers(f)))
        .collect();
    let unused = known
        .iter()
        .filter(|d| d.server.is_none_or(|s| servers.contains(&s)))
        .filter(|d| !findings.iter().any(|f| d.covers(f)))
        .collect();
    (uncovered, unused)
}

/// The real server as the findings name it.
pub const KUBE_APISERVER: &str = "kube-apiserver";
/// The real server without its watch cache.
pub const NO_WATCH_CACHE: &str = "kube-apiserver --watch-cache=false";

/// Every known difference, in the order of the table.
pub static KNOWN: &[Difference] = &[
    Difference {
        what: "server-side apply has no field ownership",
        scenarios: &["server_side_apply"],
        steps: &[
            "apply create",
            "apply conflict",
            "apply force",
            "managers after create",
            "managers after force",
            "apply without fieldManager",
        ],
        paths: &["(code)", " (length)"],
        server: None,
        embedded: "every apply, to a missing object or an existing one, forced or not, with or \
                   without a fieldManager, is 415 UnsupportedMediaType, saying that the server \
                   records no field ownership (metadata.managedFields); nothing is written",
        real: "an apply creates (201) with managedFields; a second manager's apply is 409 Conflict (cause FieldManagerConflict, `conflict with \"alice\": .data.k`); \
               force=true takes the field and removes alice's entry; managedFields name each \
               manager",
        reason: "the embedded server implements no field management (its module docs say so); \
                 a merge in its place would let a second manager take a field silently",
        fix: "record managers per field (managedFields), answer 409 FieldManagerConflict as \
              upstream, and let force=true take the fields and drop what the applier no longer \
              sets",
    },
    Difference {
        what: "the namespace controller's work is done at once",
        scenarios: &["namespace_finalize"],
        steps: &["right after the delete"],
        paths: &["/spec.finalizers (length)", "/spec.finalizers/*"],
        server: None,
        embedded: "a read right after a namespace's DELETE finds the namespace controller's \
                   sync done: its objects deleted (one DELETED each), its five conditions \
                   written, `kubernetes` gone from spec.finalizers (or the namespace gone)",
        real: "the namespace Terminating with its objects and spec.finalizers as they were, \
               until kube-controller-manager's namespace controller syncs it (after its \
               informer sees the change: a discovery, then a deletecollection per resource)",
        reason: "the embedded server runs no controller manager: it does the namespace \
                 controller's sync in the request that makes it due (the DELETE, or the write \
                 that takes a deleted namespace's last object), before answering",
        fix: "run the sync in a task of the server's own after the answer, as the controller \
              does, and let the tests wait for it",
    },
    Difference {
        what: "a watch-list without allowWatchBookmarks is refused",
        scenarios: &["watch_list"],
        steps: &["watch-list without bookmarks"],
        paths: &["(code)"],
        server: None,
        embedded: "422 Invalid: sendInitialEvents requires allowWatchBookmarks=true",
        real: "200: the initial events are sent (the initial-events-end bookmark is not)",
        reason: "kube-apiserver v1.37.2 validates sendInitialEvents against \
                 resourceVersionMatch only",
        fix: "accept it; send the initial events without the bookmark",
    },
    Difference {
        what: "a bad watch-list match gives one cause",
        scenarios: &["watch_list"],
        steps: &["watch-list with an exact match"],
        paths: &[
            "/0/details/causes (length)",
            "/0/details/causes/0/reason",
            "/0/details/name",
        ],
        server: None,
        embedded: "one cause (FieldValueInvalid); details.name \"\"",
        real: "two causes on resourceVersionMatch: FieldValueForbidden and \
               FieldValueNotSupported; no details.name",
        reason: "upstream's ListOptions validation reports both rules",
        fix: "report both causes as upstream, omit the empty name",
    },
    Difference {
        what: "pages have no remainingItemCount",
        scenarios: &["pagination"],
        steps: &["page 1", "page 2"],
        paths: &["/metadata/remainingItemCount"],
        server: None,
        embedded: "absent",
        real: "the number of items after the page (3, then 1)",
        reason: "the embedded server does not count what its continue token leaves",
        fix: "set remainingItemCount on every page that has a continue token",
    },
    Difference {
        what: "a failed JSON patch names the object and the operation",
        scenarios: &["configmap_patches", "widget_patches"],
        steps: &[
            "json patch failing test",
            "json patch removing a missing key",
            "json patch testing a present member against null",
            "json patch testing under a missing parent",
        ],
        paths: &[
            "/details/causes",
            "/details/kind",
            "/details/name",
            "/details/group",
            "/message",
        ],
        server: None,
        embedded: "422 with details {name, kind, causes: [patch: operation 0 failed at path …]}",
        real: "422 \"the server rejected our request due to an error in our request\", details {}",
        reason: "kube-apiserver wraps the JSON-patch library's error without details",
        fix: "answer 422 with upstream's message and empty details",
    },
    Difference {
        what: "cause reasons",
        scenarios: &["validation"],
        steps: &["missing name"],
        paths: &["**/details/causes/*/reason"],
        server: None,
        embedded: "FieldValueInvalid for a missing name (a built-in kind's metadata check)",
        real: "FieldValueRequired",
        reason: "the embedded server's metadata validation has one cause type (a custom \
                 resource's schema gives upstream's: FieldValueTypeInvalid, FieldValueRequired)",
        fix: "use upstream's field.ErrorType for each check",
    },
    Difference {
        what: "Status details.kind",
        scenarios: &["widget_crud", "delete_preconditions"],
        steps: &[
            "update without resourceVersion",
            "stale resourceVersion",
            "other uid",
        ],
        paths: &["/details/kind"],
        server: None,
        embedded: "the kind where upstream has the plural, and the plural where it has the \
                   kind",
        real: "422 on a custom resource: \"widgets\"; 409 on a failed delete precondition: \
               \"ConfigMap\"",
        reason: "upstream fills details.kind from the qualified resource in validation errors \
                 and from the object's kind in precondition conflicts",
        fix: "follow upstream per error",
    },
    Difference {
        what: "a 404 under a served path",
        scenarios: &["generation", "not_found"],
        steps: &["status endpoint", "unknown resource"],
        paths: &["/details", "/message"],
        server: None,
        embedded: "\"the server does not serve a resource at PATH\", no details",
        real: "an unknown resource: \"the server could not find the requested resource\", \
               details {}; /status of a CRD without subresources: `plainwidgets.… \"p\" not \
               found` with details {name, group, kind}",
        reason: "the embedded router answers both from one fallback",
        fix: "answer each as upstream",
    },
    Difference {
        what: "an unserved version answers a Status",
        scenarios: &["crd_versions", "crd_delete"],
        steps: &["get at v2alpha1", "get at v1beta1 after", "list after"],
        paths: &["(kind)"],
        server: None,
        embedded: "404 with a NotFound Status (\"the server does not serve a resource at …\")",
        real: "404 with the text `404 page not found`: no handler serves the group and version",
        reason: "the embedded router answers every unknown path from one fallback",
        fix: "answer a path under a group and version nothing serves as the mux does, in text",
    },
    Difference {
        what: "CEL rules are not type-checked",
        scenarios: &["crd_cel"],
        steps: &["a CRD whose rule names an unknown field"],
        paths: &["(code)"],
        server: None,
        embedded: "201: the rule is parsed, not checked against the schema's types; it fails \
                   when evaluated (422, `no such key … evaluating rule`)",
        real: "422: `compilation failed: ERROR: <input>:1:5: undefined field 'nope'`",
        reason: "the cel crate has no type checker; cel-go checks each rule against the \
                 schema's declared types when the CRD is written",
        fix: "check a rule's field selections and operand types against the schema before \
              accepting it",
    },
    Difference {
        what: "Kubernetes' CEL library functions are refused",
        scenarios: &["crd_cel"],
        steps: &["a CRD whose rule calls isSorted"],
        paths: &["(code)"],
        server: None,
        embedded: "422 naming the function (`isSorted`): only the standard library and the \
                   strings extension, measured to evaluate as cel-go does, are accepted",
        real: "201: the rule is compiled with Kubernetes' libraries (lists, regex, urls, \
               quantity, ip, cidr, format, semver, sets)",
        reason: "the cel crate lacks them; a rule is never evaluated differently from upstream",
        fix: "implement the libraries one by one, each held to cel-go's answers",
    },
    Difference {
        what: "upstream's CEL cost estimate is not followed",
        scenarios: &["crd_cel"],
        steps: &["a CRD whose messageExpression may cost too much"],
        paths: &["(code)"],
        server: None,
        embedded: "201: every rule is accepted; before each evaluation its work is bounded by \
                   the size of the values it sees, and a request past the bound is 422",
        real: "422 Forbidden: `estimated messageExpression cost exceeds budget by factor of \
               more than 100x` (a string of unbounded length built from `string(self.max)`)",
        reason: "upstream estimates each rule's worst cost from the schema's maxItems, \
                 maxLength and maxProperties when the CRD is written; the cel crate has no \
                 cost model",
        fix: "port cel-go's cost estimator and Kubernetes' size estimates",
    },
    Difference {
        what: "empty fields written out",
        scenarios: &[],
        steps: &[],
        paths: &[
            "**/data",
            "**/metadata/labels",
            "**/details/group",
            "**/details/name",
        ],
        server: None,
        embedded: "`data: {}`, `labels: {}`, Status `details.group: \"\"`, `details.name: \"\"`",
        real: "omitted",
        reason: "Go's `omitempty` drops empty maps and strings; the embedded server serialises \
                 what it stored",
        fix: "drop empty `omitempty` maps on write, and empty strings in Status details",
    },
    Difference {
        what: "list items carry apiVersion and kind",
        scenarios: &[],
        steps: &[],
        paths: &["/items/*/apiVersion", "/items/*/kind"],
        server: None,
        embedded: "every ConfigMapList item has apiVersion: v1, kind: ConfigMap",
        real: "omitted in the items of a built-in list (kept for custom resources)",
        reason: "a built-in list is encoded from its Go type, whose items carry no TypeMeta",
        fix: "omit them in the items of built-in lists",
    },
    Difference {
        what: "message wording",
        scenarios: &[],
        steps: &[],
        paths: &["**/message"],
        server: None,
        embedded: "messages of its own (e.g. \"does not match the name in the path\", \"cannot \
                   write configmaps\", \"too old resource version: 2 (compacted up to N)\")",
        real: "apimachinery's (\"… on the URL\", \"Operation cannot be fulfilled on …\", \
               \"Invalid value: …\", \"The resourceVersion for the provided watch is too old.\")",
        reason: "the same rule and code, worded independently",
        fix: "use upstream's formats (field.Error's `FIELD: TYPE: DETAIL`, \
              errors.NewConflict's, the storage errors')",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_one_or_any_segments() {
        assert!(path_matches("**/details/group", "/details/group"));
        assert!(path_matches("**/details/group", "/0/object/details/group"));
        assert!(path_matches("/items/*/apiVersion", "/items/3/apiVersion"));
        assert!(!path_matches("/items/*/apiVersion", "/items/3/kind"));
        assert!(path_matches("(code)", "(code)"));
        assert!(!path_matches("(code)", "(kind)"));
        assert!(path_matches("**", "/a/b"));
    }
}
