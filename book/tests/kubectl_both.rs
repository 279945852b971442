//! kubectl on both servers: one list of kubectl commands (create, get, label, annotate, the
//! three patch types, client-side and server-side apply, selectors, scale, delete) run against the
//! embedded API server and against the real kube-apiserver v1.37.2 of `cargo run -- cluster
//! up`, with the kubectl v1.37.2 built beside it. Each step's exit code and standard output
//! (its namespace written `{ns}`) must be upstream's, and the two servers must agree, except
//! where a step names an entry of the conformance suite's one table of differences
//! (`differences::KNOWN`).
//!
//! Without a real server the embedded half still runs if that kubectl has been built; without
//! it the check is skipped in one line naming the command that builds it. Under `CI=true` the
//! real half is required.

mod clients;

use std::{path::Path, process::Command};

use controlloop::apiserver::ApiServer;
use controlloop_book::lab::{
    real_server::conformance::nonce,
    rig::{
        self,
        real::{Instance, or_skip, say},
    },
};

/// One kubectl command and upstream's answer.
struct Step {
    label: &'static str,
    /// kubectl's arguments (after `--kubeconfig` and `-n` the run's namespace); `{dir}` is
    /// the folder of the manifests.
    args: &'static [&'static str],
    /// kube-apiserver's answer: kubectl's exit code and its standard output.
    code: i32,
    stdout: &'static str,
    /// The entry of the table of differences that explains why the embedded server answers
    /// otherwise, and the code and output it gives.
    known: Option<(&'static str, i32, &'static str)>,
}

const fn step(
    label: &'static str,
    args: &'static [&'static str],
    code: i32,
    stdout: &'static str,
) -> Step {
    Step {
        label,
        args,
        code,
        stdout,
        known: None,
    }
}

const APPLY_ROW: &str = "server-side apply has no field ownership";

/// The manifests the steps apply: `NAME.yaml` in the run's folder.
const MANIFESTS: &[(&str, &str)] = &[
    (
        "b",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  k: alice\n",
    ),
    (
        "b2",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  k: bob\n",
    ),
    (
        "c",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels:\n    app: web\ndata:\n  k: v\n",
    ),
    (
        "d",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  selector:\n    matchLabels:\n      app: d\n  template:\n    metadata:\n      labels:\n        app: d\n    spec:\n      containers:\n      - name: c\n        image: nginx\n",
    ),
];

