//! Spot finding: the GPU (lavapipe) and the production host code
//! (`spots::host`) against the CPU reference, pixel for pixel and spot for
//! spot, on synthetic frames and their edge cases, and the host code on the
//! real frames of ../shared/data/diffraction. The real frames against the
//! committed reference masks are in crates/cli/tests/spots.rs.

mod common;

use common::{gpu, noise};
use gpuscope_core::spots::{self, Algorithm, Counts, Gain, SpotOptions};

/// A detector-like frame: Poisson-ish background around `bg`, a few
/// Gaussian spots, a masked gap row (-1), bad pixels (-2).
fn frame(h: usize, w: usize, bg: f64, seed: u64) -> Vec<i32> {
    let u = noise(h * w, seed);
    let mut v: Vec<i32> = u
        .iter()
        .map(|&r| {
            // Inverse-CDF of a rough Poisson via a normal approximation.
            let z = (r - 0.5) * 3.4;
            (bg + z * bg.sqrt()).round().max(0.0) as i32
        })
        .collect();
    let spots = noise(30, seed + 7);
    for s in spots.chunks_exact(3) {
        let (cy, cx, a) = (s[0] * h as f64, s[1] * w as f64, 20.0 + 400.0 * s[2]);
        for r in 0..h {
            for c in 0..w {
                let d2 = (r as f64 - cy).powi(2) + (c as f64 - cx).powi(2);
                v[r * w + c] += (a * (-d2 / 2.0).exp()) as i32;
            }
        }
    }
    if h > 20 {
        for c in 0..w {
            v[17 * w + c] = -1;
        }
        v[5 * w + 3] = -2;
    }
    v
}

fn opts(algorithm: Algorithm) -> SpotOptions {
    SpotOptions {
        algorithm,
        ..SpotOptions::default()
    }
}

/// The GPU path and the host's whole-frame decisions both give the CPU
/// reference's strong pixels.
fn both_agree(v: &[i32], shape: [usize; 2], mask: Option<&[bool]>, o: &SpotOptions) -> Vec<bool> {
    let cpu = spots::cpu::strong_pixels(Counts::I32(v), shape, mask, o).unwrap();
    host_agrees(&cpu, Counts::I32(v), shape, mask, o);
    let g =
        pollster::block_on(spots::strong_pixels(gpu(), Counts::I32(v), shape, mask, o)).unwrap();
    let diff: Vec<usize> = (0..cpu.len()).filter(|&i| cpu[i] != g[i]).collect();
    assert!(
        diff.is_empty(),
        "{:?} {shape:?}: {} pixels differ, first {:?}",
        o.algorithm,
        diff.len(),
        &diff[..diff.len().min(5)]
    );
    cpu
}

fn host_agrees(
    cpu: &[bool],
    counts: Counts<'_>,
    shape: [usize; 2],
    mask: Option<&[bool]>,
    o: &SpotOptions,
) {
    let host = spots::host::strong_pixels(counts, shape, mask, o).unwrap();
    let diff: Vec<usize> = (0..cpu.len()).filter(|&i| cpu[i] != host[i]).collect();
    assert!(
        diff.is_empty(),
        "host {:?} {shape:?}: {} pixels differ, first {:?}",
        o.algorithm,
        diff.len(),
        &diff[..diff.len().min(5)]
    );
}

#[test]
fn synthetic_frames_match_the_cpu_reference() {
    for algorithm in [Algorithm::DispersionExtended, Algorithm::Dispersion] {
        // 45 x 530: several strips of 256 columns and a last strip of 13
        // rows (the strip kernel's edges).
        for (h, w, bg, seed) in [
            (64, 80, 2.0, 1),
            (50, 47, 0.3, 2),
            (40, 40, 30.0, 3),
            (45, 530, 2.0, 4),
        ] {
            let v = frame(h, w, bg, seed);
            let strong = both_agree(&v, [h, w], None, &opts(algorithm));
            assert!(
                strong.iter().any(|&s| s),
                "{algorithm:?} {h}x{w}: no strong pixel at all"
            );
            assert!(strong.iter().filter(|&&s| s).count() < h * w / 4);
        }
    }
}

