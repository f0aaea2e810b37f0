//! SLIC: the GPU (lavapipe) against the CPU twin, labels exactly equal, on
//! small 2-D/3-D, grayscale/RGB inputs and every option; determinism over
//! repeated runs; bad input; device memory after many calls.

mod common;

use common::{gpu, noise};
use gpuscope_core::keys::Samples;
use gpuscope_core::slic::{self, SlicParams, cpu};
use gpuscope_core::{Error, Gpu, GpuOptions};

#[path = "slic/connectivity.rs"]
mod connectivity;
/// The masked cases (tests/slic/mask.rs).
#[path = "slic/mask.rs"]
mod mask;

fn both(samples: Samples<'_>, shape: &[usize], p: &SlicParams) -> slic::Segments {
    let want = cpu::slic(samples, shape, p).unwrap();
    let got = pollster::block_on(slic::slic(gpu(), samples, shape, p)).unwrap();
    assert_eq!(got.shape, want.shape);
    let diff = got
        .labels
        .iter()
        .zip(&want.labels)
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(diff, 0, "{diff} labels differ for shape {shape:?}, {p:?}");
    assert_eq!(got, want);
    want
}

/// An 8-bit RGB image (channel last, no mask or smoothing): the GPU
/// converts it to Lab itself in float32, so its labels equal the CPU
/// twin's on the GPU's features, and those features are within
/// LAB_TOLERANCE of the twin's float64 Lab.
fn both_rgb8(samples: Samples<'_>, shape: &[usize], p: &SlicParams) -> slic::Segments {
    let features = pollster::block_on(slic::lab_features(gpu(), samples, shape, p)).unwrap();
    let exact = cpu::features(samples, shape, p).unwrap();
    assert_eq!(features.len(), exact.len());
    let ratio = 1.0 / p.compactness;
    for (a, b) in features.iter().zip(&exact) {
        let d = f64::from(a - b).abs() / ratio;
        assert!(d <= slic::LAB_TOLERANCE, "{a} against {b} ({d} Lab units)");
    }
    let want = cpu::slic_on_features(samples, shape, p, features).unwrap();
    let got = pollster::block_on(slic::slic(gpu(), samples, shape, p)).unwrap();
    assert_eq!(got, want, "{p:?}");
    want
}

/// Smooth blobs plus noise: structure for the superpixels to follow.
fn blobs(shape: &[usize], seed: u64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    let r = noise(n, seed);
    (0..n)
        .map(|i| {
            let mut c = [0usize; 3];
            let mut rest = i;
            for a in (0..shape.len()).rev() {
                c[a] = rest % shape[a];
                rest /= shape[a];
            }
            let s: f64 = c.iter().map(|&v| (v as f64 * 0.31).sin()).sum();
            (if s > 0.3 { 1.0 } else { 0.0 } + 0.2 * r[i]) as f32
        })
        .collect()
}

fn gray(p: SlicParams) -> SlicParams {
    SlicParams {
        channel_axis: None,
        ..p
    }
}

#[test]
fn gpu_equals_cpu_2d_gray() {
    let shape = [61, 47];
    let img = blobs(&shape, 1);
    for p in [
        gray(SlicParams::default()),
        gray(SlicParams {
            n_segments: 40,
            compactness: 0.5,
            ..SlicParams::default()
        }),
        gray(SlicParams {
            n_segments: 200,
            compactness: 0.1,
            max_num_iter: 4,
            start_label: 0,
            ..SlicParams::default()
        }),
        gray(SlicParams {
            n_segments: 30,
            enforce_connectivity: false,
            ..SlicParams::default()
        }),
        gray(SlicParams {
            n_segments: 50,
            slic_zero: true,
            ..SlicParams::default()
        }),
        gray(SlicParams {
            n_segments: 50,
            spacing: Some(vec![2.0, 1.0]),
            sigma: vec![1.0],
            ..SlicParams::default()
        }),
    ] {
        let s = both(Samples::F32(&img), &shape, &p);
        assert!(s.n_segments > 1, "{p:?}");
    }
}

