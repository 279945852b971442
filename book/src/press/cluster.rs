//! `controlloop cluster up|down|status|env`: the real control plane in one command.
//!
//! A wrapper around the Go command of this repository, `upstream/controlplane` (its README
//! says what it builds and runs: etcd v3.7.0, kube-apiserver, kube-controller-manager and
//! kubectl at Kubernetes v1.37.2, TLS on 127.0.0.1). The wrapper finds `go`, builds that
//! command once into `target/controlplane/controlplane` (a built copy keeps its exit codes and
//! takes SIGTERM itself, which `go run` does not pass on), and runs its verbs. The binaries it
//! builds are reused by every later `up` (its own inputs check, 0.3 s).
//!
//! Steps, each named when it fails, with its log:
//!
//! 1. **find go**: `$GO`, else `go` on `PATH`, else `/usr/local/go/bin/go`;
//! 2. **build the controlplane command** (`go build`, log `target/controlplane/command-build.log`);
//! 3. **build the binaries** (the command's `build`, log `target/controlplane/logs/build.log`);
//! 4. **start** (the command's `up`; its own failures name their step and log file).
//!
//! A foreground `cluster up` stops everything it started on Ctrl-C or SIGTERM: it runs the
//! command's `down`, which stops the supervisor, which stops its processes newest first.
//! `--no-watch-cache` runs a second control plane (state in
//! `target/controlplane/no-watch-cache/`, the same binaries) whose kube-apiserver has
//! `--watch-cache=false`.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
};

use anyhow::{Context, bail};

use crate::lab::rig::real::Instance;

/// What `cluster` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verb {
    /// Build if needed, start, and (unless `detach`) stay in the foreground until Ctrl-C.
    Up {
        /// Return once ready, leaving the control plane running in the background.
        detach: bool,
        /// kube-apiserver's `--etcd-compaction-interval` (e.g. `5s`).
        compaction_interval: Option<String>,
        /// Further flags for the Go command's `up` (`--apiserver-arg=…`, `--http-proxy`).
        extra: Vec<String>,
    },
    /// Stop it (idempotent).
    Down,
    /// Whether it is up (exit 0) or not (exit 3), and where.
    Status {
        /// Print `current.json`.
        json: bool,
    },
    /// The shell exports that name it (`eval "$(cargo run -q -- cluster env)"`).
    Env,
}

/// Runs `verb` on `instance`, or on the control plane whose state is in `dir`. Returns the
/// exit code the command should end with.
pub fn run(verb: &Verb, instance: Instance, dir: Option<&Path>) -> anyhow::Result<i32> {
    let go = step("find go", find_go(&Probe::here()))?;
    let repo = crate::repo();
    let base = Instance::Main.dir();
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let command = base.join("controlplane");
    let log = base.join("command-build.log");
    step(
        "build the controlplane command",
        logged(
            Command::new(&go)
                .arg("-C")
                .arg(repo.join("upstream/controlplane"))
                .args(["build", "-o"])
                .arg(&command)
                .arg("."),
            &log,
        ),
    )?;
    let dir = state_dir(dir, instance)?;
    let state = |c: &mut Command| {
        c.arg("--dir").arg(&dir);
    };
    let cmd = || {
        let mut c = Command::new(&command);
        c.env("PATH", path_with(&go));
        c
    };
    match verb {
        Verb::Up {
            detach,
            compaction_interval,
            extra,
        } => {
            // The binaries are built once, under the main state folder; another instance
            // links to them.
            let status = cmd()
                .arg("build")
                .status()
                .context("running the controlplane command")?;
            if !status.success() {
                bail!(
                    "cluster up: step 'build the binaries' failed ({status}); log: {}",
                    base.join("logs/build.log").display()
                );
            }
            if dir != base {
                share_binaries(&base, &dir)?;
            }
            let mut up = cmd();
            up.arg("up");
            state(&mut up);
            if *detach {
                up.arg("--detach");
            }
            if let Some(c) = compaction_interval {
                up.arg("--compaction-interval").arg(c);
            }
            if instance == Instance::NoWatchCache {
                up.arg("--apiserver-arg=--watch-cache=false");
            }
            up.args(extra);
            let status = if *detach {
                up.status().context("running the controlplane command")?
            } else {
                foreground(up, || {
                    let mut down = cmd();
                    down.arg("down");
                    state(&mut down);
                    down.status()
                })?
            };
            if !status.success() && !*detach && interrupted(status) {
                return Ok(0);
            }
            if !status.success() {
                eprintln!(
                    "cluster up: the control plane did not start or stopped ({status}); the \
                     message above names the step and its log; all logs: {}",
                    dir.join("logs").display()
                );
            }
            Ok(status.code().unwrap_or(1))
        }
        Verb::Down => {
            let mut c = cmd();
            c.arg("down");
            state(&mut c);
            Ok(c.status()?.code().unwrap_or(1))
        }
        Verb::Status { json } => {
            let mut c = cmd();
            c.arg("status");
            state(&mut c);
            if *json {
                c.arg("--json");
            }
            Ok(c.status()?.code().unwrap_or(1))
        }
        Verb::Env => {
            let mut c = cmd();
            c.args(["env", "--timeout", "10s"]);
            state(&mut c);
            let out = c.stderr(Stdio::inherit()).output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            print!("{text}");
            if out.status.success() && instance == Instance::NoWatchCache {
                // The same exports under the second instance's names.
                for line in text.lines() {
                    if let Some(rest) = line.strip_prefix("export CONTROLLOOP_REAL_KUBECONFIG=") {
                        println!("export {}={rest}", instance.env_var());
                    }
                }
            }
            Ok(out.status.code().unwrap_or(1))
        }
    }
}

