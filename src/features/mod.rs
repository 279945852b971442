//! Versioned feature gates: which informer behaviour is on at which Kubernetes version.
//! Follows client-go `features/{features,known_features,envvar}.go` for the table and the
//! environment overrides, and component-base `featuregate/feature_gate.go` for choosing a
//! spec by emulated version.
//!
//! ```text
//!   InOrderInformers:  1.33 ─ Beta, on ─────────► 1.36 ─ GA, on, locked ─►
//!   emulated 1.35  ──► the 1.33 spec applies: on, and KUBE_FEATURE_InOrderInformers=false turns it off
//!   emulated 1.36  ──► the 1.36 spec applies: locked; the override is logged and ignored
//! ```
//!
//! # Invariants
//! 1. The spec in force for a feature is the last one whose version is not above the emulated
//!    version; with none, the feature is PreAlpha and off.
//! 2. A value differing from a locked spec's default never takes effect, except through
//!    [`FeatureGates::set_for_testing`].
//! 3. Precedence: [`FeatureGates::set`] beats the environment, which beats the spec default.
//!
//! # Differences from upstream
//! - client-go's own gate always uses each feature's *newest* spec; a versioned gate (as
//!   component-base's, used by k/k binaries) picks the spec by emulated version. This registry
//!   is the versioned kind, so a reader can ask "what did 1.33 do?".
//! - The environment is read when asked ([`FeatureGates::apply_env`]), from any iterator, not
//!   lazily on the first `Enabled` call; [`FeatureGates::from_process_env`] reads the real one.
//! - The emulated version is limited to 1.32–1.38, the range whose tables were checked
//!   against client-go tags v0.32.0–v0.37.2 (`upstream/recorded/feature_gates_by_release.txt`;
//!   v0.37.2's `known_features.go` is v0.36.0's) and v0.38.0-beta.0 (whose 1.38 rows of the
//!   modelled gates equal 1.37's; its three new gates model nothing the port has). The
//!   informer's default stays 1.37, the newest released minor; 1.38 is chosen by asking for
//!   it ([`FeatureGates::at_minor`]`(38)`), and then the informer also follows client-go
//!   v0.38's batches ([`crate::cache::FifoChoice::batches_repeat_keys`]).
//!
//! # client-go v0.37.2 → v0.38.0-beta.0
//!
//! Every behaviour difference between the two tags in the files the port mirrors, read from
//! the module trees (`upstream/recorded/client_go_v0.3{7,8}_*` show each one marked
//! "recorded"). The informer follows v0.38 when its gates emulate 1.38; the elector when
//! [`LeaderElectionConfig::client_go_minor`] is 38. "Modelled" says where, "not" why not.
//!
//! `tools/cache/the_real_fifo.go`
//! 1. `PopBatch` no longer ends a batch at a key the batch already holds. Modelled:
//!    [`RealFifoOptions::batches_repeat_keys`], set by the informer at 1.38
//!    ([`FifoChoice::batches_repeat_keys`]). Recorded: `fifo_batch_boundaries`,
//!    `fifo_interleave`.
//! 2. `PopBatch` computes no key, so a delta whose key fails no longer ends the batch.
//!    Modelled: the same option. Recorded: `fifo_batch_boundaries`.
//! 3. `Resync`'s error, when queueing a known object's Sync fails, now wraps that failure
//!    (v0.37 wrapped an unrelated, usually nil, error). Not modelled: the port's resync
//!    returns the failure itself on both.
//!
//! `tools/cache/controller.go`
//! 4. `processDeltasInBatch` takes a delta's old object from the previous delta of its key
//!    in the batch (the store's only for the first; a key deleted earlier is absent, so the
//!    next delta is an add). Modelled: the informer's 1.38 batch. Recorded:
//!    `informer_batch_same_object`.
//! 5. It skips a delta whose key fails and goes on, returning the key errors joined.
//!    Modelled, but unreachable in the port: its informer's key function cannot fail.
//!    Recorded: `informer_batch_key_error` (not compared: the port's informer has no
//!    transform).
//! 6. Its callbacks still run after the one transaction, so a handler can now find a later
//!    state of its own object in the store. Follows from 1 and 4; recorded:
//!    `informer_batch_same_object`.
//!
//! `tools/cache/thread_safe_store.go`
//! 7. A transaction applies only the last write of a key that occurs more than once.
//!    Modelled: [`Store::last_write_per_key`], set by the informer at 1.38. Recorded:
//!    `store_transaction_repeated_key`.
//! 8. The index update is skipped whenever old and new index values are equal lists (v0.37:
//!    only one value each). Not observable; the port has always skipped on equal lists.
//!
//! `tools/cache/shared_informer.go`, `listwatch.go`
//! 9. Sharded list-watch: a shard selector option and `SetShardSelector`, a ListerWatcher
//!    wrapper that sends the selector and filters lists and watch events on the client when
//!    the server did not. Not modelled: no shard selector in the port's list options or
//!    server.
//! 10. `GVRSyncResult` for the dynamic and metadata factories. Not modelled: no such
//!     factories.
//!
//! `tools/leaderelection/leaderelection.go`, `writegate.go`
//! 11. `tryRelease` also checks the holder it has just read, and leaves a Lease another
//!     elector holds. Modelled: [`LeaderElectionConfig::client_go_minor`]. Recorded:
//!     `leader_election_release_after_outage`.
//! 12. `Recovery` (alpha): a leader past its renew deadline closes its write gate, calls
//!     `OnStoppedLeading` and keeps trying to renew the lease it held instead of ending
//!     `Run` (leading again if it can; ending when the lease changed hands, is gone, or an
//!     optional deadline passes), `OnStoppedLeading` once per loss, a health check counting
//!     from the last attempt, new config checks. Modelled:
//!     [`LeaderElectionConfig::recovery`], at 1.38 only (refused before). Recorded:
//!     `leader_election_recovery`, compared with the port at 1.38.
//! 13. The write gate (`WriteGate()`): writes refused while not leading, a write in flight
//!     when leading stops abandoned. Modelled on every minor (a new method, inert unless
//!     used): [`LeaderElector::write_gate`]; without `Recovery` (12) it closes when `Run`
//!     ends its leadership, with it as soon as a renewal fails for the renew deadline.
//!     Recorded: `leader_election_recovery` probes it, under `Recovery`.
//!
//! `tools/leaderelection/leasecandidate.go`
//! 14. `NewCandidate` checks its arguments. Not modelled: the port has no lease candidate.
//!
//! `util/workqueue/{queue,delaying_queue,rate_limiting_queue}.go`
//! 15. `Pause`/`Resume`, forwarded by the delaying and rate-limiting queues; a shutdown while
//!     paused hands out nothing more. Modelled on every release (new methods, inert unless
//!     called): [`Queue::pause`], [`Queue::resume`]. Recorded: `workqueue_pause`. The
//!     rate-limiting queue's config gains a logger: no behaviour.
//!
//! `features/known_features.go`
//! 16. Three new gates (`ClientsAllowConnectionPool`, `ManagedFieldsOptOutClient`,
//!     `WatchListClientConcurrentDecoding`) for parts the port does not have; the modelled
//!     gates resolve at 1.38 as at 1.37. Modelled: [`KNOWN_FEATURES`] has no 1.38 entry to
//!     add. Recorded: `feature_gates`.
//!
//! Beside the mirrored files: the fake clientset's tracker bumps the resourceVersion on a
//! delete and replays recent deletes to an older watch (modelled: `FakeClientset::at_minor(38)`;
//! recorded: `fake_clientset_resource_versions`); the mutation cache's `ByIndex` and
//! the store's resourceVersion gauge (no such parts in the port). The other mirrored files
//! (`delta_fifo.go`, `reflector.go`, the resource locks, the workqueue's limiters and
//! metrics) differ only in comments and lint directives.
//!
//! [`RealFifoOptions::batches_repeat_keys`]: crate::cache::RealFifoOptions::batches_repeat_keys
//! [`FifoChoice::batches_repeat_keys`]: crate::cache::FifoChoice::batches_repeat_keys
//! [`Store::last_write_per_key`]: crate::cache::Store::last_write_per_key
//! [`Queue::pause`]: crate::workqueue::Queue::pause
//! [`Queue::resume`]: crate::workqueue::Queue::resume
//! [`LeaderElectionConfig::client_go_minor`]: crate::leaderelection::LeaderElectionConfig::client_go_minor
//! [`LeaderElector::write_gate`]: crate::leaderelection::LeaderElector::write_gate
//! [`LeaderElectionConfig::recovery`]: crate::leaderelection::LeaderElectionConfig::recovery

