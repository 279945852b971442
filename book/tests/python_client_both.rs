//! The official Kubernetes Python client on both servers: one script of what a Python
//! controller author does (`book/tests/python/client_both.py`: ConfigMaps created, read, listed,
//! updated and replaced, a stale update's 409, the three patch types, selectors, pages, watches
//! from a resourceVersion and from one long compacted, deletes with preconditions, a Widget and
//! its status subresource, server-side apply) run with the client `kubernetes==37.0.2` from PyPI
//! (generated from Kubernetes' `release-1.37` OpenAPI document) against the embedded API server
//! and against the real kube-apiserver v1.37.2 of `cargo run -- cluster up`, and the one without
//! its watch cache (`cluster up --no-watch-cache`), which alone is held to the watch from a
//! compacted resourceVersion (with its cache, kube-apiserver answers it from the cache's
//! window, as in the conformance suite). The script prints
//! one line per step (its label, the status code the client saw, and what it read, normalised:
//! no uids, timestamps or continue tokens, resourceVersions only as an order); each line must
//! be upstream's, and the two servers must agree, except where a step names an entry of the
//! conformance suite's one table of differences (`differences::KNOWN`).
//!
//! The client lives in a virtualenv of its own, `target/python-client`, made on first use
//! (`python3 -m venv`, then `pip install kubernetes==37.0.2`) and reused. Without `python3` or
//! the package the check is skipped in one line naming the command that enables it; under
//! `CI=true` (or `CONTROLLOOP_REAL_TIER=required`) that is a failure. With
//! `CONTROLLOOP_REAL_TIER=skip` nothing is installed: an existing virtualenv runs the embedded
//! half. Without a real server the embedded half runs alone, as in the conformance suite.

mod clients;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::mpsc,
    time::Duration,
};

use controlloop::apiserver::ApiServer;
use controlloop_book::lab::{
    real_server::conformance::{KUBE_APISERVER, NO_WATCH_CACHE, On, nonce, setup},
    rig::{
        self, Backend, Target,
        real::{Instance, or_skip, say},
    },
};

/// The client release, pinned: the newest on PyPI for this Python (3.10 and newer) when the
/// check was written. Its `kubernetes/client/__init__.py` names the OpenAPI document it was
/// generated from, `release-1.37`.
const PIN: &str = "37.0.2";
/// The script, under the repository.
const SCRIPT: &str = "book/tests/python/client_both.py";
/// The command that runs this check (and makes the virtualenv).
const ENABLE: &str = "cargo test -p controlloop-book --test python_client_both";

/// How long each subprocess may take before it is reported as hung.
const VENV_LIMIT: Duration = Duration::from_secs(120);
const PIP_LIMIT: Duration = Duration::from_secs(600);
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);
const CRD_LIMIT: Duration = Duration::from_secs(90);

/// One step of the script and upstream's answer.
struct Step {
    label: &'static str,
    /// kube-apiserver's answer: the status code the client saw, and what it read.
    code: u16,
    output: &'static str,
    /// The entry of the table of differences that explains why the embedded server answers
    /// otherwise, and the code and output it gives.
    known: Option<(&'static str, u16, &'static str)>,
    /// Which real servers it is compared with (the embedded server: always).
    on: On,
}

const fn step(label: &'static str, code: u16, output: &'static str) -> Step {
    Step {
        label,
        code,
        output,
        known: None,
        on: On::Both,
    }
}

const APPLY_ROW: &str = "server-side apply has no field ownership";
const APPLY_415: (&str, u16, &str) = (APPLY_ROW, 415, "ApiException reason=UnsupportedMediaType");

