//! Chapter 09's experiments: the short run under each of the nine spoken drills, each one driving the
//! crate's handler, queue or informer directly. The chapter shows each function's body as its
//! block (`book/tests/book_layout.rs` keeps the two identical); [`ch09_drills`] runs them for
//! `cargo run` and records the same snapshots.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    ResourceExt,
    api::{Api, DeleteParams, Patch, PatchParams, PostParams},
};
use parking_lot::Mutex;

use crate::lab::rig::{Widget, WidgetSpec};
use crate::{
    kit::snap,
    lab::{
        deletion::{
            self, Gap, World as Resources,
            gap::{GapSubject, Heard},
        },
        first_write::{Answer, Writes, storm},
        many_workers,
        rig::{self, NAMESPACE, Process, object, value_of},
        second_replica as replicas,
    },
};
use controlloop::{
    apiserver::{Cluster, ServerOptions},
    cache::{HandlerFuncs, InformerOptions, SharedIndexInformer},
    controller::{EnqueueRequestForObject, Event, EventHandler, Release},
    leaderelection::LeaderElectionConfig,
    retry::{DEFAULT_RETRY, retry_on_conflict_seeded},
    workqueue::{
        InMemoryMetrics, Queue, QueueConfig, QueueMetricsSnapshot, RateLimitingQueue,
        default_controller_rate_limiter,
    },
};

/// Drill 1: two different updates of one object make one request.
pub fn drill1() -> String {
    // book: ch09_drill1
    let widget = |replicas| {
        let mut w = Widget::new(
            "w",
            WidgetSpec {
                replicas,
                color: None,
            },
        );
        w.metadata.namespace = Some("default".into());
        Arc::new(w)
    };
    let mut requests = vec![];
    for (old, new) in [(1, 2), (2, 3)] {
        let event = Event::Update {
            old: Some(widget(old)),
            new: Some(widget(new)),
        };
        EnqueueRequestForObject.handle(&event, &mut |r| requests.push(r));
    }
    assert_eq!(requests[0], requests[1]); // two different changes, one request
    let out: Vec<String> = requests.iter().map(|r| format!("request {r}")).collect();
    out.join("\n")
    // book: end ch09_drill1
}