use std::{collections::BTreeMap, fmt};

use crate::klog;

/// A feature gate's name, exactly as upstream declares it (`InOrderInformers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Feature(pub &'static str);

impl Feature {
    /// RealFIFO instead of DeltaFIFO: events in arrival order (Beta 1.33, GA+locked 1.36).
    pub const IN_ORDER_INFORMERS: Feature = Feature("InOrderInformers");
    /// Informers pop RealFIFO deltas in batches (Beta 1.35).
    pub const IN_ORDER_INFORMERS_BATCH_PROCESS: Feature = Feature("InOrderInformersBatchProcess");
    /// RealFIFO queues one ReplacedAll / SyncAll per relist / resync (Beta 1.36).
    pub const ATOMIC_FIFO: Feature = Feature("AtomicFIFO");
    /// RealFIFO releases its lock while the informer processes (Beta 1.36).
    pub const UNLOCK_WHILE_PROCESSING_FIFO: Feature = Feature("UnlockWhileProcessingFIFO");
    /// Reflectors stream the initial list over a watch (Beta off 1.30, Beta on 1.35).
    pub const WATCH_LIST_CLIENT: Feature = Feature("WatchListClient");

    /// The name, as used in `KUBE_FEATURE_<name>`.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A Kubernetes `major.minor` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// Major (1).
    pub major: u32,
    /// Minor (36).
    pub minor: u32,
}