#[test]
fn edge_cases_match_the_cpu_reference() {
    let big = 1 << 24;
    for algorithm in [Algorithm::DispersionExtended, Algorithm::Dispersion] {
        let o = opts(algorithm);
        // All zero; one pixel; frames smaller than the window.
        for (h, w) in [(1, 1), (1, 9), (3, 5), (6, 6), (12, 12)] {
            both_agree(&vec![0; h * w], [h, w], None, &o);
            let mut v = vec![1; h * w];
            v[(h / 2) * w + w / 2] = 50;
            both_agree(&v, [h, w], None, &o);
        }
        // Frames where DIALS' distance without background, h + w + 1, is
        // shorter than the erosion distance: no pixel may be a candidate,
        // whether or not anything is background (threshold.wgsl
        // is_candidate).
        for kernel_size in [[4, 4], [5, 5]] {
            let o = SpotOptions {
                kernel_size,
                ..opts(algorithm)
            };
            for (h, w) in [(1, 1), (1, 2), (2, 1), (1, 3)] {
                both_agree(&vec![0; h * w], [h, w], None, &o);
                both_agree(&vec![7; h * w], [h, w], None, &o);
                let mut v = vec![1; h * w];
                v[h * w - 1] = 60;
                both_agree(&v, [h, w], None, &o);
            }
        }
        // Saturated pixels at and around 2^24, and huge counts that push
        // DIALS' f64 products past 2^53 (the host decides those).
        let mut v = frame(40, 40, 5.0, 9);
        for (i, s) in [big - 1, big, big + 1, i32::MAX, big - 1, big - 1]
            .iter()
            .enumerate()
        {
            v[10 * 40 + 10 + i] = *s;
            v[30 * 40 + 5 + 2 * i] = *s;
        }
        both_agree(&v, [40, 40], None, &o);
        // A mask file: a masked square and masked borders.
        let v = frame(48, 48, 3.0, 11);
        let mask: Vec<bool> = (0..48 * 48)
            .map(|i| {
                let (r, c) = (i / 48, i % 48);
                !((20..30).contains(&r) && (5..15).contains(&c)) && c != 0 && r != 47
            })
            .collect();
        both_agree(&v, [48, 48], Some(&mask), &o);
        // Everything masked.
        both_agree(&v, [48, 48], Some(&vec![false; 48 * 48]), &o);
    }
}

#[test]
fn parameters_and_gain_match_the_cpu_reference() {
    let v = frame(48, 56, 4.0, 21);
    let n = v.len();
    let map: Vec<f64> = noise(n, 5).iter().map(|r| 0.5 + r).collect();
    for algorithm in [Algorithm::DispersionExtended, Algorithm::Dispersion] {
        for o in [
            SpotOptions {
                kernel_size: [2, 4],
                ..opts(algorithm)
            },
            // The strip kernel's largest half-widths.
            SpotOptions {
                kernel_size: [5, 7],
                ..opts(algorithm)
            },
            // Half-widths beyond the tiled kernels' halo: the per-pixel loops.
            SpotOptions {
                kernel_size: [6, 2],
                ..opts(algorithm)
            },
            SpotOptions {
                kernel_size: [1, 1],
                min_local: 0,
                ..opts(algorithm)
            },
            SpotOptions {
                sigma_background: 0.0,
                sigma_strong: 0.0,
                ..opts(algorithm)
            },
            SpotOptions {
                sigma_background: 2.5,
                sigma_strong: 1.5,
                min_local: 20,
                ..opts(algorithm)
            },
            SpotOptions {
                global_threshold: 30.5,
                ..opts(algorithm)
            },
            SpotOptions {
                gain: Gain::Scalar(1.0),
                ..opts(algorithm)
            },
            SpotOptions {
                gain: Gain::Scalar(2.7),
                ..opts(algorithm)
            },
            SpotOptions {
                gain: Gain::Map(map.clone()),
                ..opts(algorithm)
            },
        ] {
            both_agree(&v, [48, 56], None, &o);
        }
    }
}

