//! Why a scenario could not be run.

use std::time::Duration;

/// Why a scenario could not be run (as opposed to a server answering differently).
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// A request did not come back in time.
    #[error("{scenario}: step {step:?} hung for {limit:?}")]
    Hung {
        /// The scenario.
        scenario: String,
        /// The step.
        step: String,
        /// The deadline.
        limit: Duration,
    },
    /// The client could not send a request (connection refused, TLS).
    #[error("{scenario}: step {step:?}: the request failed: {source}")]
    Send {
        /// The scenario.
        scenario: String,
        /// The step.
        step: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// A step needed a value an earlier answer did not have.
    #[error("{scenario}: step {step:?}: {message}")]
    Missing {
        /// The scenario.
        scenario: String,
        /// The step.
        step: String,
        /// What was missing.
        message: String,
    },
}
