//! The storm and its report: how many writes, how far apart, what a reconcile costs
//! ([`Storm`], the essay's [`ESSAY`]); the writer ([`write_burst`]) and what it did ([`Burst`]);
//! and what the reconciles observed ([`Recorder`]).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::set_value;
pub use controlloop::testing::Observation;

/// One write storm: how many writes, how far apart, and what one reconcile of them costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Storm {
    /// How many writes (values `1..=writes`).
    pub writes: u64,
    /// The wait between two writes.
    #[serde(serialize_with = "millis")]
    pub gap: Duration,
    /// How long one reconcile works (a tokio sleep).
    #[serde(serialize_with = "millis")]
    pub cost: Duration,
}

/// Serialises a duration as milliseconds (what every table of the book prints).
fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// The essay's storm: 200 writes, 1 ms apart, behind a reconciler that works 20 ms. Every
/// experiment that runs "the essay's storm" (chapters 06, 07 and 09, the `burst` command)
/// starts from this one definition.
pub const ESSAY: Storm = Storm {
    writes: 200,
    gap: Duration::from_millis(1),
    cost: Duration::from_millis(20),
};

/// What a burst of writes did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    /// Writes acknowledged by the server.
    pub issued: u64,
    /// When the first write was sent.
    pub started: Instant,
    /// When the last write was acknowledged.
    pub finished: Instant,
}

impl Burst {
    /// From the first write sent to the last acknowledged.
    pub fn span(&self) -> Duration {
        self.finished - self.started
    }
}

/// Writes the values `1..=writes` to `name`, waiting `gap` between writes (no wait after the
/// last; a zero gap writes back to back).
pub async fn write_burst(
    api: &Api<ConfigMap>,
    name: &str,
    writes: u64,
    gap: Duration,
) -> Result<Burst, kube::Error> {
    let started = Instant::now();
    for v in 1..=writes {
        set_value(api, name, v).await?;
        if v < writes && !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    Ok(Burst {
        issued: writes,
        started,
        finished: Instant::now(),
    })
}

/// Records what reconcilers acted on, and flags two reconciles of one object at once.
///
/// It keeps [`controlloop::testing::Recorder`]'s record, in the library's [`Observation`]s,
/// and adds two ways to act that hold a thread ([`Recorder::burn`],
/// [`Recorder::burn_blocking`]). It is not that recorder wrapped: chapter 11 shows this
/// `act`'s body, counters and all, and the burns count in the same counters, which the
/// library's recorder keeps to itself.
#[derive(Default)]
pub struct Recorder {
    observations: Mutex<Vec<Observation>>,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

impl Recorder {
    /// A recorder to share between workers.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    // book: ch11_recorder_act
    /// Acts on `value` for `cost` (a tokio sleep: virtual time under a paused clock), and
    /// records the reconcile.
    pub async fn act(&self, value: Option<u64>, cost: Duration) {
        let started = Instant::now();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if !cost.is_zero() {
            tokio::time::sleep(cost).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.observations.lock().push(Observation {
            started,
            finished: Instant::now(),
            value,
        });
    }
    // book: end ch11_recorder_act

    /// Acts on `value` by burning the CPU for `cost` ([`burn`]: no await, so the reconcile
    /// holds its thread throughout), and records the reconcile as [`Recorder::act`] does.
    pub fn burn(&self, value: Option<u64>, cost: Duration) {
        let started = Instant::now();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        burn(cost);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.observations.lock().push(Observation {
            started,
            finished: Instant::now(),
            value,
        });
    }

    /// Acts on `value` by burning the CPU for `cost` on tokio's blocking pool
    /// (`spawn_blocking`): the reconcile awaits the computation, so its runtime thread runs
    /// other tasks meanwhile; records the reconcile as [`Recorder::act`] does.
    pub async fn burn_blocking(&self, value: Option<u64>, cost: Duration) {
        let started = Instant::now();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let computed = tokio::task::spawn_blocking(move || burn(cost)).await;
        computed.expect("a burn does not panic");
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.observations.lock().push(Observation {
            started,
            finished: Instant::now(),
            value,
        });
    }

    /// The value the last finished reconcile acted on; `None` before the first.
    pub fn last_value(&self) -> Option<Option<u64>> {
        self.observations.lock().last().map(|o| o.value)
    }

    /// Every finished reconcile, in finishing order.
    pub fn observations(&self) -> Vec<Observation> {
        self.observations.lock().clone()
    }

    /// Reconciles running now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The most reconciles of the (one) object that ever ran at once: above 1 breaks the
    /// single-writer guarantee.
    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Ordering::SeqCst)
    }
}

// book: ch18_burn
/// Works for `cost` of the machine's clock the way computation does: a loop that never awaits,
/// so the task holds its runtime thread until it ends. tokio's clock plays no part: under a
/// paused clock the loop takes real time and no virtual time.
pub fn burn(cost: Duration) {
    let until = std::time::Instant::now() + cost;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}
// book: end ch18_burn