/// The steps, in the script's order: label, upstream's code and output.
#[rustfmt::skip]
const STEPS: &[Step] = &[
    step("create", 201, "a k=v"),
    step("create twice", 409, "ApiException reason=AlreadyExists"),
    step("get", 200, "a k=v"),
    step("get missing", 404, "ApiException reason=NotFound"),
    step("list", 200, "a"),
    step("update", 200, "a k=w; newer than the create: True"),
    step("stale update", 409, "ApiException reason=Conflict"),
    step("replace without resourceVersion", 200, "a k=r; newer than the update: True"),
    step("label (a dict: strategic merge)", 200, "a k=r labels app=web"),
    step("merge patch", 200, "a k=m labels app=web"),
    step("strategic merge patch", 200, "a k=m,s=1 labels app=web"),
    step("json patch (a list)", 200, "a k=j,s=1 labels app=web"),
    step("json patch failing test", 422, "ApiException reason=Invalid"),
    step("create c", 201, "c k=v labels app=web"),
    step("create d", 201, "d k=v labels app=db"),
    step("label selector", 200, "a c"),
    step("set-based selector", 200, "d"),
    step("field selector", 200, "c"),
    step("invalid label selector", 400, "ApiException reason=BadRequest"),
    step("unsupported field selector", 400, "ApiException reason=BadRequest"),
    step("page 1", 200, "a c; continue: yes"),
    step("page 2", 200, "d; continue: no"),
    step("watch from the list", 200, "MODIFIED a, MODIFIED a, MODIFIED a, MODIFIED a, MODIFIED a, MODIFIED a, ADDED c, ADDED d; each newer than the last: True; Watch.resource_version is the last event's: True"),
    // With its watch cache, kube-apiserver answers from the cache's window, which covers
    // everything since it started until the window slides (the conformance suite's too_old).
    Step { on: On::WithoutWatchCache, ..step("watch from resourceVersion 1", 410, "ApiException reason=Expired") },
    step("relist", 200, "a c d"),
    step("watch to its timeout", 200, "0 events, then the server ended the watch"),
    step("delete with another uid", 409, "ApiException reason=Conflict"),
    step("delete with a stale resourceVersion", 409, "ApiException reason=Conflict"),
    step("delete with matching preconditions", 200, "answer kind=Status"),
    step("get deleted", 404, "ApiException reason=NotFound"),
    step("delete missing", 404, "ApiException reason=NotFound"),
    step("widget create", 201, "w generation 1 replicas 1 status "),
    step("widget spec patch", 200, "w generation 2 replicas 2 status "),
    step("widget status", 200, "w generation 2 replicas 2 status observedGeneration=2,readyReplicas=2"),
    step("widget status through the main resource", 200, "w generation 2 replicas 2 status observedGeneration=2,readyReplicas=2"),
    step("widget spec through the status", 200, "w generation 2 replicas 2 status observedGeneration=2,readyReplicas=2"),
    step("widget without replicas", 422, "ApiException reason=Invalid"),
    step("widget list", 200, "w"),
    step("widget delete", 200, "answer kind=Status"),
    Step { known: Some(APPLY_415), ..step("server-side apply create", 201, "b k=alice managers alice(Apply)") },
    Step { known: Some(APPLY_415), ..step("server-side apply conflict", 409, "ApiException reason=Conflict") },
    Step { known: Some(APPLY_415), ..step("server-side apply force", 200, "b k=bob managers bob(Apply)") },
    Step { known: Some((APPLY_ROW, 404, "ApiException reason=NotFound")), ..step("after the apply", 200, "b k=bob") },
];

/// What one step answered: the script's line, parsed.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    label: String,
    code: u16,
    output: String,
}

/// The script's lines as answers, and its standard error for a reader of a failure.
fn parse(server: &str, out: &Output) -> Vec<Answer> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{server}: the Python client's script failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, '\t');
            let (Some(label), Some(code), Some(output)) =
                (parts.next(), parts.next(), parts.next())
            else {
                panic!("{server}: not a step's line: {line:?}");
            };
            Answer {
                label: label.to_owned(),
                code: code
                    .parse()
                    .unwrap_or_else(|_| panic!("{server}: {label}: code {code:?}")),
                output: output.to_owned(),
            }
        })
        .collect()
}

/// The steps whose answer is not `expected(step)` (`None`: not compared on this server), as
/// messages; a step the script did not answer, or answered out of order, is one too.
fn unmet(
    server: &str,
    answers: &[Answer],
    expected: impl Fn(&Step) -> Option<(u16, &'static str)>,
) -> Vec<String> {
    let mut missed: Vec<String> = STEPS
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match answers.get(i) {
            None => Some(format!("{server}: {}: no answer", s.label)),
            Some(a) if a.label != s.label => Some(format!(
                "{server}: {}: the script's step {i} is {:?}",
                s.label, a.label
            )),
            Some(a) => expected(s)
                .filter(|&(code, output)| a.code != code || a.output != output)
                .map(|(code, output)| {
                    format!(
                        "{server}: {}: expected {code} {output:?}, got {} {:?}",
                        s.label, a.code, a.output
                    )
                }),
        })
        .collect();
    missed.extend(
        answers
            .iter()
            .skip(STEPS.len())
            .map(|a| format!("{server}: {}: a step this test does not list", a.label)),
    );
    missed
}

