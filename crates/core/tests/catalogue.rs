//! The operation catalogue: complete, consistent with the parameter types,
//! and with the reference libraries' signatures (shared docs, references.md).

use gpuscope_core::catalogue::{self, ParamType};
use gpuscope_core::filters::median::{OutlierRemoval, Outliers};
use gpuscope_core::filters::{ConvolveParams, GaussianParams, MedianParams, Mode};
use gpuscope_core::segment::{LabelParams, SourcesParams, ThresholdParams};
use gpuscope_core::slic::SlicParams;
use gpuscope_core::spots::{Algorithm, Gain, SpotOptions};
use gpuscope_core::stats::{CenFunc, ClipOptions, SigmaClipParams};
use gpuscope_core::tomo::NormalizeParams;
use serde_json::{Value, json};

fn default_of(op: &str, name: &str) -> Value {
    let o = catalogue::operation(op).unwrap_or_else(|| panic!("no operation {op}"));
    o.param(name)
        .unwrap_or_else(|| panic!("{op} has no parameter {name}"))
        .default
        .clone()
}

#[test]
fn every_parameter_of_every_type_is_listed_once() {
    let cat = catalogue::catalogue();
    let fields = catalogue::type_fields();
    let names: Vec<&str> = cat.iter().map(|o| o.name).collect();
    let typed: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, typed);
    for (op, (name, keys)) in cat.iter().zip(&fields) {
        assert_eq!(op.name, *name);
        let mut listed: Vec<String> = op.params.iter().map(|p| p.name.to_string()).collect();
        listed.sort();
        let mut keys = keys.clone();
        keys.sort();
        assert_eq!(listed, keys, "{}", op.name);
        assert!(!op.reference.is_empty() && !op.summary.is_empty() && !op.inputs.is_empty());
        for p in &op.params {
            assert!(!p.help.is_empty(), "{}.{} has no help", op.name, p.name);
            assert_eq!(
                p.ty == ParamType::Choice,
                !p.choices.is_empty(),
                "{}.{}",
                op.name,
                p.name
            );
            if p.required {
                assert_eq!(p.default, Value::Null, "{}.{}", op.name, p.name);
            } else if !p.nullable {
                assert_ne!(
                    p.default,
                    Value::Null,
                    "{}.{} lacks a default",
                    op.name,
                    p.name
                );
            }
        }
    }
}

#[test]
fn choices_are_the_values_the_types_accept() {
    for op in catalogue::catalogue() {
        for p in op.params.iter().filter(|p| p.ty == ParamType::Choice) {
            assert!(
                p.choices.iter().any(|c| json!(c) == p.default),
                "{}.{}",
                op.name,
                p.name
            );
            for c in &p.choices {
                let v = json!({ p.name: c });
                let ok = match op.name {
                    "gaussian_filter" => serde_json::from_value::<GaussianParams>(v).is_ok(),
                    "convolve" | "correlate" => serde_json::from_value::<ConvolveParams>(v).is_ok(),
                    "median_filter" => serde_json::from_value::<MedianParams>(v).is_ok(),
                    "remove_outliers" => serde_json::from_value::<OutlierRemoval>(v).is_ok(),
                    "sigma_clipped_stats" => serde_json::from_value::<SigmaClipParams>(v).is_ok(),
                    "sources" => serde_json::from_value::<SourcesParams>(v).is_ok(),
                    "find_spots" => serde_json::from_value::<SpotOptions>(v).is_ok(),
                    "normalize" => serde_json::from_value::<NormalizeParams>(v).is_ok(),
                    other => panic!("{other} has a choice parameter this test does not know"),
                };
                assert!(ok, "{}.{} = {c} is refused", op.name, p.name);
            }
        }
    }
}