/// The steps, in order, one a line: label, kubectl's arguments, upstream's exit code and output.
#[rustfmt::skip]
const STEPS: &[Step] = &[
    step("create", &["create", "configmap", "a", "--from-literal=k=v"], 0, "configmap/a created\n"),
    step("create twice", &["create", "configmap", "a", "--from-literal=k=v"], 1, ""),
    step("get", &["get", "configmap", "a", "-o", "jsonpath={.data.k}"], 0, "v"),
    step("get missing", &["get", "configmap", "missing"], 1, ""),
    step("label", &["label", "configmap", "a", "app=web"], 0, "configmap/a labeled\n"),
    step("bad label", &["label", "configmap", "a", "app=-bad-"], 1, ""),
    step("annotate", &["annotate", "configmap", "a", "note=x"], 0, "configmap/a annotated\n"),
    step("merge patch", &["patch", "configmap", "a", "--type=merge", "-p", r#"{"data":{"k":"w"}}"#], 0, "configmap/a patched\n"),
    step("strategic merge patch", &["patch", "configmap", "a", "-p", r#"{"data":{"s":"1"}}"#], 0, "configmap/a patched\n"),
    step("json patch", &["patch", "configmap", "a", "--type=json", "-p", r#"[{"op":"replace","path":"/data/k","value":"j"}]"#], 0, "configmap/a patched\n"),
    step("json patch failing test", &["patch", "configmap", "a", "--type=json", "-p", r#"[{"op":"test","path":"/data/k","value":"nope"}]"#], 1, ""),
    step("after the patches", &["get", "configmap", "a", "-o", "jsonpath={.data.k} {.data.s} {.metadata.labels.app} {.metadata.annotations.note}"], 0, "j 1 web x"),
    step("client-side apply", &["apply", "--validate=false", "-f", "{dir}/c.yaml"], 0, "configmap/c created\n"),
    step("label selector", &["get", "configmaps", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"], 0, "a c"),
    step("set-based selector", &["get", "configmaps", "-l", "app in (web),k notin (x)", "-o", "jsonpath={.items[*].metadata.name}"], 0, "a c"),
    step("field selector", &["get", "configmaps", "--field-selector", "metadata.name=c", "-o", "jsonpath={.items[*].metadata.name}"], 0, "c"),
    step("unsupported field selector", &["get", "configmaps", "--field-selector", "data.k=v"], 1, ""),
    Step { known: Some((APPLY_ROW, 1, "")), ..step("server-side apply create", &["apply", "--server-side", "--field-manager=alice", "--validate=false", "-f", "{dir}/b.yaml"], 0, "configmap/b serverside-applied\n") },
    step("server-side apply conflict", &["apply", "--server-side", "--field-manager=bob", "--validate=false", "-f", "{dir}/b2.yaml"], 1, ""),
    Step { known: Some((APPLY_ROW, 1, "")), ..step("server-side apply force", &["apply", "--server-side", "--force-conflicts", "--field-manager=bob", "--validate=false", "-f", "{dir}/b2.yaml"], 0, "configmap/b serverside-applied\n") },
    Step { known: Some((APPLY_ROW, 1, "")), ..step("after the apply", &["get", "configmap", "b", "-o", "jsonpath={.data.k}"], 0, "bob") },
    step("create a deployment", &["create", "--validate=false", "-f", "{dir}/d.yaml"], 0, "deployment.apps/d created\n"),
    step("scale it", &["scale", "deployment", "d", "--replicas=3"], 0, "deployment.apps/d scaled\n"),
    step("after the scale", &["get", "deployment", "d", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"], 0, "3 2"),
    step("delete", &["delete", "configmap", "a", "--wait=false"], 0, "configmap \"a\" deleted from {ns} namespace\n"),
    step("get deleted", &["get", "configmap", "a", "--ignore-not-found"], 0, ""),
    step("delete missing", &["delete", "configmap", "a"], 1, ""),
];

/// What one step answered: kubectl's exit code and standard output (namespace as `{ns}`),
/// and its standard error for a reader of a failure.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs every step with `kubectl` against the server `kubeconfig` names.
fn run(kubectl: &Path, kubeconfig: &Path, ns: &str, dir: &Path) -> Vec<Answer> {
    STEPS
        .iter()
        .map(|s| {
            let args: Vec<String> = s
                .args
                .iter()
                .map(|a| {
                    a.replace("{ns}", ns)
                        .replace("{dir}", &dir.display().to_string())
                })
                .collect();
            let out = Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(["--request-timeout=30s", "-n", ns])
                .args(&args)
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", kubectl.display()));
            Answer {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).replace(ns, "{ns}"),
                stderr: String::from_utf8_lossy(&out.stderr).replace(ns, "{ns}"),
            }
        })
        .collect()
}

/// The steps whose answer is not `expected(step)`, as messages.
fn unmet(
    server: &str,
    answers: &[Answer],
    expected: impl Fn(&Step) -> (i32, &'static str),
) -> Vec<String> {
    STEPS
        .iter()
        .zip(answers)
        .filter_map(|(s, a)| {
            let (code, stdout) = expected(s);
            (a.code != code || a.stdout != stdout).then(|| {
                format!(
                    "{server}: {}: expected exit {code} and {stdout:?}, got exit {} and {:?} (stderr {:?})",
                    s.label, a.code, a.stdout, a.stderr
                )
            })
        })
        .collect()
}

/// Creates the run's namespace on the server `kubeconfig` names: set-up, not a step (both
/// servers serve Namespaces, and a create into a missing one is 404 on both).
fn create_namespace(kubectl: &Path, kubeconfig: &Path, ns: &str) {
    let made = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["create", "namespace", ns])
        .output()
        .expect("kubectl runs");
    assert!(made.status.success(), "create namespace {ns}: {made:?}");
}

/// The embedded server's expected answer: upstream's, or the one its table entry names.
fn embedded_expectation(s: &Step) -> (i32, &'static str) {
    s.known
        .map_or((s.code, s.stdout), |(_, code, stdout)| (code, stdout))
}

/// The kubectl v1.37.2 built beside the control plane, if it is there (another version's
/// output differs: kubectl v1.32's `delete` does not name the namespace).
fn kubectl() -> Option<std::path::PathBuf> {
    let built = Instance::Main.dir().join("bin/v1.37.2/kubectl");
    built.is_file().then_some(built)
}

fn scratch() -> std::path::PathBuf {
    let dir = controlloop_book::repo()
        .join("target/kubectl-both")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in MANIFESTS {
        std::fs::write(dir.join(format!("{name}.yaml")), text).unwrap();
    }
    dir
}

#[test]
fn kubectl_gets_the_same_answers_from_both_servers() {
    let real = or_skip(Instance::Main);
    let kubectl = real
        .as_ref()
        .and_then(|r| r.kubectl.clone())
        .or_else(kubectl);
    let Some(kubectl) = kubectl else {
        say("kubectl check skipped: no kubectl v1.37.2 (`cargo run -- cluster up` builds it)");
        return;
    };
    clients::every_named_difference_is_known(STEPS.iter().filter_map(|s| s.known).map(|k| k.0));
    let dir = scratch();
    let ns = format!("k-{}", nonce());
    let embedded = rig::real(async {
        let server = ApiServer::start()
            .await
            .expect("the embedded server starts");
        let config = clients::embedded_kubeconfig(&dir, &server.url());
        let (kubectl, dir, ns) = (kubectl.clone(), dir.clone(), ns.clone());
        let answers = tokio::task::spawn_blocking(move || {
            create_namespace(&kubectl, &config, &ns);
            run(&kubectl, &config, &ns, &dir)
        })
        .await
        .expect("the kubectl steps ran");
        server.shutdown().await;
        answers
    });
    let mut missed = unmet("embedded", &embedded, embedded_expectation);
    if let Some(real) = &real {
        let _only = real.exclusive();
        create_namespace(&kubectl, &real.kubeconfig, &ns);
        let theirs = run(&kubectl, &real.kubeconfig, &ns, &dir);
        let _ = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&real.kubeconfig)
            .args(["delete", "namespace", &ns, "--wait=false"])
            .output();
        missed.extend(unmet("kube-apiserver", &theirs, |s| (s.code, s.stdout)));
        // Where no table entry is named, the servers agree (and where one is, they differ).
        for ((s, e), r) in STEPS.iter().zip(&embedded).zip(&theirs) {
            let (ours, real) = ((e.code, e.stdout.as_str()), (r.code, r.stdout.as_str()));
            let named = s.known.is_some();
            missed.extend(clients::disagreement(
                s.label,
                named,
                "kube-apiserver",
                ours,
                real,
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        missed.is_empty(),
        "kubectl's answers:\n{}",
        missed.join("\n")
    );
}

/// The check fires: an expectation changed in one step (its exit code, then its output) is
/// reported for that step alone.
#[test]
fn a_changed_expectation_is_reported_for_its_step() {
    let answers: Vec<Answer> = STEPS
        .iter()
        .map(|s| Answer {
            code: s.code,
            stdout: s.stdout.to_owned(),
            stderr: String::new(),
        })
        .collect();
    assert!(unmet("x", &answers, |s| (s.code, s.stdout)).is_empty());
    for i in 0..STEPS.len() {
        let mut other = answers.clone();
        other[i].code += 1;
        let m = unmet("x", &other, |s| (s.code, s.stdout));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains(STEPS[i].label), "{}", m[0]);
        let mut other = answers.clone();
        other[i].stdout.push('!');
        assert_eq!(unmet("x", &other, |s| (s.code, s.stdout)).len(), 1);
    }
}

/// The appendix on the embedded server states this check's step count, and it is the count of
/// `STEPS`.
#[test]
fn the_appendix_states_the_step_count() {
    clients::the_appendix_says(&format!(
        "one list of {} kubectl v1.37.2 commands",
        STEPS.len()
    ));
}
