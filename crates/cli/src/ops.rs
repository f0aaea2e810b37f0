//! `gpuscope ops [--json]`: the core's operation catalogue. The commands'
//! defaults come from the same parameter types (`default_value_t =
//! Params::default().field`); the tests below hold the two together.

use gpuscope_core::catalogue::{self, Operation, Param};
use serde_json::Value;

use crate::common::CliResult;

pub fn ops(json: bool) -> CliResult {
    let cat = catalogue::catalogue();
    if json {
        // Written from the structs, so the keys keep the catalogue's order.
        #[derive(serde::Serialize)]
        struct Ops<'a> {
            operations: &'a [Operation],
        }
        println!("{}", serde_json::to_string(&Ops { operations: &cat })?);
        return Ok(());
    }
    for op in &cat {
        print_op(op);
    }
    Ok(())
}

fn print_op(op: &Operation) {
    let output = serde_json::to_value(op.output).unwrap_or(Value::Null);
    println!(
        "{}  ({}) -> {}",
        op.name,
        op.reference,
        output.as_str().unwrap_or("?")
    );
    println!("  {}", op.summary);
    println!("  command line: {}", op.cli);
    for i in &op.inputs {
        println!(
            "  input {}: {}-D to {}-D, {}; channels: {}",
            i.name, i.ndim[0], i.ndim[1], i.dtypes, i.channels
        );
    }
    for p in &op.params {
        println!(
            "    {:<22} {:<7} {:<24} {}",
            p.name,
            type_name(p),
            value_text(p),
            p.help
        );
    }
    println!();
}

