#![no_main]
//! CBF, plain and gzipped (detected by its magic bytes).

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    common::decode("f.cbf.gz", data);
});