/// The embedded server's expected answer: upstream's, or the one its table entry names.
fn embedded_expectation(s: &Step) -> Option<(u16, &'static str)> {
    Some(
        s.known
            .map_or((s.code, s.output), |(_, code, output)| (code, output)),
    )
}

/// Upstream's answer, where `server` is compared on the step.
fn upstream_on(server: &'static str) -> impl Fn(&Step) -> Option<(u16, &'static str)> + Copy {
    move |s| compared(s, server).then_some((s.code, s.output))
}

/// Whether a step is compared on the real server `server`.
fn compared(s: &Step, server: &str) -> bool {
    s.on == On::Both || server == NO_WATCH_CACHE
}

/// Whether a missing Python or client fails the check rather than skipping it: the real
/// tier's rule (`CI=true` or `CONTROLLOOP_REAL_TIER=required`, unless it is `skip`).
fn required() -> bool {
    match std::env::var("CONTROLLOOP_REAL_TIER")
        .unwrap_or_default()
        .as_str()
    {
        "skip" => false,
        "required" => true,
        _ => std::env::var("CI").is_ok_and(|v| v == "true"),
    }
}

/// Runs `cmd` to its end, or for at most `limit`: past it, kills the process and panics
/// naming `what` hung.
fn bounded(cmd: &mut Command, limit: Duration, what: &str) -> std::io::Result<Output> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out,
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("{what} hung for {limit:?} (pid {pid}, killed)")
        }
    }
}

/// The virtualenv's Python with the pinned client, made if missing (unless `install` is
/// false); why not, otherwise.
fn python(install: bool) -> Result<PathBuf, String> {
    let venv = controlloop_book::repo().join("target/python-client");
    let python = venv.join("bin/python");
    let has_pin = |python: &Path| {
        bounded(
            Command::new(python).args(["-c", "import kubernetes; print(kubernetes.__version__)"]),
            VENV_LIMIT,
            "importing the Python client",
        )
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == PIN)
    };
    if python.is_file() && has_pin(&python) {
        return Ok(python);
    }
    if !install {
        return Err(format!(
            "no virtualenv with kubernetes=={PIN} at {} (CONTROLLOOP_REAL_TIER=skip installs \
             nothing)",
            venv.display()
        ));
    }
    let failed = |what: &str, out: std::io::Result<Output>| match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`{what}` failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("`{what}` could not run: {e}")),
    };
    let make = format!("python3 -m venv {}", venv.display());
    failed(
        &make,
        bounded(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            VENV_LIMIT,
            &make,
        ),
    )?;
    let pip = format!("{} -m pip install kubernetes=={PIN}", python.display());
    failed(
        &pip,
        bounded(
            Command::new(&python)
                .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
                .arg(format!("kubernetes=={PIN}")),
            PIP_LIMIT,
            &pip,
        ),
    )?;
    if has_pin(&python) {
        Ok(python)
    } else {
        Err(format!(
            "{pip} succeeded, but `import kubernetes` does not give {PIN}"
        ))
    }
}

