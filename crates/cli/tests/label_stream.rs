//! `gpuscope label` on stacks larger than the memory budget, disk to disk:
//! a tiny `--memory-budget` forces one plane per slab, and the streamed
//! labels must equal the CPU reference (scipy's numbering) and the
//! in-memory GPU path exactly, for every connectivity, with host memory
//! that does not grow with the stack.

mod common;

use std::path::Path;

use common::{gpuscope, scratch, stderr};
use gpuscope_core::segment::label::cpu;
use gpuscope_io::tiff::TiffStackWriter;
use gpuscope_io::{Array, ArrayData, DType};
use serde_json::Value;

/// 24×24 planes: 576 pixels, so the 5 KiB budget (640 labels at 8 bytes of
/// device memory a pixel) holds one plane per slab and every plane border
/// is a slab border.
const H: usize = 24;
const W: usize = 24;
const TINY: &str = "5K";

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("one JSON object on stdout")
}

fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

fn index(z: usize, y: usize, x: usize) -> usize {
    (z * H + y) * W + x
}

/// A snake of columns along z joined alternately at the first and last
/// plane: one component crossing every slab border many times, whose
/// pieces in one slab are joined only through other slabs.
fn snake(nz: usize) -> Vec<bool> {
    let mut m = vec![false; nz * H * W];
    let cols: Vec<usize> = (1..W - 1).step_by(2).collect();
    for (k, &x) in cols.iter().enumerate() {
        for z in 0..nz {
            m[index(z, 5, x)] = true;
        }
        if k + 1 < cols.len() {
            let z = if k % 2 == 0 { nz - 1 } else { 0 };
            m[index(z, 5, x + 1)] = true;
        }
    }
    // A second snake in y, the other way round, threaded between planes.
    for (k, y) in (8..H - 1).step_by(3).enumerate() {
        for z in 0..nz {
            m[index(z, y, 20)] = true;
        }
        if y + 3 < H - 1 {
            let z = if k % 2 == 0 { 0 } else { nz - 1 };
            for yy in y..=y + 3 {
                m[index(z, yy, 20)] = true;
            }
        }
    }
    m
}

/// Components whose first pixel lies in an earlier slab than their bulk,
/// a U joined only in its last plane, and a blob whose bulk comes first
/// but whose first pixel comes after another component's.
fn late_and_early(nz: usize) -> Vec<bool> {
    assert!(nz >= 12);
    let mut m = vec![false; nz * H * W];
    m[index(0, 20, 20)] = true; // label 1
    // A stalk from plane 1 into a big block in planes 6..12.
    for z in 1..6 {
        m[index(z, 9, 9)] = true;
    }
    for z in 6..12 {
        for y in 4..14 {
            for x in 4..14 {
                m[index(z, y, x)] = true;
            }
        }
    }
    // A U: two columns from plane 2 joined only at plane 10.
    for z in 2..=10 {
        m[index(z, 20, 2)] = true;
        m[index(z, 20, 6)] = true;
    }
    for x in 2..=6 {
        m[index(10, 20, x)] = true;
    }
    // A column starting in plane 2 before the U in raster order.
    for z in 2..nz {
        m[index(z, 18, 16)] = true;
    }
    // A blob in plane 3 at the first corner.
    for y in 0..3 {
        for x in 0..3 {
            m[index(3, y, x)] = true;
        }
    }
    m
}

fn write_npy(path: &Path, shape: &[usize], mask: &[bool], dtype: DType) {
    let a = Array::new(shape.to_vec(), ArrayData::Bool(mask.to_vec())).unwrap();
    let a = if dtype == DType::Bool {
        a
    } else {
        // Foreground 7, background 0 (the default --background).
        Array::from_f64(
            shape.to_vec(),
            mask.iter().map(|&m| if m { 7.0 } else { 0.0 }).collect(),
        )
        .unwrap()
        .cast(dtype)
    };
    gpuscope_io::write(path, &a).unwrap();
}