/// skimage's max_size cut of the connectivity search (the GPU step hands
/// over to the host's search when a piece reaches it), also below
/// min_size, and float64 and 8-bit input, whose equal float32 distances
/// are told apart by their exact sums (`exact_ties`).
#[test]
fn gpu_equals_cpu_with_cut_pieces_and_exact_ties() {
    let shape = [61, 47];
    let img = blobs(&shape, 4);
    let img64: Vec<f64> = img.iter().map(|&v| f64::from(v)).collect();
    let img8: Vec<u8> = img
        .iter()
        .map(|&v| (v.clamp(0.0, 1.0) * 255.0) as u8)
        .collect();
    for max_size_factor in [1.0, 0.3, 3.0] {
        let p = gray(SlicParams {
            n_segments: 40,
            compactness: 0.5,
            max_size_factor,
            ..SlicParams::default()
        });
        let cut = both(Samples::F32(&img), &shape, &p);
        if max_size_factor < 3.0 {
            // The cut changes the answer (the test exercises it).
            let uncut = SlicParams {
                max_size_factor: 100.0,
                ..p.clone()
            };
            assert_ne!(cut.labels, both(Samples::F32(&img), &shape, &uncut).labels);
        }
        both(Samples::F64(&img64), &shape, &p);
        both(Samples::U8(&img8), &shape, &p);
    }
}

#[test]
fn a_segment_per_pixel_and_six_channels_equal_the_cpu_twin() {
    // As many segments as pixels, in a volume and in an image (runs of
    // equal labels of a pixel or two for accumulate), and six channels
    // whose structure lies only in the last two.
    let shape = [9, 20, 21];
    let img = blobs(&shape, 41);
    let p = gray(SlicParams {
        n_segments: 9 * 20 * 21,
        enforce_connectivity: false,
        ..SlicParams::default()
    });
    both(Samples::F32(&img), &shape, &p);
    let plane = [33, 35];
    both(Samples::F32(&img[..33 * 35]), &plane, &p);
    let (h, w, channels) = (29, 37, 6);
    let r = noise(h * w * channels, 42);
    let multi: Vec<f32> = (0..h * w * channels)
        .map(|i| {
            let step = ((i / channels % w) / 9 + (i / channels / w) / 7) as f32;
            let structure = if i % channels >= 4 { step } else { 0.0 };
            structure + 0.3 * r[i] as f32
        })
        .collect();
    let p = SlicParams {
        n_segments: 25,
        convert2lab: Some(false),
        ..SlicParams::default()
    };
    let s = both(Samples::F32(&multi), &[h, w, channels], &p);
    assert!(s.n_segments > 5, "{}", s.n_segments);
}

#[test]
fn gpu_equals_cpu_2d_rgb_and_channel_axis() {
    let (h, w) = (40, 52);
    let r = noise(h * w * 3, 7);
    let rgb: Vec<u8> = (0..h * w * 3)
        .map(|i| {
            let (y, x, c) = (i / (w * 3), (i / 3) % w, i % 3);
            let base = if (x / 13 + y / 10 + c) % 2 == 0 {
                200.0
            } else {
                40.0
            };
            (base + 30.0 * r[i]) as u8
        })
        .collect();
    let p = SlicParams {
        n_segments: 30,
        ..SlicParams::default()
    };
    let a = both_rgb8(Samples::U8(&rgb), &[h, w, 3], &p);
    let signed: Vec<i8> = rgb.iter().map(|&b| b.wrapping_sub(128) as i8).collect();
    both_rgb8(Samples::I8(&signed), &[h, w, 3], &p);
    // The same image with channels first (the float64 Lab on the host)
    // gives the same labels.
    let mut planar = vec![0u8; rgb.len()];
    for i in 0..h * w {
        for c in 0..3 {
            planar[c * h * w + i] = rgb[i * 3 + c];
        }
    }
    let b = both(
        Samples::U8(&planar),
        &[3, h, w],
        &SlicParams {
            channel_axis: Some(0),
            ..p.clone()
        },
    );
    assert_eq!(a.labels, b.labels);
    // SLICO on the GPU's Lab, then neither Lab nor SLICO.
    both_rgb8(
        Samples::U8(&rgb),
        &[h, w, 3],
        &SlicParams {
            slic_zero: true,
            ..p.clone()
        },
    );
    both(
        Samples::U8(&rgb),
        &[h, w, 3],
        &SlicParams {
            convert2lab: Some(false),
            slic_zero: true,
            ..p.clone()
        },
    );
}

