#![no_main]
//! HDF5/NeXus: the default dataset (NeXus default or Eiger series), the
//! datasets the fixtures use, a frame of each and the detector metadata.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let Some(path) = common::file("h5", data) else {
        return;
    };
    let file = path.display().to_string();
    for spec in [
        file.clone(),
        format!("{file}::/data"),
        format!("{file}::/entry/data/data"),
    ] {
        if let Ok(mut s) = gpuscope_io::hdf5::Hdf5Stack::open(&spec) {
            let _ = s.detector();
            if s.shape().len() >= 2 && s.shape()[0] > 0 {
                if let Ok(a) = s.read_slab(0, 1) {
                    assert_eq!(gpuscope_io::checked_product(&a.shape), Some(a.len()));
                }
            } else if let Ok(a) = s.read_all() {
                assert_eq!(gpuscope_io::checked_product(&a.shape), Some(a.len()));
            }
        }
    }
});
