//! The elector's core without I/O: what it last observed of the lock, when (on its own clock),
//! and what each attempt decides from a record it read. The shell ([`super::LeaderElector`])
//! does the requests and the waiting; every decision is made here.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::record::LeaderElectionRecord;

/// What an attempt does after reading the lock's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Another holder's lease is still valid on this elector's clock: give up this attempt.
    Held,
    /// Write this record (acquire, or renew on the slow path when `slow_path`).
    Write {
        record: LeaderElectionRecord,
        slow_path: bool,
    },
}

/// What one attempt to renew came to (`tryRecover`'s `renewed, lost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The lease was renewed.
    Renewed,
    /// No renewal: the request failed, or the poll's time ran out.
    Failed,
    /// The lease is another's, or gone: recovery must stop (only under `Recovery`).
    Lost,
}

/// The observed state (`observedRecord`, `observedRawRecord`, `observedTime`,
/// `reportedLeader`).
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    identity: String,
    lease_duration: Duration,
    record: LeaderElectionRecord,
    raw: Vec<u8>,
    /// On this elector's monotonic clock; `None` is Go's zero time (long ago).
    at: Option<Instant>,
    reported_leader: String,
    /// When the last attempt to acquire or renew began (`lastAttemptTime`, client-go v0.38):
    /// what [`Observed::unhealthy`] counts from under `Recovery`. `None`: never.
    last_attempt: Option<Instant>,
}

impl Observed {
    pub fn new(identity: String, lease_duration: Duration) -> Self {
        Observed {
            identity,
            lease_duration,
            record: LeaderElectionRecord::default(),
            raw: Vec::new(),
            at: None,
            reported_leader: String::new(),
            last_attempt: None,
        }
    }

    pub fn record(&self) -> &LeaderElectionRecord {
        &self.record
    }

    pub fn at(&self) -> Option<Instant> {
        self.at
    }

    /// `IsLeader`: the last observed holder is this elector.
    pub fn is_leader(&self) -> bool {
        self.record.holder_identity == self.identity
    }

    /// `isLeaseValid`: the observed record's own duration has not passed since it was
    /// observed, on this elector's clock (keeps I1, I2). A record observed no earlier than
    /// `now` (the attempt's start) is valid whatever its duration: in Go the clock always
    /// moves between an attempt's start and the read's return, so such an observation is
    /// strictly after `now`; under tokio's paused clock the two instants can be equal.
    pub fn is_lease_valid(&self, now: Instant) -> bool {
        let secs = u64::try_from(self.record.lease_duration_seconds).unwrap_or(0);
        self.at.is_some_and(|at| {
            at >= now
                || at
                    .checked_add(Duration::from_secs(secs))
                    .is_some_and(|until| until > now)
        })
    }

    /// `setObservedRecord`: this record, observed now. The raw bytes are left as they were, as
    /// upstream leaves them.
    pub fn set(&mut self, record: LeaderElectionRecord, now: Instant) {
        self.record = record;
        self.at = Some(now);
    }

    /// An observation set from outside, raw bytes included (what upstream's tests do by
    /// building the elector with its fields set).
    pub fn set_with_raw(&mut self, record: LeaderElectionRecord, at: Option<Instant>) {
        self.raw = record.raw();
        self.record = record;
        self.at = at;
    }

    /// After a read: a record whose raw bytes differ from the last read ones is a new
    /// observation, at `now`; the same bytes leave the observed time alone (keeps I1).
    pub fn observe_read(&mut self, record: LeaderElectionRecord, raw: Vec<u8>, now: Instant) {
        if raw != self.raw {
            self.set(record, now);
            self.raw = raw;
        }
    }

    /// The record this elector writes when it holds the lock from `now` (wall clock).
    pub fn candidate(&self, wall: Timestamp) -> LeaderElectionRecord {
        LeaderElectionRecord {
            holder_identity: self.identity.clone(),
            lease_duration_seconds: i64::try_from(self.lease_duration.as_secs())
                .unwrap_or(i64::MAX),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            ..Default::default()
        }
    }