#[test]
fn packed_u16_and_u32_frames_give_the_same_answer() {
    let v = frame(33, 45, 6.0, 31); // odd pixel count: a half-filled last word
    let o = SpotOptions::default();
    let v16: Vec<u16> = v.iter().map(|&x| x.max(0) as u16).collect();
    let v32: Vec<u32> = v.iter().map(|&x| x.max(0) as u32).collect();
    let cpu = spots::cpu::strong_pixels(Counts::U16(&v16), [33, 45], None, &o).unwrap();
    for c in [Counts::U16(&v16), Counts::U32(&v32)] {
        let g = pollster::block_on(spots::strong_pixels(gpu(), c, [33, 45], None, &o)).unwrap();
        assert_eq!(g, cpu);
    }
}

#[test]
fn spots_match_the_cpu_reference_in_2d_and_3d() {
    let (h, w) = (64, 72);
    let mut stack = Vec::new();
    for z in 0..3 {
        stack.extend(frame(h, w, 2.0, 40 + z % 2));
    }
    let o = SpotOptions {
        min_spot_size: 1,
        ..SpotOptions::default()
    };
    for three_d in [false, true] {
        let cpu =
            spots::cpu::find_spots(Counts::I32(&stack), [3, h, w], None, &o, three_d).unwrap();
        let g = pollster::block_on(spots::find_spots(
            gpu(),
            Counts::I32(&stack),
            [3, h, w],
            None,
            &o,
            three_d,
        ))
        .unwrap();
        assert!(!cpu.spots.is_empty());
        assert_eq!(g, cpu, "three_d = {three_d}");
    }
}

#[test]
fn spot_measurements_follow_dials_definitions() {
    // One 2x2 spot of known values: centroid of pixel centres.
    let (h, w) = (1, 1);
    let _ = (h, w);
    let mut v = vec![0i32; 20 * 20];
    v[10 * 20 + 10] = 100;
    v[10 * 20 + 11] = 300;
    v[11 * 20 + 10] = 100;
    v[11 * 20 + 11] = 300;
    let strong_all = SpotOptions {
        algorithm: Algorithm::Dispersion,
        sigma_background: 0.0,
        sigma_strong: 0.0,
        min_spot_size: 1,
        ..SpotOptions::default()
    };
    let r = spots::cpu::find_spots(Counts::I32(&v), [1, 20, 20], None, &strong_all, false).unwrap();
    let s = r
        .spots
        .iter()
        .find(|s| s.n_pixels == 4)
        .expect("the 2x2 spot");
    assert_eq!(s.bbox, [10, 12, 10, 12, 0, 1]);
    assert_eq!(s.intensity, 800.0);
    // x: (100*10.5 + 300*11.5) * 2 / 800 = 11.25; y: 11.0; z: 0.5
    assert!((s.centroid[0] - 11.25).abs() < 1e-12, "{:?}", s.centroid);
    assert!((s.centroid[1] - 11.0).abs() < 1e-12);
    assert!((s.centroid[2] - 0.5).abs() < 1e-12);
    // DIALS' unbiased standard error²: Σw(x-x̄)² · Σw / ((Σw)² - Σw²) / Σw.
    let (sw, sw2) = (800.0f64, 2.0 * (100.0f64 * 100.0 + 300.0 * 300.0));
    let dx = 2.0 * (100.0 * 0.75f64.powi(2) + 300.0 * 0.25f64.powi(2));
    let expect = dx * sw / (sw * sw - sw2) / sw;
    assert!(
        (s.variance[0] - expect).abs() < 1e-15,
        "{} vs {expect}",
        s.variance[0]
    );
}

