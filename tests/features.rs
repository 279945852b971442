//! The versioned feature-gate registry: the informer gates' histories, and ports of client-go's
//! `features/envvar_test.go` (v0.36.0; §9 item 34 of the spec). Environment variables are
//! passed as maps, so no test touches the process environment.

use controlloop::cache::{FifoKind, select_fifo};
use controlloop::features::{
    Feature, FeatureGateError, FeatureGates, FeatureSpec, PreRelease, Version,
};
use controlloop::klog;

const TEST_ALPHA: Feature = Feature("TestAlpha");
const TEST_BETA: Feature = Feature("TestBeta");

/// Upstream's `defaultTestFeatures`.
fn default_test_features() -> FeatureGates {
    FeatureGates::with_specs(
        Version::new(1, 36),
        [
            (
                TEST_ALPHA,
                vec![FeatureSpec::unversioned(false, PreRelease::Alpha, false)],
            ),
            (
                TEST_BETA,
                vec![FeatureSpec::unversioned(true, PreRelease::Beta, false)],
            ),
        ],
    )
}

fn locked_alpha() -> FeatureGates {
    FeatureGates::with_specs(
        Version::new(1, 36),
        [(
            TEST_ALPHA,
            vec![FeatureSpec::unversioned(true, PreRelease::Alpha, true)],
        )],
    )
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// `TestEnvVarFeatureGates` "no env var, features get Defaults assigned".
#[test]
fn without_env_vars_features_get_their_defaults() {
    let mut g = default_test_features();
    g.apply_env(env(&[]));
    assert!(!g.enabled(TEST_ALPHA));
    assert!(g.enabled(TEST_BETA));
}

/// "incorrect env var, feature gets Default assigned", "incorrect env var value gets ignored",
/// "empty env var value gets ignored".
#[test]
fn a_misnamed_or_unparsable_env_var_is_ignored_and_a_bad_value_is_logged() {
    for vars in [
        env(&[("TestAlpha", "true")]),
        env(&[("KUBE_FEATURE_TestAlpha", "TrueFalse")]),
        env(&[("KUBE_FEATURE_TestAlpha", "")]),
    ] {
        let mut g = default_test_features();
        let ((), lines) = klog::capture(|| g.apply_env(vars.clone()));
        assert!(!g.enabled(TEST_ALPHA), "{vars:?}");
        assert!(g.enabled_via_env().is_empty(), "{vars:?}");
        let bad_value = vars[0].0.starts_with("KUBE_FEATURE_");
        assert_eq!(lines.len(), usize::from(bad_value), "{vars:?}: {lines:?}");
    }
    let mut g = default_test_features();
    let ((), lines) =
        klog::capture(|| g.apply_env(env(&[("KUBE_FEATURE_TestAlpha", "TrueFalse")])));
    assert_eq!(
        lines,
        [
            r#"E] "Could not set feature gate" err="strconv.ParseBool: parsing \"TrueFalse\": invalid syntax" feature="TestAlpha" desiredState="TrueFalse""#
        ]
    );
}

/// "correct env var changes the feature gets state".
#[test]
fn a_correct_env_var_changes_the_state() {
    let mut g = default_test_features();
    g.apply_env(env(&[("KUBE_FEATURE_TestAlpha", "true")]));
    assert!(g.enabled(TEST_ALPHA));
    assert_eq!(g.enabled_via_env().get(&TEST_ALPHA), Some(&true));
}

/// "a feature LockToDefault wins": `KUBE_FEATURE_TestAlpha=False` on a locked-true feature
/// leaves it true, and the refusal is logged in klog's error-line shape.
#[test]
fn a_locked_feature_wins_over_the_env_and_the_refusal_is_logged() {
    let mut g = locked_alpha();
    let ((), lines) = klog::capture(|| g.apply_env(env(&[("KUBE_FEATURE_TestAlpha", "False")])));
    assert!(g.enabled(TEST_ALPHA));
    assert!(g.enabled_via_env().is_empty());
    assert_eq!(
        lines,
        [
            r#"E] "Could not set feature gate, feature is locked" feature="TestAlpha" desiredState="False" lockedState=true"#
        ]
    );
}

/// "setting a feature to LockToDefault changes the internal state".
#[test]
fn setting_a_locked_feature_to_its_default_is_recorded_silently() {
    let mut g = locked_alpha();
    let ((), lines) = klog::capture(|| g.apply_env(env(&[("KUBE_FEATURE_TestAlpha", "True")])));
    assert!(g.enabled(TEST_ALPHA));
    assert_eq!(g.enabled_via_env().get(&TEST_ALPHA), Some(&true));
    assert!(lines.is_empty(), "{lines:?}");
}

/// "setting a feature via the Set method works" / "… wins" (over the env).
#[test]
fn set_works_and_wins_over_the_env() {
    let mut g = default_test_features();
    g.set(TEST_ALPHA, true).unwrap();
    assert!(g.enabled(TEST_ALPHA));
    let mut g = default_test_features();
    g.set(TEST_ALPHA, false).unwrap();
    g.apply_env(env(&[("KUBE_FEATURE_TestAlpha", "True")]));
    assert!(!g.enabled(TEST_ALPHA));
    assert_eq!(g.enabled_via_env().get(&TEST_ALPHA), Some(&true));
    assert_eq!(g.enabled_via_set().get(&TEST_ALPHA), Some(&false));
}

/// "setting a feature via the SetForTesting method works even when it is locked".
#[test]
fn set_for_testing_works_even_when_locked() {
    let mut g = locked_alpha();
    g.set_for_testing(TEST_ALPHA, false).unwrap();
    assert!(!g.enabled(TEST_ALPHA));
}

/// `TestEnvVarFeatureGatesSetNegative`: unknown and locked features are errors, and a locked
/// feature keeps its value.
#[test]
fn setting_an_unknown_or_locked_feature_returns_an_error() {
    let mut g = default_test_features();
    assert_eq!(
        g.set(Feature("Unknown"), false).unwrap_err().to_string(),
        r#"feature "Unknown" is not registered in FeatureGates "controlloop""#
    );
    let mut g = FeatureGates::with_specs(
        Version::new(1, 36),
        [(
            Feature("LockedFeature"),
            vec![FeatureSpec::unversioned(true, PreRelease::GA, true)],
        )],
    );
    let err = g.set(Feature("LockedFeature"), false).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"cannot set feature gate "LockedFeature" to false, feature is locked to true"#
    );
    assert!(g.enabled(Feature("LockedFeature")));
}