/// Every 8-bit colour through the GPU's Lab conversion, in four images of
/// 2^22 colours (each with black and white, so that no rescaling applies),
/// against skimage's float64 Lab (the CPU twin's).
#[test]
fn gpu_lab_is_within_tolerance_for_every_8bit_colour() {
    let p = SlicParams::default();
    let mut worst = 0f64;
    for part in 0..4u32 {
        let mut rgb: Vec<u8> = vec![0, 0, 0, 255, 255, 255];
        for c in part << 22..(part + 1) << 22 {
            rgb.extend([(c >> 16) as u8, (c >> 8) as u8, c as u8]);
        }
        let shape = [rgb.len() / 3, 1, 3];
        let got =
            pollster::block_on(slic::lab_features(gpu(), Samples::U8(&rgb), &shape, &p)).unwrap();
        let want = cpu::features(Samples::U8(&rgb), &shape, &p).unwrap();
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            worst = worst.max(f64::from(a - b).abs() * p.compactness);
        }
    }
    eprintln!("largest difference: {worst:e} Lab units");
    assert!(worst <= slic::LAB_TOLERANCE, "{worst}");
    assert!(
        worst > 0.0,
        "float32 against float64 should differ somewhere"
    );
}

#[test]
fn gpu_equals_cpu_3d() {
    let shape = [14, 17, 19];
    let img = blobs(&shape, 3);
    for p in [
        gray(SlicParams {
            n_segments: 40,
            compactness: 1.0,
            max_num_iter: 5,
            ..SlicParams::default()
        }),
        gray(SlicParams {
            n_segments: 100,
            compactness: 0.3,
            spacing: Some(vec![2.0, 1.0, 1.0]),
            slic_zero: true,
            ..SlicParams::default()
        }),
    ] {
        let s = both(Samples::F32(&img), &shape, &p);
        assert!(s.n_segments > 1);
    }
}

/// `assign` visits the centres from the pixel's own cell outwards and skips
/// those whose spatial distance alone exceeds every lane's best: the labels
/// stay the twin's (index order, strict `<`) whether colour or space
/// dominates, with anisotropic spacing and on exact ties (a constant
/// volume whose pixels lie midway between seeds).
#[test]
fn candidates_skipped_on_a_bound_change_no_label() {
    let shape = [24, 26, 28];
    let img = blobs(&shape, 11);
    for compactness in [0.02, 0.3, 1.0, 10.0, 300.0] {
        for spacing in [None, Some(vec![3.0, 1.0, 0.5])] {
            let p = gray(SlicParams {
                n_segments: 150,
                compactness,
                spacing,
                max_num_iter: 6,
                ..SlicParams::default()
            });
            let s = both(Samples::F32(&img), &shape, &p);
            assert!(s.n_segments > 1);
        }
    }
    let flat = vec![0.25f32; 20 * 20 * 20];
    let p = gray(SlicParams {
        n_segments: 27,
        ..SlicParams::default()
    });
    both(Samples::F32(&flat), &[20, 20, 20], &p);
}

/// Every label (but `split_ok`) is one face-connected component.
fn assert_connected(labels: &[i32], shape: [usize; 3], split_ok: Option<i32>) {
    let [nz, ny, nx] = shape;
    let max = *labels.iter().max().unwrap();
    let mut seen = vec![false; (max + 2) as usize];
    let mut done = vec![false; labels.len()];
    for s in 0..labels.len() {
        if done[s] {
            continue;
        }
        let l = labels[s];
        assert!(
            !seen[(l + 1) as usize] || split_ok == Some(l),
            "label {l} is split in pieces"
        );
        seen[(l + 1) as usize] = true;
        let mut stack = vec![s];
        done[s] = true;
        while let Some(i) = stack.pop() {
            let (z, y, x) = (i / (ny * nx), (i / nx) % ny, i % nx);
            let mut nb = Vec::new();
            if x > 0 {
                nb.push(i - 1)
            }
            if x + 1 < nx {
                nb.push(i + 1)
            }
            if y > 0 {
                nb.push(i - nx)
            }
            if y + 1 < ny {
                nb.push(i + nx)
            }
            if z > 0 {
                nb.push(i - nx * ny)
            }
            if z + 1 < nz {
                nb.push(i + nx * ny)
            }
            for j in nb {
                if !done[j] && labels[j] == l {
                    done[j] = true;
                    stack.push(j);
                }
            }
        }
    }
}

