//! The one error type of the core crate.
//!
//! The core serves several front ends (the command line, Python, the page),
//! each with its own words for the same remedy: `--cpu`,
//! `gpuscope.set_device('cpu')`, the page's CPU switch. So a message here
//! says only what was wrong, in no front end's words; what the user can do
//! about it is a typed [`Remedy`] (and the parameter concerned is a field),
//! which each front end renders in its own terms.

/// What a user can do about an error. Front ends word each one (the
/// command line as flags, Python as calls and keywords, the page as its
/// controls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// Run on the CPU reference path.
    UseCpu,
    /// Give the operation more device memory (a larger budget, or a device
    /// with more memory).
    LargerBudget,
    /// Work in smaller pieces (a smaller budget).
    SmallerBudget,
    /// Pick another GPU adapter from the list of devices.
    OtherAdapter,
    /// Process a smaller input.
    SmallerInput,
    /// Set a parameter to a value, named as the reference library does
    /// (`channel_axis` to `None`, `workshop` to `False`).
    Set { param: &'static str, value: Setting },
}

/// A value a [`Remedy::Set`] asks for, spelled per front end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Python's `None`, the command line's `none`.
    Nothing,
    /// Python's `False`; the command line leaves the flag out.
    Off,
}

/// Everything that can go wrong in an operation. Messages say what was wrong;
/// [`Error::remedies`] says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No GPU adapter could be found or opened.
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    /// The device refused an allocation; the caller may retry with smaller chunks.
    #[error("the GPU is out of memory for {what}")]
    OutOfMemory { what: String },
    /// The adapter failed the conformance probe: its answers would be wrong.
    #[error("the GPU adapter {adapter} gives wrong answers ({what})")]
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
    /// Beyond what this device, its limits or the memory budget allow on
    /// this path; `remedies` say what does work.
    #[error("{what}")]
    Beyond {
        what: String,
        remedies: &'static [Remedy],
    },
}

impl Error {
    pub(crate) fn param(name: &'static str, problem: impl Into<String>) -> Self {
        Error::InvalidParameter {
            name,
            problem: problem.into(),
        }
    }

    pub(crate) fn beyond(what: impl Into<String>, remedies: &'static [Remedy]) -> Self {
        Error::Beyond {
            what: what.into(),
            remedies,
        }
    }

    /// What the user can do about this error, most direct first.
    pub fn remedies(&self) -> &'static [Remedy] {
        match self {
            Error::NoAdapter(_) => &[Remedy::UseCpu],
            Error::OutOfMemory { .. } => &[Remedy::SmallerBudget],
            Error::Nonconformant { .. } => &[Remedy::OtherAdapter, Remedy::UseCpu],
            Error::Beyond { remedies, .. } => remedies,
            Error::Device(_) | Error::InvalidParameter { .. } | Error::InvalidInput(_) => &[],
        }
    }

    /// The parameter this error concerns, as the catalogue names it.
    pub fn parameter(&self) -> Option<&'static str> {
        match self {
            Error::InvalidParameter { name, .. } => Some(name),
            Error::Beyond { remedies, .. } => remedies.iter().find_map(|r| match r {
                Remedy::Set { param, .. } => Some(*param),
                _ => None,
            }),
            _ => None,
        }
    }

    /// The message followed by its remedies, each worded by `words`, as
    /// "MESSAGE; REMEDY, or REMEDY".
    pub fn render(&self, words: impl Fn(Remedy) -> String) -> String {
        let remedies: Vec<String> = self.remedies().iter().map(|&r| words(r)).collect();
        if remedies.is_empty() {
            self.to_string()
        } else {
            format!("{self}; {}", remedies.join(", or "))
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of the core's sources that name a front end's options (a
    /// `--flag`, a Python call) outside comments and the catalogue's `cli:`
    /// examples: those belong in the front ends' remedies.
    fn front_end_words(dir: &std::path::Path, found: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                front_end_words(&path, found);
                continue;
            }
            // The catalogue holds each operation's command-line example.
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("catalogue.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                let code = line.trim_start();
                // Tests may name any front end's words.
                if code.starts_with("#[cfg(test)]") {
                    break;
                }
                if code.starts_with("//") || code.contains("cli:") {
                    continue;
                }
                let code = code.split(" // ").next().unwrap_or(code);
                let flag = code.match_indices("--").any(|(at, _)| {
                    code[at + 2..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_lowercase())
                });
                if flag || code.contains("set_device(") {
                    found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
    }

    #[test]
    fn messages_name_no_front_ends_options() {
        let mut found = Vec::new();
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        front_end_words(&src, &mut found);
        assert!(
            found.is_empty(),
            "front-end words in the core:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn remedies_follow_the_message() {
        let e = Error::beyond("too big", &[Remedy::UseCpu, Remedy::LargerBudget]);
        let words = |r: Remedy| format!("{r:?}");
        assert_eq!(e.render(words), "too big; UseCpu, or LargerBudget");
        let plain = Error::InvalidInput("bad".into());
        assert_eq!(plain.render(words), "invalid input: bad");
        assert_eq!(Error::NoAdapter("x".into()).remedies(), &[Remedy::UseCpu]);
        let set = Error::beyond(
            "no",
            &[Remedy::Set {
                param: "workshop",
                value: Setting::Off,
            }],
        );
        assert_eq!(set.parameter(), Some("workshop"));
    }
}
