//! Chapter 15's bands: the takeover times on the real control plane. Each band's runs are its
//! file (`cargo run --features tls -- measure election`: a crash and a release, one after the
//! other), and the band is the rule of its kind over them ([`crate::kit::basis::RULE`]).

use crate::kit::band::{Band, Reference};

/// Milliseconds from `a` crashing to `b` leading. Two-sided: with the lease duration fixed
/// by the run, the takeover is a same-run law. Its lower end is the safety claim (no one
/// leads before the crashed leader's lease has run out), its upper end the liveness one.
pub const REAL_LEASE_TAKEOVER_AFTER_CRASH_MS: Band<u64> = Band::law(
    2517,
    5035,
    "after a crash, the other replica takes over once the lease has run out, and not before",
    "book/bases/real_lease_takeover_after_crash_ms.tsv",
);
/// Milliseconds from `a` releasing the Lease to `b` leading. An upper bound.
pub const REAL_LEASE_TAKEOVER_AFTER_RELEASE_MS: Band<u64> = Band::at_most(
    1108,
    "after a release, the other replica takes over at its next poll, well within a lease",
    "book/bases/real_lease_takeover_after_release_ms.tsv",
);

/// Every band above, by name.
pub const BANDS: &[(&str, Band<u64>)] = &[
    (
        "REAL_LEASE_TAKEOVER_AFTER_CRASH_MS",
        REAL_LEASE_TAKEOVER_AFTER_CRASH_MS,
    ),
    (
        "REAL_LEASE_TAKEOVER_AFTER_RELEASE_MS",
        REAL_LEASE_TAKEOVER_AFTER_RELEASE_MS,
    ),
];

/// Every figure shown and not checked, by name: none.
pub const SHOWN: &[(&str, Reference)] = &[];
