//! Watch over real HTTP through `kube::Api::watch` and kube_runtime's `watcher` + `reflector`:
//! resume, initial state, bookmarks, the streaming list, 410 after compaction, and the test
//! controls that break watches on purpose.

mod apiserver_support;

use apiserver_support::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::runtime::{reflector, watcher};
use serde_json::json;

fn ev(ty: &str, name: &str, rv: u64) -> (String, String, String) {
    (ty.to_string(), name.to_string(), rv.to_string())
}

#[tokio::test]
async fn a_watch_resumes_after_its_resource_version_and_replays_nothing_older() {
    let server = server().await;
    let api = cms(&server, "default");
    let a = create(&api, &cm("a", &[], "1")).await; // rv 2
    create(&api, &cm("b", &[], "1")).await; // rv 3
    let mut changed = a.clone();
    changed.data = Some([("v".to_string(), "2".to_string())].into());
    api.replace("a", &Default::default(), &changed)
        .await
        .unwrap(); // rv 4
    let mut w = open_watch(&api, &WatchParams::default(), "3").await;
    assert_eq!(
        next_event(&mut w, "history after rv 3 not replayed").await,
        ev("MODIFIED", "a", 4)
    );
    create(&api, &cm("c", &[], "1")).await;
    assert_eq!(
        next_event(&mut w, "live event not delivered").await,
        ev("ADDED", "c", 5)
    );
    api.delete("b", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        next_event(&mut w, "delete not delivered").await,
        ev("DELETED", "b", 6)
    );
}

#[tokio::test]
async fn a_watch_from_zero_sends_the_current_state_first() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("a", &[], "1")).await;
    create(&api, &cm("b", &[], "1")).await;
    let mut w = open_watch(&api, &WatchParams::default(), "0").await;
    assert_eq!(next_event(&mut w, "initial a").await, ev("ADDED", "a", 2));
    assert_eq!(next_event(&mut w, "initial b").await, ev("ADDED", "b", 3));
    create(&api, &cm("c", &[], "1")).await;
    assert_eq!(next_event(&mut w, "live c").await, ev("ADDED", "c", 4));
}

#[tokio::test]
async fn the_streaming_list_ends_its_initial_events_with_an_annotated_bookmark() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("a", &[], "1")).await;
    create(&api, &cm("b", &[], "1")).await;
    let wp = WatchParams::default().initial_events();
    let mut w = open_watch(&api, &wp, "").await;
    assert_eq!(next_event(&mut w, "initial a").await, ev("ADDED", "a", 2));
    assert_eq!(next_event(&mut w, "initial b").await, ev("ADDED", "b", 3));
    assert_eq!(
        next_event(&mut w, "initial-events-end bookmark missing").await,
        ev("BOOKMARK(initial-events-end)", "", 3)
    );
    create(&api, &cm("c", &[], "1")).await;
    assert_eq!(
        next_event(&mut w, "live c after the stream").await,
        ev("ADDED", "c", 4)
    );
    let log = server.requests();
    let q = &log.iter().find(|r| r.is_watch()).unwrap().query;
    assert!(
        q.contains("sendInitialEvents=true") && q.contains("resourceVersionMatch=NotOlderThan"),
        "{q}"
    );
}

#[tokio::test]
async fn bookmarks_carry_kind_api_version_and_the_watchers_position() {
    let server = server().await;
    let api = cms(&server, "default");
    let wp = WatchParams::default().labels("app=web");
    let mut w = open_watch(&api, &wp, "1").await;
    create(&api, &cm("not-web", &[("app", "db")], "1")).await; // rv 2: filtered out
    // The write has committed, so the watcher considers rv 2 before it answers the request.
    server.send_bookmarks();
    let bm = within("bookmark never sent", w.next())
        .await
        .unwrap()
        .unwrap();
    let WatchEvent::Bookmark(bm) = bm else {
        panic!("expected a bookmark, got {bm:?}")
    };
    assert_eq!(
        (bm.types.kind.as_str(), bm.types.api_version.as_str()),
        ("ConfigMap", "v1")
    );
    assert_eq!(
        bm.metadata.resource_version, "2",
        "a bookmark carries events filtered out"
    );

    let mut plain = open_watch(&api, &WatchParams::default().disable_bookmarks(), "2").await;
    server.send_bookmarks();
    create(&api, &cm("x", &[], "1")).await;
    assert_eq!(
        next_event(&mut plain, "event after bookmark request").await,
        ev("ADDED", "x", 3)
    );
}

#[tokio::test]
async fn an_object_leaving_the_selector_is_deleted_for_the_watcher() {
    let server = server().await;
    let api = cms(&server, "default");
    let mut w = open_watch(&api, &WatchParams::default().labels("app=web"), "1").await;
    create(&api, &cm("a", &[("app", "web")], "1")).await;
    let set = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"app": v}}}));
    api.patch("a", &PatchParams::default(), &set("db"))
        .await
        .unwrap();
    api.patch("a", &PatchParams::default(), &set("web"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut w, "create").await, ev("ADDED", "a", 2));
    assert_eq!(
        next_event(&mut w, "leave selector").await,
        ev("DELETED", "a", 3)
    );
    assert_eq!(
        next_event(&mut w, "re-enter selector").await,
        ev("ADDED", "a", 4)
    );
}