#[test]
fn bad_parameters_are_clear_errors() {
    let v = vec![0i32; 100];
    for o in [
        SpotOptions {
            kernel_size: [0, 3],
            ..SpotOptions::default()
        },
        SpotOptions {
            sigma_strong: f64::NAN,
            ..SpotOptions::default()
        },
        SpotOptions {
            min_local: 1,
            ..SpotOptions::default()
        },
        SpotOptions {
            min_local: 50,
            ..SpotOptions::default()
        },
        SpotOptions {
            global_threshold: -1.0,
            ..SpotOptions::default()
        },
        SpotOptions {
            gain: Gain::Scalar(0.0),
            ..SpotOptions::default()
        },
        SpotOptions {
            gain: Gain::Map(vec![1.0; 99]),
            ..SpotOptions::default()
        },
        SpotOptions {
            min_spot_size: 5,
            max_spot_size: 4,
            ..SpotOptions::default()
        },
    ] {
        let e = spots::cpu::strong_pixels(Counts::I32(&v), [10, 10], None, &o).unwrap_err();
        assert!(!e.to_string().is_empty());
        assert!(
            pollster::block_on(spots::strong_pixels(
                gpu(),
                Counts::I32(&v),
                [10, 10],
                None,
                &o
            ))
            .is_err()
        );
    }
    assert!(
        spots::cpu::strong_pixels(Counts::I32(&v), [10, 9], None, &SpotOptions::default()).is_err()
    );
    assert!(
        spots::cpu::strong_pixels(
            Counts::I32(&v),
            [10, 10],
            Some(&[true; 3]),
            &SpotOptions::default()
        )
        .is_err()
    );
}

#[test]
fn series_mixing_fast_and_exact_slow_frames_match_the_cpu_reference() {
    // Frames 1 and 3 hold near-saturated pixels whose f64 products reach
    // 2^53 (undecided on the GPU: redone step by step) between ordinary
    // frames, with two frames in flight.
    let (h, w) = (40, 44);
    let mut stack = Vec::new();
    for z in 0..5 {
        let mut f = frame(h, w, 3.0, 60 + z as u64);
        if z % 2 == 1 {
            for i in 0..4 {
                f[(8 + 5 * i) * w + 9 + 3 * i] = (1 << 24) - 1 - i as i32;
            }
        }
        stack.extend(f);
    }
    for algorithm in [Algorithm::DispersionExtended, Algorithm::Dispersion] {
        let o = SpotOptions {
            min_spot_size: 1,
            ..opts(algorithm)
        };
        let cpu = spots::cpu::find_spots(Counts::I32(&stack), [5, h, w], None, &o, false).unwrap();
        for want_mask in [true, false] {
            let g = pollster::block_on(spots::find_spots_with(
                gpu(),
                Counts::I32(&stack),
                [5, h, w],
                None,
                &o,
                false,
                want_mask,
            ))
            .unwrap();
            assert_eq!(g.spots, cpu.spots, "{algorithm:?}");
            assert_eq!(g.n_strong, cpu.n_strong, "{algorithm:?}");
            if want_mask {
                assert_eq!(g.strong, cpu.strong, "{algorithm:?}");
            }
        }
        assert!(cpu.spots.iter().any(|s| s.bbox[4] == 3), "spots in frame 3");
    }
}