#[test]
fn enforced_segments_are_connected_and_numbered_from_start_label() {
    let shape = [30, 33, 28];
    let img = blobs(&shape, 9);
    for start in [0, 1] {
        let p = gray(SlicParams {
            n_segments: 150,
            compactness: 0.2,
            start_label: start,
            ..SlicParams::default()
        });
        let s = both(Samples::F32(&img), &shape, &p);
        assert_connected(&s.labels, [30, 33, 28], None);
        let max = *s.labels.iter().max().unwrap();
        assert_eq!(*s.labels.iter().min().unwrap(), start);
        assert_eq!(s.n_segments as i32, max - start + 1, "labels are dense");
    }
}

#[test]
fn repeated_runs_give_identical_labels() {
    let shape = [24, 31, 29];
    let img = blobs(&shape, 11);
    let p = gray(SlicParams {
        n_segments: 24 * 31 * 29 / 125,
        compactness: 1.0,
        max_num_iter: 5,
        ..SlicParams::default()
    });
    let first = pollster::block_on(slic::slic(gpu(), Samples::F32(&img), &shape, &p)).unwrap();
    for _ in 0..4 {
        let again = pollster::block_on(slic::slic(gpu(), Samples::F32(&img), &shape, &p)).unwrap();
        assert_eq!(again, first);
    }
}

#[test]
fn tiny_and_degenerate_inputs() {
    // 1x1, 2x2x2, n_segments 1, n_segments above the pixel count, constant.
    let one = [0.5f32];
    let s = both(Samples::F32(&one), &[1, 1], &gray(SlicParams::default()));
    assert_eq!(s.labels, vec![1]);
    let cube: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let s = both(
        Samples::F32(&cube),
        &[2, 2, 2],
        &gray(SlicParams::default()),
    );
    assert_eq!(s.labels.len(), 8);
    let img = blobs(&[20, 30], 2);
    let s = both(
        Samples::F32(&img),
        &[20, 30],
        &gray(SlicParams {
            n_segments: 1,
            ..SlicParams::default()
        }),
    );
    assert_eq!(s.n_segments, 1);
    assert!(s.labels.iter().all(|&l| l == 1));
    let s = both(
        Samples::F32(&img),
        &[20, 30],
        &gray(SlicParams {
            n_segments: 5000,
            enforce_connectivity: false,
            ..SlicParams::default()
        }),
    );
    assert_eq!(s.n_segments, 600, "one segment per pixel");
    let flat = vec![3u16; 16 * 16 * 16];
    let s = both(
        Samples::U16(&flat),
        &[16, 16, 16],
        &gray(SlicParams {
            n_segments: 8,
            ..SlicParams::default()
        }),
    );
    assert_eq!(s.n_segments, 8, "a constant volume gives the grid");
}