#[test]
fn defaults_are_the_reference_signatures() {
    // scipy.ndimage.gaussian_filter(input, sigma, order=0, mode='reflect', cval=0.0, truncate=4.0)
    assert_eq!(default_of("gaussian_filter", "mode"), json!("reflect"));
    assert_eq!(default_of("gaussian_filter", "cval"), json!(0.0));
    assert_eq!(default_of("gaussian_filter", "truncate"), json!(4.0));
    assert!(
        catalogue::operation("gaussian_filter")
            .unwrap()
            .param("sigma")
            .unwrap()
            .required
    );
    // convolve/correlate(input, weights, mode='reflect', cval=0.0)
    for op in ["convolve", "correlate"] {
        assert_eq!(default_of(op, "mode"), json!("reflect"));
        assert_eq!(default_of(op, "cval"), json!(0.0));
    }
    // median_filter(input, size=None, footprint=None, mode='reflect', cval=0.0)
    assert_eq!(default_of("median_filter", "mode"), json!("reflect"));
    assert_eq!(default_of("median_filter", "cval"), json!(0.0));
    assert_eq!(default_of("median_filter", "footprint"), Value::Null);
    // Mantid Imaging: size 3, bright; diff required.
    assert_eq!(default_of("remove_outliers", "size"), json!(3));
    assert_eq!(default_of("remove_outliers", "mode"), json!("bright"));
    // tomopy.prep.normalize.normalize(arr, flat, dark, cutoff=None, ncore=None, out=None)
    // (and averaging='mean' where tomopy has it)
    assert_eq!(default_of("normalize", "cutoff"), json!(null));
    assert_eq!(default_of("normalize", "averaging"), json!("mean"));
    // astropy: sigma=3.0, sigma_lower=None, sigma_upper=None, maxiters=5, cenfunc='median'
    for op in ["sigma_clipped_stats", "sources"] {
        assert_eq!(default_of(op, "sigma"), json!(3.0));
        assert_eq!(default_of(op, "sigma_lower"), Value::Null);
        assert_eq!(default_of(op, "sigma_upper"), Value::Null);
        assert_eq!(default_of(op, "maxiters"), json!(5));
        assert_eq!(default_of(op, "cenfunc"), json!("median"));
        assert_eq!(default_of(op, "workshop"), json!(false));
    }
    assert_eq!(default_of("sources", "nsigma"), json!(5.0));
    // scipy.ndimage.label's default structure (faces), skimage's background 0.
    assert_eq!(default_of("label", "connectivity"), json!(1));
    assert_eq!(default_of("label", "background"), json!(0.0));
    assert_eq!(default_of("sources", "connectivity"), json!(1));
    // skimage.segmentation.slic(image, n_segments=100, compactness=10.0, max_num_iter=10,
    // sigma=0, spacing=None, convert2lab=None, enforce_connectivity=True,
    // min_size_factor=0.5, max_size_factor=3, slic_zero=False, start_label=1,
    // mask=None, *, channel_axis=-1)
    let slic = [
        ("n_segments", json!(100)),
        ("compactness", json!(10.0)),
        ("max_num_iter", json!(10)),
        ("sigma", json!([0.0])),
        ("spacing", Value::Null),
        ("convert2lab", Value::Null),
        ("enforce_connectivity", json!(true)),
        ("min_size_factor", json!(0.5)),
        ("max_size_factor", json!(3.0)),
        ("slic_zero", json!(false)),
        ("start_label", json!(1)),
        ("mask", Value::Null),
        ("channel_axis", json!(-1)),
    ];
    for (name, v) in slic {
        assert_eq!(default_of("slic", name), v, "slic {name}");
    }
    // DIALS: kernel_size 3,3, sigma_background 6, sigma_strong 3, min_local 2,
    // global_threshold 0, algorithm dispersion_extended, gain None (the
    // format's gain, 1), min_spot_size 3 (pixel-array detectors), max 1000.
    let spots = [
        ("algorithm", json!("dispersion_extended")),
        ("kernel_size", json!([3, 3])),
        ("sigma_background", json!(6.0)),
        ("sigma_strong", json!(3.0)),
        ("min_local", json!(2)),
        ("global_threshold", json!(0.0)),
        ("gain", Value::Null),
        ("min_spot_size", json!(3)),
        ("max_spot_size", json!(1000)),
    ];
    for (name, v) in spots {
        assert_eq!(default_of("find_spots", name), v, "find_spots {name}");
    }
}