    /// Step 1 of `tryAcquireOrRenew`: a leader whose lease is still valid renews without
    /// reading, assuming the record it observed is the current one.
    pub fn fast_path(&self, now: Instant, wall: Timestamp) -> Option<LeaderElectionRecord> {
        if !(self.is_leader() && self.is_lease_valid(now)) {
            return None;
        }
        let mut record = self.candidate(wall);
        record.acquire_time = self.record.acquire_time;
        record.leader_transitions = self.record.leader_transitions;
        Some(record)
    }

    /// Steps 3 and 4 of `tryAcquireOrRenew`, after [`Observed::observe_read`] of `old`:
    /// another holder's valid lease is respected; otherwise the candidate record is written,
    /// keeping the acquire time when renewing and counting a transition when taking over.
    /// `now` is when the attempt began.
    pub fn decide(&self, old: &LeaderElectionRecord, now: Instant, wall: Timestamp) -> Decision {
        if !old.holder_identity.is_empty() && self.is_lease_valid(now) && !self.is_leader() {
            return Decision::Held;
        }
        let mut record = self.candidate(wall);
        let slow_path = self.is_leader();
        if slow_path {
            record.acquire_time = old.acquire_time;
            record.leader_transitions = old.leader_transitions;
        } else {
            record.leader_transitions = old.leader_transitions.saturating_add(1);
        }
        Decision::Write { record, slow_path }
    }

    /// `tryCoordinatedRenew`'s checks after a read: an expired lease, another holder, or an
    /// "end of term" mark end the attempt; otherwise the renewal to write.
    pub fn decide_coordinated(
        &self,
        old: &LeaderElectionRecord,
        now: Instant,
        wall: Timestamp,
    ) -> Option<LeaderElectionRecord> {
        let secs = u64::try_from(old.lease_duration_seconds).unwrap_or(0);
        let expired = self
            .at
            .and_then(|at| at.checked_add(Duration::from_secs(secs)))
            .is_none_or(|until| until < now);
        if expired || !self.is_leader() || !old.preferred_holder.is_empty() {
            return None;
        }
        let mut record = self.candidate(wall);
        record.acquire_time = old.acquire_time;
        record.leader_transitions = old.leader_transitions;
        record.strategy = old.strategy.clone();
        Some(record)
    }

    /// `tryRecover`'s step 4 (client-go v0.38), after [`Observed::observe_read`] of `old`:
    /// the renewal to write if this elector still holds the lease, `None` if the lease changed
    /// hands (recovery never acquires, keeps I6).
    pub fn recovery_renewal(
        &self,
        old: &LeaderElectionRecord,
        wall: Timestamp,
    ) -> Option<LeaderElectionRecord> {
        if !self.is_leader() {
            return None;
        }
        let mut record = self.candidate(wall);
        record.acquire_time = old.acquire_time;
        record.leader_transitions = old.leader_transitions;
        Some(record)
    }

    /// The release record (`tryRelease`): nobody holds it, for one second, transitions kept.
    pub fn released(&self, old: &LeaderElectionRecord, wall: Timestamp) -> LeaderElectionRecord {
        LeaderElectionRecord {
            leader_transitions: old.leader_transitions,
            lease_duration_seconds: 1,
            renew_time: Some(wall),
            acquire_time: Some(wall),
            ..Default::default()
        }
    }

    /// `maybeReportTransition`: the holder to report to `OnNewLeader`, if it changed since
    /// the last report.
    pub fn take_transition(&mut self) -> Option<String> {
        if self.record.holder_identity == self.reported_leader {
            return None;
        }
        self.reported_leader = self.record.holder_identity.clone();
        Some(self.reported_leader.clone())
    }

    /// `recordAttempt` (client-go v0.38): an attempt to acquire or renew begins at `now`.
    pub fn record_attempt(&mut self, now: Instant) {
        self.last_attempt = Some(now);
    }

