//! scipy.ndimage's boundary modes: how a stencil sees coordinates outside
//! the array. The host side (chunk halos, CPU references, the conformance
//! probe) and `shaders/common/boundary.wgsl` (every GPU stencil) must agree;
//! the probe checks the shader's answers against [`map_coordinate`] on every
//! device that opens.

use std::str::FromStr;

use crate::error::{Error, Result};

/// Boundary modes of scipy.ndimage (the `grid-` aliases are accepted too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// `d c b a | a b c d | d c b a` (scipy's default).
    #[default]
    Reflect,
    /// `d c b | a b c d | c b a`
    Mirror,
    /// `a a a | a b c d | d d d`
    Nearest,
    /// `b c d | a b c d | a b c`
    Wrap,
    /// `k k k | a b c d | k k k` with k = cval
    Constant,
}

impl Mode {
    /// The mode's number in `shaders/common/boundary.wgsl`.
    pub(crate) fn code(self) -> u32 {
        match self {
            Mode::Reflect => 0,
            Mode::Mirror => 1,
            Mode::Nearest => 2,
            Mode::Wrap => 3,
            Mode::Constant => 4,
        }
    }
}

/// The names of [`Mode`]'s values, scipy's spelling, default first.
pub const MODES: [&str; 5] = ["reflect", "mirror", "nearest", "wrap", "constant"];

named_enum!(Mode);

impl Mode {
    /// scipy's name of the mode.
    pub fn name(self) -> &'static str {
        MODES[self.code() as usize]
    }
}

impl FromStr for Mode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Mode> {
        match s {
            "reflect" | "grid-mirror" => Ok(Mode::Reflect),
            "mirror" => Ok(Mode::Mirror),
            "nearest" => Ok(Mode::Nearest),
            "wrap" | "grid-wrap" => Ok(Mode::Wrap),
            "constant" | "grid-constant" => Ok(Mode::Constant),
            other => Err(Error::param(
                "mode",
                format!("'{other}' (expected reflect, mirror, nearest, wrap or constant)"),
            )),
        }
    }
}

/// Maps a coordinate outside `[0, n)` back inside as scipy.ndimage does;
/// `None` means the constant value (mode constant).
pub fn map_coordinate(c: i64, n: usize, mode: Mode) -> Option<usize> {
    let n = n as i64;
    if (0..n).contains(&c) {
        return Some(c as usize);
    }
    let m = match mode {
        Mode::Constant => return None,
        Mode::Nearest => c.clamp(0, n - 1),
        Mode::Wrap => c.rem_euclid(n),
        Mode::Reflect => {
            let r = c.rem_euclid(2 * n);
            if r >= n { 2 * n - 1 - r } else { r }
        }
        Mode::Mirror => {
            if n == 1 {
                0
            } else {
                let period = 2 * n - 2;
                let r = c.rem_euclid(period);
                if r >= n { period - r } else { r }
            }
        }
    };
    Some(m as usize)
}