/// `TestEnvVarFeatureGatesEnabledPanic`.
#[test]
#[should_panic(expected = r#"feature "UnknownFeature" is not registered"#)]
fn asking_for_an_unregistered_feature_panics() {
    default_test_features().enabled(Feature("UnknownFeature"));
}

// ---- the informer gates' histories ---------------------------------------------------------

#[test]
fn in_order_informers_is_absent_at_1_32_beta_from_1_33_and_locked_ga_from_1_36() {
    let at = |m| {
        FeatureGates::at_minor(m)
            .unwrap()
            .spec(Feature::IN_ORDER_INFORMERS)
            .unwrap()
    };
    assert_eq!(at(32).pre_release, PreRelease::PreAlpha);
    assert!(!at(32).default);
    for m in 33..=35 {
        assert_eq!(
            (at(m).pre_release, at(m).default, at(m).lock_to_default),
            (PreRelease::Beta, true, false)
        );
    }
    for m in 36..=37 {
        assert_eq!(
            (at(m).pre_release, at(m).default, at(m).lock_to_default),
            (PreRelease::GA, true, true)
        );
    }
}

#[test]
fn the_other_informer_gates_turn_on_when_upstream_says() {
    let on = |f, m| FeatureGates::at_minor(m).unwrap().enabled(f);
    assert!(!on(Feature::IN_ORDER_INFORMERS_BATCH_PROCESS, 34));
    assert!(on(Feature::IN_ORDER_INFORMERS_BATCH_PROCESS, 35));
    for f in [Feature::ATOMIC_FIFO, Feature::UNLOCK_WHILE_PROCESSING_FIFO] {
        assert!(!on(f, 35));
        assert!(on(f, 36));
    }
    assert!(!on(Feature::WATCH_LIST_CLIENT, 34));
    assert!(on(Feature::WATCH_LIST_CLIENT, 35));
}

#[test]
fn an_emulated_version_outside_1_32_to_1_38_is_an_error() {
    assert_eq!(
        FeatureGates::at_minor(31).unwrap_err(),
        FeatureGateError::UnsupportedVersion(Version::new(1, 31))
    );
    assert!(FeatureGates::at_minor(38).is_ok());
    assert!(FeatureGates::at_minor(39).is_err());
}

#[test]
fn the_env_override_turns_in_order_informers_off_at_1_35_but_not_at_1_36() {
    let vars = env(&[("KUBE_FEATURE_InOrderInformers", "false")]);
    let mut g35 = FeatureGates::at_minor(35).unwrap();
    let ((), quiet) = klog::capture(|| g35.apply_env(vars.clone()));
    assert!(quiet.is_empty());
    assert!(!g35.enabled(Feature::IN_ORDER_INFORMERS));
    assert_eq!(select_fifo(&g35).kind, FifoKind::DeltaFifo);

    let mut g36 = FeatureGates::at_minor(36).unwrap();
    let ((), lines) = klog::capture(|| g36.apply_env(vars));
    assert!(g36.enabled(Feature::IN_ORDER_INFORMERS));
    assert_eq!(select_fifo(&g36).kind, FifoKind::RealFifo);
    assert_eq!(
        lines,
        [
            r#"E] "Could not set feature gate, feature is locked" feature="InOrderInformers" desiredState="false" lockedState=true"#
        ]
    );
}

#[test]
fn select_fifo_gives_one_mode_per_era() {
    let mode = |m| select_fifo(&FeatureGates::at_minor(m).unwrap()).describe();
    assert_eq!(mode(32), "DeltaFIFO (Replaced, known objects)");
    assert_eq!(mode(33), "RealFIFO (known objects)");
    assert_eq!(mode(34), "RealFIFO (known objects)");
    assert_eq!(mode(35), "RealFIFO (known objects, batched)");
    assert_eq!(mode(36), "RealFIFO (atomic, unlocked, bookmarks, batched)");
    assert_eq!(mode(37), "RealFIFO (atomic, unlocked, bookmarks, batched)");
}

#[test]
fn atomic_fifo_off_at_1_36_gives_the_1_35_mode_with_known_objects() {
    let mut g = FeatureGates::at_minor(36).unwrap();
    g.set(Feature::ATOMIC_FIFO, false).unwrap();
    let c = select_fifo(&g);
    assert_eq!(c.describe(), "RealFIFO (known objects, batched)");
    assert!(!c.store_tracks_resource_version);
}
