//! The README's two commands, `cargo run` and `cargo test`, share one compiled dependency set.
//!
//! Both build with the `dev` profile (`test` inherits it), so they share every dependency
//! artifact as long as each dependency is built with the same features. Cargo switches on the
//! features that dev-dependencies (criterion, proptest) ask of a shared crate only when it builds
//! tests: a shared crate then has two feature sets, two artifacts, and everything above it is
//! compiled twice. `book/Cargo.toml` switches those features on for the book's own build as well;
//! this test asks `cargo tree` for both feature sets and fails, naming the crate, when they part.

use std::{collections::BTreeMap, process::Command};

/// `cargo tree`'s view of the crate: each package (`name vX.Y.Z`) with its feature sets.
type Features = BTreeMap<String, Vec<String>>;

/// Parses `cargo tree --prefix none -f '{p}|{f}'` output into each package's feature sets.
fn parse(tree: &str) -> Features {
    let mut out = Features::new();
    for line in tree.lines() {
        let line = line.trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        let package = package.trim_end_matches(" (proc-macro)");
        // Drop the path of a local package: `controlloop v0.1.0 (/path)`.
        let package = package.split(" (").next().unwrap_or(package).to_owned();
        let sets = out.entry(package).or_default();
        if !sets.iter().any(|s| s == features) {
            sets.push(features.to_owned());
            sets.sort();
        }
    }
    out
}

/// The packages the crate's own build (`run`) uses whose feature sets differ in the test
/// build (`test`), each with both.
fn split(run: &Features, test: &Features) -> Vec<String> {
    run.iter()
        .filter_map(|(package, features)| {
            let in_test = test.get(package).cloned().unwrap_or_default();
            (in_test != *features).then(|| {
                format!("{package}: cargo run builds {features:?}, cargo test {in_test:?}")
            })
        })
        .collect()
}

fn tree(edges: &str) -> Features {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--locked",
            "--offline",
            "-p",
            "controlloop",
            "-p",
            "controlloop-book",
            "--prefix",
            "none",
        ])
        .args(["-e", edges, "-f", "{p}|{f}"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&String::from_utf8(out.stdout).expect("cargo tree prints UTF-8"))
}

#[test]
fn cargo_run_and_cargo_test_build_every_shared_dependency_with_the_same_features() {
    let run = tree("normal,build");
    let test = tree("normal,build,dev");
    assert!(
        run.len() > 100,
        "cargo tree listed only {} packages",
        run.len()
    );
    let split = split(&run, &test);
    assert!(
        split.is_empty(),
        "the test build compiles these crates (and everything above them) a second time; switch \
         the features on in [dependencies] too:\n  {}",
        split.join("\n  ")
    );
}

#[test]
fn a_feature_only_the_tests_switch_on_is_caught() {
    // The shape of the split this guards against: criterion's itertools asked `either` for
    // `use_std`, which the crate's own build did not.
    let run = parse("kube-client v5.0.0|default\neither v1.19.0|default,std\n");
    let test = parse(
        "kube-client v5.0.0|default\neither v1.19.0|default,std,use_std (*)\n\
         criterion v0.7.0|async\n",
    );
    assert_eq!(
        split(&run, &test),
        [
            "either v1.19.0: cargo run builds [\"default,std\"], cargo test \
             [\"default,std,use_std\"]"
        ]
    );
    // Test-only packages are not a split; identical sets are not either.
    let same = parse("either v1.19.0|default,std\n");
    assert!(split(&same, &run).is_empty());
}