impl Version {
    /// `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Version { major, minor }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A feature's maturity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum PreRelease {
    /// Not yet introduced at this version.
    PreAlpha,
    /// Alpha.
    Alpha,
    /// Beta.
    Beta,
    /// Generally available.
    GA,
    /// Deprecated.
    Deprecated,
}

/// One entry of a feature's history: from `version` on, this default, maturity and lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FeatureSpec {
    /// The version this spec starts at (`0.0`: always).
    pub version: Version,
    /// On or off by default.
    pub default: bool,
    /// Maturity.
    pub pre_release: PreRelease,
    /// Whether the default can no longer be changed.
    pub lock_to_default: bool,
}

const fn spec(minor: u32, default: bool, pre_release: PreRelease, lock: bool) -> FeatureSpec {
    FeatureSpec {
        version: Version::new(1, minor),
        default,
        pre_release,
        lock_to_default: lock,
    }
}

impl FeatureSpec {
    /// A spec that applies at every version, as client-go's unversioned test tables.
    pub const fn unversioned(default: bool, pre_release: PreRelease, lock: bool) -> Self {
        FeatureSpec {
            version: Version::new(0, 0),
            default,
            pre_release,
            lock_to_default: lock,
        }
    }
}

use PreRelease::{Beta, GA};

/// The informer's gates and their histories, as in client-go `features/known_features.go`
/// (v0.36.0; unchanged at v0.37.2). `InOrderInformers` was unversioned Beta-on in v0.33
/// and v0.34, which this table records as its 1.33 entry.
pub const KNOWN_FEATURES: &[(Feature, &[FeatureSpec])] = &[
    (Feature::ATOMIC_FIFO, &[spec(36, true, Beta, false)]),
    (
        Feature::IN_ORDER_INFORMERS,
        &[spec(33, true, Beta, false), spec(36, true, GA, true)],
    ),
    (
        Feature::IN_ORDER_INFORMERS_BATCH_PROCESS,
        &[spec(35, true, Beta, false)],
    ),
    (
        Feature::UNLOCK_WHILE_PROCESSING_FIFO,
        &[spec(36, true, Beta, false)],
    ),
    (
        Feature::WATCH_LIST_CLIENT,
        &[spec(30, false, Beta, false), spec(35, true, Beta, false)],
    ),
];

