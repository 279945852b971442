//! Why the saved estimates could not be read, or the appendix written.

use std::path::PathBuf;

/// Why the saved estimates could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CostsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The upstream benchmark did not build or run; Go's output.
    #[error("upstream/bench (go test -bench) failed:\n{0}")]
    Upstream(String),
    /// A criterion file is not what criterion writes.
    #[error("{path}: not a criterion estimate: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
}