#[test]
fn bad_input_is_a_clear_error() {
    let mut img = blobs(&[10, 10], 4);
    img[17] = f32::NAN;
    let p = gray(SlicParams::default());
    let e = pollster::block_on(slic::slic(gpu(), Samples::F32(&img), &[10, 10], &p)).unwrap_err();
    assert!(e.to_string().contains("NaN"), "{e}");
    img[17] = f32::NEG_INFINITY;
    let e = cpu::slic(Samples::F32(&img), &[10, 10], &p).unwrap_err();
    assert!(e.to_string().contains("infinite"), "{e}");
    let e = pollster::block_on(slic::slic(gpu(), Samples::F32(&img), &[10, 10], &p)).unwrap_err();
    assert!(e.to_string().contains("infinite"), "{e}");
    // Integer input goes through the host's rescaling: NaN cannot occur,
    // float64 NaN is refused there.
    let mut f64img: Vec<f64> = img.iter().map(|&v| f64::from(v)).collect();
    f64img[17] = f64::NAN;
    let e =
        pollster::block_on(slic::slic(gpu(), Samples::F64(&f64img), &[10, 10], &p)).unwrap_err();
    assert!(e.to_string().contains("NaN"), "{e}");
    // NaN under a mask is fine, as in scikit-image.
    img[17] = f32::NAN;
    let mut mask = vec![true; 100];
    mask[17] = false;
    both(
        Samples::F32(&img),
        &[10, 10],
        &SlicParams {
            mask: Some(mask),
            ..p.clone()
        },
    );
    let ok = blobs(&[10, 10], 4);
    let cases: Vec<(SlicParams, &[usize], &str)> = vec![
        (SlicParams::default(), &[10, 10], "channel_axis"),
        (
            gray(SlicParams {
                n_segments: 0,
                ..SlicParams::default()
            }),
            &[10, 10],
            "n_segments",
        ),
        (
            gray(SlicParams {
                max_num_iter: 0,
                ..SlicParams::default()
            }),
            &[10, 10],
            "max_num_iter",
        ),
        (
            gray(SlicParams {
                compactness: 0.0,
                ..SlicParams::default()
            }),
            &[10, 10],
            "compactness",
        ),
        (
            gray(SlicParams {
                start_label: 2,
                ..SlicParams::default()
            }),
            &[10, 10],
            "start_label",
        ),
        (
            gray(SlicParams {
                spacing: Some(vec![1.0; 3]),
                ..SlicParams::default()
            }),
            &[10, 10],
            "spacing",
        ),
        (
            gray(SlicParams {
                sigma: vec![-1.0],
                ..SlicParams::default()
            }),
            &[10, 10],
            "sigma",
        ),
        (gray(SlicParams::default()), &[10, 11], "shape"),
        (gray(SlicParams::default()), &[100], "2-D or 3-D"),
        (
            SlicParams {
                convert2lab: Some(true),
                channel_axis: Some(0),
                ..SlicParams::default()
            },
            &[4, 5, 5],
            "RGB",
        ),
        (
            gray(SlicParams {
                mask: Some(vec![false; 100]),
                ..SlicParams::default()
            }),
            &[10, 10],
            "mask",
        ),
    ];
    for (p, shape, word) in cases {
        let e: Error = cpu::slic(Samples::F32(&ok), shape, &p).unwrap_err();
        assert!(e.to_string().contains(word), "{word}: {e}");
    }
}

#[test]
fn repeated_calls_of_many_sizes_leave_no_device_memory_behind() {
    let device = &pollster::block_on(Gpu::new(GpuOptions::default())).unwrap();
    let before = device.live_bytes();
    for (i, shape) in [
        vec![9, 13],
        vec![40, 33],
        vec![5, 6, 7],
        vec![1, 1],
        vec![17, 12, 20],
    ]
    .iter()
    .enumerate()
    {
        let img = blobs(shape, i as u64);
        let p = gray(SlicParams {
            n_segments: 20,
            slic_zero: i % 2 == 0,
            ..SlicParams::default()
        });
        pollster::block_on(slic::slic(device, Samples::F32(&img), shape, &p)).unwrap();
    }
    // The kernel times of the calls add up, and a reset starts from zero.
    if device.summary().timestamps {
        assert!(device.kernel_ns_total().is_some_and(|ns| ns > 0));
        device.reset_kernel_time();
        assert_eq!(device.kernel_ns_total(), Some(0));
    }
    device.trim();
    assert_eq!(device.live_bytes(), before);
}

#[test]
fn many_small_segments() {
    // cuda-slic failed for n_segments far above 250 000 on 500³; the same
    // density (about 5 voxels per segment, as 5 000 000 on 300³) here.
    let shape = [30, 30, 30];
    let img = blobs(&shape, 13);
    let p = gray(SlicParams {
        n_segments: 5000,
        compactness: 1.0,
        max_num_iter: 5,
        ..SlicParams::default()
    });
    let s = both(Samples::F32(&img), &shape, &p);
    assert!(s.n_segments > 1000, "{}", s.n_segments);
}