fn write_tiff(path: &Path, nz: usize, mask: &[bool], dtype: DType, fg: f64, bg: f64) {
    let mut w = TiffStackWriter::create(path, H, W, dtype).unwrap();
    for z in 0..nz {
        let page: Vec<f64> = mask[z * H * W..(z + 1) * H * W]
            .iter()
            .map(|&m| if m { fg } else { bg })
            .collect();
        let page = Array::from_f64(vec![H, W], page).unwrap().cast(dtype);
        w.write_page(&page).unwrap();
    }
    w.finish().unwrap();
}

fn read_labels(path: &Path) -> Array {
    let a = gpuscope_io::read(path).unwrap().array;
    assert_eq!(a.dtype(), DType::I32, "{}", path.display());
    a
}

/// Runs `label` with extra args; returns (labels, JSON summary).
fn label(input: &Path, output: &Path, c: usize, extra: &[&str]) -> (Array, Value) {
    let c = c.to_string();
    // --memory-budget is global: clap takes it after the subcommand too.
    let mut args = vec![
        "label",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        "--connectivity",
        &c,
        "--json",
    ];
    args.extend(extra);
    let v = json(&gpuscope(&args));
    (read_labels(output), v)
}

/// Streamed (tiny budget) == in-memory GPU == CPU reference, exactly.
fn check_all(name: &str, mask: &[bool], nz: usize) {
    let dir = scratch(&format!("label_stream_{name}"));
    let input = dir.join("in.npy");
    let shape = [nz, H, W];
    write_npy(&input, &shape, mask, DType::Bool);
    for c in 1..=3 {
        let want = cpu::label(mask, &shape, c).unwrap();
        let (streamed, v) = label(&input, &dir.join("s.npy"), c, &["--memory-budget", TINY]);
        assert_eq!(v["streamed"], true, "{name} c={c}: {v}");
        assert_eq!(v["n_labels"], want.count, "{name} c={c}: count");
        assert_eq!(streamed.shape, shape);
        assert_eq!(
            streamed.data,
            ArrayData::I32(want.labels.clone()),
            "{name} c={c}: streamed labels differ from the reference"
        );
        let (whole, v) = label(&input, &dir.join("m.npy"), c, &[]);
        assert_eq!(v["streamed"], false, "{name} c={c}: {v}");
        assert_eq!(
            whole, streamed,
            "{name} c={c}: in-memory and streamed differ"
        );
    }
    // Only the outputs remain: the provisional file is gone.
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["in.npy", "m.npy", "s.npy"]);
}

#[test]
fn random_volume_streams_exactly_for_every_connectivity() {
    let nz = 10;
    let m: Vec<bool> = noise(nz * H * W, 5).iter().map(|&v| v < 0.35).collect();
    check_all("random", &m, nz);
    // Slabs of several planes (24 KiB: 3072 labels, 5 planes) and a last
    // slab shorter than the others (16 KiB: 3 planes per slab).
    let dir = scratch("label_stream_random_slabs");
    let input = dir.join("in.npy");
    write_npy(&input, &[nz, H, W], &m, DType::U8);
    for (budget, c) in [("24K", 1), ("16K", 3)] {
        let want = cpu::label(&m, &[nz, H, W], c).unwrap();
        let (got, v) = label(&input, &dir.join("o.npy"), c, &["--memory-budget", budget]);
        assert_eq!(v["streamed"], true);
        assert_eq!(got.data, ArrayData::I32(want.labels), "{budget} c={c}");
    }
}

#[test]
fn snakes_across_many_slab_borders() {
    check_all("snake", &snake(14), 14);
}

#[test]
fn first_pixel_in_an_earlier_slab_than_the_bulk() {
    let m = late_and_early(14);
    check_all("late", &m, 14);
    // The numbering the layout was built for (faces only): the corner
    // pixel, the stalk with its block, the column, the U, the blob.
    let want = cpu::label(&m, &[14, H, W], 1).unwrap();
    assert_eq!(want.count, 5);
    let at = |z, y, x| want.labels[index(z, y, x)];
    assert_eq!(
        [
            at(0, 20, 20),
            at(8, 5, 5),
            at(5, 18, 16),
            at(10, 20, 4),
            at(3, 1, 1)
        ],
        [1, 2, 3, 4, 5]
    );
}

