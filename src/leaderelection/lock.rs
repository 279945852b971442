//! The resource lock an elector holds, and its Lease implementation (kubernetes/client-go v0.37.2
//! `tools/leaderelection/resourcelock/interface.go`, `leaselock.go`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ObjectMeta, PostParams};
use parking_lot::Mutex;

use super::record::{
    LeaderElectionRecord, leader_election_record_to_lease_spec,
    lease_spec_to_leader_election_record,
};

/// Why a lock operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The API server refused or did not answer the request.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// An update before any get or create: the lock knows no resourceVersion to write from.
    #[error("lease not initialized, call get or create first")]
    NotInitialized,
}

impl LockError {
    /// Whether the API server answered 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        matches!(self, LockError::Api(kube::Error::Api(s)) if s.code == 404)
    }

    /// Whether the API server answered 409 Conflict: the lock moved since it was read.
    pub fn is_conflict(&self) -> bool {
        matches!(self, LockError::Api(kube::Error::Api(s)) if s.code == 409)
    }
}

/// What an elector needs of a lock (upstream's `resourcelock.Interface`). Each call stands for
/// one request; dropping its future cancels the request.
pub trait ResourceLock: Send + Sync + 'static {
    /// Reads the record, and its raw bytes ([`LeaderElectionRecord::raw`]).
    fn get(
        &self,
    ) -> impl Future<Output = Result<(LeaderElectionRecord, Vec<u8>), LockError>> + Send;
    /// Creates the lock holding `record`.
    fn create(
        &self,
        record: LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;
    /// Replaces the record, from the version last read or written.
    fn update(
        &self,
        record: LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;
    /// Records an event about the lock ("became leader", "stopped leading").
    fn record_event(&self, event: &str);
    /// The identity this lock claims the lease as.
    fn identity(&self) -> &str;
    /// `namespace/name`, for logs.
    fn describe(&self) -> String;
}

/// The callback [`LeaseLock::with_event_recorder`] takes: `(type, reason, message)`, as
/// `record.EventRecorder.Eventf` is given them (`"Normal"`, `"LeaderElection"`,
/// `"{identity} became leader"`).
type Recorder = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// The Lease lock (`resourcelock.LeaseLock`): the record is a `coordination.k8s.io/v1` Lease's
/// spec. It keeps the lease it last read or wrote, and updates from that lease's
/// resourceVersion, so an update after someone else's write is a 409 Conflict (module
/// invariant I3).
pub struct LeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    labels: Option<BTreeMap<String, String>>,
    recorder: Option<Recorder>,
    /// The lease as last read or written (`ll.lease`); never held across an await.
    lease: Mutex<Option<Lease>>,
}

impl std::fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseLock")
            .field("lease", &self.describe())
            .field("identity", &self.identity)
            .finish()
    }
}

impl LeaseLock {
    /// A lock on the Lease `namespace/name`, claimed as `identity`.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        let namespace = namespace.into();
        LeaseLock {
            api: Api::namespaced(client, &namespace),
            namespace,
            name: name.into(),
            identity: identity.into(),
            labels: None,
            recorder: None,
            lease: Mutex::new(None),
        }
    }

    /// Labels the Lease gets on create, and keeps on every update (`NewWithLabels`).
    pub fn with_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = Some(labels);
        self
    }

    /// Where [`ResourceLock::record_event`] sends its events: `(type, reason, message)`.
    pub fn with_event_recorder(
        mut self,
        recorder: impl Fn(&str, &str, &str) + Send + Sync + 'static,
    ) -> Self {
        self.recorder = Some(Arc::new(recorder));
        self
    }

    fn remember(&self, lease: Lease) {
        *self.lease.lock() = Some(lease);
    }
}

impl ResourceLock for LeaseLock {
    async fn get(&self) -> Result<(LeaderElectionRecord, Vec<u8>), LockError> {
        let lease = self.api.get(&self.name).await?;
        let record = lease_spec_to_leader_election_record(&lease.spec.clone().unwrap_or_default());
        self.remember(lease);
        let raw = record.raw();
        Ok((record, raw))
    }

    async fn create(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: self.labels.clone(),
                ..Default::default()
            },
            spec: Some(leader_election_record_to_lease_spec(&record)),
        };
        let created = self.api.create(&PostParams::default(), &lease).await?;
        self.remember(created);
        Ok(())
    }

    async fn update(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        // As upstream, the new spec goes into the kept lease before the request: a failed
        // update leaves it there, at the old resourceVersion.
        let lease = {
            let mut kept = self.lease.lock();
            let lease = kept.as_mut().ok_or(LockError::NotInitialized)?;
            lease.spec = Some(leader_election_record_to_lease_spec(&record));
            if let Some(labels) = &self.labels {
                let mine = lease.metadata.labels.get_or_insert_with(BTreeMap::new);
                mine.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            lease.clone()
        };
        let updated = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await?;
        self.remember(updated);
        Ok(())
    }

    fn record_event(&self, event: &str) {
        if let Some(recorder) = &self.recorder {
            recorder(
                "Normal",
                "LeaderElection",
                &format!("{} {event}", self.identity),
            );
        }
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
