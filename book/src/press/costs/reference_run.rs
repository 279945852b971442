//! Where and when a run happened, and where its table goes.

use std::{fs, path::PathBuf};

use super::error::CostsError;

/// Where the generated table goes, inside the book's source folder.
pub const REFERENCE_RUN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../chapters/costs/reference-run.md"
);

/// Where and when a run happened.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The day of the run (UTC).
    pub date: String,
    /// The CPU model, from `/proc/cpuinfo`.
    pub cpu: String,
    /// Cores available to the run.
    pub cores: usize,
    /// The 1-minute load average when the run started, from `/proc/loadavg`.
    pub load_at_start: String,
    /// `rustc --version`.
    pub rustc: String,
    /// The criterion options the run used.
    pub criterion_args: String,
}

/// The 1-minute load average now, from `/proc/loadavg` ("unknown" where there is none).
pub fn load_average() -> String {
    crate::kit::basis::load_average().map_or_else(|| "unknown".to_owned(), |l| l.to_string())
}

impl RunInfo {
    /// Reads this machine's description; `criterion_args` are the options passed to criterion.
    pub fn here(criterion_args: &str) -> RunInfo {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let load_at_start = load_average();
        let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or("rustc".into()))
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "unknown rustc".to_owned());
        RunInfo {
            date: jiff::Timestamp::now().strftime("%Y-%m-%d").to_string(),
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_at_start,
            rustc,
            criterion_args: criterion_args.to_owned(),
        }
    }
}

/// Writes `text` to [`REFERENCE_RUN`].
pub fn write_reference_run(text: &str) -> Result<PathBuf, CostsError> {
    let path = PathBuf::from(REFERENCE_RUN);
    let io = |source| CostsError::Io {
        path: path.clone(),
        source,
    };
    fs::create_dir_all(path.parent().expect("a parent folder")).map_err(io)?;
    fs::write(&path, text).map_err(io)?;
    Ok(path)
}
