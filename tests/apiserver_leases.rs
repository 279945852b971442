//! Leases (`coordination.k8s.io/v1`), the lock client-go's leader election holds: namespaced,
//! discoverable, watched like any kind, and with the lease strategy's rules (kubernetes
//! v1.37.2 `pkg/registry/coordination/lease/strategy.go`): every update carries a
//! resourceVersion, a stale one is a 409 Conflict, `ValidateLeaseSpec`'s bounds are 422, and
//! `spec.strategy` and `spec.preferredHolder` are dropped while the `CoordinatedLeaderElection`
//! gate is off (its default).

use std::time::Duration;

use controlloop::apiserver::{Cluster, ServerOptions};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, ObjectMeta, PostParams};

fn paused<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(f)
}

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what} hung: the in-process server never answered"))
}

fn lease(holder: &str, duration: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("lock".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    }
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other}"),
    }
}

#[test]
fn a_lease_is_created_read_and_replaced_with_its_resource_version() {
    paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let api: Api<Lease> = Api::namespaced(cluster.in_process_client(), "default");
        let created = within(
            "create",
            api.create(&PostParams::default(), &lease("a", 15)),
        )
        .await
        .unwrap();
        assert!(created.metadata.resource_version.is_some());
        assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
        let mut next = created.clone();
        next.spec.as_mut().unwrap().holder_identity = Some("b".into());
        let replaced = within(
            "replace",
            api.replace("lock", &PostParams::default(), &next),
        )
        .await
        .unwrap();
        assert_eq!(replaced.spec.unwrap().holder_identity.as_deref(), Some("b"));
        // The first candidate's write, from the version it read: refused, so only one wins.
        let stale = within(
            "stale replace",
            api.replace("lock", &PostParams::default(), &created),
        )
        .await
        .unwrap_err();
        assert_eq!(code(stale), 409);
        let got = within("get", api.get("lock")).await.unwrap();
        assert_eq!(got.spec.unwrap().holder_identity.as_deref(), Some("b"));
    });
}

#[test]
fn an_update_without_a_resource_version_is_422_and_the_spec_bounds_are_validated() {
    paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let api: Api<Lease> = Api::namespaced(cluster.in_process_client(), "default");
        within(
            "create",
            api.create(&PostParams::default(), &lease("a", 15)),
        )
        .await
        .unwrap();
        let unconditional = within(
            "replace",
            api.replace("lock", &PostParams::default(), &lease("b", 15)),
        )
        .await
        .unwrap_err();
        assert_eq!(code(unconditional), 422);
        let mut zero = lease("a", 0);
        zero.metadata.name = Some("zero".into());
        let e = within("create", api.create(&PostParams::default(), &zero))
            .await
            .unwrap_err();
        match e {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 422);
                assert!(
                    s.message.contains("spec.leaseDurationSeconds"),
                    "{}",
                    s.message
                );
            }
            other => panic!("{other}"),
        }
        let mut negative = lease("a", 15);
        negative.metadata.name = Some("negative".into());
        negative.spec.as_mut().unwrap().lease_transitions = Some(-1);
        let e = within("create", api.create(&PostParams::default(), &negative))
            .await
            .unwrap_err();
        assert_eq!(code(e), 422);
    });
}

#[test]
fn strategy_and_preferred_holder_are_dropped_while_the_gate_is_off() {
    paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let api: Api<Lease> = Api::namespaced(cluster.in_process_client(), "default");
        let mut l = lease("a", 15);
        let spec = l.spec.as_mut().unwrap();
        spec.strategy = Some("OldestEmulationVersion".into());
        spec.preferred_holder = Some("b".into());
        let created = within("create", api.create(&PostParams::default(), &l))
            .await
            .unwrap();
        let spec = created.spec.clone().unwrap();
        assert_eq!((spec.strategy, spec.preferred_holder), (None, None));
        let mut next = created;
        next.spec.as_mut().unwrap().strategy = Some("OldestEmulationVersion".into());
        let replaced = within(
            "replace",
            api.replace("lock", &PostParams::default(), &next),
        )
        .await
        .unwrap();
        assert_eq!(replaced.spec.unwrap().strategy, None);
    });
}

#[test]
fn leases_are_discoverable_in_their_group_and_namespaced() {
    paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let client = cluster.in_process_client();
        let req = http::Request::get("/apis/coordination.k8s.io/v1")
            .body(Vec::new())
            .unwrap();
        let doc: serde_json::Value = within("discovery", client.request(req)).await.unwrap();
        let leases = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "leases")
            .expect("leases are discoverable");
        assert_eq!(
            (leases["kind"].as_str(), leases["namespaced"].as_bool()),
            (Some("Lease"), Some(true))
        );
        let req = http::Request::get("/apis").body(Vec::new()).unwrap();
        let groups: serde_json::Value = within("discovery", client.request(req)).await.unwrap();
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "coordination.k8s.io"),
            "{groups}"
        );
    });
}
