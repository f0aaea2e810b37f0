#![no_main]
//! .npy: the whole-file decoder and the slab reader of stacks.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    common::decode("f.npy", data);
    let _ = gpuscope_io::npy::parse_header(data);
    if let Some(path) = common::file("npy", data)
        && let Ok(mut r) = gpuscope_io::npy::NpyReader::open(&path)
        && let Some(&nz) = r.shape().first()
    {
        // The first slices and the last one, as the streamed commands read.
        for z in [0, 1, nz.saturating_sub(1)] {
            let _ = r.read_slab(z, 1);
        }
    }
});
