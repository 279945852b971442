//! Chapter 19's four tests of its operator, each written once, over any `kube::Client`: the
//! embedded server in-process under tokio's paused clock, or kube-apiserver on the real
//! clock. Each runs the operator in a namespace of its own and stops it at the end.
//!
//! Every wait has a deadline on tokio's clock (virtual in-process, real on a real server) and
//! fails with what it waited for and what the server held then, never by hanging.

use std::{future::Future, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::wait::{Condition, await_condition},
};
use tokio::time::Instant;

use super::operator::{CHECKED, Operator, Probe, page_name, run};
use super::site::{Site, SiteSpec};

/// Why a test failed: what did not hold, and what the server held then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Failed(pub String);

impl From<kube::Error> for Failed {
    fn from(e: kube::Error) -> Failed {
        Failed(format!("a request failed: {e}"))
    }
}

/// The site every test creates.
pub const SITE: &str = "web";

/// One test's world: a client, its own namespace, the operator running there, and the probe
/// the test turns off.
pub struct World {
    /// The client, for the operator and the test.
    pub client: Client,
    /// The test's namespace.
    pub namespace: String,
    /// The operator under test.
    pub operator: Operator,
    /// The site's health, as the operator's probe sees it.
    pub probe: Arc<Probe>,
    running: tokio::task::JoinHandle<()>,
}

impl World {
    /// Creates `namespace`, starts `operator` there, and creates the site (message `v1`).
    pub async fn start(
        client: Client,
        namespace: &str,
        operator: Operator,
    ) -> Result<World, Failed> {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.to_string());
        namespaces.create(&PostParams::default(), &ns).await?;
        let probe = Arc::new(Probe::default());
        let running = run(client.clone(), namespace, operator, probe.clone());
        let world = World {
            client,
            namespace: namespace.to_string(),
            operator,
            probe,
            running,
        };
        let site = Site::new(
            SITE,
            SiteSpec {
                message: "v1".into(),
            },
        );
        world.sites().create(&PostParams::default(), &site).await?;
        Ok(world)
    }

    /// The sites of the test's namespace.
    pub fn sites(&self) -> Api<Site> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The ConfigMaps of the test's namespace.
    pub fn pages(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Waits until the object `name` of `api` meets `condition`, within `deadline`.
    pub async fn until<K>(
        &self,
        api: Api<K>,
        name: &str,
        what: &str,
        deadline: Duration,
        condition: impl Condition<K>,
    ) -> Result<(), Failed>
    where
        K: Clone + std::fmt::Debug + Send + serde::de::DeserializeOwned + kube::Resource + 'static,
    {
        match tokio::time::timeout(deadline, await_condition(api, name, condition)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(Failed(format!("{what}: the watch failed: {e}"))),
            Err(_) => Err(Failed(format!(
                "{what}: not within {deadline:?}; the server held {}",
                self.state().await
            ))),
        }
    }

    /// Waits until the operator has done its work on the site: the page is there with the
    /// site's message and the site is marked checked at its generation.
    pub async fn settled(&self, deadline: Duration) -> Result<(), Failed> {
        self.until(
            self.sites(),
            SITE,
            "the site checked",
            deadline,
            |s: Option<&Site>| {
                s.is_some_and(|s| {
                    s.annotations().get(CHECKED)
                        == s.metadata.generation.map(|g| g.to_string()).as_ref()
                })
            },
        )
        .await?;
        let message = self.sites().get(SITE).await?.spec.message;
        let page = page_name(SITE);
        self.until(
            self.pages(),
            &page,
            "the page written",
            deadline,
            move |p: Option<&ConfigMap>| {
                p.and_then(|p| p.data.as_ref()?.get("message"))
                    .is_some_and(|m| *m == message)
            },
        )
        .await
    }

    /// The site and its page, as one line, for a failure message.
    pub async fn state(&self) -> String {
        let site = match self.sites().get_opt(SITE).await {
            Ok(Some(s)) => format!(
                "site {SITE} (message {:?}, finalizers {:?}, deleting {}, annotations {:?}, \
                 status {:?})",
                s.spec.message,
                s.finalizers(),
                s.metadata.deletion_timestamp.is_some(),
                s.annotations().get(CHECKED),
                s.status,
            ),
            Ok(None) => format!("no site {SITE}"),
            Err(e) => format!("site {SITE}: {e}"),
        };
        let page = match self.pages().get_opt(&page_name(SITE)).await {
            Ok(Some(p)) => format!("page {:?}", p.data.unwrap_or_default()),
            Ok(None) => "no page".to_string(),
            Err(e) => format!("page: {e}"),
        };
        format!("{site}; {page}")
    }

    /// Stops the operator.
    pub fn stop(self) {
        self.running.abort();
    }
}

/// How long a test waits for what one reconcile does, within the probe interval.
pub const PROMPT: Duration = Duration::from_secs(10);

