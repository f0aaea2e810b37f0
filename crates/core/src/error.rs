//! The one error type of the core crate.

/// Everything that can go wrong in an operation. Messages say what was wrong
/// and, where there is one, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No GPU adapter could be found or opened.
    #[error("no GPU adapter: {0} (run with --cpu to use the CPU reference path)")]
    NoAdapter(String),
    /// The device refused an allocation; the caller may retry with smaller chunks.
    #[error("the GPU is out of memory for {what} (try a smaller --memory-budget)")]
    OutOfMemory { what: String },
    /// The adapter failed the conformance probe: its answers would be wrong.
    #[error(
        "the GPU adapter {adapter} gives wrong answers ({what}); pick another adapter (see `gpuscope devices`) or run with --cpu"
    )]
    Nonconformant { adapter: String, what: String },
    /// Any other error reported by the GPU driver or wgpu.
    #[error("GPU error: {0}")]
    Device(String),
    /// A parameter has an invalid value.
    #[error("invalid {name}: {problem}")]
    InvalidParameter { name: &'static str, problem: String },
    /// The input array cannot be processed as given.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

impl Error {
    pub(crate) fn param(name: &'static str, problem: impl Into<String>) -> Self {
        Error::InvalidParameter {
            name,
            problem: problem.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