/// Drill 2: the queue alone, under a writer 1 ms apart: a free reconciler takes every
/// write, a 20 ms one a handful, and both end on the last value.
pub fn drill2() -> String {
    rig::paused(async {
        // book: ch09_drill2
        let mut lines = vec!["40 writes, 1 ms apart".to_owned()];
        for cost in [Duration::ZERO, Duration::from_millis(20)] {
            let (queue, latest) = (Queue::new(), Arc::new(AtomicU64::new(0)));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let (q, l, s) = (queue.clone(), latest.clone(), seen.clone());
            let worker = tokio::spawn(async move {
                while let Some(claim) = q.claim().await {
                    s.lock().push(l.load(Ordering::SeqCst)); // a reconcile reads the level now
                    tokio::time::sleep(cost).await; // works
                    drop(claim); // done: a key added meanwhile goes back, once
                }
            });
            for value in 1..=40 {
                latest.store(value, Ordering::SeqCst); // the write...
                queue.add("default/w"); // ...and its event, which queues the key
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await; // quiet
            worker.abort();
            let seen = seen.lock().clone();
            assert_eq!(seen.last(), Some(&40)); // whatever the count, it ends on the last value
            let (n, last) = (seen.len(), seen.last());
            let ms = cost.as_millis();
            lines.push(format!(
                "  cost {ms:>2} ms: {n:>2} reconciles, last value seen {last:?}"
            ));
        }
        lines.join("\n")
        // book: end ch09_drill2
    })
}

/// Drill 3: a resync replays the cache and asks the server nothing, so a lost event stays
/// lost.
pub fn drill3() -> String {
    rig::paused(async {
        // book: ch09_drill3
        let cluster = rig::widget_cluster().await;
        let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
        let widget = |color: &str| {
            let mut w = Widget::new(
                "w",
                WidgetSpec {
                    replicas: 1,
                    color: Some(color.into()),
                },
            );
            w.metadata.namespace = Some("default".into());
            w
        };
        api.create(&PostParams::default(), &widget("green"))
            .await
            .expect("a fresh widget");
        let ten_hours = Duration::from_secs(10 * 3600);
        let informer = Arc::new(SharedIndexInformer::new(
            api.clone(),
            InformerOptions::new(ten_hours),
        ));
        let replays = Arc::new(AtomicU64::new(0));
        let r = replays.clone();
        let on_update = move |old: Arc<Widget>, new: Arc<Widget>| {
            if Arc::ptr_eq(&old, &new) {
                r.fetch_add(1, Ordering::SeqCst); // a resync: the cached object as old and new
            }
        };
        let handler = HandlerFuncs::new().on_update(on_update);
        informer
            .add_event_handler(handler)
            .expect("a fresh informer");
        let running = informer.clone();
        let task = tokio::spawn(async move { running.run(futures::future::pending()).await });
        tokio::time::sleep(Duration::from_secs(1)).await; // listed and watching
        cluster
            .silent_write(&widget("blue"))
            .expect("a write whose event is lost");
        let mut asked = vec![];
        for _ in 0..3 {
            let tick = Duration::from_secs(1);
            tokio::time::sleep(ten_hours - 2 * tick).await; // just before the next resync
            let before = cluster.requests().len();
            tokio::time::sleep(2 * tick).await; // across it
            asked.push(cluster.requests().len() - before);
        }
        task.abort();
        let server = api.get("w").await.expect("the widget").spec.color;
        let cached = informer
            .indexer()
            .get_by_key("default/w")
            .expect("cached")
            .spec
            .color
            .clone();
        assert_eq!(replays.load(Ordering::SeqCst), 3); // three resyncs replayed the cache...
        assert_eq!(asked, [0, 0, 0]); // ...and asked the server nothing
        let replayed = replays.load(Ordering::SeqCst);
        format!(
            "resyncs {replayed}, requests at the three resync ticks: {asked:?}\n\
             server says {}, cache still says {}",
            server.unwrap_or_default(),
            cached.unwrap_or_default()
        )
        // book: end ch09_drill3
    })
}

/// Drill 4: `forget` without `done` holds the key for ever, and the queue's
/// unfinished-work gauges climb while it does; a late `done` lets it out, and they fall.
pub fn drill4() -> String {
    rig::paused(async {
        // book: ch09_drill4
        let metrics = InMemoryMetrics::new(); // client-go's workqueue metrics, kept in memory
        let config = QueueConfig {
            name: "drill4".into(),
            metrics_provider: Some(metrics.clone()),
        };
        let q = RateLimitingQueue::with_config(default_controller_rate_limiter(), config)
            .expect("a tokio runtime");
        q.add("default/w");
        let key = q.get().await.expect("the key");
        q.forget(&key); // meant as "finished"; done() is never called
        for _ in 0..3 {
            q.add("default/w"); // three more changes to the object
        }
        let an_hour = tokio::time::timeout(Duration::from_secs(3600), q.get()).await;
        assert_eq!(q.len(), 0);
        assert!(an_hour.is_err()); // an hour of virtual time, and no worker sees the key
        let held = metrics.snapshot("drill4").expect("a named queue");
        // The gauges see it: the key has been held, unfinished, for the whole hour.
        assert!(held.longest_running_processor_seconds >= 3599.5);
        q.done(&key);
        let after_done = tokio::time::timeout(Duration::from_secs(1), q.get()).await;
        let after_done = after_done.expect("the late done releases it");
        assert_eq!(after_done, Some("default/w")); // the late done lets it out, once
        q.done(&"default/w");
        tokio::time::sleep(Duration::from_secs(1)).await; // the gauges' next 500 ms tick
        let released = metrics.snapshot("drill4").expect("a named queue");
        assert_eq!(released.longest_running_processor_seconds, 0.0); // nothing held now
        let gauge = |m: &QueueMetricsSnapshot| {
            format!(
                "longest_running_processor_seconds {:.1}, unfinished_work_seconds {:.1}",
                m.longest_running_processor_seconds, m.unfinished_work_seconds
            )
        };
        format!(
            "forget without done, then 3 adds: len {}, get within an hour: nothing\n\
             after the hour: {}\n\
             after a late done: get returns {after_done:?}; then {}",
            q.len(),
            gauge(&held),
            gauge(&released)
        )
        // book: end ch09_drill4
    })
}

/// Drill 5: "act once when a field flips false → true" with the level last acted on kept in
/// memory, and kept in the object's status; the process restarts after the flip.
pub fn drill5() -> String {
    rig::paused(async {
        // book: ch09_drill5
        let cluster = rig::widget_cluster().await;
        let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
        let spec = WidgetSpec {
            replicas: 1,
            color: None,
        };
        let mut w = Widget::new("w", spec);
        w.metadata.namespace = Some("default".into());
        w.metadata.annotations = Some([("enabled".to_owned(), "false".to_owned())].into());
        api.create(&PostParams::default(), &w)
            .await
            .expect("a widget, off");

        // One reconcile: act if the field is on and the level last acted on is off, then keep
        // the level it acted on: in process memory (`Some`), or in the object's status (`None`).
        async fn reconcile(api: &Api<Widget>, memory: Option<&mut bool>) -> u64 {
            let w = api.get("w").await.expect("the widget");
            let now = w.annotations().get("enabled").map(String::as_str) == Some("true");
            let recorded = w.status.and_then(|s| s.message) == Some("acted on true".into());
            let before = memory.as_deref().copied().unwrap_or(recorded);
            match memory {
                Some(m) => *m = now,
                None if recorded != now => {
                    let status =
                        serde_json::json!({ "status": { "message": format!("acted on {now}") } });
                    let pp = PatchParams::default();
                    api.patch_status("w", &pp, &Patch::Merge(&status))
                        .await
                        .expect("the status write");
                }
                None => {}
            }
            u64::from(now && !before) // the action: one launch notice
        }

        let flip = serde_json::json!({ "metadata": { "annotations": { "enabled": "true" } } });
        api.patch("w", &PatchParams::default(), &Patch::Merge(&flip))
            .await
            .expect("the flip, false to true");
        let (mut in_memory, mut in_status) = (0, 0);
        let mut memory = false; // this process's memory of the level
        in_memory += reconcile(&api, Some(&mut memory)).await;
        in_status += reconcile(&api, None).await;
        let mut memory = false; // a restart: a new process, a new memory
        in_memory += reconcile(&api, Some(&mut memory)).await; // the initial list
        in_status += reconcile(&api, None).await;
        assert_eq!(in_status, 1); // one flip, one action, across the restart
        assert_eq!(in_memory, 2); // the memory acted again after the restart
        format!(
            "one flip false -> true, one restart\n\
             level acted on kept in memory:     {in_memory} actions\n\
             level acted on kept in the status: {in_status} action"
        )
        // book: end ch09_drill5
    })
}

/// Drill 6: two replicas under leader election; the leader paused for 5 s and for 30 s, then
/// one switch-on. A pause past the lease leaves two leaders for the renew deadline.
pub fn drill6() -> String {
    rig::paused(async {
        // book: ch09_drill6
        let config = LeaderElectionConfig::default(); // client-go's 15 s, 10 s, 2 s
        let (lease, renew) = (config.lease_duration, config.renew_deadline);
        let mut lines = vec![format!("lease {lease:?}, renew deadline {renew:?}")];
        for paused in [Duration::from_secs(5), Duration::from_secs(30)] {
            let world = replicas::World::new().await;
            let a = replicas::replica(&world, "a", config.clone());
            tokio::time::sleep(Duration::from_millis(1)).await;
            let b = replicas::replica(&world, "b", config.clone());
            tokio::time::sleep(Duration::from_secs(10)).await; // a leads, b waits
            a.pause.pause(); // a stops where it stands: no renewals
            let was_leading = world.log.paused("a");
            tokio::time::sleep(paused).await; // b sees the lease age meanwhile
            a.pause.resume(); // a still believes it leads
            world.log.resumed("a", was_leading);
            tokio::time::sleep(Duration::from_millis(1)).await;
            world.switch(true).await; // one switch-on
            tokio::time::sleep(renew * 2).await;
            let (both, notices) = (world.log.overlap(), world.actions.count());
            for r in [&a, &b] {
                r.crash.cancel();
            }
            let expected = if paused > lease {
                (renew, 2)
            } else {
                (Duration::ZERO, 1)
            };
            assert_eq!((both, notices), expected);
            lines.push(format!(
                "  a paused {paused:?}: both led for {} s, {notices} launch notice(s)",
                both.as_secs()
            ));
        }
        lines.join("\n")
        // book: end ch09_drill6
    })
}

/// Drill 7: a delete in a relist gap, without and with a finalizer; then a crash between
/// the cleanup and the finalizer's removal.
pub fn drill7() -> String {
    // book: ch09_drill7
    let mut lines = vec![];
    for design in [Gap::DropsTombstones, Gap::Finalizer] {
        let (world, heard) = (Arc::new(Resources::default()), Arc::new(Heard::default()));
        let subject = GapSubject::new(design, &world, &heard);
        rig::paused(async {
            let (cluster, api, w) = deletion::fresh().await;
            let process = Process::start(&subject, &api);
            let created = api.create(&PostParams::default(), &w).await;
            created.expect("a new widget");
            tokio::time::sleep(Duration::from_secs(1)).await; // reconciled: resource made
            cluster.expire_watches(); // every watch answered 410: the informer relists
            tokio::time::sleep(Duration::from_millis(10)).await;
            let deleted = api.delete(deletion::OBJECT, &DeleteParams::default()).await;
            deleted.expect("a delete no watch carries");
            tokio::time::sleep(Duration::from_secs(60)).await;
            process.kill();
        });
        let cleanups = world.calls.load(Ordering::SeqCst);
        let left = world.exists.load(Ordering::SeqCst);
        assert_eq!(
            (cleanups, left),
            (u64::from(!left), design == Gap::DropsTombstones)
        );
        let title = design.title();
        lines.push(format!(
            "{title}: cleanups {cleanups}, resource left {left}"
        ));
    }
    for idempotent in [true, false] {
        let crashed = deletion::run(idempotent, true); // dies after cleanup, before removal
        assert_eq!(crashed.cleanup_calls, 2); // the restart runs the cleanup again
        let found_done = crashed.already_gone;
        assert_eq!(found_done, u64::from(idempotent));
        lines.push(format!(
            "crash after cleanup, idempotent {idempotent}: cleanups 2, found already done {found_done}"
        ));
    }
    lines.join("\n")
    // book: end ch09_drill7
}

/// Drill 8: a stale update gets 409 and stores nothing; reading again and retrying builds on
/// the other write; eight writers at once under `DefaultRetry`.
pub fn drill8() -> String {
    rig::paused(async {
        // book: ch09_drill8
        let cluster = Cluster::new(ServerOptions::default());
        let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
        let pp = PostParams::default();
        let created = api.create(&pp, &object("c", 0)).await;
        created.expect("a fresh ConfigMap");
        let mut mine = api.get("c").await.expect("reading it"); // resourceVersion r
        let other = serde_json::json!({ "data": { "value": "1" } });
        let (merge, pp_patch) = (Patch::Merge(&other), PatchParams::default());
        let patched = api.patch("c", &pp_patch, &merge).await;
        patched.expect("another writer's change"); // the object is at r+1
        mine.data = Some([("value".to_owned(), "2".to_owned())].into());
        let stale = Answer::of_result(&api.replace("c", &pp, &mine).await); // carries r
        let after_409 = value_of(&api.get("c").await.expect("reading it"));
        let retried = retry_on_conflict_seeded(DEFAULT_RETRY, 0, || async {
            let mut c = api.get("c").await?; // read again on every attempt
            let next = value_of(&c).unwrap_or(0) + 1;
            c.data = Some([("value".to_owned(), next.to_string())].into());
            api.replace("c", &pp, &c).await
        });
        let stored = value_of(&retried.await.expect("the retried write"));
        assert_eq!((stale.code, after_409, stored), (409, Some(1), Some(2)));
        let eight = storm(8, DEFAULT_RETRY, "DefaultRetry", Writes::Conditional).await;
        assert_eq!((eight.succeeded, eight.gave_up, eight.stored), (5, 3, 5));
        format!(
            "stale replace: {} {}; stored after it: {after_409:?}\n\
             read again and retried: stored {stored:?}\n\
             8 writers, DefaultRetry: {} landed, {} gave up with a 409, counter {}",
            stale.code, stale.reason, eight.succeeded, eight.gave_up, eight.stored
        )
        // book: end ch09_drill8
    })
}

/// Drill 9: the drain rate for workers × keys, one key never on two workers; and one worker
/// starving the initial list behind a hot key.
pub fn drill9() -> String {
    rig::paused(async {
        // book: ch09_drill9
        let cost = Duration::from_millis(10); // one reconcile
        let mut lines = vec!["controller-runtime v0.24.1, a 10 ms reconcile".to_owned()];
        for (workers, keys) in [(1, 16), (4, 16), (16, 16), (16, 1)] {
            let p = many_workers::point(Release::V0_24, workers, keys, cost).await;
            assert_eq!(p.overlaps, 0); // one key is never on two workers at once
            let rounds = keys.div_ceil(workers) as u64; // each worker drains keys/workers
            assert_eq!(p.drain_ms, 10 * rounds);
            lines.push(format!(
                "  MaxConcurrentReconciles {workers:>2}, keys {keys:>2}: initial list in {:>3} ms",
                p.drain_ms
            ));
        }
        for workers in [1, 2] {
            // 16 cold keys listed, one hot key written every 1 ms for 1 s
            let s = many_workers::starvation(Release::V0_24, workers).await;
            assert_eq!(s.cold_served_during, if workers == 1 { 0 } else { 16 });
            lines.push(format!(
                "  {workers} worker(s), a hot key: {} of 16 cold keys served while it is hot",
                s.cold_served_during
            ));
        }
        lines.join("\n")
        // book: end ch09_drill9
    })
}

/// The references chapter 09 makes, checked, as the shortest text that carries the claim:
/// how many, of which kind, and which are dead.
pub fn references_text(refs: &[crate::kit::drills::Reference]) -> String {
    let tests = refs.iter().filter(|r| r.target.contains(".rs::")).count();
    let dead: Vec<&str> = refs
        .iter()
        .filter(|r| !r.resolves)
        .map(|r| r.target.as_str())
        .collect();
    format!(
        "references on this page: {} ({} to chapter sections, {tests} to tests)\ndead: {}\n",
        refs.len(),
        refs.len() - tests,
        if dead.is_empty() {
            "none".to_owned()
        } else {
            dead.join(", ")
        }
    )
}

/// What each drill's run claims, for this run's claims table.
const CLAIMS: [(&str, &str); 9] = [
    (
        "ch09_drill1",
        "Drill 1: two different updates of one object make one request",
    ),
    (
        "ch09_drill2",
        "Drill 2: the count follows time, and ends on the last value",
    ),
    (
        "ch09_drill3",
        "Drill 3: a resync asks the server nothing, so the drift stays",
    ),
    (
        "ch09_drill4",
        "Drill 4: Forget without Done strands the key; the gauges see it",
    ),
    (
        "ch09_drill5",
        "Drill 5: the level acted on survives a restart only in the status",
    ),
    (
        "ch09_drill6",
        "Drill 6: a leader paused past its lease acts beside the new one for the renew deadline",
    ),
    (
        "ch09_drill7",
        "Drill 7: a delete in a relist gap is cleaned up only from the level; a crash cleans up twice",
    ),
    (
        "ch09_drill8",
        "Drill 8: a 409 stores nothing; reading again and retrying builds on the other write",
    ),
    (
        "ch09_drill9",
        "Drill 9: workers help only up to the keys; one worker starves the list behind a hot key",
    ),
];

/// Runs the nine drills and the reference check, records chapter 09's snapshots, and adds
/// each drill's run to this run's claims table.
pub fn ch09_drills() {
    let runs = [
        drill1(),
        drill2(),
        drill3(),
        drill4(),
        drill5(),
        drill6(),
        drill7(),
        drill8(),
        drill9(),
    ];
    for ((name, claim), text) in CLAIMS.into_iter().zip(runs) {
        snap::text(name, &text);
        let figure = text.lines().map(str::trim).collect::<Vec<_>>().join("; ");
        crate::kit::claims::record(crate::kit::claims::Row::exact(claim, "09", name, figure));
    }
    let refs = crate::kit::drills::chapter_references("09-spoken-drills.md");
    assert!(refs.iter().all(|r| r.resolves), "dead references: {refs:?}");
    snap::text("ch09_references", references_text(&refs));
}