/// Runs one test in its own world, and stops the operator whatever it returned.
pub async fn in_world<F, Fut>(
    client: Client,
    namespace: &str,
    operator: Operator,
    test: F,
) -> Result<Duration, Failed>
where
    F: FnOnce(Arc<World>) -> Fut,
    Fut: Future<Output = Result<Duration, Failed>>,
{
    let world = Arc::new(World::start(client, namespace, operator).await?);
    let outcome = test(world.clone()).await;
    if let Ok(world) = Arc::try_unwrap(world) {
        world.stop();
    }
    outcome
}

// book: ch19_tests
/// A site deleted with its namespace is gone within a minute: its finalizer was released
/// although the namespace's deletion removed the page before the cleanup ran.
pub async fn deleted_with_its_namespace(
    client: Client,
    ns: &str,
    op: Operator,
) -> Result<Duration, Failed> {
    in_world(client.clone(), ns, op, |w| async move {
        w.settled(PROMPT).await?;
        let namespaces: Api<Namespace> = Api::all(client);
        namespaces.delete(ns, &DeleteParams::default()).await?;
        let gone = |s: Option<&Site>| s.is_none();
        w.until(
            w.sites(),
            SITE,
            "the site gone",
            Duration::from_secs(60),
            gone,
        )
        .await?;
        Ok(Duration::ZERO)
    })
    .await
}

/// A spec changed while the operator works on the old one survives the operator's write.
pub async fn concurrent_change_kept(
    client: Client,
    ns: &str,
    op: Operator,
) -> Result<Duration, Failed> {
    in_world(client, ns, op, |w| async move {
        let page = page_name(SITE);
        let exists = |p: Option<&ConfigMap>| p.is_some();
        w.until(w.pages(), &page, "the page created", PROMPT, exists)
            .await?; // now probing
        let v2 = Patch::Merge(serde_json::json!({ "spec": { "message": "v2" } }));
        w.sites().patch(SITE, &PatchParams::default(), &v2).await?;
        w.settled(PROMPT).await?;
        match w.sites().get(SITE).await?.spec.message.as_str() {
            "v2" => Ok(Duration::ZERO),
            other => Err(Failed(format!(
                "the site's message is {other:?}: the change to v2 was lost"
            ))),
        }
    })
    .await
}
// book: end ch19_tests

// book: ch19_tests_more
/// A deleted page is written again at once, not at the next hourly probe.
pub async fn deleted_page_recreated(
    client: Client,
    ns: &str,
    op: Operator,
) -> Result<Duration, Failed> {
    in_world(client, ns, op, |w| async move {
        w.settled(PROMPT).await?;
        w.pages()
            .delete(&page_name(SITE), &DeleteParams::default())
            .await?;
        let back = |p: Option<&ConfigMap>| p.is_some();
        w.until(
            w.pages(),
            &page_name(SITE),
            "the page recreated",
            PROMPT,
            back,
        )
        .await?;
        Ok(Duration::ZERO)
    })
    .await
}

/// A site that stops answering is marked unhealthy by the next probe, which no event triggers;
/// returns how long after the site went down that took.
pub async fn probed_again(client: Client, ns: &str, op: Operator) -> Result<Duration, Failed> {
    in_world(client, ns, op, |w| async move {
        w.settled(PROMPT).await?;
        let healthy =
            |s: Option<&Site>| s.and_then(|s| s.status.as_ref()).is_some_and(|s| s.healthy);
        w.until(w.sites(), SITE, "the site healthy", PROMPT, healthy)
            .await?;
        tokio::time::sleep(2 * op.probe_takes).await; // the reconcile its own write caused ends
        w.probe.set_down(true);
        let down = Instant::now();
        let unhealthy = |s: Option<&Site>| {
            s.and_then(|s| s.status.as_ref())
                .is_some_and(|s| !s.healthy)
        };
        let within = 2 * op.probe_every;
        w.until(
            w.sites(),
            SITE,
            "the site marked unhealthy",
            within,
            unhealthy,
        )
        .await?;
        Ok(down.elapsed())
    })
    .await
}
// book: end ch19_tests_more

/// One of the four tests.
pub type Test = fn(
    Client,
    &str,
    Operator,
)
    -> std::pin::Pin<Box<dyn Future<Output = Result<Duration, Failed>> + Send + '_>>;

/// The four tests, by name, each the test written to catch one [`super::Bug`] (in
/// [`super::Bug::ALL`]'s order).
pub const TESTS: [(&str, Test); 4] = [
    ("deleted with its namespace", |c, ns, op| {
        Box::pin(deleted_with_its_namespace(c, ns, op))
    }),
    ("concurrent change kept", |c, ns, op| {
        Box::pin(concurrent_change_kept(c, ns, op))
    }),
    ("deleted page recreated", |c, ns, op| {
        Box::pin(deleted_page_recreated(c, ns, op))
    }),
    ("probed again", |c, ns, op| {
        Box::pin(probed_again(c, ns, op))
    }),
];
