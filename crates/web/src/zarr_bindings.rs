//! Zarr stores in the page: the files of a picked folder are read by byte
//! ranges through a JS function (`File.slice()` with `FileReaderSync` in
//! the decoding worker), one chunk at a time, never the whole store.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use gpuscope_io::zarr::{CallbackStore, ZarrArray};
use js_sys::{Array, Function, Object, Uint8Array};
use wasm_bindgen::prelude::*;

use crate::bindings::{Volume, js_err, set};
use crate::ops;

thread_local! {
    /// `read(fileIndex, offset, length) -> Uint8Array` of the open store.
    /// The store must be `Send + Sync`, which a JS function is not, so the
    /// store holds only each key's file index and calls this.
    static READ: RefCell<Option<Function>> = const { RefCell::new(None) };
}

fn read_range(index: usize, offset: u64, len: usize) -> Result<Vec<u8>, String> {
    READ.with(|r| {
        let r = r.borrow();
        let f = r.as_ref().ok_or("the store is closed")?;
        let v = f
            .call3(
                &JsValue::NULL,
                &JsValue::from(index as u32),
                &JsValue::from_f64(offset as f64),
                &JsValue::from_f64(len as f64),
            )
            .map_err(|e| {
                e.as_string()
                    .unwrap_or_else(|| "the browser could not read the file".into())
            })?;
        Ok(Uint8Array::new(&v).to_vec())
    })
}

/// An opened Zarr array (the store's root array, or its first OME-Zarr
/// level).
#[wasm_bindgen]
pub struct ZarrHandle {
    array: ZarrArray,
    store: String,
}

/// Opens the store `store` whose files are `keys` (paths below the
/// store's folder, `/`-separated) of lengths `lens`, reading through
/// `read(index, offset, length)`. Only one store is open at a time.
#[wasm_bindgen]
pub fn zarr_open(
    store: String,
    keys: Vec<String>,
    lens: Vec<f64>,
    read: Function,
) -> Result<ZarrHandle, JsError> {
    READ.with(|r| *r.borrow_mut() = Some(read));
    let index: HashMap<String, usize> = keys.iter().cloned().zip(0..).collect();
    let pairs = keys.into_iter().zip(lens.iter().map(|&l| l as u64));
    let reader = move |key: &str, offset: u64, len: usize| {
        let i = *index
            .get(key)
            .ok_or_else(|| format!("{key} is not in the store"))?;
        read_range(i, offset, len)
    };
    let cb = CallbackStore::new(pairs, Arc::new(reader));
    let array = ZarrArray::open_store(Box::new(cb), "", &store).map_err(js_err)?;
    Ok(ZarrHandle { array, store })
}

#[wasm_bindgen]
impl ZarrHandle {
    /// `{path, shape, dtype, frames, zarr_format, chunks, codecs}`.
    pub fn info(&self) -> JsValue {
        let z = &self.array;
        let o = Object::new();
        let nums =
            |v: &[usize]| -> Array { v.iter().map(|&x| JsValue::from_f64(x as f64)).collect() };
        set(&o, "path", z.path());
        set(&o, "shape", nums(z.shape()));
        set(&o, "chunks", nums(z.chunks()));
        set(&o, "dtype", z.dtype().name());
        set(&o, "frames", z.planes() as u32);
        set(&o, "zarr_format", z.zarr_format() as u32);
        set(&o, "codecs", z.codecs().join(", "));
        o.into()
    }

    /// Plane `z` (from 0; the axes before the last two, in C order).
    pub fn frame(&mut self, z: u32) -> Result<Volume, JsError> {
        if self.array.planes() == 0 {
            return Err(JsError::new(&format!(
                "{}: the array has shape {:?}; the page shows arrays of two axes or more",
                self.store,
                self.array.shape()
            )));
        }
        let plane = self.array.read_plane(z as usize).map_err(js_err)?;
        let z_ = &self.array;
        let mut header = vec![
            ("zarr_format".to_string(), z_.zarr_format().to_string()),
            ("array".into(), z_.path().to_string()),
            ("shape".into(), format!("{:?}", z_.shape())),
            ("chunks".into(), format!("{:?}", z_.chunks())),
            ("codecs".into(), z_.codecs().join(", ")),
        ];
        if z_.planes() > 1 {
            header.push(("frame".into(), format!("{} of {}", z + 1, z_.planes())));
        }
        Ok(Volume::of(ops::decoded(plane, "zarr", header)))
    }
}