#[test]
fn empty_full_and_two_plane_stacks() {
    let n = 6 * H * W;
    check_all("empty", &vec![false; n], 6);
    check_all("full", &vec![true; n], 6);
    let m: Vec<bool> = noise(2 * H * W, 9).iter().map(|&v| v < 0.5).collect();
    check_all("two_planes", &m, 2);
}

#[test]
fn one_plane_stack_larger_than_the_budget_is_labelled_in_rows() {
    // One 40×40 plane does not fit 819 labels: nothing to stream along z,
    // the in-memory path splits its rows.
    let dir = scratch("label_stream_one_plane");
    let (h, w) = (40, 40);
    let m: Vec<bool> = noise(h * w, 3).iter().map(|&v| v < 0.45).collect();
    let input = dir.join("in.npy");
    let a = Array::new(vec![1, h, w], ArrayData::Bool(m.clone())).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    for c in 1..=3 {
        let want = cpu::label(&m, &[1, h, w], c).unwrap();
        let (got, v) = label(&input, &dir.join("o.npy"), c, &["--memory-budget", TINY]);
        assert_eq!(v["streamed"], false);
        assert_eq!(got.data, ArrayData::I32(want.labels), "c={c}");
    }
}

#[test]
fn tiff_and_integer_stacks_with_a_background_value() {
    let dir = scratch("label_stream_tiff");
    let nz = 9;
    let m = late_and_early(12)[..nz * H * W].to_vec();
    let shape = [nz, H, W];
    let want = cpu::label(&m, &shape, 2).unwrap();
    // uint16 TIFF, background 3: foreground is every other value.
    let tif = dir.join("in.tif");
    write_tiff(&tif, nz, &m, DType::U16, 9.0, 3.0);
    for out in ["o.npy", "o.tif"] {
        let (got, v) = label(
            &tif,
            &dir.join(out),
            2,
            &["--memory-budget", TINY, "--background", "3"],
        );
        assert_eq!(v["streamed"], true, "{out}");
        assert_eq!(got.shape, shape, "{out}");
        assert_eq!(got.data, ArrayData::I32(want.labels.clone()), "{out}");
    }
    // int16 .npy with the default background.
    let npy = dir.join("in16.npy");
    write_npy(&npy, &shape, &m, DType::I16);
    let (got, _) = label(&npy, &dir.join("o16.npy"), 2, &["--memory-budget", TINY]);
    assert_eq!(got.data, ArrayData::I32(want.labels));
}

