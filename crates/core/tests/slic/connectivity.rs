//! SLIC's connectivity step: masks with many small pieces, the host step
//! against the twin's flood fill, and scikit-image's own test image. Part
//! of tests/slic.rs.

use super::*;

#[test]
fn random_masks_with_many_small_pieces_equal_the_cpu_twin() {
    // A small piece whose last earlier neighbour carries the piece's own
    // counter value (an earlier small piece with no earlier neighbour and
    // no kept piece between) skips it for the neighbour met before; such
    // pieces arise beside masked pixels. Random masks on noise at low
    // compactness make many of them, chains of two and more included.
    for seed in 0..8u64 {
        for (shape, n_segments, compactness, kept) in [
            (vec![24usize, 31], 60usize, 0.05, 0.5),
            (vec![40, 40], 200, 0.01, 0.6),
            (vec![30, 30], 150, 0.1, 0.4),
            (vec![9, 10, 11], 100, 0.02, 0.6),
        ] {
            let n: usize = shape.iter().product();
            let img: Vec<f32> = noise(n, seed).iter().map(|&v| v as f32).collect();
            let mask: Vec<bool> = noise(n, seed + 1000).iter().map(|&v| v < kept).collect();
            let p = gray(SlicParams {
                n_segments,
                compactness,
                min_size_factor: 0.9,
                mask: Some(mask),
                ..SlicParams::default()
            });
            both(Samples::F32(&img), &shape, &p);
        }
    }
}

/// The host's connectivity step (union-find, searching only small pieces;
/// production code for volumes beyond one binding) gives the CPU twin's
/// flood fill's labels on 2-D and 3-D volumes of many pieces, with
/// unreached pixels, for min_size from 0 to more than the volume.
#[test]
fn host_connectivity_equals_the_twin_flood_fill() {
    let mut cases = 0;
    for (dims, seed) in [
        ([1, 23, 31], 1),
        ([1, 1, 40], 2),
        ([1, 37, 1], 3),
        ([6, 9, 11], 4),
        ([13, 5, 7], 5),
        ([1, 1, 1], 6),
    ] {
        let n: usize = dims.iter().product();
        for labels_used in [2u32, 3, 7] {
            // Blocky k-means labels (runs of 1-3 pixels) so that pieces of
            // many sizes touch; some pixels unreached.
            let r = noise(n, seed * 31 + u64::from(labels_used));
            let raw: Vec<u32> = (0..n)
                .map(|i| {
                    if r[i] < 0.08 {
                        slic::NONE
                    } else {
                        ((i / 2 + i / (3 * dims[2]) + (r[i] * 1.7) as usize) as u32) % labels_used
                    }
                })
                .collect();
            for min_size in [0, 1, 2, 3, 5, 9, n, n + 1] {
                // skimage's cap on a search: never reached, or cutting
                // pieces (below min_size too).
                for max_size in [usize::MAX, 0, 1, 4, 11] {
                    for start in [0, 1] {
                        let want = cpu::connect(&raw, dims, min_size, max_size, start);
                        let got = slic::host::connect(raw.clone(), dims, min_size, max_size, start);
                        assert_eq!(
                            got, want,
                            "{dims:?}, {labels_used} labels, min_size {min_size}, \
                             max_size {max_size}, start {start}"
                        );
                        cases += 1;
                    }
                }
            }
        }
    }
    // Every label unreached, and one label everywhere.
    for raw in [vec![slic::NONE; 60], vec![4; 60]] {
        for min_size in [0, 30, 61] {
            let want = cpu::connect(&raw, [3, 4, 5], min_size, usize::MAX, 1);
            assert_eq!(
                slic::host::connect(raw.clone(), [3, 4, 5], min_size, usize::MAX, 1),
                want
            );
        }
    }
    assert_eq!(cases, 6 * 3 * 8 * 5 * 2);
}

/// scikit-image's test_enforce_connectivity (test_slic.py): a 3 x 6 float
/// image, two segments, compactness 1e-4, labels from 0, with and without
/// the connectivity step (and with max_size_factor 0.8).
#[test]
fn skimage_enforce_connectivity_test_image() {
    let img: Vec<f64> = [[0, 0, 0, 1, 1, 1], [1, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 0]]
        .iter()
        .flatten()
        .map(|&v| f64::from(v))
        .collect();
    let p = SlicParams {
        n_segments: 2,
        compactness: 1e-4,
        convert2lab: Some(false),
        start_label: 0,
        ..gray(SlicParams::default())
    };
    let connected = [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1];
    let run = |p: &SlicParams| both(Samples::F64(&img), &[3, 6], p).labels;
    assert_eq!(run(&p), connected);
    // Without the connectivity step skimage gives the image itself for
    // float64 input. For float32 input it swaps the two labels: the colour
    // distance (1e8) swallows the spatial one (under 2) in a float32 sum,
    // and the tie goes to centre 0 in the first pass. Equal float32 sums
    // are told apart by their exact values for input other than float32
    // (`exact_ties`), which gives skimage's float64 labels here.
    let plain = SlicParams {
        enforce_connectivity: false,
        ..p.clone()
    };
    let image_itself = [0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0];
    assert_eq!(run(&plain), image_itself);
    let img8: Vec<u8> = img.iter().map(|&v| v as u8).collect();
    assert_eq!(
        both(Samples::U8(&img8), &[3, 6], &plain).labels,
        image_itself
    );
    let img32: Vec<f32> = img.iter().map(|&v| v as f32).collect();
    assert_eq!(
        both(Samples::F32(&img32), &[3, 6], &plain).labels,
        [1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1]
    );
    let low_max = SlicParams {
        max_size_factor: 0.8,
        ..p.clone()
    };
    assert_eq!(run(&low_max), connected);
}
