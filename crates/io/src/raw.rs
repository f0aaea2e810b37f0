//! Headerless ("raw") arrays: C-order samples and nothing else, as written
//! by `numpy.ndarray.tofile`, many detector and tomography programs, and
//! ImageJ's "Save As > Raw Data". The file cannot say its own shape and
//! dtype, so a [`RawLayout`] gives them: from the user (the CLI's
//! `--raw-shape`/`--raw-dtype`) or from the sidecar `NAME.raw.json` that
//! gpuscope writes beside every raw output, so outputs chain into the next
//! command without flags.
//!
//! The file size must equal the layout's offset plus its data exactly: a
//! wrong shape or dtype almost always shows up as a size mismatch, and
//! reading on regardless would give garbage silently.

use crate::array::{Array, DType, checked_product};
use crate::elements::decode_elements;
use crate::error::{ErrorKind, IoError, Result};

/// Shape, dtype, byte order and header length of a headerless file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLayout {
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Bytes to skip before the first sample (a foreign header).
    pub offset: u64,
    pub big_endian: bool,
}

impl RawLayout {
    /// Little-endian samples from the first byte: what gpuscope writes.
    pub fn new(shape: Vec<usize>, dtype: DType) -> RawLayout {
        RawLayout {
            shape,
            dtype,
            offset: 0,
            big_endian: false,
        }
    }

    /// Bytes of sample data the layout describes.
    pub fn data_bytes(&self) -> Result<u64> {
        if self.shape.is_empty() {
            return Err(IoError::invalid(
                "a raw layout needs a shape of at least one axis",
                "give the shape of at least one axis, e.g. 64,2048,2048",
            ));
        }
        checked_product(&self.shape)
            .and_then(|n| n.checked_mul(self.dtype.size_bytes()))
            .map(|n| n as u64)
            .ok_or_else(|| IoError::too_large(format!("shape {:?} is too large", self.shape)))
    }

    /// Checks a file of `file_len` bytes holds exactly this layout.
    pub fn check_file_len(&self, file_len: u64) -> Result<()> {
        let data = self.data_bytes()?;
        let need = self.offset.saturating_add(data);
        if file_len == need {
            return Ok(());
        }
        let kind = if file_len < need {
            ErrorKind::Truncated
        } else {
            ErrorKind::Corrupt
        };
        Err(IoError::new(
            kind,
            format!(
                "a raw {} array of shape {:?}{} needs {need} bytes but the file holds {file_len}",
                self.dtype.name(),
                self.shape,
                if self.offset > 0 {
                    format!(" after {} header bytes", self.offset)
                } else {
                    String::new()
                },
            ),
            "check the raw shape, dtype and offset: \
             np.fromfile(path, dtype).reshape(shape) must use every byte",
        ))
    }

    /// The sidecar's text: one JSON object.
    pub fn to_json(&self) -> String {
        self.to_json_with(None)
    }

    /// The sidecar's text with the pair hash of its data (see [`crate::pair`]).
    pub(crate) fn to_json_with(&self, data_hash: Option<u64>) -> String {
        let shape: Vec<String> = self.shape.iter().map(|n| n.to_string()).collect();
        let hash = data_hash
            // 16 hex digits, as the native reader's check parses them.
            .map(|h| format!(", \"data_hash\": \"{h:016x}\""))
            .unwrap_or_default();
        format!(
            "{{\"format\": \"raw\", \"shape\": [{}], \"dtype\": \"{}\", \"byte_order\": \"{}\", \
             \"offset\": {}, \"order\": \"C\"{hash}}}\n",
            shape.join(", "),
            self.dtype.name(),
            if self.big_endian { "big" } else { "little" },
            self.offset
        )
    }