#[tokio::test]
async fn a_watch_from_a_compacted_version_gets_200_and_an_error_event_410() {
    let server = server().await;
    let api = cms(&server, "default");
    for i in 0..3 {
        create(&api, &cm(&format!("c{i}"), &[], "1")).await;
    }
    assert_eq!(server.compact(), 4);
    let mut w = open_watch(&api, &WatchParams::default(), "2").await;
    assert_eq!(
        next_event(&mut w, "no ERROR event").await,
        ev("ERROR", "Expired", 410)
    );
    assert!(
        within("stream not closed after ERROR", w.next())
            .await
            .is_none()
    );
    let log = server.requests();
    let watch = log.iter().rev().find(|r| r.is_watch()).unwrap();
    assert_eq!(
        watch.status, 200,
        "the expiry travels in the stream, not the status line"
    );
    // At or after the compacted revision, watching works.
    let mut ok = open_watch(&api, &WatchParams::default(), "4").await;
    create(&api, &cm("d", &[], "1")).await;
    assert_eq!(
        next_event(&mut ok, "watch at compacted rv").await,
        ev("ADDED", "d", 5)
    );
}

#[tokio::test]
async fn close_watches_ends_open_streams_cleanly() {
    let server = server().await;
    let api = cms(&server, "default");
    let mut w = open_watch(&api, &WatchParams::default(), "1").await;
    server.close_watches();
    assert!(
        within("close_watches did not end the stream", w.next())
            .await
            .is_none()
    );
}

#[tokio::test]
async fn expire_watches_sends_an_open_stream_error_410_then_ends_it() {
    let server = server().await;
    let api = cms(&server, "default");
    let mut w = open_watch(&api, &WatchParams::default(), "1").await;
    create(&api, &cm("a", &[], "1")).await;
    assert_eq!(
        next_event(&mut w, "no ADDED before the expiry").await,
        ev("ADDED", "a", 2)
    );
    server.expire_watches();
    assert_eq!(
        next_event(&mut w, "expire_watches sent no ERROR event").await,
        ev("ERROR", "Expired", 410)
    );
    assert!(
        within("stream not closed after ERROR", w.next())
            .await
            .is_none()
    );
}

#[tokio::test]
async fn dropped_events_and_silent_writes_take_revisions_but_reach_no_watcher() {
    let server = server().await;
    let api = cms(&server, "default");
    let mut w = open_watch(&api, &WatchParams::default(), "1").await;
    server.drop_next_events(1);
    create(&api, &cm("dropped", &[], "1")).await; // rv 2, hidden
    let mut silent = cm("silent", &[], "1");
    silent.metadata.namespace = Some("default".into());
    let stored = server.silent_write(&silent).unwrap(); // rv 3, hidden
    assert_eq!(stored.metadata.resource_version.as_deref(), Some("3"));
    create(&api, &cm("seen", &[], "1")).await; // rv 4
    assert_eq!(
        next_event(&mut w, "visible write").await,
        ev("ADDED", "seen", 4)
    );
    let names: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(
        names,
        ["dropped", "seen", "silent"],
        "a relist sees what the watch missed"
    );
}

/// The reflector pattern end to end: kube_runtime's watcher lists, watches, meets a 410 after
/// compaction, relists, and its store converges on the server's state, including writes the
/// watch never delivered.
#[tokio::test]
async fn kube_runtime_watcher_relists_after_410_and_its_store_converges() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("a", &[], "1")).await;
    create(&api, &cm("b", &[], "1")).await;
    let (store, writer) = reflector::store::<ConfigMap>();
    let all: Api<ConfigMap> = Api::all(server.client());
    let mut stream = reflector(writer, watcher(all, watcher::Config::default())).boxed();
    let names = |s: &reflector::Store<ConfigMap>| {
        let mut n: Vec<String> = s
            .state()
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        n.sort();
        n
    };
    within("initial list never completed", async {
        while !matches!(stream.try_next().await, Ok(Some(watcher::Event::InitDone))) {}
    })
    .await;
    assert_eq!(names(&store), ["a", "b"]);

    // Two writes the watch never delivers, then compaction past the client's last RV (3) and
    // a dropped connection: the re-watch from RV 3 meets 410.
    server.drop_next_events(2);
    create(&api, &cm("c", &[], "1")).await;
    api.delete("a", &DeleteParams::default()).await.unwrap();
    server.compact();
    server.close_watches();
    let mut saw_410 = false;
    within("the store never converged after the 410", async {
        loop {
            match stream.next().await {
                Some(Err(watcher::Error::WatchError(s))) if s.code == 410 => saw_410 = true,
                Some(Ok(watcher::Event::InitDone)) if saw_410 => break,
                Some(_) => {}
                None => panic!("the watcher stream ended"),
            }
        }
    })
    .await;
    assert_eq!(names(&store), ["b", "c"]);
    let log = server.requests();
    let lists = log
        .iter()
        .filter(|r| !r.is_watch() && r.method == "GET")
        .count();
    assert_eq!(lists, 2, "one initial list and one relist: {log:#?}");
}

#[tokio::test]
async fn kube_runtime_streaming_list_fills_the_store_without_a_list_request() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("a", &[], "1")).await;
    let (store, writer) = reflector::store::<ConfigMap>();
    let cfg = watcher::Config::default().streaming_lists();
    let mut stream = reflector(writer, watcher(api.clone(), cfg)).boxed();
    within("streaming list never completed", async {
        while !matches!(stream.try_next().await, Ok(Some(watcher::Event::InitDone))) {}
    })
    .await;
    assert_eq!(store.state().len(), 1);
    create(&api, &cm("b", &[], "1")).await;
    within("live event never reached the store", async {
        while store.state().len() < 2 {
            stream.try_next().await.unwrap();
        }
    })
    .await;
    let log = server.requests();
    assert!(
        log.iter()
            .filter(|r| r.method == "GET")
            .all(|r| r.is_watch()),
        "{log:#?}"
    );
}
