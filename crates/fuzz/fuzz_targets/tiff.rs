#![no_main]
//! TIFF and BigTIFF: the whole-file decoder and the page reader of stacks.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    common::decode("f.tif", data);
    if let Some(path) = common::file("tif", data)
        && let Ok(mut r) = gpuscope_io::tiff::TiffStackReader::open(&path)
    {
        for i in [0, r.pages().saturating_sub(1)] {
            let _ = r.read_page(i);
        }
    }
});
