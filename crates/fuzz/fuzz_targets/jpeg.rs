#![no_main]
//! .jpg: the whole-file decoder.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    common::decode("f.jpg", data);
});
