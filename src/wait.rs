//! apimachinery's backoff, ported once for the three loops that wait on it: the retry helpers
//! ([`crate::retry`]), the reflector's relist backoff and the elector's acquire loop. Follows
//! apimachinery v0.37.2 `pkg/util/wait/backoff.go` (`Backoff`, `Backoff.Step`,
//! `Backoff.DelayWithReset`) and `pkg/util/wait/jitter.go` (`Jitter`).
//!
//! [`Backoff`] is the sequence of waits: each [`Backoff::step`] returns the current wait (plus
//! jitter) and, while steps remain, multiplies it by the factor, up to the cap, where the growth
//! ends. [`DelayWithReset`] starts the sequence again once a reset interval has passed since it
//! last started, as the reflector's backoff manager does. [`jitter`] is the one jitter rule:
//! a wait plus up to `max_factor` of itself.
//!
//! The random draw in `[0, 1)` is the caller's, so that a caller with a seeded generator
//! (every loop here, for virtual-time runs) gets the same waits on every run.
//!
//! # Invariants
//! 1. [`Backoff::step`] returns the wait it held before the step, jittered; the next wait is
//!    the factor times this one while steps remain, and the cap once the factor would pass it
//!    (then no step remains: the wait stays at the cap).
//! 2. [`jitter`] returns `d + r × max_factor × d`: at least `d`, less than `(1 + max_factor) × d`.
//! 3. [`DelayWithReset::step`] restarts the sequence from its first wait when more than the
//!    reset interval has passed since the sequence last started, and only then.
//!
//! # Concurrency
//! None: plain values, stepped by their owner.
//!
//! # Differences from upstream
//! - The random draw is a parameter (upstream: the process's `math/rand`).
//! - [`jitter`] with a `max_factor` of zero or less adds nothing; upstream's `Jitter` treats
//!   it as 1.0. No caller here passes one: a backoff jitters only when its jitter is positive,
//!   and the elector's factor is 1.2.
//! - [`DelayWithReset`] takes the time at each step rather than holding a clock.

use std::time::Duration;

use tokio::time::Instant;

/// How long to wait between attempts, and how many attempts to make (apimachinery's
/// `wait.Backoff`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The first wait (before any factor or jitter).
    pub duration: Duration,
    /// Each step multiplies the wait by this, while `steps` lasts and the cap allows; 0 keeps
    /// it.
    pub factor: f64,
    /// Each wait adds up to this fraction of itself, drawn uniformly (0: none).
    pub jitter: f64,
    /// How many attempts the retry helpers make.
    pub steps: u32,
    /// The largest wait the factor may reach (zero: no cap); reaching it ends the growth.
    pub cap: Duration,
}

impl Backoff {
    /// The next wait, advancing the backoff (apimachinery's `Backoff.Step`); `random` is the
    /// jitter's draw, in `[0, 1)`. Keeps I1.
    pub fn step(&mut self, random: f64) -> Duration {
        let wait = self.duration;
        if self.steps >= 1 {
            self.steps -= 1;
            if self.factor != 0.0 {
                let next = self.duration.mul_f64(self.factor);
                if !self.cap.is_zero() && next > self.cap {
                    self.duration = self.cap;
                    self.steps = 0;
                } else {
                    self.duration = next;
                }
            }
        }
        if self.jitter > 0.0 {
            jitter(wait, self.jitter, random)
        } else {
            wait
        }
    }
}

/// `d` plus up to `max_factor` of itself: `d + random × max_factor × d`, `random` in `[0, 1)`
/// (apimachinery's `wait.Jitter`). Keeps I2.
pub(crate) fn jitter(d: Duration, max_factor: f64, random: f64) -> Duration {
    if max_factor <= 0.0 {
        return d;
    }
    d.saturating_add(d.mul_f64(random * max_factor))
}

/// A backoff that starts again after a quiet spell (apimachinery's `Backoff.DelayWithReset`,
/// which the reflector's backoff manager is).
#[derive(Debug, Clone)]
pub(crate) struct DelayWithReset {
    initial: Backoff,
    backoff: Backoff,
    reset_interval: Duration,
    started: Option<Instant>,
}

impl DelayWithReset {
    /// `backoff`, restarted when more than `reset_interval` has passed since it last started.
    pub(crate) fn new(backoff: Backoff, reset_interval: Duration) -> Self {
        Self {
            initial: backoff,
            backoff,
            reset_interval,
            started: None,
        }
    }

    /// The next wait at time `now`; `random` is the jitter's draw, in `[0, 1)`. Keeps I3.
    pub(crate) fn step(&mut self, now: Instant, random: f64) -> Duration {
        if self
            .started
            .is_none_or(|s| now.duration_since(s) > self.reset_interval)
        {
            self.backoff = self.initial;
            self.started = Some(now);
        }
        self.backoff.step(random)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reflector() -> Backoff {
        Backoff {
            duration: Duration::from_millis(800),
            factor: 2.0,
            jitter: 0.0,
            steps: u32::MAX,
            cap: Duration::from_secs(30),
        }
    }

    #[test]
    fn steps_grow_by_the_factor_up_to_the_cap_and_stay_there() {
        let mut b = reflector();
        let waits: Vec<u128> = (0..9).map(|_| b.step(0.5).as_millis()).collect();
        assert_eq!(
            waits,
            [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]
        );
        assert_eq!(b.steps, 0, "reaching the cap ends the growth");
    }

    #[test]
    fn jitter_adds_up_to_its_factor() {
        let d = Duration::from_secs(2);
        assert_eq!(jitter(d, 1.2, 0.0), d);
        assert_eq!(jitter(d, 1.2, 0.5), Duration::from_millis(3200));
        assert_eq!(jitter(d, 0.0, 0.5), d);
    }

    #[test]
    fn a_delay_with_reset_restarts_only_after_the_interval() {
        let mut b = DelayWithReset::new(reflector(), Duration::from_secs(120));
        let t0 = Instant::now();
        assert_eq!(b.step(t0, 0.0).as_millis(), 800);
        assert_eq!(b.step(t0 + Duration::from_secs(120), 0.0).as_millis(), 1600);
        assert_eq!(b.step(t0 + Duration::from_secs(121), 0.0).as_millis(), 800);
    }
}
