//! The crate's single error type.

use std::fmt;

/// What went wrong, for callers that branch on it; the message says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The operating system refused a read or write.
    Io,
    /// The input ends before the data its header declares.
    Truncated,
    /// The input is malformed (bad magic, bad header, bad compressed stream).
    Corrupt,
    /// Well-formed input using a feature or type this crate does not handle.
    Unsupported,
    /// Declared sizes are beyond what can be allocated or addressed.
    TooLarge,
    /// The caller passed an array or argument that cannot be used here.
    InvalidArgument,
}

/// Every error of the crate. Displays as one line:
/// `<file name>: <what is wrong> (<what to do>)`.
#[derive(Debug, thiserror::Error)]
pub struct IoError {
    /// The file (or the name given to [`crate::decode`]) the error is about.
    pub file: String,
    pub kind: ErrorKind,
    pub message: String,
    /// What the user can do about it; may be empty.
    pub hint: String,
    #[source]
    pub source: Option<std::io::Error>,
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = if self.file.is_empty() {
            "<input>"
        } else {
            &self.file
        };
        write!(f, "{}: {}", OneLine(file), OneLine(&self.message))?;
        if !self.hint.is_empty() {
            write!(f, " ({})", OneLine(&self.hint))?;
        }
        Ok(())
    }
}

/// Messages quote bytes from damaged files; escape control characters so the
/// message stays one printable line.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl IoError {
    pub fn new(kind: ErrorKind, message: impl Into<String>, hint: impl Into<String>) -> IoError {
        IoError {
            file: String::new(),
            kind,
            message: message.into(),
            hint: hint.into(),
            source: None,
        }
    }
    pub fn truncated(message: impl Into<String>) -> IoError {
        IoError::new(
            ErrorKind::Truncated,
            format!("truncated: {}", message.into()),
            "the file is incomplete; copy or download it again",
        )
    }
    pub fn corrupt(message: impl Into<String>) -> IoError {
        IoError::new(
            ErrorKind::Corrupt,
            message,
            "the file is damaged or not in the format its name says",
        )
    }
    pub fn unsupported(message: impl Into<String>, hint: impl Into<String>) -> IoError {
        IoError::new(ErrorKind::Unsupported, message, hint)
    }
    pub fn too_large(message: impl Into<String>) -> IoError {
        IoError::new(
            ErrorKind::TooLarge,
            message,
            "the header declares sizes that cannot be right or cannot be held in memory",
        )
    }
    pub fn invalid(message: impl Into<String>, hint: impl Into<String>) -> IoError {
        IoError::new(ErrorKind::InvalidArgument, message, hint)
    }
    pub fn io(context: &str, err: std::io::Error) -> IoError {
        IoError {
            file: String::new(),
            kind: ErrorKind::Io,
            message: format!("{context}: {err}"),
            hint: "check the path, permissions and free disk space".into(),
            source: Some(err),
        }
    }

    /// Attach the file name unless one is already set (inner layers may know better).
    pub fn in_file(mut self, name: &str) -> IoError {
        if self.file.is_empty() {
            self.file = display_name(name);
        }
        self
    }
}

/// The file-name part of a path, which is what users recognise in a message.
pub(crate) fn display_name(name: &str) -> String {
    let trimmed = name.trim_end_matches(['/', '\\']);
    match trimmed.rsplit(['/', '\\']).next() {
        Some(base) if !base.is_empty() => base.to_string(),
        _ => name.to_string(),
    }
}

pub type Result<T> = std::result::Result<T, IoError>;
