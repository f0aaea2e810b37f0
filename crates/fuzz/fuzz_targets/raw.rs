#![no_main]
//! Headerless .raw with its sidecar: the input is the sidecar's JSON, a NUL
//! byte, then the data.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let (json, bytes) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(json) else {
        return;
    };
    let Ok(layout) = gpuscope_io::raw::RawLayout::from_json(text) else {
        return;
    };
    if let Ok(a) = gpuscope_io::raw::decode(bytes, &layout) {
        assert_eq!(gpuscope_io::checked_product(&a.shape), Some(a.len()));
    }
    if let Some(path) = common::file("raw", bytes)
        && let Ok(mut r) = gpuscope_io::npy::NpyReader::open_raw(&path, &layout)
        && let Some(&nz) = r.shape().first()
    {
        for z in [0, nz.saturating_sub(1)] {
            let _ = r.read_slab(z, 1);
        }
    }
});
