//! The faults chapter 12 arms in a controller's own code: the [`Hooks`] both of chapter 07's
//! designs call ([`trigger::Hooks`]) first thing in a reconcile and first thing in the event
//! handler, and the panic hook that keeps the injected panics out of the output.

use std::{
    sync::{
        Arc, Once,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::lab::designs::trigger::{self, Unavailable};

/// Every panic a hook raises starts with this, so [`quiet_injected_panics`] can tell them from
/// real ones.
pub const INJECTED: &str = "injected fault:";

/// The faults armed in a controller's own code. One `Hooks` outlives every process of a run,
/// so a fault armed once stays armed across restarts, and the counters count the whole run.
#[derive(Default)]
pub struct Hooks {
    /// Reconciles started (failed and panicked ones included).
    reconciles: AtomicU64,
    /// Reconciles failed by an [`Hooks::outage`].
    failed: AtomicU64,
    /// Reconciles panicked by [`Hooks::panic_every`].
    panicked: AtomicU64,
    /// When the last reconcile started.
    last_reconcile: Mutex<Option<Instant>>,
    /// Handler calls (events heard).
    events: AtomicU64,
    /// Every `n`-th reconcile from the arming on panics (0: never).
    panic_every: AtomicU64,
    /// The reconcile number the panics count from.
    panic_base: AtomicU64,
    /// The handler call with this number panics, once (0: never).
    handler_panic_at: AtomicU64,
    /// Each handler call blocks its thread this long (a slow handler; real clock only).
    handler_delay: Mutex<Duration>,
    /// The world refuses every command in this window: reconciles fail, then succeed again.
    outage: Mutex<Option<(Instant, Instant)>>,
}

impl Hooks {
    /// No fault armed.
    pub fn new() -> Arc<Self> {
        Arc::new(Hooks::default())
    }

    /// Reconciles started so far.
    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::SeqCst)
    }

    /// Reconciles an outage failed so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::SeqCst)
    }

    /// Reconciles the armed panics panicked so far.
    pub fn panicked(&self) -> u64 {
        self.panicked.load(Ordering::SeqCst)
    }

    /// When the last reconcile started, if one did.
    pub fn last_reconcile(&self) -> Option<Instant> {
        *self.last_reconcile.lock()
    }

    /// Events heard so far.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::SeqCst)
    }

    /// From now on every `n`-th reconcile panics.
    pub fn panic_every(&self, n: u64) {
        self.panic_base.store(self.reconciles(), Ordering::SeqCst);
        self.panic_every.store(n, Ordering::SeqCst);
    }

    /// The next event the handler hears panics (once).
    pub fn panic_on_next_event(&self) {
        self.handler_panic_at
            .store(self.events() + 1, Ordering::SeqCst);
    }

    /// From now on the handler takes `delay` per event.
    pub fn slow_handler(&self, delay: Duration) {
        *self.handler_delay.lock() = delay;
    }

    /// Every reconcile fails from now for `stretch`, then they succeed again.
    pub fn outage(&self, stretch: Duration) {
        let now = Instant::now();
        *self.outage.lock() = Some((now, now + stretch));
    }
}

impl trigger::Hooks for Hooks {
    /// Counts the reconcile; panics if [`Hooks::panic_every`] says so, and fails in an
    /// [`Hooks::outage`].
    fn reconcile(&self) -> Result<(), Unavailable> {
        let n = self.reconciles.fetch_add(1, Ordering::SeqCst) + 1;
        *self.last_reconcile.lock() = Some(Instant::now());
        let every = self.panic_every.load(Ordering::SeqCst);
        let since = n.saturating_sub(self.panic_base.load(Ordering::SeqCst));
        if every > 0 && since.is_multiple_of(every) {
            self.panicked.fetch_add(1, Ordering::SeqCst);
            panic!("{INJECTED} reconcile {n} panics");
        }
        match *self.outage.lock() {
            Some((from, until)) if (from..until).contains(&Instant::now()) => {
                self.failed.fetch_add(1, Ordering::SeqCst);
                Err(Unavailable)
            }
            _ => Ok(()),
        }
    }

    /// Counts the event; blocks the thread after [`Hooks::slow_handler`], and panics on the
    /// event [`Hooks::panic_on_next_event`] armed.
    fn event(&self) {
        let n = self.events.fetch_add(1, Ordering::SeqCst) + 1;
        let delay = *self.handler_delay.lock();
        if !delay.is_zero() {
            std::thread::sleep(delay); // what a slow handler does: it holds its thread
        }
        if self.handler_panic_at.load(Ordering::SeqCst) == n {
            panic!("{INJECTED} event handler panics on event {n}");
        }
    }
}

/// Installs, once per process, a panic hook that keeps the panics [`Hooks`] raise out of the
/// output (they are expected, and counted) and hands every other panic to the previous hook.
pub fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or_default();
            if !message.starts_with(INJECTED) {
                previous(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use std::panic::AssertUnwindSafe;

    use super::*;
    use crate::lab::designs::trigger::Hooks as _;

    fn panics(f: impl FnOnce()) -> bool {
        quiet_injected_panics();
        std::panic::catch_unwind(AssertUnwindSafe(f)).is_err()
    }

    #[test]
    fn every_nth_reconcile_from_the_arming_on_panics() {
        let hooks = Hooks::new();
        assert_eq!(hooks.reconcile(), Ok(()));
        hooks.panic_every(3);
        let pattern: Vec<bool> = (0..6).map(|_| panics(|| drop(hooks.reconcile()))).collect();
        assert_eq!(pattern, [false, false, true, false, false, true]);
        assert_eq!(hooks.reconciles(), 7, "panicked reconciles count too");
        assert_eq!(hooks.panicked(), 2);
    }

    #[test]
    fn the_armed_event_panics_once() {
        let hooks = Hooks::new();
        hooks.event();
        hooks.panic_on_next_event();
        assert!(panics(|| hooks.event()));
        assert!(!panics(|| hooks.event()), "a second time");
        assert_eq!(hooks.events(), 3);
    }

    #[test]
    fn an_outage_fails_reconciles_only_while_it_lasts() {
        crate::lab::rig::paused(async {
            let hooks = Hooks::new();
            hooks.outage(Duration::from_millis(100));
            assert_eq!(hooks.reconcile(), Err(Unavailable));
            tokio::time::sleep(Duration::from_millis(99)).await;
            assert_eq!(hooks.reconcile(), Err(Unavailable));
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert_eq!(hooks.reconcile(), Ok(()));
            assert_eq!((hooks.failed(), hooks.reconciles()), (2, 3));
        });
    }
}