    /// `Check`: a leader that has not observed its own record for longer than the lease
    /// duration plus `tolerance` should have stopped leading. Under `Recovery` (`recovering`,
    /// client-go v0.38) a leader stays alive on purpose while it cannot observe the lease, so
    /// only one that has made no attempt for that long is unhealthy.
    pub fn unhealthy(&self, recovering: bool, now: Instant, tolerance: Duration) -> bool {
        if !self.is_leader() {
            return false;
        }
        let from = if recovering {
            self.last_attempt
        } else {
            self.at
        };
        let since = from.map_or(Duration::MAX, |at| now.saturating_duration_since(at));
        since > self.lease_duration.saturating_add(tolerance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, secs: i64) -> LeaderElectionRecord {
        LeaderElectionRecord {
            holder_identity: holder.into(),
            lease_duration_seconds: secs,
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_held_by_another_is_taken_only_after_its_whole_duration_unchanged() {
        let wall = Timestamp::UNIX_EPOCH;
        let mut s = Observed::new("b".into(), Duration::from_secs(15));
        let t0 = Instant::now();
        let held = record("a", 15);
        s.observe_read(held.clone(), held.raw(), t0);
        assert_eq!(
            s.decide(&held, t0 + Duration::from_secs(14), wall),
            Decision::Held
        );
        // The same bytes again, later: the observed time does not move (keeps I1).
        s.observe_read(held.clone(), held.raw(), t0 + Duration::from_secs(10));
        let taken = s.decide(&held, t0 + Duration::from_secs(15), wall);
        let Decision::Write { record, slow_path } = taken else {
            panic!("{taken:?}")
        };
        assert_eq!(
            (
                record.holder_identity.as_str(),
                record.leader_transitions,
                slow_path
            ),
            ("b", 1, false)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_leader_renews_on_the_fast_path_only_while_its_lease_is_valid() {
        let wall = Timestamp::UNIX_EPOCH;
        let mut s = Observed::new("a".into(), Duration::from_secs(15));
        let t0 = Instant::now();
        s.set(record("a", 15), t0);
        assert!(s.fast_path(t0 + Duration::from_secs(14), wall).is_some());
        assert!(s.fast_path(t0 + Duration::from_secs(15), wall).is_none());
        let tolerance = Duration::from_secs(5);
        assert!(!s.unhealthy(false, t0 + Duration::from_secs(20), tolerance));
        assert!(s.unhealthy(false, t0 + Duration::from_secs(21), tolerance));
        assert_eq!(s.take_transition().as_deref(), Some("a"));
        assert_eq!(s.take_transition(), None);
    }

    /// client-go v0.38.0-beta.0 `TestCheckInRecoveryMode`, all four cases: without
    /// `Recovery` a leader that has not observed its lease for the lease duration and the
    /// tolerance is unhealthy even while it keeps attempting; with it, healthy while attempts
    /// go on, unhealthy once they stop; a non-leader is healthy.
    #[tokio::test(start_paused = true)]
    async fn under_recovery_check_counts_from_the_last_attempt() {
        let tolerance = Duration::from_secs(5);
        let fresh = |holder: &str| {
            let mut s = Observed::new("baz".into(), Duration::from_secs(15));
            s.record_attempt(Instant::now());
            s.set(record(holder, 15), Instant::now());
            s
        };
        let later = Instant::now() + Duration::from_secs(15) + tolerance + Duration::from_secs(1);
        let mut attempting = fresh("baz");
        attempting.record_attempt(later);
        assert!(attempting.unhealthy(false, later, tolerance), "no recovery");
        assert!(
            !attempting.unhealthy(true, later, tolerance),
            "attempts go on"
        );
        assert!(
            fresh("baz").unhealthy(true, later, tolerance),
            "attempts stopped"
        );
        assert!(
            !fresh("other").unhealthy(true, later, tolerance),
            "not the leader"
        );
    }
}
