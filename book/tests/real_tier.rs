//! The real tier's own checks: whether it runs here (one line when it does not), the `tls`
//! feature's error, how a kubeconfig authenticates (client certificate, bearer token, exec
//! plugin) against the real kube-apiserver, and `cluster up` stopping everything it started
//! on SIGTERM and on Ctrl-C.

use std::{path::Path, time::Duration};

use controlloop_book::lab::rig::{
    self, Backend, RigError, Target,
    real::{self, Instance, or_skip, process_start_time},
};

/// A kubeconfig for `server` with `user` (YAML lines under `user:`), written to `path`.
fn kubeconfig(path: &Path, server: &str, ca: Option<&Path>, user: &str) {
    let ca = ca.map_or(String::new(), |ca| {
        format!("    certificate-authority: {}\n", ca.display())
    });
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n\
         {ca}users:\n- name: u\n  user:\n{user}contexts:\n- name: x\n  context:\n    cluster: c\n    \
         user: u\ncurrent-context: x\n"
    );
    std::fs::write(path, text).unwrap();
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = controlloop_book::repo().join("target/real-tier-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}-{}", std::process::id()))
}

/// The one line `cargo test` prints about the real tier when it does not run (under `CI=true`
/// a missing server fails here), for both control planes.
#[test]
fn the_real_tier_says_whether_it_runs() {
    for instance in [Instance::Main, Instance::NoWatchCache] {
        if let Some(server) = or_skip(instance) {
            assert!(server.kubeconfig.is_file(), "{server:?}");
            real::say(&format!(
                "real tier: {instance:?} at {}",
                server.server.as_deref().unwrap_or("(from the environment)")
            ));
        }
    }
}

