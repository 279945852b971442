//! The real control plane on 127.0.0.1 (`upstream/controlplane`, started by
//! `cargo run -- cluster up`): where it is, whether this build can reach it, and the one line a
//! run prints when it cannot.
//!
//! The real tier (the conformance suite, the real-clock experiments on a real API server,
//! chapter 14's blocks) runs when a real server is *present* and this build has a TLS stack
//! (the book's `tls` feature). A server is present when `CONTROLLOOP_REAL_KUBECONFIG` names a
//! kubeconfig (as `go -C upstream/controlplane run . env` and `cargo run -- cluster env`
//! print), or when `target/controlplane/current.json` says ready and its supervisor is alive.
//!
//! What happens otherwise is one rule ([`tier`]), set by `CONTROLLOOP_REAL_TIER`:
//!
//! | `CONTROLLOOP_REAL_TIER` | server present, `tls` built | otherwise |
//! |---|---|---|
//! | unset, `CI` not `true` | runs | skips, in one line naming the command that enables it |
//! | unset under `CI=true`, or `required` | runs | **fails**, naming what is missing |
//! | `skip` | skips (one line) | skips (one line) |
//!
//! `.ci/run` sets `skip` for the README's `cargo test` (built without `tls`) and runs the
//! tier in a step of its own, with the control plane up and `--features tls`, where a missing
//! server fails.

use std::{
    fmt,
    path::{Path, PathBuf},
};

/// The command that starts the real control plane in the background.
pub const UP: &str = "cargo run -- cluster up --detach";
/// The command that runs the real tier once it is up.
pub const TEST: &str = "cargo test --features tls";

/// Which of the real control planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Instance {
    /// The control plane as `cluster up` starts it: kube-apiserver with its watch cache.
    Main,
    /// A second one whose kube-apiserver runs with `--watch-cache=false`: every list and watch
    /// goes to etcd (`cluster up --no-watch-cache`).
    NoWatchCache,
}

impl Instance {
    /// Its state folder under the repository (`current.json`, logs, certificates).
    pub fn dir(self) -> PathBuf {
        let base = crate::repo().join("target").join("controlplane");
        match self {
            Instance::Main => base,
            Instance::NoWatchCache => base.join("no-watch-cache"),
        }
    }

    /// The variable that names its kubeconfig, taking precedence over `current.json`.
    pub fn env_var(self) -> &'static str {
        match self {
            Instance::Main => "CONTROLLOOP_REAL_KUBECONFIG",
            Instance::NoWatchCache => "CONTROLLOOP_REAL_NO_WATCH_CACHE_KUBECONFIG",
        }
    }

    /// The command that starts it in the background.
    pub fn up(self) -> &'static str {
        match self {
            Instance::Main => UP,
            Instance::NoWatchCache => "cargo run -- cluster up --detach --no-watch-cache",
        }
    }
}

/// A running real API server this process can talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealServer {
    /// Which control plane.
    pub instance: Instance,
    /// Its admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// kube-apiserver's URL, when `current.json` says it.
    pub server: Option<String>,
    /// The kubectl built beside it (v1.37.2), when `current.json` says it.
    pub kubectl: Option<PathBuf>,
    /// kube-apiserver's `--etcd-compaction-interval`, when `current.json` says it.
    pub compaction_interval: Option<String>,
}

impl RealServer {
    /// Takes the real tier's lock, waiting for any other holder (another test binary, another
    /// doctest): the experiments share the real server's `default/controlloop-burst`, and a
    /// storm on it must be alone. Held until the guard drops.
    pub fn exclusive(&self) -> Exclusive {
        Exclusive::take(&Instance::Main.dir().join("tier.lock"))
    }
}

/// The real tier's lock: a folder created atomically, holding the holder's pid; a folder whose
/// holder is dead is taken over.
#[derive(Debug)]
pub struct Exclusive {
    path: PathBuf,
}

