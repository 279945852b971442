//! Requeue, error and deletion semantics of both controllers, on one server, under the paused
//! clock: each function starts this crate's `Controller` and kube-runtime's on the same
//! ConfigMap(s), scripts the same writes, and returns the [`Log`] of what each reconciler did.
//!
//! controller-runtime (`pkg/internal/controller/controller.go`, v0.22.5 and v0.24.1) turns a
//! result into queue calls: `requeue_after` is `forget` + `add_after`; an error is
//! `add_rate_limited`, whose delay doubles per failure of that key until `forget`. What a
//! later `add` does to a waiting `add_after` is the queue's to decide: client-go's delaying
//! queue keeps the waiting entry until its time; controller-runtime v0.24.1's priority queue
//! (its default, `pkg/controller/priorityqueue/priorityqueue.go`) keeps one entry per key and
//! the earlier time. So every run here whose result depends on the queue runs this crate's
//! controller at each [`Release`], logged as `Runtime::Controlloop(release)`. kube-runtime
//! 5.0.0 (`controller/mod.rs`, `scheduler.rs`) sends every request — a watch trigger or the
//! `Action` a reconcile returned — to one scheduler that keeps **one slot per object**: the
//! earlier request wins and replaces the later one. An error is handed to `error_policy`,
//! which returns the next `Action`, with no memory of earlier failures.

use std::{collections::HashMap, convert::Infallible, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    ResourceExt,
    api::DeleteParams,
    runtime::{Controller as KubeController, controller::Action, watcher},
};
use parking_lot::Mutex;

use super::{Log, Runtime};
use crate::lab::rig::{self, Backend, Fixture, OBJECT, value_of};
use controlloop::controller::{
    Context, Controller, ReconcileError, ReconcileResult, Reconciler, Release, Request,
};

/// A reconcile error for kube-runtime's reconcilers (it wants a `std::error::Error`).
#[derive(Debug, thiserror::Error)]
#[error("not yet")]
pub struct NotYet;

/// One second.
pub const SEC: Duration = Duration::from_secs(1);
/// One millisecond.
pub const MS: Duration = Duration::from_millis(1);

/// A fixture with the object (value 0) and any `others`, its informer not yet running.
pub async fn fixture(others: &[&str]) -> Fixture {
    let fixture = Fixture::new(&Backend::InProcess).await.expect("cluster");
    for name in std::iter::once(&OBJECT).chain(others) {
        fixture.target.create(name, 0).await.expect("create");
    }
    fixture
}

/// Runs this crate's controllers (and their informer), each in a task.
pub fn start(fixture: &mut Fixture, controllers: &[Controller<ConfigMap>]) {
    fixture.run_informer();
    for c in controllers {
        let c = c.clone();
        tokio::spawn(async move { c.run(futures::future::pending()).await });
    }
}

// book: ch11_fn_at_each_release
/// This crate's controller once per controller-runtime release, each with the reconciler
/// `reconcile(release)` returns, on `fixture`'s informer; the informer and the controllers
/// are started.
pub fn at_each_release<R: Reconciler<ConfigMap>>(
    fixture: &mut Fixture,
    name: &str,
    reconcile: impl Fn(Release) -> R,
) -> Vec<Controller<ConfigMap>> {
    let mut controllers = vec![];
    for release in Release::ALL {
        let controller = Controller::builder(name).release(release); // the only difference
        controllers.push(
            controller
                .build(&fixture.informer, reconcile(release))
                .expect("controller"),
        );
    }
    start(fixture, &controllers);
    controllers
}
// book: end ch11_fn_at_each_release

/// Stops every controller and the cluster.
pub async fn stop(
    fixture: Fixture,
    ours: Vec<Controller<ConfigMap>>,
    kube: tokio::task::JoinHandle<()>,
) {
    for c in ours {
        c.shutdown();
    }
    kube.abort();
    fixture.stop().await;
}

