//! The decode workload: a synthetic Eiger-like frame (uint32, mostly small
//! counts, module gaps at 2^32 - 1), compressed with bitshuffle-LZ4 on the
//! host once, then decoded on the GPU `--frames` times per call, resident
//! (compressed chunk in, raw frame out, both on the device). The row adds
//! decoded GB/s and frames/s, from the kernel time where the adapter has
//! timestamps and from the wall time of the call.

use gpuscope_core::decode::gpu::Resident;
use gpuscope_io::h5bytes::encode_bitshuffle_lz4;
use serde_json::{Value, json};

use super::Bench;
use crate::common::{CliResult, Failure};

/// Columns of the synthetic frame (an Eiger 16M's), for its gap bands.
const COLUMNS: usize = 4148;

/// Eiger-like counts as little-endian uint32 bytes: about 60% zeros, most
/// others 1-3, one pixel in 500 bright, and the module gaps (10 columns
/// every 1040, 37 rows every 551) at 2^32 - 1 as the detector writes them.
fn eiger_like(pixels: usize) -> Vec<u8> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut out = Vec::with_capacity(4 * pixels);
    for i in 0..pixels {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let (row, col) = (i / COLUMNS, i % COLUMNS);
        let r = (s >> 32) as u32;
        let v = if col % 1040 >= 1030 || row % 551 >= 514 {
            u32::MAX
        } else if r.is_multiple_of(500) {
            100 + (r >> 9) % 5000
        } else {
            match r % 10 {
                0..=5 => 0,
                6 | 7 => 1,
                8 => 2,
                _ => 3,
            }
        };
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

pub fn decode(b: &Bench) -> CliResult<Vec<Value>> {
    if !b.want("decode") {
        return Ok(vec![]);
    }
    let pixels = b.args.decode_pixels.max(1);
    let times = b.args.frames.max(1);
    let frame = eiger_like(pixels);
    let chunk = encode_bitshuffle_lz4(&frame, 4);
    let gpu = b.gpu();
    let r = pollster::block_on(Resident::new(gpu, &[&chunk], 4, frame.len()))?;
    let outcome = (|| -> CliResult<Vec<Value>> {
        // Checked once against the frame it was made from.
        pollster::block_on(r.run(gpu, 1))?;
        if pollster::block_on(r.read(gpu))?.first() != Some(&frame) {
            return Err(Failure(
                "decode: the GPU's frame differs from the input".into(),
            ));
        }
        let mut kernel_ms = None;
        let mut row = b.time(
            "decode",
            times * frame.len(),
            &mut || {
                let k = pollster::block_on(r.run(gpu, times))?;
                kernel_ms = k.map(|k| kernel_ms.map_or(k, |m: f64| m.min(k)));
                Ok(())
            },
            None,
        )?;
        let e2e_ms = row["e2e_ms"].as_f64().unwrap_or(f64::NAN);
        let per_frame = |ms: f64| ms / times as f64;
        let gb_s = |ms: f64| frame.len() as f64 / (per_frame(ms) * 1e6);
        row["pixels"] = json!(pixels);
        row["frames"] = json!(times);
        row["compressed_bytes"] = json!(chunk.len());
        row["ratio"] = json!(frame.len() as f64 / chunk.len() as f64);
        row["frames_per_s"] = json!(1e3 / per_frame(e2e_ms));
        row["decoded_gb_s"] = json!(gb_s(e2e_ms));
        if let Some(k) = kernel_ms {
            row["kernel_ms_per_frame"] = json!(per_frame(k));
            row["kernel_frames_per_s"] = json!(1e3 / per_frame(k));
            row["kernel_decoded_gb_s"] = json!(gb_s(k));
        }
        eprintln!(
            "decode: {pixels} uint32 pixels, {} compressed bytes (ratio {:.1}): {:.1} frames/s, {:.2} GB/s decoded (wall){}",
            chunk.len(),
            frame.len() as f64 / chunk.len() as f64,
            1e3 / per_frame(e2e_ms),
            gb_s(e2e_ms),
            kernel_ms.map_or(String::new(), |k| format!(
                "; kernels {:.1} frames/s, {:.2} GB/s",
                1e3 / per_frame(k),
                gb_s(k)
            ))
        );
        Ok(vec![row])
    })();
    r.free(gpu);
    outcome
}