#[test]
fn parameter_types_deserialise_with_defaults_and_validate() {
    let g: GaussianParams = serde_json::from_value(json!({"sigma": [2.0]})).unwrap();
    assert_eq!(g.truncate, 4.0);
    assert_eq!(g.mode, Mode::Reflect);
    g.validate().unwrap();
    let e = GaussianParams::default()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("sigma"), "{e}");
    let e = serde_json::from_value::<GaussianParams>(json!({"sigma": [1.0], "mode": "bogus"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("reflect, mirror"), "{e}");
    let e = serde_json::from_value::<GaussianParams>(json!({"sigmma": [1.0]}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("sigmma"), "{e}");
    let g: GaussianParams =
        serde_json::from_value(json!({"sigma": [1.0], "truncate": 0.0})).unwrap();
    assert!(g.validate().unwrap_err().to_string().contains("truncate"));

    assert!(ConvolveParams::default().validate().is_err());
    let c: ConvolveParams = serde_json::from_value(
        json!({"weights": {"shape": [3], "values": [1.0, 2.0, 1.0]}, "mode": "wrap"}),
    )
    .unwrap();
    c.validate().unwrap();
    assert_eq!(
        c.filter(1, true).unwrap().passes[0].weights,
        vec![1.0, 2.0, 1.0]
    );

    assert!(MedianParams::default().validate().is_err());
    let m: MedianParams = serde_json::from_value(json!({"size": [3]})).unwrap();
    m.validate().unwrap();
    assert_eq!(m.footprint(2).unwrap().len(), 9);

    let r: OutlierRemoval = serde_json::from_value(json!({"diff": 20.0})).unwrap();
    assert_eq!((r.size, r.outliers), (3, Outliers::Bright));
    r.validate().unwrap();
    assert!(OutlierRemoval::default().validate().is_err());

    let c: SigmaClipParams = serde_json::from_value(json!({"maxiters": null})).unwrap();
    assert_eq!(c.maxiters, None);
    assert_eq!(c.cenfunc, CenFunc::Median);
    let o = SigmaClipParams::default().options();
    assert_eq!((o.sigma, o.maxiters, o.strict), (3.0, Some(5), false));
    let d = ClipOptions::default();
    assert_eq!((d.sigma, d.maxiters, d.strict), (3.0, Some(5), false));
    let w: SigmaClipParams = serde_json::from_value(json!({"workshop": true})).unwrap();
    assert_eq!((w.options().maxiters, w.options().strict), (None, true));
    let bad: SigmaClipParams = serde_json::from_value(json!({"sigma": -1.0})).unwrap();
    assert!(bad.validate().unwrap_err().to_string().contains("sigma"));

    assert!(ThresholdParams::default().validate().is_err());
    let t: ThresholdParams = serde_json::from_value(json!({"value": 1.5})).unwrap();
    t.validate().unwrap();
    assert!(
        LabelParams {
            connectivity: 4,
            background: 0.0
        }
        .validate()
        .is_err()
    );
    SourcesParams::default().validate().unwrap();

    SlicParams::default().validate().unwrap();
    let s: SlicParams =
        serde_json::from_value(json!({"n_segments": 7, "channel_axis": null})).unwrap();
    assert_eq!(
        (s.n_segments, s.channel_axis, s.compactness),
        (7, None, 10.0)
    );
    let s: SlicParams = serde_json::from_value(json!({"n_segments": 0})).unwrap();
    assert!(s.validate().unwrap_err().to_string().contains("n_segments"));

    let o: SpotOptions =
        serde_json::from_value(json!({"algorithm": "dispersion", "gain": 2.0})).unwrap();
    assert_eq!(
        (o.algorithm, &o.gain),
        (Algorithm::Dispersion, &Gain::Scalar(2.0))
    );
    let o: SpotOptions = serde_json::from_value(json!({"gain": null})).unwrap();
    assert_eq!(o, SpotOptions::default());
    let o: SpotOptions = serde_json::from_value(json!({"gain": [1.0, 2.0]})).unwrap();
    assert_eq!(o.gain, Gain::Map(vec![1.0, 2.0]));
    let e = serde_json::from_value::<SpotOptions>(json!({"algorithm": "niblack"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("dispersion_extended"), "{e}");
}
