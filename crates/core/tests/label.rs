//! Labelling on the GPU against the CPU reference (flood fill in raster
//! order, scipy's numbering): exact labels and counts, 1-D to 3-D, every
//! connectivity, worst cases for union-find, and slabs merged across
//! borders on a device with 64 KiB bindings.

mod common;

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::Gpu;
use gpuscope_core::segment::label::{Labels, cpu, label};

fn gpu_label(g: &Gpu, mask: &[bool], shape: &[usize], c: usize) -> Labels {
    pollster::block_on(label(g, mask, shape, c)).unwrap()
}

/// GPU (whole and in slabs) equals the CPU reference; returns the count.
fn both(mask: &[bool], shape: &[usize], c: usize) -> usize {
    let want = cpu::label(mask, shape, c).unwrap();
    for (name, g) in [("whole", gpu()), ("slabs", tiny_gpu())] {
        let got = gpu_label(g, mask, shape, c);
        assert_eq!(got.count, want.count, "{name} {shape:?} c={c}: count");
        let first = got
            .labels
            .iter()
            .zip(&want.labels)
            .position(|(a, b)| a != b);
        assert!(
            first.is_none(),
            "{name} {shape:?} c={c}: differs at {first:?}"
        );
    }
    want.count
}

fn random(n: usize, density: f64, seed: u64) -> Vec<bool> {
    noise(n, seed).into_iter().map(|v| v < density).collect()
}

#[test]
fn random_masks_2d_every_connectivity_and_density() {
    for (i, density) in [0.3, 0.5, 0.6].into_iter().enumerate() {
        let shape = [181, 203];
        let m = random(shape[0] * shape[1], density, i as u64);
        for c in [1, 2] {
            assert!(both(&m, &shape, c) > 0);
        }
    }
}

#[test]
fn random_masks_3d_every_connectivity() {
    let shape = [23, 31, 37];
    let m = random(shape.iter().product(), 0.35, 7);
    let counts: Vec<usize> = [1, 2, 3].iter().map(|&c| both(&m, &shape, c)).collect();
    // More neighbours merge more components.
    assert!(counts[0] > counts[1] && counts[1] > counts[2], "{counts:?}");
}

#[test]
fn one_dimensional_and_tiny_inputs() {
    let m = random(70_001, 0.5, 3);
    both(&m, &[70_001], 1);
    assert_eq!(both(&[true], &[1, 1], 2), 1);
    assert_eq!(both(&[false], &[1, 1], 1), 0);
    assert_eq!(both(&[], &[0, 5], 1), 0);
}

#[test]
fn worst_cases_checkerboard_spiral_full_empty_isolated() {
    let (h, w) = (130, 170);
    let checker: Vec<bool> = (0..h * w).map(|i| (i / w + i % w) % 2 == 0).collect();
    // Faces only: every square alone; with corners: one component.
    assert_eq!(
        both(&checker, &[h, w], 1),
        checker.iter().filter(|&&b| b).count()
    );
    assert_eq!(both(&checker, &[h, w], 2), 1);
    assert_eq!(both(&vec![true; h * w], &[h, w], 1), 1);
    assert_eq!(both(&vec![false; h * w], &[h, w], 2), 0);
    // One-pixel components on every other row and column.
    let dots: Vec<bool> = (0..h * w)
        .map(|i| (i / w) % 2 == 0 && (i % w) % 2 == 0)
        .collect();
    assert_eq!(both(&dots, &[h, w], 2), h.div_ceil(2) * w.div_ceil(2));
    // A one-pixel-wide square spiral: one long winding component.
    let spiral = spiral(h, w);
    assert_eq!(both(&spiral, &[h, w], 1), 1);
    // Vertical stripes joined only at the bottom row: a comb whose teeth
    // meet across every slab border.
    let comb: Vec<bool> = (0..h * w).map(|i| i % 2 == 0 || i / w == h - 1).collect();
    assert_eq!(both(&comb, &[h, w], 1), 1);
}

/// A one-pixel-wide square spiral with one-pixel gaps: a turtle walks
/// segments whose lengths shrink by two every half turn.
fn spiral(h: usize, w: usize) -> Vec<bool> {
    let mut m = vec![false; h * w];
    let dirs = [(0i64, 1i64), (1, 0), (0, -1), (-1, 0)];
    let mut lengths = vec![w as i64 - 1, h as i64 - 1, w as i64 - 1];
    while lengths.len() < 4 * (h + w) {
        let next = lengths[lengths.len() - 2] - 2;
        if next <= 0 {
            break;
        }
        lengths.push(next);
    }
    let (mut y, mut x) = (0i64, 0i64);
    m[0] = true;
    for (k, &len) in lengths.iter().enumerate() {
        let (dy, dx) = dirs[k % 4];
        for _ in 0..len {
            y += dy;
            x += dx;
            m[(y * w as i64 + x) as usize] = true;
        }
    }
    m
}

