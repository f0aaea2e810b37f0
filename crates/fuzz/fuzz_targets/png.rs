#![no_main]
//! .png: the whole-file decoder.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    common::decode("f.png", data);
});