#[test]
fn planes_too_big_for_the_budget_fail_cleanly() {
    let dir = scratch("label_stream_too_big");
    let input = dir.join("in.npy");
    let a = Array::new(vec![3, 40, 40], ArrayData::Bool(vec![true; 4800])).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    let out = dir.join("o.npy");
    let o = gpuscope(&[
        "--memory-budget",
        TINY,
        "label",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.starts_with("error: ") && e.contains("--memory-budget"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    // No output, no provisional or temporary file left.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[test]
fn host_memory_does_not_grow_with_the_stack() {
    // 8 and 48 planes of 256² under a 1 MiB budget (2 planes per slab),
    // sparse (about 6 000 components at 48 planes: memory per component
    // stays small): the peak resident memory of the streamed label and
    // sources runs must not differ by more than 4 MiB, where the 48-plane
    // labels alone are 12 MiB (and sources' float32 data as much again).
    // The same stack labelled in memory must show that growth (the
    // measure can see it).
    let dir = scratch("label_stream_rss");
    let (h, w) = (256, 256);
    let mut peak = Vec::new();
    let mut peak_sources = Vec::new();
    for nz in [8, 48] {
        let m: Vec<u8> = noise(nz * h * w, nz as u64)
            .iter()
            .map(|&v| u8::from(v < 0.002))
            .collect();
        let input = dir.join(format!("in{nz}.npy"));
        let a = Array::new(vec![nz, h, w], ArrayData::U8(m)).unwrap();
        gpuscope_io::write(&input, &a).unwrap();
        // Each peak is the median of three runs: a single run's baseline
        // varied by ~5 MB on a loaded CI machine (lavapipe's threads).
        let median_peak = |args: &[&str], check: &dyn Fn(&Value)| -> u64 {
            let mut runs: Vec<u64> = (0..3)
                .map(|_| {
                    let v = json(&gpuscope(args));
                    assert_eq!(v["streamed"], true);
                    check(&v);
                    v["peak_rss_bytes"].as_u64().expect("VmHWM on Linux")
                })
                .collect();
            runs.sort_unstable();
            runs[1]
        };
        // sources: clip passes, threshold (the 1s), labels, catalogue.
        let catalogue = dir.join(format!("c{nz}.csv"));
        peak_sources.push(median_peak(
            &[
                "--memory-budget",
                "1M",
                "sources",
                input.to_str().unwrap(),
                "--catalogue",
                catalogue.to_str().unwrap(),
                "--json",
            ],
            &|v| assert!(v["n_sources"].as_u64().unwrap() > 500, "{v}"),
        ));
        let out = dir.join(format!("o{nz}.npy"));
        peak.push(median_peak(
            &[
                "--memory-budget",
                "1M",
                "label",
                input.to_str().unwrap(),
                out.to_str().unwrap(),
                "--json",
            ],
            &|_| {},
        ));
    }
    eprintln!("peak RSS, 8 and 48 planes: label {peak:?}, sources {peak_sources:?}");
    for p in [&peak, &peak_sources] {
        let growth = p[1] as i64 - p[0] as i64;
        assert!(
            growth < 4 << 20,
            "peak RSS grew by {growth} bytes: {peak:?} {peak_sources:?}"
        );
    }
    let input = dir.join("in48.npy");
    let out = dir.join("whole.npy");
    let v = json(&gpuscope(&[
        "label",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["streamed"], false);
    let whole = v["peak_rss_bytes"].as_u64().unwrap();
    assert!(
        whole > peak[1] + (12 << 20),
        "in memory {whole} vs streamed {}",
        peak[1]
    );
    assert_eq!(read_labels(&out), read_labels(&dir.join("o48.npy")));
}

/// float32 noise with bright blobs and a NaN: a small sky cube.
fn sky(nz: usize) -> Vec<f32> {
    let mut v: Vec<f32> = noise(nz * H * W, 17)
        .iter()
        .map(|&u| ((u - 0.5) * 3.4) as f32)
        .collect();
    let pos = noise(3 * 30, 23);
    for k in 0..30 {
        let z = 1 + (pos[3 * k] * (nz - 2) as f64) as usize;
        let y = 2 + (pos[3 * k + 1] * (H - 4) as f64) as usize;
        let x = 2 + (pos[3 * k + 2] * (W - 4) as f64) as usize;
        for (dz, dy, dx) in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (-1, -1, 0)] {
            let i = index(
                (z as i64 + dz) as usize,
                (y as i64 + dy) as usize,
                (x as i64 + dx) as usize,
            );
            v[i] += 6.0 + k as f32 * 0.25;
        }
    }
    v[index(2, 3, 4)] = f32::NAN;
    v
}

#[test]
fn sources_stream_and_equal_the_cpu_reference() {
    let dir = scratch("sources_stream");
    let nz = 16;
    let shape = [nz, H, W];
    let npy = dir.join("sky.npy");
    gpuscope_io::write(&npy, &Array::from_f32(shape.to_vec(), sky(nz)).unwrap()).unwrap();
    let tif = dir.join("sky.tif");
    let mut w = TiffStackWriter::create(&tif, H, W, DType::F32).unwrap();
    let all = sky(nz);
    for z in 0..nz {
        let page = all[z * H * W..(z + 1) * H * W].to_vec();
        w.write_page(&Array::from_f32(vec![H, W], page).unwrap())
            .unwrap();
    }
    w.finish().unwrap();
    let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
    for (input, cat, lab, extra) in [
        (&npy, "cat.json", "lab.npy", vec!["--nsigma", "2.5"]),
        (
            &tif,
            "cat.csv",
            "lab.tif",
            vec!["--workshop", "--nsigma", "3", "--connectivity", "3"],
        ),
    ] {
        let run = |prefix: &str, global: &[&str]| -> Value {
            let mut args: Vec<String> = global.iter().map(|s| s.to_string()).collect();
            args.extend([
                "sources".into(),
                input.to_str().unwrap().into(),
                "--catalogue".into(),
                path(&format!("{prefix}{cat}")),
                "--labels".into(),
                path(&format!("{prefix}{lab}")),
                "--json".into(),
            ]);
            args.extend(extra.iter().map(|s| s.to_string()));
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            json(&gpuscope(&a))
        };
        let streamed = run("s_", &["--memory-budget", TINY]);
        let reference = run("c_", &["--cpu"]);
        assert_eq!(streamed["streamed"], true);
        assert!(streamed["n_sources"].as_u64().unwrap() > 5, "{streamed}");
        for key in ["n_sources", "threshold", "clip"] {
            assert_eq!(streamed[key], reference[key], "{cat}: {key}");
        }
        let read = |p: String| std::fs::read(p).unwrap();
        assert_eq!(
            read(path(&format!("s_{cat}"))),
            read(path(&format!("c_{cat}"))),
            "{cat}: catalogues differ"
        );
        assert_eq!(
            read_labels(&dir.join(format!("s_{lab}"))).data,
            read_labels(&dir.join(format!("c_{lab}"))).data,
            "{lab}"
        );
    }
    // Without --labels; nothing left beside the outputs.
    let o = gpuscope(&[
        "--memory-budget",
        TINY,
        "sources",
        npy.to_str().unwrap(),
        "--catalogue",
        &path("only.json"),
        "--nsigma",
        "2.5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(path("only.json")).unwrap(),
        std::fs::read(path("c_cat.json")).unwrap()
    );
    let hidden = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(hidden, 0);
}

/// A little-endian TIFF of uncompressed greyscale pages, page `bad` with
/// 16-bit samples and the others 8-bit: readable up to that page.
fn mixed_tiff(path: &Path, pages: usize, bad: usize) {
    let mut f: Vec<u8> = b"II\x2a\x00\0\0\0\0".to_vec();
    let mut link = 4; // where the next IFD offset goes
    for p in 0..pages {
        let bytes = if p == bad { 2 } else { 1 };
        let data_at = f.len() as u32;
        f.extend((0..H * W * bytes).map(|i| (i % 3 == 0) as u8));
        if f.len() % 2 == 1 {
            f.push(0);
        }
        let ifd = f.len() as u32;
        f[link..link + 4].copy_from_slice(&ifd.to_le_bytes());
        let tags: [(u16, u16, u32); 9] = [
            (256, 3, W as u32),
            (257, 3, H as u32),
            (258, 3, 8 * bytes as u32),
            (259, 3, 1),
            (262, 3, 1),
            (273, 4, data_at),
            (277, 3, 1),
            (278, 3, H as u32),
            (279, 4, (H * W * bytes) as u32),
        ];
        f.extend((tags.len() as u16).to_le_bytes());
        for (tag, kind, value) in tags {
            f.extend(tag.to_le_bytes());
            f.extend(kind.to_le_bytes());
            f.extend(1u32.to_le_bytes());
            f.extend(value.to_le_bytes());
        }
        link = f.len();
        f.extend(0u32.to_le_bytes());
    }
    std::fs::write(path, f).unwrap();
}

#[test]
fn a_bad_page_mid_stack_leaves_no_output() {
    let dir = scratch("label_stream_bad_page");
    let input = dir.join("mixed.tif");
    mixed_tiff(&input, 8, 5);
    for out in ["o.npy", "o.tif"] {
        let o = gpuscope(&[
            "--memory-budget",
            TINY,
            "label",
            input.to_str().unwrap(),
            dir.join(out).to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{out}");
        let e = stderr(&o);
        assert!(e.contains("page 5"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{out}: {left:?}");
    }
    // The readable pages alone label fine (the file itself is sound).
    let good = dir.join("good.tif");
    mixed_tiff(&good, 5, 99);
    let (_, v) = label(&good, &dir.join("g.npy"), 1, &["--memory-budget", TINY]);
    assert_eq!(v["streamed"], true);
}
