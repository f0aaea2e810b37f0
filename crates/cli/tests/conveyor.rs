//! Files to files through the conveyor: every stack source format x every
//! stack sink format, and every dtype, against the in-memory median (the CPU
//! reference, which the GPU equals exactly), with blocks smaller than the
//! stream's chunks (`--memory-budget`), `--no-sync`, and the report of
//! `--json`.

mod common;

use std::path::Path;

use common::{gpuscope, scratch, stderr};
use gpuscope_core::filters::Boundary;
use gpuscope_core::filters::median::{Footprint, cpu};
use gpuscope_core::keys::SampleVec;
use gpuscope_io::{Array, ArrayData};
use serde_json::Value;

const SHAPE: [usize; 3] = [6, 40, 36];

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

fn arrays() -> Vec<Array> {
    let n = SHAPE.iter().product();
    let r = noise(n, 11);
    let shape = SHAPE.to_vec();
    let a = |d| Array::new(shape.clone(), d).unwrap();
    vec![
        a(ArrayData::U8(r.iter().map(|v| (v * 256.0) as u8).collect())),
        a(ArrayData::U16(
            r.iter().map(|v| (v * 65536.0) as u16).collect(),
        )),
        a(ArrayData::I16(
            r.iter().map(|v| (v * 65536.0 - 32768.0) as i16).collect(),
        )),
        a(ArrayData::I32(
            r.iter().map(|v| (v * 4e9 - 2e9) as i32).collect(),
        )),
        a(ArrayData::F32(
            r.iter().map(|v| (v * 200.0 - 100.0) as f32).collect(),
        )),
        a(ArrayData::F64(r.iter().map(|v| 1.0 + v * 1e-9).collect())),
    ]
}

fn samples(a: &Array) -> SampleVec {
    match &a.data {
        ArrayData::U8(v) => SampleVec::U8(v.clone()),
        ArrayData::U16(v) => SampleVec::U16(v.clone()),
        ArrayData::I16(v) => SampleVec::I16(v.clone()),
        ArrayData::I32(v) => SampleVec::I32(v.clone()),
        ArrayData::F32(v) => SampleVec::F32(v.clone()),
        ArrayData::F64(v) => SampleVec::F64(v.clone()),
        _ => unreachable!("not made by arrays()"),
    }
}

/// Each element's bits (NaN equals NaN).
fn bits(a: &Array) -> Vec<u64> {
    match &a.data {
        ArrayData::U8(v) => v.iter().map(|&x| x as u64).collect(),
        ArrayData::U16(v) => v.iter().map(|&x| x as u64).collect(),
        ArrayData::I16(v) => v.iter().map(|&x| x as u16 as u64).collect(),
        ArrayData::I32(v) => v.iter().map(|&x| x as u32 as u64).collect(),
        ArrayData::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        ArrayData::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        _ => unreachable!("not made by arrays()"),
    }
}