    /// Parses a sidecar (see [`RawLayout::to_json`]); `byte_order` and
    /// `offset` are optional.
    pub fn from_json(text: &str) -> Result<RawLayout> {
        let bad = |what: String| {
            IoError::new(
                ErrorKind::Corrupt,
                format!("raw sidecar: {what}"),
                "write it as {\"shape\": [64, 2048, 2048], \"dtype\": \"uint16\"} \
                 (optional \"byte_order\": \"little\"|\"big\", \"offset\": bytes)",
            )
        };
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
        let shape = v["shape"]
            .as_array()
            .ok_or_else(|| bad("no \"shape\" list".into()))?
            .iter()
            .map(|n| n.as_u64().and_then(|n| usize::try_from(n).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| bad("\"shape\" must hold non-negative integers".into()))?;
        let dtype = v["dtype"]
            .as_str()
            .and_then(DType::from_name)
            .ok_or_else(|| bad(format!("unknown \"dtype\" {}", v["dtype"])))?;
        if v.get("order").is_some_and(|o| o != "C") {
            return Err(bad("only C order (\"order\": \"C\") is supported".into()));
        }
        let big_endian = match v.get("byte_order").map(|b| b.as_str()) {
            None | Some(Some("little")) => false,
            Some(Some("big")) => true,
            _ => return Err(bad("\"byte_order\" must be \"little\" or \"big\"".into())),
        };
        let offset = match v.get("offset") {
            None => 0,
            Some(o) => o
                .as_u64()
                .ok_or_else(|| bad("\"offset\" must be a non-negative integer".into()))?,
        };
        let layout = RawLayout {
            shape,
            dtype,
            offset,
            big_endian,
        };
        layout.data_bytes()?;
        Ok(layout)
    }
}

/// Decodes a whole raw file held in memory.
pub fn decode(bytes: &[u8], layout: &RawLayout) -> Result<Array> {
    layout.check_file_len(bytes.len() as u64)?;
    let start = layout.offset as usize;
    let data = decode_elements(layout.dtype, &bytes[start..], layout.big_endian);
    Array::new(layout.shape.clone(), data)
}

#[cfg(not(target_arch = "wasm32"))]
pub use native::*;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::*;
    use crate::atomic::{write_atomic, write_bytes_atomic};
    use crate::error::display_name;
    use std::path::{Path, PathBuf};

    /// Where the layout of the raw file `path` is written: `path` + `.json`.
    pub fn sidecar_path(path: &Path) -> PathBuf {
        let mut s = path.as_os_str().to_owned();
        s.push(".json");
        PathBuf::from(s)
    }

    /// The layout in `path`'s sidecar, or `None` when there is none.
    pub fn read_sidecar(path: &Path) -> Result<Option<RawLayout>> {
        let side = sidecar_path(path);
        let text = match std::fs::read_to_string(&side) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(
                    IoError::io("cannot read the raw sidecar", e).in_file(&side.to_string_lossy())
                );
            }
        };
        RawLayout::from_json(&text)
            .map(Some)
            .map_err(|e| e.in_file(&side.to_string_lossy()))
    }

    /// Writes the sidecar of the raw file `path` (no pair hash: a layout
    /// for a file from another program).
    pub fn write_sidecar(path: &Path, layout: &RawLayout) -> Result<()> {
        write_bytes_atomic(&sidecar_path(path), layout.to_json().as_bytes())
    }

    /// Writes the sidecar of raw data gpuscope just wrote, with its pair hash.
    pub(crate) fn write_sidecar_hashed(path: &Path, layout: &RawLayout, hash: u64) -> Result<()> {
        write_bytes_atomic(
            &sidecar_path(path),
            layout.to_json_with(Some(hash)).as_bytes(),
        )
    }

    /// The pair hash in `path`'s sidecar and the sidecar's name, when the
    /// sidecar has one (a sidecar that does not parse is the layout
    /// reader's to report).
    pub(crate) fn sidecar_hash(path: &Path) -> Option<(u64, String)> {
        let side = sidecar_path(path);
        let text = std::fs::read_to_string(&side).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        crate::pair::from_json(&v).map(|h| (h, display_name(&side.to_string_lossy())))
    }

    /// Reads the raw file `path` whole (checked against its sidecar's pair
    /// hash when it has one).
    pub fn read(path: &Path, layout: &RawLayout) -> Result<Array> {
        let name = display_name(&path.to_string_lossy());
        let bytes = crate::links::read_regular(path).map_err(|e| e.in_file(&name))?;
        let array = decode(&bytes, layout).map_err(|e| e.in_file(&name))?;
        if let Some((expected, side)) = sidecar_hash(path) {
            let data = &bytes[layout.offset as usize..];
            if crate::pair::hash_of(layout, data) != expected {
                return Err(crate::pair::mismatch(&side).in_file(&name));
            }
        }
        Ok(array)
    }

    /// Writes `array` headerless (little-endian, C order) and its sidecar;
    /// both through temporary files, so a failure leaves no partial file.
    pub fn write(path: &Path, array: &Array) -> Result<()> {
        let name = path.to_string_lossy();
        array.validate().map_err(|e| e.in_file(&name))?;
        if array.shape.is_empty() {
            return Err(IoError::invalid(
                "a 0-d array cannot be written raw (the sidecar needs a shape)",
                "write it as .npy",
            )
            .in_file(&name));
        }
        let layout = RawLayout::new(array.shape.clone(), array.dtype());
        let mut hash = crate::pair::SequentialHash::new(&layout);
        write_atomic(path, |w| {
            let mut tee = crate::pair::Tee { w, hash: &mut hash };
            crate::elements::write_data(&mut tee, &array.data)
                .map_err(|e| IoError::io("cannot write the file", e))
        })
        .map_err(|e| e.in_file(&name))?;
        write_sidecar_hashed(path, &layout, hash.finish())
    }
}