/// The streamed series (`SpotSeries`, frames pushed in batches) gives the
/// in-memory answer, 2-D and 3-D, on the GPU and on the CPU, whatever the
/// batch size: spots that run through a batch border are joined.
#[test]
fn series_of_large_frames_copied_while_others_run_match_the_cpu_reference() {
    // 8 MiB frames: each is copied into its upload buffer on several
    // threads while the previous frame is submitted and the one before
    // collected (the path of detector-size series).
    let (h, w) = (1024, 2048);
    let mut stack = Vec::new();
    for z in 0..4 {
        stack.extend(frame(h, w, 2.0 + z as f64, 90 + z as u64));
    }
    let o = opts(Algorithm::DispersionExtended);
    let cpu = spots::cpu::find_spots(Counts::I32(&stack), [4, h, w], None, &o, false).unwrap();
    let g = pollster::block_on(spots::find_spots_with(
        gpu(),
        Counts::I32(&stack),
        [4, h, w],
        None,
        &o,
        false,
        true,
    ))
    .unwrap();
    assert_eq!(g.strong, cpu.strong);
    assert_eq!(g.spots, cpu.spots);
    for z in 0..4 {
        assert!(
            cpu.spots.iter().any(|s| s.bbox[4] == z),
            "spots in frame {z}"
        );
    }
}

#[test]
fn streamed_series_equals_the_in_memory_path_for_any_batch_size() {
    let (h, w, nz) = (40, 44, 7);
    let n = h * w;
    let mut stack = Vec::new();
    for z in 0..nz {
        // Runs of three frames with the same spots: 3-D spots across borders.
        let mut f = frame(h, w, 2.0, 80 + z as u64 / 3);
        if z == 4 {
            // Undecided pixels: this frame takes the exact slow path.
            for i in 0..4 {
                f[(8 + 5 * i) * w + 9 + 3 * i] = (1 << 24) - 1 - i as i32;
            }
        }
        stack.extend(f);
    }
    let o = SpotOptions {
        min_spot_size: 2,
        ..SpotOptions::default()
    };
    for three_d in [false, true] {
        let want =
            spots::cpu::find_spots(Counts::I32(&stack), [nz, h, w], None, &o, three_d).unwrap();
        assert!(!want.spots.is_empty());
        if three_d {
            assert!(
                want.spots.iter().any(|s| s.bbox[5] - s.bbox[4] == 3),
                "spots through three frames"
            );
        }
        for on_gpu in [true, false] {
            for batch in [1, 2, 3, nz] {
                let got = pollster::block_on(async {
                    let mut series = spots::SpotSeries::new(
                        on_gpu.then(gpu),
                        [h, w],
                        None,
                        o.clone(),
                        three_d,
                        true,
                    )
                    .await?;
                    let mut done = Vec::new();
                    for z0 in (0..nz).step_by(batch) {
                        let part = stack[z0 * n..(z0 + batch).min(nz) * n].to_vec();
                        done.extend(series.push(spots::FrameBatch::I32(part)).await?);
                    }
                    let (last, r) = series.finish().await?;
                    done.extend(last);
                    Ok::<_, gpuscope_core::Error>((done, r))
                })
                .unwrap();
                let (done, r) = got;
                let what = format!("three_d {three_d}, gpu {on_gpu}, batch {batch}");
                assert_eq!(r.spots, want.spots, "{what}");
                assert_eq!(r.n_strong, want.n_strong, "{what}");
                assert_eq!(r.n_regions, want.n_regions, "{what}");
                assert_eq!(r.n_frames, nz);
                let zs: Vec<usize> = done.iter().map(|d| d.z).collect();
                assert_eq!(zs, (0..nz).collect::<Vec<_>>(), "{what}: frames in order");
                let mask: Vec<bool> = done.into_iter().flat_map(|d| d.strong.unwrap()).collect();
                assert_eq!(mask, want.strong, "{what}");
            }
        }
    }
}