/// The state folder: `dir` made absolute against this process's working directory (the
/// caller's), else `instance`'s. The Go command is handed an absolute path because a relative
/// one is not taken from where the caller typed it everywhere: the supervisor that
/// `up --detach` starts runs in the state folder itself.
fn state_dir(dir: Option<&Path>, instance: Instance) -> anyhow::Result<PathBuf> {
    match dir {
        None => Ok(instance.dir()),
        Some(d) => std::path::absolute(d).with_context(|| {
            format!(
                "--dir {}: resolving it against the working directory",
                d.display()
            )
        }),
    }
}

/// Runs `up` in the foreground. On Ctrl-C or SIGTERM to this process, runs `down` (which stops
/// the supervisor and everything it started), then waits for `up` to end. A terminal's Ctrl-C
/// also reaches the supervisor itself, which then stops on its own; `down` waits for it.
fn foreground(
    mut up: Command,
    down: impl FnOnce() -> std::io::Result<ExitStatus>,
) -> anyhow::Result<ExitStatus> {
    let mut child = up.spawn().context("starting the controlplane command")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let signalled = runtime.block_on(async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut waiter = tokio::task::spawn_blocking(move || {
            // Poll: the child is waited for below, after `down`, if a signal came first.
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => return (child, Some(status)),
                    Ok(None) => std::thread::sleep(std::time::Duration::from_millis(100)),
                    Err(_) => return (child, None),
                }
            }
        });
        tokio::select! {
            done = &mut waiter => Ok::<_, std::io::Error>(Err(done.expect("the waiter does not panic"))),
            _ = tokio::signal::ctrl_c() => Ok(Ok(waiter)),
            _ = term.recv() => Ok(Ok(waiter)),
        }
    })?;
    match signalled {
        Err((mut child, status)) => Ok(match status {
            Some(s) => s,
            None => child.wait()?,
        }),
        Ok(waiter) => {
            eprintln!("cluster up: stopping everything it started");
            let stopped = down().context("running the controlplane command's down")?;
            let (mut child, status) = runtime.block_on(waiter)?;
            let status = match status {
                Some(s) => s,
                None => child.wait()?,
            };
            if !stopped.success() {
                bail!("cluster up: step 'stop' failed ({stopped})");
            }
            Ok(status)
        }
    }
}

/// Whether `up` ended because it was told to stop (the Go command exits 130 then, or dies of
/// the signal).
fn interrupted(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(status.code(), Some(130) | Some(143) | Some(0)) || status.signal().is_some()
}

/// Points `dir/bin` at the main state folder's binaries, so a second control plane starts
/// without a second build.
fn share_binaries(base: &Path, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let link = dir.join("bin");
    if link.symlink_metadata().is_err() {
        std::os::unix::fs::symlink(base.join("bin"), &link)
            .with_context(|| format!("linking {} to the built binaries", link.display()))?;
    }
    Ok(())
}