/// **A new trigger while a requeue is pending.** Every reconciler asks to look again in 10 s
/// (`always`: on every run; otherwise on its first run only); a write at 1 s triggers them
/// all. This crate's controller runs at each release, beside kube-runtime's. Reconcile times
/// in seconds, within 25 s.
pub fn requeue_pending(always: bool) -> Log {
    rig::paused(async move {
        // book: ch11_requeue
        let mut fixture = fixture(&[]).await;
        let log = Log::new();

        let ours = at_each_release(&mut fixture, "requeue", |release| {
            let seen = log.clone();
            move |_req: Request, _ctx: Context<ConfigMap>| {
                let first = seen.record(Runtime::Controlloop(release), "reconcile") == 1;
                async move {
                    Ok(if first || always {
                        ReconcileResult::requeue_after(10 * SEC)
                    } else {
                        ReconcileResult::done()
                    })
                }
            }
        });

        let seen = log.clone();
        let kube = log.drive(
            KubeController::new(fixture.target.api(), watcher::Config::default()).run(
                move |_cm: Arc<ConfigMap>, _: Arc<()>| {
                    let first = seen.record(Runtime::KubeRuntime, "reconcile") == 1;
                    async move {
                        Ok::<_, Infallible>(if first || always {
                            Action::requeue(10 * SEC)
                        } else {
                            Action::await_change()
                        })
                    }
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            ),
        );

        tokio::time::sleep(SEC).await;
        rig::set_value(&fixture.target.api(), OBJECT, 1)
            .await
            .expect("write"); // a new trigger at 1 s
        tokio::time::sleep(24 * SEC).await;
        stop(fixture, ours, kube).await;
        // book: end ch11_requeue
        log
    })
}

/// Failures per object, for the kube-runtime reconciler that builds its own backoff.
#[derive(Default)]
pub struct Failures(Mutex<HashMap<String, u32>>);

impl Failures {
    /// Counts one more failure of `name`; returns the count.
    pub fn fail(&self, name: &str) -> u32 {
        let mut m = self.0.lock();
        let n = m.entry(name.to_owned()).or_default();
        *n += 1;
        *n
    }
    /// Forgets `name`'s failures (what `forget` does for the workqueue's limiter).
    pub fn forget(&self, name: &str) {
        self.0.lock().remove(name);
    }
}

/// **ReconcileError backoff.** Every reconciler fails its first `failures` runs, then succeeds. This
/// crate's controller (at each release) retries through its release's default rate limiter
/// (per key: 5 ms, doubling); kube-runtime's `error_policy` returns a fixed
/// `Action::requeue(5 ms)` — unless the user builds a per-object backoff, as the third
/// controller does (a second kube-runtime controller, logged under the same name after a
/// `built:` prefix).
pub fn error_backoff(failures: usize) -> Log {
    rig::paused(async move {
        // book: ch11_error_backoff
        let mut fixture = fixture(&[]).await;
        let log = Log::new();

        let ours = at_each_release(&mut fixture, "backoff", |release| {
            let seen = log.clone();
            move |_req: Request, _ctx: Context<ConfigMap>| {
                let run = seen.record(Runtime::Controlloop(release), "run");
                async move {
                    if run <= failures {
                        Err(ReconcileError::retry("not yet")) // add_rate_limited: 5 ms, 10 ms, 20 ms…
                    } else {
                        Ok(ReconcileResult::done()) // forget: the next failure starts at 5 ms
                    }
                }
            }
        });

        let seen = log.clone();
        let fixed = log.drive(
            KubeController::new(fixture.target.api(), watcher::Config::default()).run(
                move |_cm: Arc<ConfigMap>, _: Arc<()>| {
                    let run = seen.record(Runtime::KubeRuntime, "run");
                    async move {
                        if run <= failures {
                            Err(NotYet)
                        } else {
                            Ok(Action::await_change())
                        }
                    }
                },
                |_, _: &NotYet, _| Action::requeue(5 * MS), // the same delay every time
                Arc::new(()),
            ),
        );

        let seen = log.clone();
        let built = log.drive(
            KubeController::new(fixture.target.api(), watcher::Config::default()).run(
                move |cm: Arc<ConfigMap>, failures_so_far: Arc<Failures>| {
                    let run = seen.record(Runtime::KubeRuntime, "built: run");
                    async move {
                        if run <= failures {
                            Err(NotYet)
                        } else {
                            failures_so_far.forget(&cm.name_any()); // the user's own `forget`
                            Ok(Action::await_change())
                        }
                    }
                },
                |cm, _: &NotYet, failures_so_far: Arc<Failures>| {
                    let n = failures_so_far.fail(&cm.name_any());
                    Action::requeue(5 * MS * 2u32.pow(n - 1)) // 5 ms, doubling, per object
                },
                Arc::new(Failures::default()),
            ),
        );

        tokio::time::sleep(10 * SEC).await;
        built.abort();
        stop(fixture, ours, fixed).await;
        // book: end ch11_error_backoff
        log
    })
}

/// What a reconciler of this crate notes: the value it read from the cache, or `gone`.
pub fn read(ctx: &Context<ConfigMap>, req: &Request) -> String {
    match ctx.get(req).and_then(|cm| value_of(&cm)) {
        Some(v) => format!("{} = {v}", req.name),
        None => format!("{} gone", req.name),
    }
}

/// **A deleted object.** Every reconciler notes what it read and, while the object exists,
/// asks to look again in 5 s; the object is deleted at 1 s. This crate's controller runs at
/// each release (what the Delete event's `add` does to the waiting requeue is the queue's
/// call). Entries within 10 s.
pub fn deleted() -> Log {
    rig::paused(async move {
        // book: ch11_deleted
        let mut fixture = fixture(&[]).await;
        let log = Log::new();

        let ours = at_each_release(&mut fixture, "deleted", |release| {
            let seen = log.clone();
            move |req: Request, ctx: Context<ConfigMap>| {
                let note = read(&ctx, &req); // "NAME = VALUE", or "NAME gone"
                seen.record(Runtime::Controlloop(release), &note);
                async move {
                    Ok(if note.ends_with("gone") {
                        ReconcileResult::done()
                    } else {
                        ReconcileResult::requeue_after(5 * SEC)
                    })
                }
            }
        });

        let seen = log.clone();
        let kube = log.drive(
            KubeController::new(fixture.target.api(), watcher::Config::default()).run(
                move |cm: Arc<ConfigMap>, _: Arc<()>| {
                    // kube-runtime hands over the object itself: there is no "gone" to read.
                    let v = value_of(&cm).unwrap_or_default();
                    seen.record(Runtime::KubeRuntime, format!("{} = {v}", cm.name_any()));
                    async { Ok::<_, Infallible>(Action::requeue(5 * SEC)) }
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            ),
        );

        tokio::time::sleep(SEC).await;
        let api = fixture.target.api();
        api.delete(OBJECT, &DeleteParams::default())
            .await
            .expect("delete");
        tokio::time::sleep(9 * SEC).await;
        stop(fixture, ours, kube).await;
        // book: end ch11_deleted
        log
    })
}

/// What [`relist_gap`] saw.
#[derive(Debug, Clone)]
pub struct RelistGap {
    /// What each reconciler did.
    pub log: Log,
    /// List requests (plain, or streaming lists) the server answered after the 410: one per
    /// client that relisted.
    pub relists: usize,
}

/// **A deletion during a relist gap.** Two objects, `OBJECT` and `survivor`; at 1 s every watch
/// ends with 410 Expired, so both clients back off and relist; 10 ms later, while no watch is
/// open, `OBJECT` is deleted. No requeue is involved, so this crate's controller runs at its
/// default release. Entries within 60 s.
pub fn relist_gap() -> RelistGap {
    rig::paused(async move {
        // book: ch11_relist_gap
        let mut fixture = fixture(&["survivor"]).await;
        let log = Log::new();

        let seen = log.clone();
        let ours = Controller::builder("relist")
            .build(
                &fixture.informer,
                move |req: Request, ctx: Context<ConfigMap>| {
                    seen.record(Runtime::ours(), read(&ctx, &req));
                    async { Ok(ReconcileResult::done()) }
                },
            )
            .expect("controller");
        start(&mut fixture, std::slice::from_ref(&ours));

        let seen = log.clone();
        let kube = log.drive(
            KubeController::new(fixture.target.api(), watcher::Config::default()).run(
                move |cm: Arc<ConfigMap>, _: Arc<()>| {
                    let v = value_of(&cm).unwrap_or_default();
                    seen.record(Runtime::KubeRuntime, format!("{} = {v}", cm.name_any()));
                    async { Ok::<_, Infallible>(Action::await_change()) }
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            ),
        );

        tokio::time::sleep(SEC).await;
        let cluster = fixture.target.cluster.clone().expect("embedded cluster");
        cluster.clear_requests();
        cluster.expire_watches(); // ERROR 410 on every open watch: both clients must relist
        tokio::time::sleep(10 * MS).await;
        let api = fixture.target.api();
        api.delete(OBJECT, &DeleteParams::default())
            .await
            .expect("delete"); // no watch is open to carry it
        tokio::time::sleep(59 * SEC).await;
        let relists = cluster
            .requests()
            .iter()
            .filter(|r| {
                r.method == "GET"
                    && r.path.ends_with("/configmaps")
                    && (!r.is_watch() || r.query.contains("sendInitialEvents=true"))
            })
            .count();
        stop(fixture, vec![ours], kube).await;
        // book: end ch11_relist_gap
        RelistGap { log, relists }
    })
}

/// The delays between successive runs of each reconciler noted `note`, in ms.
pub fn retry_delays(log: &Log, runtime: Runtime, note: &str) -> Vec<u64> {
    let at: Vec<Duration> = log
        .entries(runtime)
        .into_iter()
        .filter(|(_, n)| n == note)
        .map(|(t, _)| t)
        .collect();
    at.windows(2)
        .map(|w| (w[1] - w[0]).as_millis() as u64)
        .collect()
}