#[test]
fn volumes_in_slabs_merge_across_borders() {
    // 40 planes of 30x30: 64 KiB bindings hold 18 planes, so three slabs.
    let shape = [40, 30, 30];
    let n: usize = shape.iter().product();
    let m = random(n, 0.3, 11);
    for c in [1, 3] {
        both(&m, &shape, c);
    }
    // A column through all planes is one component whatever the slabs.
    let column: Vec<bool> = (0..n).map(|i| i % 900 == 455).collect();
    assert_eq!(both(&column, &shape, 1), 1);
}

#[test]
fn bad_parameters_are_refused_with_a_reason() {
    let m = vec![true; 6];
    for c in [0, 3, 4] {
        let e = cpu::label(&m, &[2, 3], c).unwrap_err().to_string();
        assert!(e.contains("connectivity"), "{e}");
        assert!(pollster::block_on(label(gpu(), &m, &[2, 3], c)).is_err());
    }
    let e = cpu::label(&m, &[4, 3], 1).unwrap_err().to_string();
    assert!(e.contains("shape"), "{e}");
    assert!(cpu::label(&m, &[1, 1, 2, 3], 1).is_err());
}

#[test]
fn more_blocks_than_one_scan_step() {
    // 8.4 M pixels: 1028 ranking blocks of 8192, more than one step (1024
    // blocks) of the single-workgroup scan over the blocks.
    let shape = [1028, 8192];
    let m = random(shape[0] * shape[1], 0.45, 21);
    let want = cpu::label(&m, &shape, 1).unwrap();
    let got = gpu_label(gpu(), &m, &shape, 1);
    assert_eq!(got.count, want.count);
    assert!(got.labels == want.labels);
}

#[test]
fn narrow_wide_and_word_aligned_boxes_every_connectivity() {
    // The GPU's tiles adapt to the box: rows shorter than 16 pixels (tiles
    // spanning several rows per thread), word-aligned rows (mask read four
    // bytes at a time) and rows that are neither.
    for (k, shape) in [
        vec![300, 5],
        vec![200, 1],
        vec![40, 50, 1],
        vec![30, 1, 1],
        vec![7, 300],
        vec![20, 30, 7],
        vec![9, 3, 200],
        vec![20, 40, 64],
        vec![3, 70, 96],
        // Tiles padded on every axis: the local roots outgrow the labels
        // (2 bytes a pixel of every tile) and must still fit one binding.
        vec![9, 17, 100],
    ]
    .into_iter()
    .enumerate()
    {
        let m = random(shape.iter().product(), 0.45, 40 + k as u64);
        for c in 1..=shape.len() {
            assert!(both(&m, &shape, c) > 0);
        }
    }
}

/// One device labelling many small images in turn, as the page, Python
/// and Dask's per-block calls do: buffers come back from the pool holding
/// the previous image. A small whole tile (power-of-two sides, fewer than
/// 4096 pixels) once read the previous mask past its own end.
#[test]
fn small_images_in_turn_on_one_device_ignore_the_previous_mask() {
    let g = common::open(gpuscope_core::GpuOptions::default());
    let first = [
        false, false, false, false, true, false, true, false, true, true, true, true,
    ];
    assert_eq!(gpu_label(&g, &first, &[3, 4], 1).count, 1);
    let columns = [true, false, true, false, true, false, true, false];
    assert_eq!(gpu_label(&g, &columns, &[2, 4], 1).count, 2);
    let shapes: [&[usize]; 8] = [
        &[4, 8],
        &[2, 4],
        &[8, 8],
        &[4, 4],
        &[16, 32],
        &[2, 2, 4],
        &[1, 4],
        &[4, 2, 8],
    ];
    for round in 0..3u64 {
        for (k, shape) in shapes.iter().enumerate() {
            let n = shape.iter().product();
            let mask = random(n, 0.3 + 0.2 * round as f64, 100 * round + k as u64);
            for c in 1..=shape.len() {
                let want = cpu::label(&mask, shape, c).unwrap();
                let got = gpu_label(&g, &mask, shape, c);
                assert_eq!(got.count, want.count, "{shape:?} c={c} round {round}");
                assert_eq!(got.labels, want.labels, "{shape:?} c={c} round {round}");
            }
        }
    }
}
