#![no_main]
//! Zarr: a store of one metadata document and one chunk, laid out from the
//! input as `[format byte][u16 LE metadata length][metadata][chunk]`. The
//! format byte's lowest bit picks v3 (`zarr.json`) or v2 (`.zarray`), the
//! next three bits the key the chunk is stored at (the first chunk of a 3-,
//! 2-, 1- or 0-D grid in each key encoding), the two above them how: a
//! file, a symlink to a file outside the store, a FIFO, a symlink to
//! `/dev/zero`. The array is opened and its first slice (or, for other
//! shapes, all of it) read.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [kind, a, b, rest @ ..] = data else {
        return;
    };
    let n = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
    let (meta, chunk) = rest.split_at(n);
    let dir = std::env::temp_dir().join(format!("gpuscope-fuzz-{}", std::process::id()));
    let store = dir.join("input.zarr");
    let _ = std::fs::remove_dir_all(&store);
    let doc = if kind % 2 == 0 {
        "zarr.json"
    } else {
        ".zarray"
    };
    let keys = ["c/0/0/0", "c/0/0", "c/0", "c", "0.0.0", "0.0", "0/0/0", "0"];
    let key = store.join(keys[usize::from((kind >> 1) & 7)]);
    let outside = dir.join("outside-chunk");
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(key.parent().unwrap_or(store.as_path()))?;
        std::fs::write(store.join(doc), meta)?;
        match (kind >> 4) & 3 {
            0 => std::fs::write(&key, chunk),
            1 => {
                std::fs::write(&outside, chunk)?;
                std::os::unix::fs::symlink(&outside, &key)
            }
            2 => {
                use std::os::unix::ffi::OsStrExt;
                let c = std::ffi::CString::new(key.as_os_str().as_bytes())?;
                // SAFETY: a NUL-terminated path.
                if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            }
            _ => std::os::unix::fs::symlink("/dev/zero", &key),
        }
    };
    if write().is_err() {
        return;
    }
    if let Ok(mut z) = gpuscope_io::zarr::ZarrArray::open(&store.display().to_string()) {
        let shape = z.shape().to_vec();
        let read = if shape.len() >= 2 && shape[0] > 0 {
            z.read_slab(0, 1)
        } else {
            z.read_all()
        };
        if let Ok(a) = read {
            assert_eq!(gpuscope_io::checked_product(&a.shape), Some(a.len()));
        }
    }
});