/// Runs the script against the server `kubeconfig` names, in namespace `ns`.
fn run(python: &Path, server: &str, kubeconfig: &Path, ns: &str) -> Vec<Answer> {
    let out = bounded(
        Command::new(python)
            .arg(controlloop_book::repo().join(SCRIPT))
            .arg(kubeconfig)
            .arg(ns)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        SCRIPT_LIMIT,
        &format!("the Python client's steps on {server}"),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    parse(server, &out)
}

/// A folder of this run's under `target/python-client-both`.
fn scratch() -> PathBuf {
    let dir = controlloop_book::repo()
        .join("target/python-client-both")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_python_client_gets_the_same_answers_from_both_servers() {
    let real = or_skip(Instance::Main);
    let no_cache = real.as_ref().and_then(|_| or_skip(Instance::NoWatchCache));
    let python = match python(std::env::var("CONTROLLOOP_REAL_TIER").as_deref() != Ok("skip")) {
        Ok(p) => p,
        Err(why) if required() => panic!(
            "the Python client check is required here (CI=true or CONTROLLOOP_REAL_TIER=required), but {why}"
        ),
        Err(why) => {
            say(&format!(
                "Python client check skipped: {why}; `{ENABLE}` makes the virtualenv (python3 \
                 with its venv module needed)"
            ));
            return;
        }
    };
    clients::every_named_difference_is_known(STEPS.iter().filter_map(|s| s.known).map(|k| k.0));
    let dir = scratch();
    let ns = format!("py-{}", nonce());
    let embedded = rig::real(async {
        let server = ApiServer::start()
            .await
            .expect("the embedded server starts");
        rig::widget::install_widgets(&server.client())
            .await
            .expect("the Widget CRDs are installed");
        let config = clients::embedded_kubeconfig(&dir, &server.url());
        let (python, ns) = (python.clone(), ns.clone());
        let answers = tokio::task::spawn_blocking(move || run(&python, "embedded", &config, &ns))
            .await
            .expect("the Python client's steps ran");
        server.shutdown().await;
        answers
    });
    let mut missed = unmet("embedded", &embedded, embedded_expectation);
    let _only = real.as_ref().map(|r| r.exclusive());
    for (server, real) in [(KUBE_APISERVER, &real), (NO_WATCH_CACHE, &no_cache)] {
        let Some(real) = real else { continue };
        rig::real(rig::within(
            CRD_LIMIT,
            &format!("installing the Widget CRDs on {server}"),
            async {
                let target = Target::start(&Backend::Kubeconfig(real.kubeconfig.clone()))
                    .await
                    .expect("a client of kube-apiserver");
                setup::install_crds(&target.client())
                    .await
                    .expect("the Widget CRDs are installed");
            },
        ));
        let theirs = run(&python, server, &real.kubeconfig, &ns);
        missed.extend(unmet(server, &theirs, upstream_on(server)));
        // Where no table entry is named, the servers agree (and where one is, they differ).
        for ((s, e), r) in STEPS.iter().zip(&embedded).zip(&theirs) {
            if compared(s, server) {
                let (ours, real) = ((e.code, e.output.as_str()), (r.code, r.output.as_str()));
                let named = s.known.is_some();
                missed.extend(clients::disagreement(s.label, named, server, ours, real));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        missed.is_empty(),
        "the Python client's answers:\n{}",
        missed.join("\n")
    );
}

/// The check fires: an expectation changed in one step (its code, then its output) is
/// reported for that step alone, and so is a step the script left out.
#[test]
fn a_changed_expectation_is_reported_for_its_step() {
    let answers: Vec<Answer> = STEPS
        .iter()
        .map(|s| Answer {
            label: s.label.to_owned(),
            code: s.code,
            output: s.output.to_owned(),
        })
        .collect();
    let upstream = upstream_on(NO_WATCH_CACHE);
    assert!(unmet("x", &answers, upstream).is_empty());
    for i in 0..STEPS.len() {
        let mut other = answers.clone();
        other[i].code += 1;
        let m = unmet("x", &other, upstream);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains(STEPS[i].label), "{}", m[0]);
        let mut other = answers.clone();
        other[i].output.push('!');
        assert_eq!(unmet("x", &other, upstream).len(), 1);
    }
    let mut short = answers.clone();
    short.pop();
    let m = unmet("x", &short, upstream);
    assert_eq!(
        m,
        [format!("x: {}: no answer", STEPS[STEPS.len() - 1].label)]
    );
}

/// Every step of the script is a step of this test, in the same order: the labels the script
/// passes to `step(...)` are `STEPS`' labels.
#[test]
fn the_script_and_the_test_list_the_same_steps() {
    let script = std::fs::read_to_string(controlloop_book::repo().join(SCRIPT)).unwrap();
    let labels: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("step(\""))
        .filter_map(|l| l.split('"').next())
        .collect();
    let ours: Vec<&str> = STEPS.iter().map(|s| s.label).collect();
    assert_eq!(labels, ours);
}

/// The appendix on the embedded server states this check's step count, and it is the count of
/// `STEPS`.
#[test]
fn the_appendix_states_the_step_count() {
    clients::the_appendix_says(&format!("one script of {} steps", STEPS.len()));
}