/// The lowest emulated version this registry models.
pub const MIN_EMULATED: Version = Version::new(1, 32);
/// The highest emulated version this registry models: 1.38, client-go v0.38.0-beta.0.
pub const MAX_EMULATED: Version = Version::new(1, 38);

/// The informer's default emulated version: 1.37, client-go v0.37.2, until 1.38.0 is
/// released.
pub(crate) const DEFAULT_EMULATED: Version = Version::new(1, 37);

/// The first emulated version whose informer follows client-go v0.38's batches: a batch may
/// repeat a key, and the store's transaction applies the last write per key.
pub(crate) const V038_BATCHES: Version = Version::new(1, 38);

/// Errors from building or setting gates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// The emulated version is outside 1.32–1.38.
    #[error("emulated version {0} is outside the modelled range {MIN_EMULATED}..={MAX_EMULATED}")]
    UnsupportedVersion(Version),
    /// The feature is not in the table.
    #[error("feature {0:?} is not registered in FeatureGates \"controlloop\"")]
    Unknown(String),
    /// The feature is locked to another value (upstream's message).
    #[error("cannot set feature gate {feature:?} to {value}, feature is locked to {locked}")]
    Locked {
        /// The feature.
        feature: String,
        /// The value asked for.
        value: bool,
        /// The value it is locked to.
        locked: bool,
    },
}

/// A feature-gate set at one emulated Kubernetes version.
#[derive(Debug, Clone)]
pub struct FeatureGates {
    emulated: Version,
    specs: BTreeMap<Feature, Vec<FeatureSpec>>,
    via_env: BTreeMap<Feature, bool>,
    via_set: BTreeMap<Feature, bool>,
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl FeatureGates {
    /// The informer's gates at `emulated`, all at their defaults.
    pub fn new(emulated: Version) -> Result<Self, FeatureGateError> {
        if !(MIN_EMULATED..=MAX_EMULATED).contains(&emulated) {
            return Err(FeatureGateError::UnsupportedVersion(emulated));
        }
        Ok(Self::with_specs(
            emulated,
            KNOWN_FEATURES.iter().map(|(f, s)| (*f, s.to_vec())),
        ))
    }

    /// The informer's gates at `1.minor`.
    pub fn at_minor(minor: u32) -> Result<Self, FeatureGateError> {
        Self::new(Version::new(1, minor))
    }

    /// Gates over a custom table (as upstream's tests build one), at any version.
    pub fn with_specs(
        emulated: Version,
        specs: impl IntoIterator<Item = (Feature, Vec<FeatureSpec>)>,
    ) -> Self {
        FeatureGates {
            emulated,
            specs: specs.into_iter().collect(),
            via_env: BTreeMap::new(),
            via_set: BTreeMap::new(),
        }
    }

    /// The informer's gates at `emulated`, with `KUBE_FEATURE_*` from the process environment.
    pub fn from_process_env(emulated: Version) -> Result<Self, FeatureGateError> {
        let mut g = Self::new(emulated)?;
        g.apply_env(std::env::vars());
        Ok(g)
    }

    /// The emulated version.
    pub fn emulated_version(&self) -> Version {
        self.emulated
    }

    /// Every feature in the table, in name order.
    pub fn known(&self) -> impl Iterator<Item = Feature> + '_ {
        self.specs.keys().copied()
    }

    /// The spec in force for `feature` at the emulated version (keeps I1), or `None` if the
    /// feature is not in the table.
    pub fn spec(&self, feature: Feature) -> Option<FeatureSpec> {
        let history = self.specs.get(&feature)?;
        Some(
            history
                .iter()
                .rev()
                .find(|s| s.version <= self.emulated)
                .copied()
                .unwrap_or(FeatureSpec {
                    version: self.emulated,
                    default: false,
                    pre_release: PreRelease::PreAlpha,
                    lock_to_default: false,
                }),
        )
    }