impl Exclusive {
    /// How long to wait for another holder.
    pub const LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);

    fn take(path: &Path) -> Exclusive {
        let start = std::time::Instant::now();
        let me = std::process::id().to_string();
        loop {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if std::fs::create_dir(path).is_ok() {
                let _ = std::fs::write(path.join("pid"), &me);
                return Exclusive {
                    path: path.to_path_buf(),
                };
            }
            let holder = std::fs::read_to_string(path.join("pid")).unwrap_or_default();
            let alive = holder
                .trim()
                .parse::<u64>()
                .is_ok_and(|pid| process_start_time(pid).is_some());
            // A holder that died (or one still writing its pid: give it a moment).
            if !alive && holder.trim() != me {
                std::thread::sleep(std::time::Duration::from_millis(200));
                let again = std::fs::read_to_string(path.join("pid")).unwrap_or_default();
                if again == holder {
                    let _ = std::fs::remove_dir_all(path);
                    continue;
                }
            }
            assert!(
                start.elapsed() < Self::LIMIT,
                "the real tier's lock {} is held by pid {} for over an hour (a deadlock?)",
                path.display(),
                holder.trim()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Why the real tier does not run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Absent {
    /// No real server is up (and no variable names one).
    NoServer(Instance),
    /// A server is up, but this build has no TLS stack to reach it.
    NoTls(Instance),
    /// `CONTROLLOOP_REAL_TIER=skip`.
    Skipped,
}

impl fmt::Display for Absent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Absent::NoServer(i) => {
                let go = if go_on_path() {
                    ""
                } else {
                    " (it needs Go 1.26 or newer on PATH)"
                };
                write!(
                    f,
                    "real tier skipped: no real API server is up; start one with `{}`{go}, \
                     then run `{TEST}`",
                    i.up()
                )
            }
            Absent::NoTls(_) => write!(
                f,
                "real tier skipped: a real API server is up, but this build has no TLS stack; \
                 run `{TEST}`"
            ),
            Absent::Skipped => write!(
                f,
                "real tier skipped: CONTROLLOOP_REAL_TIER=skip (it runs with `{UP}` and `{TEST}`)"
            ),
        }
    }
}

/// Whether this build has a TLS stack (the book's `tls` feature).
pub const TLS: bool = cfg!(feature = "tls");

/// The real server of `instance` if one is present, whether or not this build can reach it.
pub fn find(instance: Instance) -> Option<RealServer> {
    if let Some(path) = std::env::var_os(instance.env_var()).filter(|p| !p.is_empty()) {
        let from_state = read_state(&instance.dir());
        return Some(RealServer {
            instance,
            kubeconfig: PathBuf::from(path),
            server: from_state.as_ref().and_then(|s| s.server.clone()),
            kubectl: std::env::var_os("CONTROLLOOP_REAL_KUBECTL")
                .map(PathBuf::from)
                .or_else(|| from_state.as_ref().and_then(|s| s.kubectl.clone())),
            compaction_interval: from_state.and_then(|s| s.compaction_interval),
        });
    }
    read_state(&instance.dir()).map(|s| RealServer { instance, ..s })
}

/// The real tier's rule (see the module's table): the server to run on, or why not. Under
/// `CI=true` (or `CONTROLLOOP_REAL_TIER=required`) an absent server or TLS stack panics with
/// the line a skip would print.
pub fn tier(instance: Instance) -> Result<RealServer, Absent> {
    let mode = std::env::var("CONTROLLOOP_REAL_TIER").unwrap_or_default();
    let required = match mode.as_str() {
        "skip" => return Err(Absent::Skipped),
        "required" => true,
        "" => std::env::var("CI").is_ok_and(|v| v == "true"),
        other => panic!(
            "CONTROLLOOP_REAL_TIER={other:?}: expected `skip`, `required` or nothing (required \
             under CI=true, else run if a real server is up)"
        ),
    };
    let outcome = match find(instance) {
        None => Err(Absent::NoServer(instance)),
        Some(_) if !TLS => Err(Absent::NoTls(instance)),
        Some(server) => Ok(server),
    };
    match outcome {
        Err(absent) if required => panic!(
            "the real tier is required here (CI=true or CONTROLLOOP_REAL_TIER=required), but \
             {absent}"
        ),
        other => other,
    }
}

