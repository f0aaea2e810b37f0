//! The core's errors in the page's words: remedies name the page's own
//! controls, and an error about a parameter starts `invalid NAME:`, which
//! the page reads to mark and focus that field (web/errors.js).

use gpuscope_core::{Error, Remedy, Setting};

/// A remedy in the page's words.
pub fn page_remedy(r: Remedy) -> String {
    match r {
        Remedy::UseCpu => "choose 'CPU (wasm)' under Run on".into(),
        Remedy::LargerBudget | Remedy::SmallerInput => "use a smaller image".into(),
        Remedy::SmallerBudget => "use a smaller image, or reload the page".into(),
        Remedy::OtherAdapter => "try another browser or GPU".into(),
        Remedy::Set {
            param,
            value: Setting::Nothing,
        } => format!("set {param} to none"),
        Remedy::Set {
            param,
            value: Setting::Off,
        } => format!("turn {param} off"),
    }
}

/// A core error as the page shows it.
pub fn page_words(e: &Error) -> String {
    let text = e.render(page_remedy);
    match e.parameter() {
        Some(p) if !text.starts_with(&format!("invalid {p}:")) => format!("invalid {p}: {text}"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_remedy() -> Vec<Remedy> {
        let mut all = vec![
            Remedy::UseCpu,
            Remedy::LargerBudget,
            Remedy::SmallerBudget,
            Remedy::OtherAdapter,
            Remedy::SmallerInput,
        ];
        for value in [Setting::Nothing, Setting::Off] {
            all.push(Remedy::Set {
                param: "channel_axis",
                value,
            });
        }
        all
    }

    #[test]
    fn remedies_name_no_other_front_ends_options() {
        for r in every_remedy() {
            let w = page_remedy(r);
            for other in ["--", "set_device", "=None", "=False", "gpuscope."] {
                assert!(!w.contains(other), "{r:?} in the page's words: {w}");
            }
        }
    }

    #[test]
    fn errors_about_a_parameter_name_it_first() {
        let e = Error::Beyond {
            what: "a 2-D image has no channel axis".into(),
            remedies: &[Remedy::Set {
                param: "channel_axis",
                value: Setting::Nothing,
            }],
        };
        assert_eq!(
            page_words(&e),
            "invalid channel_axis: a 2-D image has no channel axis; set channel_axis to none"
        );
        let oom = Error::OutOfMemory { what: "x".into() };
        assert_eq!(
            page_words(&oom),
            "the GPU is out of memory for x; use a smaller image, or reload the page"
        );
    }
}