    fn known_spec(&self, feature: Feature) -> Result<FeatureSpec, FeatureGateError> {
        self.spec(feature)
            .ok_or_else(|| FeatureGateError::Unknown(feature.0.to_owned()))
    }

    /// Whether `feature` is on (keeps I3).
    ///
    /// # Panics
    /// If `feature` is not in the table, as upstream: asking for an unregistered gate is a
    /// programming error.
    pub fn enabled(&self, feature: Feature) -> bool {
        let spec = self.known_spec(feature).unwrap_or_else(|e| panic!("{e}"));
        self.via_set
            .get(&feature)
            .or_else(|| self.via_env.get(&feature))
            .copied()
            .unwrap_or(spec.default)
    }

    /// Sets `feature`. A locked feature set to anything but its default is an error and
    /// nothing changes (keeps I2).
    pub fn set(&mut self, feature: Feature, value: bool) -> Result<(), FeatureGateError> {
        let spec = self.known_spec(feature)?;
        if spec.lock_to_default && spec.default != value {
            return Err(FeatureGateError::Locked {
                feature: feature.0.to_owned(),
                value,
                locked: spec.default,
            });
        }
        self.via_set.insert(feature, value);
        Ok(())
    }

    /// Sets `feature` even if it is locked (upstream `SetForTesting`).
    pub fn set_for_testing(
        &mut self,
        feature: Feature,
        value: bool,
    ) -> Result<(), FeatureGateError> {
        self.known_spec(feature)?;
        self.via_set.insert(feature, value);
        Ok(())
    }

    /// Applies `KUBE_FEATURE_<Name>=<bool>` overrides from `vars` (name case as declared;
    /// values as Go's `strconv.ParseBool`). Unknown names are ignored. An unparsable value logs
    /// "Could not set feature gate"; a value against a locked default logs "Could not set
    /// feature gate, feature is locked" and is ignored (keeps I2).
    pub fn apply_env<I, N, V>(&mut self, vars: I)
    where
        I: IntoIterator<Item = (N, V)>,
        N: AsRef<str>,
        V: AsRef<str>,
    {
        let vars: BTreeMap<String, String> = vars
            .into_iter()
            .map(|(n, v)| (n.as_ref().to_owned(), v.as_ref().to_owned()))
            .collect();
        let features: Vec<Feature> = self.known().collect();
        for feature in features {
            let Some(raw) = vars.get(&format!("KUBE_FEATURE_{feature}")) else {
                continue;
            };
            let spec = self.known_spec(feature).expect("iterating known features");
            match parse_go_bool(raw) {
                None => klog::error(
                    "Could not set feature gate",
                    Some(&format!(
                        "strconv.ParseBool: parsing {raw:?}: invalid syntax"
                    )),
                    &[
                        ("feature", feature.0.into()),
                        ("desiredState", raw.as_str().into()),
                    ],
                ),
                Some(v) if spec.lock_to_default && v != spec.default => klog::error(
                    "Could not set feature gate, feature is locked",
                    None,
                    &[
                        ("feature", feature.0.into()),
                        ("desiredState", raw.as_str().into()),
                        ("lockedState", spec.default.into()),
                    ],
                ),
                Some(v) => {
                    self.via_env.insert(feature, v);
                }
            }
        }
        for feature in self.known().collect::<Vec<_>>() {
            let (msg, on) = match self.via_env.get(&feature) {
                Some(v) => ("Feature gate updated state", *v),
                None => ("Feature gate default state", self.enabled(feature)),
            };
            klog::v1_info(
                msg,
                &[("feature", feature.0.into()), ("enabled", on.into())],
            );
        }
    }

    /// The values taken from the environment (upstream's internal `enabledViaEnvVar`).
    pub fn enabled_via_env(&self) -> &BTreeMap<Feature, bool> {
        &self.via_env
    }

    /// The values taken from `set` (upstream's internal `enabledViaSetMethod`).
    pub fn enabled_via_set(&self) -> &BTreeMap<Feature, bool> {
        &self.via_set
    }
}