fn type_name(p: &Param) -> String {
    serde_json::to_value(p.ty)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// `default X`, `required`, plus the limits.
fn value_text(p: &Param) -> String {
    let mut t = if p.required {
        "required".to_string()
    } else {
        format!("default {}", p.default)
    };
    if let Some(min) = p.min {
        t.push_str(&format!(
            ", {}{min}",
            if p.min_exclusive { ">" } else { ">=" }
        ));
    }
    if let Some(max) = p.max {
        t.push_str(&format!(", <={max}"));
    }
    if !p.choices.is_empty() {
        t = format!("{t} [{}]", p.choices.join("|"));
    }
    t
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};
    use gpuscope_core::filters::median::OutlierRemoval;
    use gpuscope_core::filters::{ConvolveParams, GaussianParams, MedianParams};
    use gpuscope_core::segment::{LabelParams, SourcesParams, ThresholdParams};
    use gpuscope_core::slic::SlicParams;
    use gpuscope_core::spots::SpotOptions;
    use gpuscope_core::stats::SigmaClipParams;

    use crate::segment::{LabelCmd, SourcesCmd};
    use crate::{Cli, Command};

    fn label_params(a: &LabelCmd) -> LabelParams {
        LabelParams {
            connectivity: a.connectivity,
            background: a.background,
        }
    }

    fn sources_params(a: &SourcesCmd) -> SourcesParams {
        let c = a.clip.params();
        SourcesParams {
            sigma: c.sigma,
            sigma_lower: c.sigma_lower,
            sigma_upper: c.sigma_upper,
            maxiters: c.maxiters,
            cenfunc: c.cenfunc,
            workshop: c.workshop,
            nsigma: a.nsigma,
            connectivity: a.connectivity,
        }
    }

    fn parse(args: &str) -> Command {
        let argv = std::iter::once("gpuscope").chain(args.split_whitespace());
        match Cli::try_parse_from(argv) {
            Ok(cli) => cli.command,
            Err(e) => panic!("gpuscope {args}: {e}"),
        }
    }

    /// The parameters a command runs with when only the required ones are
    /// given, for each operation of the catalogue; against the defaults.
    fn check(op: &str) {
        match (op, parse(&command_line(op))) {
            ("gaussian_filter", Command::Convolve(a)) => assert_eq!(
                a.gaussian_params(),
                GaussianParams {
                    sigma: vec![2.0],
                    ..GaussianParams::default()
                }
            ),
            ("convolve" | "correlate", Command::Convolve(a)) => {
                let d = ConvolveParams::default();
                assert_eq!((a.mode, a.cval), (d.mode, d.cval));
                assert_eq!(a.correlate, op == "correlate");
            }
            ("median_filter", Command::Median(a)) => assert_eq!(
                a.params(),
                MedianParams {
                    size: vec![3],
                    ..MedianParams::default()
                }
            ),
            ("remove_outliers", Command::Outliers(a)) => assert_eq!(
                a.params(),
                OutlierRemoval {
                    diff: 20.0,
                    ..OutlierRemoval::default()
                }
            ),
            ("normalize", Command::Normalize(a)) => {
                assert_eq!(a.params(), gpuscope_core::tomo::NormalizeParams::default())
            }
            ("sigma_clipped_stats", Command::Clip(a)) => {
                assert_eq!(a.clip.params(), SigmaClipParams::default())
            }
            ("threshold", Command::Threshold(a)) => {
                assert_eq!(a.above, Some(1.5));
                assert!(
                    ThresholdParams::default().value.is_nan(),
                    "value has no default"
                );
                assert_eq!(a.clip.params(), SigmaClipParams::default());
            }
            ("label", Command::Label(a)) => assert_eq!(label_params(&a), LabelParams::default()),
            ("regionprops", Command::Sources(_)) => {}
            ("sources", Command::Sources(a)) => {
                assert_eq!(sources_params(&a), SourcesParams::default())
            }
            ("slic", Command::Slic(a)) => assert_eq!(a.params(None), SlicParams::default()),
            ("find_spots", Command::Spots(a)) => match crate::spots::options(&a, 4) {
                Ok(o) => assert_eq!(o, SpotOptions::default()),
                Err(e) => panic!("{}", e.0),
            },
            (op, _) => panic!("{op}: no command line checked for this operation"),
        }
    }

    fn command_line(op: &str) -> String {
        match op {
            "gaussian_filter" => "convolve in.npy out.npy --gaussian 2",
            "convolve" => "convolve in.npy out.npy --kernel k.npy",
            "correlate" => "convolve in.npy out.npy --kernel k.npy --correlate",
            "median_filter" => "median in.npy out.npy --size 3",
            "remove_outliers" => "outliers in.npy out.npy --diff 20",
            "normalize" => "normalize in.npy out.npy --flat f.npy --dark d.npy",
            "sigma_clipped_stats" => "clip in.npy",
            "threshold" => "threshold in.npy out.npy --above 1.5",
            "label" => "label in.npy out.npy",
            "regionprops" | "sources" => "sources in.npy --catalogue out.csv",
            "slic" => "slic in.npy out.npy",
            "find_spots" => "spots in.cbf",
            _ => "",
        }
        .to_string()
    }

    #[test]
    fn command_line_defaults_are_the_catalogue_defaults() {
        for op in gpuscope_core::catalogue::catalogue() {
            check(op.name);
        }
    }

    #[test]
    fn threshold_nsigma_clips_with_the_catalogue_defaults() {
        let Command::Threshold(a) = parse("threshold in.npy out.npy --nsigma 5") else {
            panic!("not threshold");
        };
        assert_eq!(a.clip.params(), SigmaClipParams::default());
        assert_eq!(a.nsigma, Some(5.0));
    }

    #[test]
    fn every_entry_names_a_real_command() {
        let cli = Cli::command();
        for op in gpuscope_core::catalogue::catalogue() {
            let words: Vec<&str> = op.cli.split_whitespace().collect();
            assert_eq!(words[0], "gpuscope", "{}", op.name);
            assert!(
                cli.find_subcommand(words[1]).is_some(),
                "{}: no command {}",
                op.name,
                words[1]
            );
            assert!(command_line(op.name).starts_with(words[1]), "{}", op.name);
        }
    }
}
