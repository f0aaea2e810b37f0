//! Arguments checked without running a command: argv parsed as `gpuscope`
//! parses it, then each command's parameters through the validation its
//! operation does, on a tiny array on the CPU (no file, no device). The
//! argv fuzz target (crates/fuzz) calls this; its findings become the
//! tests below.

use clap::Parser;
use gpuscope_core::Samples;
use gpuscope_core::filters::Filter;
use gpuscope_core::segment::label;
use gpuscope_core::stats::clip;

use crate::segment::{ClipArgs, level};
use crate::{Cli, Command, parse_size};

// The argv fuzz target: NUL-separated words.
#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let args: Vec<String> = text.split('\0').map(String::from).collect();
        let _ = check_argv(&args);
    }
});

/// Parses `args` (without the program name) and validates the parameters;
/// `Err` carries the message the user would see.
pub(crate) fn check_argv(args: &[String]) -> Result<(), String> {
    let argv = std::iter::once("gpuscope".to_string()).chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    let tiny = [1.0f32, 2.0, 3.0, 2.5, 100.0, 2.0];
    let clip_level = |c: &ClipArgs, n: Option<f64>| -> Result<(), String> {
        let s = clip::cpu::sigma_clipped_stats(Samples::F32(&tiny), None, &c.options())
            .map_err(|e| e.to_string())?;
        if let Some(n) = n {
            level(c, n).value(&s).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    match &cli.command {
        Command::Convolve(a) => {
            if let Some(sigma) = &a.gaussian {
                // One sigma serves every image; several name the axes.
                let ndims = if sigma.len() == 1 {
                    vec![2, 3]
                } else {
                    vec![sigma.len()]
                };
                for ndim in ndims {
                    Filter::gaussian(ndim, sigma, a.truncate).map_err(|e| e.to_string())?;
                }
            }
        }
        Command::Clip(a) => clip_level(&a.clip, None)?,
        Command::Threshold(a) => clip_level(&a.clip, a.nsigma)?,
        Command::Sources(a) => clip_level(&a.clip, Some(a.nsigma))?,
        Command::Label(a) => {
            label::cpu::label(&[true, false, true, true], &[2, 2], a.connectivity)
                .map_err(|e| e.to_string())?;
        }
        Command::Spots(a) => {
            crate::spots::parse_kernel(&a.kernel_size).map_err(|e| e.0)?;
        }
        _ => {}
    }
    if let Some(b) = cli.memory_budget {
        parse_size(&b.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_argv;

    fn check(args: &[&str]) -> Result<(), String> {
        check_argv(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn valid_and_invalid_arguments() {
        assert!(check(&["clip", "a.npy", "--sigma", "2"]).is_ok());
        assert!(check(&["clip", "a.npy", "--sigma", "0"]).is_err());
        assert!(check(&["convolve", "a.npy", "b.npy", "--gaussian", "1,2"]).is_ok());
        assert!(check(&["convolve", "a.npy", "b.npy", "--gaussian", "-1"]).is_err());
        assert!(check(&["label", "a.npy", "b.npy", "--connectivity", "9"]).is_err());
        assert!(check(&["spots", "a.cbf", "--kernel-size", "3,x"]).is_err());
        assert!(check(&["--memory-budget", "0", "clip", "a.npy"]).is_err());
        assert!(check(&["nonsense"]).is_err());
    }
}