/// Without the `tls` feature, an `https` kubeconfig fails at once, naming the feature and the
/// command that enables it; with it, the client is built and an unreachable server fails
/// quickly, never hangs.
#[test]
fn an_https_kubeconfig_fails_at_once_without_tls_and_quickly_with_it() {
    let path = scratch("https.kubeconfig");
    kubeconfig(&path, "https://127.0.0.1:1", None, "    token: x\n");
    rig::real(async {
        let started = rig::within(
            Duration::from_secs(30),
            "a client for an unreachable https server",
            Target::start(&Backend::Kubeconfig(path.clone())),
        )
        .await;
        if real::TLS {
            let target = started.expect("with a TLS stack the client is built");
            let err = rig::within(
                Duration::from_secs(30),
                "a request to a closed port",
                target.api().get("x"),
            )
            .await
            .expect_err("nothing listens on port 1");
            assert!(!err.to_string().is_empty());
        } else {
            let Err(err) = started else {
                panic!("an https server without a TLS stack must fail");
            };
            assert!(matches!(err, RigError::NoTls { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains("`tls` feature") && text.contains("cargo test --features tls"),
                "{text}"
            );
        }
    });
    std::fs::remove_file(path).unwrap();
}

/// Who the real server says the client is (a SelfSubjectReview).
async fn whoami(path: &Path) -> String {
    let target = Target::start(&Backend::Kubeconfig(path.to_path_buf()))
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let req = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#.to_vec())
        .unwrap();
    let answer = rig::within(
        Duration::from_secs(30),
        "a SelfSubjectReview",
        target.client().request_text(req),
    )
    .await
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    v["status"]["userInfo"]["username"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The three ways kube's `Config::from_custom_kubeconfig` authenticates, each against the real
/// kube-apiserver: the admin's client certificate, a service account's bearer token, and an
/// exec plugin that prints that token as an ExecCredential.
#[test]
fn a_kubeconfig_authenticates_by_certificate_token_and_exec_plugin() {
    let Some(server) = or_skip(Instance::Main) else {
        return;
    };
    let url = server
        .server
        .clone()
        .or_else(|| std::env::var("CONTROLLOOP_REAL_SERVER").ok())
        .expect("current.json or CONTROLLOOP_REAL_SERVER names the server");
    let ca = std::env::var_os("CONTROLLOOP_REAL_CA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Instance::Main.dir().join("pki/ca.crt"));
    rig::real(async {
        assert_eq!(whoami(&server.kubeconfig).await, "controlloop-admin");
        // A service account and a token for it (the TokenRequest API).
        let admin = Target::start(&Backend::Kubeconfig(server.kubeconfig.clone()))
            .await
            .unwrap();
        let send = |method: &str, path: &str, body: &str| {
            http::Request::builder()
                .method(method)
                .uri(path)
                .header("content-type", "application/json")
                .body(body.as_bytes().to_vec())
                .unwrap()
        };
        let _ = admin
            .client()
            .request_text(send(
                "POST",
                "/api/v1/namespaces/default/serviceaccounts",
                r#"{"metadata":{"name":"controlloop-token"}}"#,
            ))
            .await; // 409 when an earlier run made it
        let token: serde_json::Value = serde_json::from_str(
            &admin
                .client()
                .request_text(send(
                    "POST",
                    "/api/v1/namespaces/default/serviceaccounts/controlloop-token/token",
                    r#"{"spec":{"expirationSeconds":600}}"#,
                ))
                .await
                .expect("a TokenRequest"),
        )
        .unwrap();
        let token = token["status"]["token"].as_str().unwrap().to_owned();
        let user = "system:serviceaccount:default:controlloop-token";

        let bearer = scratch("token.kubeconfig");
        kubeconfig(&bearer, &url, Some(&ca), &format!("    token: {token}\n"));
        assert_eq!(whoami(&bearer).await, user);

        let credential = scratch("credential.json");
        std::fs::write(
            &credential,
            format!(
                r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}"}}}}"#
            ),
        )
        .unwrap();
        let exec = scratch("exec.kubeconfig");
        kubeconfig(
            &exec,
            &url,
            Some(&ca),
            &format!(
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: cat\n      \
                 args: [\"{}\"]\n      interactiveMode: Never\n",
                credential.display()
            ),
        );
        assert_eq!(whoami(&exec).await, user);
        for p in [bearer, credential, exec] {
            std::fs::remove_file(p).unwrap();
        }
    });
}

/// `cluster up` in the foreground, then SIGTERM to it, and again with Ctrl-C (SIGINT to its
/// whole process group, as a terminal sends it): every process it started is gone, and so is
/// its `current.json`. Runs a control plane of its own (its own state folder, the built
/// binaries), beside the one the tier uses.
#[test]
fn cluster_up_stops_everything_it_started_on_sigterm_and_ctrl_c() {
    if or_skip(Instance::Main).is_none() {
        return; // needs Go and the built binaries, as the tier does
    }
    for (signal, group) in [("-TERM", false), ("-INT", true)] {
        stops_on(signal, group);
    }
}

/// One foreground `cluster up`, stopped by `signal` (to its process group if `group`).
fn stops_on(signal: &str, group: bool) {
    use std::os::unix::process::CommandExt as _;
    let dir = scratch(&format!("signal{signal}-plane"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_controlloop"))
        .args(["cluster", "up", "--dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("the controlloop command starts");
    let current = dir.join("current.json");
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let state: serde_json::Value = loop {
        if let Ok(text) = std::fs::read_to_string(&current)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && v["ready"] == true
        {
            break v;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "cluster up ended before it was ready"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the control plane in {} was not ready within 180 s",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let processes: Vec<(u64, u64)> = state["processes"]
        .as_array()
        .unwrap()
        .iter()
        .chain([&state["supervisor"]])
        .map(|p| (p["pid"].as_u64().unwrap(), p["startTime"].as_u64().unwrap()))
        .collect();
    assert!(
        processes.len() >= 4,
        "etcd, apiserver, controller manager, supervisor"
    );
    for &(pid, start) in &processes {
        assert_eq!(process_start_time(pid), Some(start), "pid {pid} runs");
    }
    let whom = if group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    let killed = std::process::Command::new("kill")
        .args([signal, "--", &whom])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cluster up did not stop within 120 s of {signal}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "cluster up ended with {status} on {signal}"
    );
    for (pid, start) in processes {
        assert_ne!(
            process_start_time(pid),
            Some(start),
            "pid {pid} still runs after {signal}"
        );
    }
    assert!(
        !current.exists(),
        "current.json stays behind after {signal}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