/// The largest case at full size: 5 000 000 segments on a 300³ volume
/// (slow on lavapipe: run on a real GPU with `--ignored`).
#[test]
#[ignore]
fn five_million_segments_on_300_cubed() {
    let shape = [300, 300, 300];
    let img = blobs(&shape, 17);
    let p = gray(SlicParams {
        n_segments: 5_000_000,
        compactness: 1.0,
        max_num_iter: 5,
        ..SlicParams::default()
    });
    let s = pollster::block_on(slic::slic(gpu(), Samples::F32(&img), &shape, &p)).unwrap();
    assert!(s.n_segments > 1_000_000, "{}", s.n_segments);
    // skimage may give a small top-left piece the next piece's label.
    assert_connected(&s.labels, [300, 300, 300], Some(s.labels[0]));
}

#[test]
fn volumes_beyond_one_binding_run_in_slabs() {
    // 64 KiB bindings: the features go to the GPU in z-slabs sharing the
    // centres; the connectivity step then runs on the host.
    let tiny = common::tiny_gpu();
    let shape = [20, 30, 40];
    let img = blobs(&shape, 19);
    let mask: Vec<bool> = (0..img.len()).map(|i| i % 40 > 2).collect();
    for p in [
        gray(SlicParams {
            n_segments: 150,
            compactness: 0.3,
            ..SlicParams::default()
        }),
        gray(SlicParams {
            n_segments: 100,
            compactness: 0.3,
            slic_zero: true,
            enforce_connectivity: false,
            mask: Some(mask),
            ..SlicParams::default()
        }),
    ] {
        let want = cpu::slic(Samples::F32(&img), &shape, &p).unwrap();
        let got = pollster::block_on(slic::slic(tiny, Samples::F32(&img), &shape, &p)).unwrap();
        assert_eq!(got, want, "{p:?}");
        assert!(got.n_segments > 10);
    }
    // A multichannel volume (z, y, x, 3): 12 bytes per voxel.
    let r = noise(12 * 20 * 25 * 3, 23);
    let vol: Vec<f32> = (0..r.len())
        .map(|i| {
            let v = i / 3;
            let (z, y, x) = (v / 500, (v / 25) % 20, v % 25);
            (((x / 6 + y / 5 + z / 4 + i % 3) % 2) as f64 + 0.3 * r[i]) as f32
        })
        .collect();
    let p = SlicParams {
        n_segments: 60,
        convert2lab: Some(false),
        compactness: 1.0,
        ..SlicParams::default()
    };
    let want = cpu::slic(Samples::F32(&vol), &[12, 20, 25, 3], &p).unwrap();
    let got =
        pollster::block_on(slic::slic(tiny, Samples::F32(&vol), &[12, 20, 25, 3], &p)).unwrap();
    assert_eq!(got, want);
    assert_eq!(got.shape, vec![12, 20, 25]);
}

#[test]
fn volumes_beyond_the_memory_budget_are_streamed() {
    // A 64 KiB budget: each iteration streams z-slabs of the volume (kept on
    // the host) past the resident centres; the connectivity step on the host.
    let small = &pollster::block_on(Gpu::new(GpuOptions {
        memory_budget: Some(64 << 10),
        ..GpuOptions::default()
    }))
    .unwrap();
    let shape = [20, 30, 40];
    let img = blobs(&shape, 29);
    let mask: Vec<bool> = (0..img.len()).map(|i| (i / 40) % 30 > 3).collect();
    for p in [
        gray(SlicParams {
            n_segments: 150,
            compactness: 0.3,
            max_num_iter: 6,
            ..SlicParams::default()
        }),
        gray(SlicParams {
            n_segments: 90,
            compactness: 0.3,
            slic_zero: true,
            mask: Some(mask),
            ..SlicParams::default()
        }),
    ] {
        let want = cpu::slic(Samples::F32(&img), &shape, &p).unwrap();
        let got = pollster::block_on(slic::slic(small, Samples::F32(&img), &shape, &p)).unwrap();
        assert_eq!(got, want, "{p:?}");
        assert!(got.n_segments > 10);
    }
    small.trim();
    assert_eq!(small.live_bytes(), 0, "streaming leaves no device memory");
}