/// [`tier`], printing the skip line (to stderr, past the test harness's capture) when the
/// tier does not run, once per process however many tests skip. For tests and blocks:
/// `let Some(real) = rig::real::or_skip(Main) else { return };`.
pub fn or_skip(instance: Instance) -> Option<RealServer> {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    match tier(instance) {
        Ok(server) => Some(server),
        Err(absent) => {
            let line = absent.to_string();
            let mut said = SAID
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !said.contains(&line) {
                say(&line);
                said.push(line);
            }
            None
        }
    }
}

/// Writes one line to the process's stderr directly, which the test harness does not capture,
/// and to stdout through `println!`, which a doctest's output shows.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
    println!("{line}");
}

/// Whether a `go` command is on `PATH`.
pub fn go_on_path() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join("go").is_file()))
}

/// The fields of `current.json` the rig reads, if it says ready and its supervisor is alive.
fn read_state(dir: &Path) -> Option<RealServer> {
    let text = std::fs::read_to_string(dir.join("current.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v["ready"] != true {
        return None;
    }
    let pid = v["supervisor"]["pid"].as_u64()?;
    let start = v["supervisor"]["startTime"].as_u64()?;
    if process_start_time(pid) != Some(start) {
        return None; // a stale file: the supervisor died without removing it
    }
    let s = |k: &str| v[k].as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    Some(RealServer {
        instance: Instance::Main,
        kubeconfig: PathBuf::from(s("kubeconfig")?),
        server: s("server"),
        kubectl: s("kubectl").map(PathBuf::from),
        compaction_interval: s("compactionInterval"),
    })
}

/// Field 22 of `/proc/PID/stat` (the process's start time in clock ticks), which with the pid
/// names a process unambiguously, as the Go command records it.
pub fn process_start_time(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// A nonce for namespace names: the same for both servers in one run, another in the next.
pub fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:x}", (t.as_millis() as u64) & 0xff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_a_missing_one_has_none() {
        assert!(process_start_time(u64::from(std::process::id())).is_some());
        assert_eq!(process_start_time(u64::MAX), None);
    }

    #[test]
    fn a_stale_or_unready_state_file_is_no_server() {
        let dir = std::env::temp_dir().join(format!("real-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let me = u64::from(std::process::id());
        let start = process_start_time(me).unwrap();
        let write = |ready: bool, pid: u64, start: u64| {
            let v = serde_json::json!({
                "ready": ready, "kubeconfig": "/k", "server": "https://127.0.0.1:1",
                "supervisor": { "pid": pid, "startTime": start },
            });
            std::fs::write(dir.join("current.json"), v.to_string()).unwrap();
        };
        write(true, me, start);
        assert_eq!(
            read_state(&dir).map(|s| s.kubeconfig),
            Some(PathBuf::from("/k"))
        );
        write(false, me, start);
        assert_eq!(read_state(&dir), None, "not ready");
        write(true, me, start + 1);
        assert_eq!(read_state(&dir), None, "a reused pid");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn each_skip_line_names_the_command_that_enables_the_tier() {
        let line = Absent::NoServer(Instance::Main).to_string();
        assert!(line.contains(UP) && line.contains(TEST), "{line}");
        let line = Absent::NoServer(Instance::NoWatchCache).to_string();
        assert!(line.contains("--no-watch-cache"), "{line}");
        let line = Absent::NoTls(Instance::Main).to_string();
        assert!(line.contains("--features tls"), "{line}");
    }
}