fn reference(a: &Array, size: &[usize]) -> Array {
    let s = samples(a);
    let fp = Footprint::size(3, size).unwrap();
    let out = cpu::median_filter(s.as_samples(), &a.shape, &fp, Boundary::default()).unwrap();
    let data = match out {
        SampleVec::U8(v) => ArrayData::U8(v),
        SampleVec::U16(v) => ArrayData::U16(v),
        SampleVec::I16(v) => ArrayData::I16(v),
        SampleVec::I32(v) => ArrayData::I32(v),
        SampleVec::F32(v) => ArrayData::F32(v),
        SampleVec::F64(v) => ArrayData::F64(v),
        _ => unreachable!("the input's dtype"),
    };
    Array::new(a.shape.clone(), data).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the median from `input` to `output` and checks it against `want`.
fn median_equals(input: &Path, output: &Path, size: &str, want: &Array, extra: &[&str]) -> Value {
    let mut args = vec!["median", s(input), s(output), "--size", size, "--json"];
    args.extend(extra);
    let o = gpuscope(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let got = gpuscope_io::read(output).unwrap().array;
    assert_eq!(got.shape, want.shape, "{args:?}");
    assert_eq!(bits(&got), bits(want), "{args:?}");
    v
}

#[test]
fn every_source_and_sink_format_gives_the_in_memory_median() {
    let dir = scratch("conveyor_formats");
    let a = &arrays()[1]; // uint16: every format stores it
    let want = reference(a, &[1, 3, 3]);
    for src in ["npy", "raw", "tif", "zarr"] {
        let input = dir.join(format!("in.{src}"));
        gpuscope_io::write(&input, a).unwrap();
        for dst in ["npy", "raw", "tif", "zarr"] {
            let output = dir.join(format!("{src}-to.{dst}"));
            // Blocks of about one slice: many blocks, many chunks.
            let v = median_equals(
                &input,
                &output,
                "1,3,3",
                &want,
                &["--memory-budget", "64K", "--no-sync"],
            );
            assert_eq!(v["streamed"], true);
            let bytes = (a.len() * 2) as u64;
            assert_eq!(v["read_bytes"].as_u64(), Some(bytes), "{src} -> {dst}: {v}");
            assert_eq!(
                v["write_bytes"].as_u64(),
                Some(bytes),
                "{src} -> {dst}: {v}"
            );
            for key in ["read_ms", "compute_ms", "write_ms", "finish_ms"] {
                assert!(v[key].as_f64().is_some(), "{key} missing: {v}");
            }
        }
    }
}

#[test]
fn every_dtype_streams_bit_for_bit_with_halos_across_blocks() {
    let dir = scratch("conveyor_dtypes");
    for (i, a) in arrays().iter().enumerate() {
        let name = a.dtype().name();
        let input = dir.join(format!("{name}.npy"));
        gpuscope_io::write(&input, a).unwrap();
        // A window across slices: halos reach into the blocks either side.
        let want = reference(a, &[3, 3, 3]);
        let output = dir.join(format!("{name}-cube.npy"));
        let budget = ["64K", "256K", "1M"][i % 3];
        median_equals(&input, &output, "3", &want, &["--memory-budget", budget]);
        let want = reference(a, &[1, 3, 3]);
        let output = dir.join(format!("{name}-flat.zarr"));
        median_equals(&input, &output, "1,3,3", &want, &[]);
    }
}

/// Slices larger than the budget's blocks are read and written in rows
/// (each chunk reads its box's rows again, so more bytes are read than the
/// input holds), with the in-memory result, from every source format (a
/// TIFF's pages are read whole) into every sink format (TIFF and Zarr
/// outputs gather each slice), with a window across slices too.
#[test]
fn slices_larger_than_a_block_stream_in_rows() {
    let dir = scratch("conveyor_rows");
    let shape = vec![3, 700, 500];
    let n: usize = shape.iter().product();
    let r = noise(n, 29);
    let a = Array::new(
        shape,
        ArrayData::U16(r.iter().map(|v| (v * 65536.0) as u16).collect()),
    )
    .unwrap();
    let bytes = (n * 2) as u64;
    let sources = ["npy", "raw", "tif", "zarr"];
    for src in sources {
        gpuscope_io::write(&dir.join(format!("in.{src}")), &a).unwrap();
    }
    for size in [[1, 3, 3], [3, 5, 1]] {
        let want = reference(&a, &size);
        let size = format!("{},{},{}", size[0], size[1], size[2]);
        for src in sources {
            let input = dir.join(format!("in.{src}"));
            for dst in ["npy", "raw", "tif", "zarr"] {
                let output = dir.join(format!("{src}-{size}.{dst}"));
                let v = median_equals(&input, &output, &size, &want, &["--memory-budget", "1M"]);
                let what = format!("{src} -> {dst}, size {size}: {v}");
                let read = v["read_bytes"].as_u64().unwrap_or(0);
                if src == "tif" {
                    assert_eq!(read, bytes, "{what}");
                } else {
                    assert!(read > bytes, "not read in rows: {what}");
                }
                assert_eq!(v["write_bytes"].as_u64(), Some(bytes), "{what}");
            }
        }
    }
}
