//! The library's layers, kept: no cycle between its files or between its modules, and none of
//! the house rules broken (CONTRIBUTING.md, "Two crates, one way down"). The checker is
//! `tests/layering/mod.rs`, which the book's `book/tests/layers.rs` shares. No allow-list: a
//! new loop or a broken rule fails here, naming the files and the names that tie them.

mod layering;

use layering::Rule;

/// Which top-level module never imports which.
const RULES: &[Rule] = &[
    // The workqueue knows nothing of Kubernetes.
    Rule {
        from: "workqueue",
        to: "cache",
    },
    // The cache knows nothing of controllers.
    Rule {
        from: "cache",
        to: "controller",
    },
    // The controller sees a cluster only through a client or a ListerWatcher.
    Rule {
        from: "controller",
        to: "apiserver",
    },
    // The controller logs through the leaf `klog`, not through the feature gates' module.
    Rule {
        from: "controller",
        to: "features",
    },
    // The server is the other end of the wire: nothing from the client side.
    Rule {
        from: "apiserver",
        to: "cache",
    },
    Rule {
        from: "apiserver",
        to: "controller",
    },
    Rule {
        from: "apiserver",
        to: "workqueue",
    },
    Rule {
        from: "apiserver",
        to: "fake",
    },
    Rule {
        from: "apiserver",
        to: "leaderelection",
    },
    Rule {
        from: "apiserver",
        to: "retry",
    },
    // The fake clientset stands beside the server, not on it.
    Rule {
        from: "fake",
        to: "apiserver",
    },
];

/// The modules below `testing`, the fixture that wires a cluster to the ports (the `testing`
/// feature): it stands on top of them, and none of them imports it. Every other top-level
/// module, which the test checks, so a new module is listed here when it is added.
const BELOW_TESTING: &[&str] = &[
    "apiserver",
    "cache",
    "controller",
    "fake",
    "features",
    "klog",
    "leaderelection",
    "retry",
    "wait",
    "watch_event",
    "workqueue",
];

#[test]
fn the_library_has_no_loop_and_keeps_the_house_rules() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = layering::read_dir(&src);
    let modules: std::collections::BTreeSet<&str> = sources
        .keys()
        .map(|path| {
            path.split('/')
                .next()
                .unwrap_or(path)
                .trim_end_matches(".rs")
        })
        .filter(|&m| m != "lib" && m != "testing")
        .collect();
    assert_eq!(
        modules,
        BELOW_TESTING.iter().copied().collect(),
        "BELOW_TESTING lists every top-level module but `testing`"
    );
    let top = BELOW_TESTING.iter().map(|&from| Rule {
        from,
        to: "testing",
    });
    let rules: Vec<Rule> = RULES.iter().map(|r| Rule { ..*r }).chain(top).collect();
    if let Err(failures) = layering::check(&sources, "lib.rs", &rules, &[]) {
        panic!("the library's layers are broken:\n{failures}");
    }
}
