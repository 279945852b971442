//! The informer feature gates (client-go `features/known_features.go`).

use controlloop::features::{Feature, FeatureGates, PreRelease};

use crate::{compare, compare_each};

// ---------------------------------------------------------------------------------------
// Feature gates, the fake clientset, resync
// ---------------------------------------------------------------------------------------

/// The informer gates, in the order the recording lists them.
const MODELLED: [Feature; 5] = [
    Feature::ATOMIC_FIFO,
    Feature::IN_ORDER_INFORMERS,
    Feature::IN_ORDER_INFORMERS_BATCH_PROCESS,
    Feature::UNLOCK_WHILE_PROCESSING_FIFO,
    Feature::WATCH_LIST_CLIENT,
];

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn pre_release(p: PreRelease) -> &'static str {
    match p {
        PreRelease::PreAlpha => "PreAlpha",
        PreRelease::Alpha => "Alpha",
        PreRelease::Beta => "Beta",
        PreRelease::GA => "GA",
        PreRelease::Deprecated => "Deprecated",
    }
}

/// Each gate's spec at each emulated minor, and what standalone client-go v0.37 enables
/// (the port's default minor, 1.37; v0.36's table is the same).
#[test]
fn feature_gates() {
    compare_each(
        &["feature_gates", "client_go_v0.37_feature_gates"],
        feature_gates_lines(37),
    );
}

/// Each gate's spec at each emulated minor up to `newest`, and what standalone client-go
/// enables at `newest`.
fn feature_gates_lines(newest: u32) -> Vec<String> {
    let mut lines = Vec::new();
    for minor in 32..=newest {
        let gates = FeatureGates::at_minor(minor).expect("a modelled minor");
        for f in MODELLED {
            let s = gates.spec(f).expect("a modelled gate");
            let pre = pre_release(s.pre_release);
            lines.push(format!(
                "1.{minor} {}: {pre} default={} locked={}",
                f.name(),
                on_off(s.default),
                yes_no(s.lock_to_default)
            ));
        }
    }
    let standalone = FeatureGates::at_minor(newest).expect("the pinned minor");
    for f in MODELLED {
        lines.push(format!(
            "standalone {}: {}",
            f.name(),
            on_off(standalone.enabled(f))
        ));
    }
    lines
}

#[test]
fn feature_gates_on_v0_38() {
    compare("client_go_v0.38_feature_gates", feature_gates_lines(38));
}

/// Each client-go release's own table, newest spec per gate (what that release runs with
/// standalone), against the port's spec at that minor. A gate a release does not know is
/// PreAlpha and off in the port.
#[test]
fn feature_gates_by_release() {
    let mut lines = Vec::new();
    for (tag, minor) in [
        ("v0.32.0", 32),
        ("v0.33.0", 33),
        ("v0.34.0", 34),
        ("v0.35.0", 35),
        ("v0.36.0", 36),
        ("v0.37.0-beta.0", 37),
        ("v0.37.2", 37),
    ] {
        let gates = FeatureGates::at_minor(minor).expect("a modelled minor");
        for f in MODELLED {
            let s = gates.spec(f).expect("a modelled gate");
            let what = match s.pre_release {
                PreRelease::PreAlpha => "not in the table".to_string(),
                p => format!(
                    "{} default={} locked={}",
                    pre_release(p),
                    on_off(s.default),
                    yes_no(s.lock_to_default)
                ),
            };
            lines.push(format!("{tag} {}: {what}", f.name()));
        }
    }
    compare("feature_gates_by_release", lines);
}
