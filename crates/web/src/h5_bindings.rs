//! HDF5/NeXus in the page: files are read by byte ranges through a JS
//! function (`File.slice()` with `FileReaderSync` in the decoding worker),
//! so a file larger than the tab's memory opens one frame at a time.

use std::cell::RefCell;
use std::sync::Arc;

use gpuscope_io::h5bytes::{H5Bytes, H5Series, Source};
use js_sys::{Array, Function, Object, Uint8Array};
use wasm_bindgen::prelude::*;

use crate::bindings::{Volume, js_err, set};
use crate::ops;

thread_local! {
    /// `read(fileIndex, offset, length) -> Uint8Array` of the open files.
    /// The reader's storage must be `Send + Sync`, which a JS function is
    /// not, so the storage holds only the file's index and calls this.
    static READ: RefCell<Option<Function>> = const { RefCell::new(None) };
}

fn read_range(index: usize, offset: u64, len: usize) -> Result<Vec<u8>, String> {
    READ.with(|r| {
        let r = r.borrow();
        let f = r.as_ref().ok_or("the file is closed")?;
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

/// An opened HDF5 file (the first name) with the files its links reach.
#[wasm_bindgen]
pub struct H5Handle {
    file: H5Bytes,
    series: Option<H5Series>,
    /// The detector's pixel mask and count cutoff, for frames of the
    /// selected series' shape.
    mask: (Option<Vec<u32>>, Option<f64>),
}

/// Opens `names[0]` (lengths `lens`), reading through `read`; the other
/// names are what its external links may reach (an Eiger master's data
/// files). Only one set of files is open at a time.
#[wasm_bindgen]
pub fn h5_open(names: Vec<String>, lens: Vec<f64>, read: Function) -> Result<H5Handle, JsError> {
    READ.with(|r| *r.borrow_mut() = Some(read));
    let sources: Vec<Source> = names
        .iter()
        .zip(&lens)
        .enumerate()
        .map(|(i, (name, &len))| Source {
            name: name.clone(),
            len: len as u64,
            read: Arc::new(move |offset, n| read_range(i, offset, n)),
        })
        .collect();
    let file = H5Bytes::open(&sources).map_err(js_err)?;
    Ok(H5Handle {
        file,
        series: None,
        mask: (None, None),
    })
}

#[wasm_bindgen]
impl H5Handle {
    /// Every group and dataset: `[{path, shape?, dtype?, note}]`.
    pub fn tree(&self) -> Result<Array, JsError> {
        let nodes = self.file.tree().map_err(js_err)?;
        Ok(nodes
            .into_iter()
            .map(|n| -> JsValue {
                let o = Object::new();
                set(&o, "path", n.path);
                if let Some(s) = n.shape {
                    let a: Array = s.iter().map(|&x| JsValue::from_f64(x as f64)).collect();
                    set(&o, "shape", a);
                }
                if let Some(t) = n.dtype {
                    set(&o, "dtype", t);
                }
                set(&o, "note", n.note);
                o.into()
            })
            .collect())
    }

    /// Selects the dataset at `path` (none: the NeXus default or the
    /// Eiger series): `{paths, shape, dtype, frames}`.
    pub fn select(&mut self, path: Option<String>) -> Result<JsValue, JsError> {
        let s = self.file.series(path.as_deref()).map_err(js_err)?;
        let o = Object::new();
        let paths: Array = s.dataset_paths().into_iter().map(JsValue::from).collect();
        set(&o, "paths", paths);
        let shape: Array = s
            .shape()
            .iter()
            .map(|&x| JsValue::from_f64(x as f64))
            .collect();
        set(&o, "shape", shape);
        set(&o, "dtype", s.dtype().name());
        set(&o, "frames", s.frames() as u32);
        self.mask = if s.shape().len() >= 3 {
            self.file.detector_mask(&s.shape()[1..]).map_err(js_err)?
        } else {
            (None, None)
        };
        set(&o, "masked", self.mask.0.is_some() || self.mask.1.is_some());
        self.series = Some(s);
        Ok(o.into())
    }

    /// Frame `z` (from 0) of the selected dataset.
    pub fn frame(&self, z: u32) -> Result<Volume, JsError> {
        let s = self
            .series
            .as_ref()
            .ok_or_else(|| JsError::new("no dataset selected"))?;
        let array = s.frame(z as usize).map_err(js_err)?;
        let mut header = vec![
            ("datasets".to_string(), s.dataset_paths().join(" ")),
            ("frame".to_string(), format!("{} of {}", z + 1, s.frames())),
        ];
        let (mask, cutoff) = &self.mask;
        if mask.is_none() && cutoff.is_none() {
            return Ok(Volume::of(ops::decoded(array, "hdf5", header)));
        }
        if mask.is_some() {
            header.push((
                "pixel_mask".into(),
                "applied: gaps -1, bad pixels -2".into(),
            ));
        }
        if let Some(c) = cutoff {
            header.push(("count_cutoff".into(), format!("counts above {c} set to -2")));
        }
        Ok(Volume::of(ops::decoded_masked(
            array,
            mask.as_deref(),
            *cutoff,
            header,
        )))
    }
}