/// Bad batches are errors, not panics.
#[test]
fn streamed_series_rejects_partial_frames() {
    let o = SpotOptions::default();
    let r = pollster::block_on(async {
        let mut s = spots::SpotSeries::new(None, [4, 5], None, o, false, false).await?;
        s.push(spots::FrameBatch::U16(vec![1; 21])).await
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("whole frames of 4 x 5"), "{e}");
    let r = pollster::block_on(spots::SpotSeries::new(
        None,
        [4, 5],
        Some(vec![true; 3]),
        SpotOptions::default(),
        false,
        false,
    ));
    assert!(r.is_err());
}

/// The host's whole-frame decisions on the three real detector frames
/// (Pilatus and Eiger CBF, gaps and bad pixels marked negative), both
/// algorithms, with and without gain: the CPU reference's strong pixels.
#[test]
fn host_decisions_match_the_cpu_reference_on_real_frames() {
    if common::backend_rerun() {
        return;
    }
    for stem in [
        "DLS_I03_smargon_0001",
        "DLS_I23_P12M_thau_00001",
        "dlsnxs2cbf_therm_0001",
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/diffraction")
            .join(format!("{stem}.cbf.gz"));
        assert!(
            path.exists(),
            "{} is missing: the tests read the shared data beside the repository",
            path.display()
        );
        let a = gpuscope_io::read(&path).unwrap().array;
        let shape = [a.shape[0], a.shape[1]];
        let gpuscope_io::ArrayData::I32(v) = a.data else {
            panic!("{stem}: CBF frames decode to int32")
        };
        for o in [
            opts(Algorithm::DispersionExtended),
            opts(Algorithm::Dispersion),
            SpotOptions {
                gain: Gain::Scalar(1.7),
                kernel_size: [2, 4],
                ..opts(Algorithm::DispersionExtended)
            },
        ] {
            let cpu = spots::cpu::strong_pixels(Counts::I32(&v), shape, None, &o).unwrap();
            assert!(cpu.iter().any(|&s| s), "{stem}: no strong pixel");
            host_agrees(&cpu, Counts::I32(&v), shape, None, &o);
        }
    }
}

/// A frame of near-saturated counts: DIALS' f64 products pass 2^53 almost
/// everywhere, so more pixels are undecided than the GPU's list holds and
/// the host decides the whole frame (`host::strong_pixels`), packed u16
/// and u32 as well as i32.
#[test]
fn frames_beyond_the_undecided_list_are_decided_on_the_host() {
    // Background near 1.5e7 (just below 2^24), one bright pixel every 37
    // rows and 41 columns: 7 x 7 window sums of squares near 5e17.
    let (h, w) = (300, 260);
    let v: Vec<i32> = noise(h * w, 77)
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let spot = (i / w) % 37 == 5 && (i % w) % 41 == 7;
            if spot {
                16_000_000
            } else {
                15_000_000 + (r * 3000.0) as i32
            }
        })
        .collect();
    for algorithm in [Algorithm::DispersionExtended, Algorithm::Dispersion] {
        let o = SpotOptions {
            sigma_background: 0.5,
            sigma_strong: 0.5,
            ..opts(algorithm)
        };
        let strong = both_agree(&v, [h, w], None, &o);
        assert!(strong.iter().any(|&s| s), "{algorithm:?}: no strong pixel");
        let v32: Vec<u32> = v.iter().map(|&x| x as u32).collect();
        let cpu = spots::cpu::strong_pixels(Counts::U32(&v32), [h, w], None, &o).unwrap();
        assert_eq!(cpu, strong);
        host_agrees(&cpu, Counts::U32(&v32), [h, w], None, &o);
    }
    // Small counts as u16, with a mask and a gain map.
    let v16: Vec<u16> = frame(70, 90, 6.0, 31)
        .iter()
        .map(|&x| x.max(0) as u16)
        .collect();
    let mask: Vec<bool> = (0..70 * 90).map(|i| i % 13 != 4).collect();
    let map: Vec<f64> = noise(70 * 90, 8).iter().map(|r| 0.7 + r).collect();
    for algorithm in [Algorithm::DispersionExtended, Algorithm::Dispersion] {
        let o = SpotOptions {
            gain: Gain::Map(map.clone()),
            ..opts(algorithm)
        };
        let cpu = spots::cpu::strong_pixels(Counts::U16(&v16), [70, 90], Some(&mask), &o).unwrap();
        host_agrees(&cpu, Counts::U16(&v16), [70, 90], Some(&mask), &o);
    }
}
