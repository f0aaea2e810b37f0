//! wasm-bindgen surface of spot finding: `Engine.find_spots` (WebGPU) and
//! the free `find_spots` (CPU reference), same arguments `(data, shape,
//! options)`, returning
//! `{data: Uint8Array strong-pixel mask, shape, count, table: {columns,
//! rows}, ms, kernelMs?}`.

use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

use crate::bindings::{Engine, js_err, options};
use crate::spots::{self, COLUMNS};
use gpuscope_core::spots::{SpotOptions, SpotResult};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value.into());
}

fn spots_js(r: &SpotResult, shape: &[u32], ms: f64, kernel_ms: Option<f64>) -> JsValue {
    let obj = Object::new();
    let mask: Vec<u8> = r.strong.iter().map(|&s| u8::from(s)).collect();
    set(&obj, "data", Uint8Array::from(&mask[..]));
    set(
        &obj,
        "shape",
        shape.iter().map(|&n| JsValue::from(n)).collect::<Array>(),
    );
    set(&obj, "count", r.spots.len() as f64);
    set(&obj, "nStrong", r.n_strong as f64);
    let columns: Array = COLUMNS
        .iter()
        .map(|(key, label)| {
            let c = Object::new();
            set(&c, "key", *key);
            set(&c, "label", *label);
            JsValue::from(c)
        })
        .collect();
    let rows: Array = spots::rows(r)
        .iter()
        .map(|row| {
            let o = Object::new();
            for ((key, _), v) in COLUMNS.iter().zip(row) {
                set(&o, key, *v);
            }
            JsValue::from(o)
        })
        .collect();
    let table = Object::new();
    set(&table, "columns", columns);
    set(&table, "rows", rows);
    set(&obj, "table", table);
    set(&obj, "ms", ms);
    if let Some(k) = kernel_ms {
        set(&obj, "kernelMs", k);
    }
    obj.into()
}

#[wasm_bindgen]
impl Engine {
    /// DIALS' spot finding on one frame on the GPU; options as the
    /// catalogue's `find_spots` (`gain` null, a number or a per-pixel array).
    pub async fn find_spots(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let o: SpotOptions = options(opts)?;
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let r = spots::find_spots_gpu(&self.gpu, &data, &shape, &o)
            .await
            .map_err(js_err)?;
        let kernel_ms = self.gpu.kernel_ns_total().map(|ns| ns as f64 / 1e6);
        Ok(spots_js(&r, &shape, performance_now() - t0, kernel_ms))
    }
}

/// DIALS' spot finding on one frame on the CPU (f64 reference).
#[wasm_bindgen]
pub fn find_spots(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let o: SpotOptions = options(opts)?;
    let t0 = performance_now();
    let r = spots::find_spots_cpu(data, &shape, &o).map_err(js_err)?;
    Ok(spots_js(&r, &shape, performance_now() - t0, None))
}