/// `PATH` with the folder of `go` first, for the Go command's own `go` calls (its build).
fn path_with(go: &Path) -> OsString {
    let mut dirs: Vec<PathBuf> = go.parent().map(Path::to_path_buf).into_iter().collect();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

/// Names the step in a failure.
fn step<T>(name: &str, result: anyhow::Result<T>) -> anyhow::Result<T> {
    result.map_err(|e| anyhow::anyhow!("cluster: step '{name}' failed: {e:#}"))
}

/// Runs `command` with its output in `log`; on failure, says where the log is and its end.
fn logged(command: &mut Command, log: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::create(log)?;
    let status = command
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    bail!("{status}; log: {}\n{}", log.display(), tail.join("\n"))
}

/// Where to look for `go`.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// `$GO`.
    pub go: Option<OsString>,
    /// `$PATH`.
    pub path: Option<OsString>,
    /// Further places, in order.
    pub fallbacks: Vec<PathBuf>,
}

impl Probe {
    /// This process's environment, with `/usr/local/go/bin/go` (the official tarball's place)
    /// as the fallback.
    pub fn here() -> Probe {
        Probe {
            go: std::env::var_os("GO"),
            path: std::env::var_os("PATH"),
            fallbacks: vec![PathBuf::from("/usr/local/go/bin/go")],
        }
    }
}

/// The `go` command: `$GO`, else on `PATH`, else a fallback; an error naming what is missing
/// and how to get it.
pub fn find_go(probe: &Probe) -> anyhow::Result<PathBuf> {
    if let Some(go) = probe.go.as_ref().filter(|g| !g.is_empty()) {
        let go = PathBuf::from(go);
        if go.is_file() {
            return Ok(go);
        }
        bail!("$GO is {}, which is not a file", go.display());
    }
    let on_path = probe
        .path
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("go"));
    if let Some(go) = on_path
        .chain(probe.fallbacks.iter().cloned())
        .find(|p| p.is_file())
    {
        return Ok(go);
    }
    bail!(
        "the Go toolchain is missing: no `go` on PATH{}; the control plane is built from Go \
         modules, so install Go 1.26 or newer (https://go.dev/dl/) or set GO=/path/to/go",
        if probe.fallbacks.is_empty() {
            String::new()
        } else {
            format!(
                " nor at {}",
                probe
                    .fallbacks
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_state_folder_is_taken_from_the_callers_working_directory() {
        let here = std::env::current_dir().unwrap();
        let rel = state_dir(Some(Path::new("target/x")), Instance::Main).unwrap();
        assert_eq!(rel, here.join("target/x"));
        let dotted = state_dir(Some(Path::new("./target/../y")), Instance::Main).unwrap();
        assert!(
            dotted.is_absolute() && dotted.starts_with(&here),
            "{}",
            dotted.display()
        );
        assert_eq!(
            state_dir(Some(Path::new("/srv/plane")), Instance::Main).unwrap(),
            PathBuf::from("/srv/plane")
        );
        assert_eq!(
            state_dir(None, Instance::NoWatchCache).unwrap(),
            Instance::NoWatchCache.dir()
        );
    }

    #[test]
    fn a_missing_go_is_an_error_naming_the_tool_and_where_it_looked() {
        let probe = Probe {
            go: None,
            path: Some(OsString::from("/nonexistent-a:/nonexistent-b")),
            fallbacks: vec![PathBuf::from("/nonexistent-c/go")],
        };
        let e = find_go(&probe).unwrap_err().to_string();
        assert!(e.contains("Go toolchain is missing"), "{e}");
        assert!(
            e.contains("/nonexistent-c/go") && e.contains("go.dev/dl"),
            "{e}"
        );
        let e = find_go(&Probe {
            go: Some("/nonexistent/go".into()),
            ..probe
        })
        .unwrap_err()
        .to_string();
        assert_eq!(e, "$GO is /nonexistent/go, which is not a file");
    }

    #[test]
    fn go_is_found_on_path_before_the_fallbacks() {
        let dir = std::env::temp_dir().join(format!("find-go-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("go"), "").unwrap();
        let probe = Probe {
            go: None,
            path: Some(dir.clone().into_os_string()),
            fallbacks: vec![PathBuf::from("/nonexistent/go")],
        };
        assert_eq!(find_go(&probe).unwrap(), dir.join("go"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_failed_step_names_itself_and_its_log() {
        let log = std::env::temp_dir().join(format!("step-log-{}", std::process::id()));
        let e = step(
            "build the controlplane command",
            logged(Command::new("sh").args(["-c", "echo boom; exit 3"]), &log),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("cluster: step 'build the controlplane command' failed: exit status: 3"),
            "{e}"
        );
        assert!(
            e.contains(&log.display().to_string()) && e.ends_with("boom"),
            "{e}"
        );
        std::fs::remove_file(log).unwrap();
    }
}
