//! Zarr array metadata, v3 (`zarr.json`) and v2 (`.zarray`), parsed into
//! one description: shape, chunks, dtype, fill value and codec pipeline.
//! Everything is checked here, before any chunk is read: sizes must not
//! overflow, chunk extents are at least 1, codecs are ones we decode.

use serde_json::Value;

use crate::{DType, IoError, Result};

/// One step of a chunk's codec pipeline, in the order the writer applied
/// them (the reader undoes them last to first).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Codec {
    /// Array to array: the encoded array's axis `i` is the input's `order[i]`.
    Transpose(Vec<usize>),
    /// Array to bytes: the samples, in this byte order.
    Bytes {
        big: bool,
    },
    /// Array to bytes: a shard of inner chunks with an index of
    /// (offset, length) pairs.
    Sharding(Box<Sharding>),
    Gzip,
    Zlib,
    Zstd,
    Crc32c,
    Blosc,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sharding {
    pub inner: Vec<usize>,
    pub codecs: Vec<Codec>,
    pub index_codecs: Vec<Codec>,
    pub index_at_end: bool,
}

/// How a chunk's grid coordinates become its key (file path in the store).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct KeyEncoding {
    /// v3's `default` encoding prefixes `c`; v2 (and v3's `v2`) does not.
    pub prefix_c: bool,
    pub separator: char,
}

impl KeyEncoding {
    pub fn key(&self, coords: &[usize]) -> String {
        let sep = self.separator.to_string();
        let parts: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
        match (self.prefix_c, parts.is_empty()) {
            (true, true) => "c".into(),
            (true, false) => format!("c{sep}{}", parts.join(&sep)),
            (false, true) => "0".into(),
            (false, false) => parts.join(&sep),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub zarr_format: u8,
    pub shape: Vec<usize>,
    pub chunks: Vec<usize>,
    pub dtype: DType,
    /// One element, little-endian.
    pub fill: Vec<u8>,
    pub codecs: Vec<Codec>,
    pub key: KeyEncoding,
}

/// Metadata documents larger than this are refused unread.
pub(crate) const MAX_METADATA_BYTES: u64 = 16 << 20;

fn bad(msg: impl Into<String>) -> IoError {
    IoError::corrupt(msg)
}

fn unsupported(msg: impl Into<String>) -> IoError {
    IoError::unsupported(
        msg,
        "re-save the array with zarr-python using the bytes, transpose, gzip, zstd, blosc, crc32c or sharding codecs",
    )
}

fn usize_list(v: Option<&Value>, what: &str) -> Result<Vec<usize>> {
    let list = v
        .and_then(Value::as_array)
        .ok_or_else(|| bad(format!("the metadata has no {what} list")))?;
    list.iter()
        .map(|x| {
            x.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad(format!("{what} holds {x}, not a size")))
        })
        .collect()
}

/// Shape and chunk shape must agree and describe addressable sizes.
fn check_grid(shape: &[usize], chunks: &[usize], dtype: DType) -> Result<()> {
    if shape.len() != chunks.len() {
        return Err(bad(format!(
            "the chunk shape {chunks:?} does not have the {} dimensions of the shape {shape:?}",
            shape.len()
        )));
    }
    if chunks.contains(&0) {
        return Err(bad(format!("the chunk shape {chunks:?} has an empty axis")));
    }
    let elem = dtype.size_bytes();
    for (what, s) in [("shape", shape), ("chunk shape", chunks)] {
        if crate::checked_product(s)
            .and_then(|n| n.checked_mul(elem))
            .is_none()
        {
            return Err(IoError::too_large(format!(
                "the {what} {s:?} holds more bytes than can be addressed"
            )));
        }
    }
    Ok(())
}

/// A v3 `zarr.json` of `node_type` array.
pub(crate) fn parse_v3(doc: &Value) -> Result<Meta> {
    let shape = usize_list(doc.get("shape"), "shape")?;
    let dtype_name = doc
        .get("data_type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("the metadata names no data_type (or names a structured one)"))?;
    let dtype = dtype_v3(dtype_name)?;
    let grid = doc.get("chunk_grid").unwrap_or(&Value::Null);
    if grid.get("name").and_then(Value::as_str) != Some("regular") {
        return Err(unsupported(format!(
            "the chunk grid {} is not the regular grid",
            grid.get("name").unwrap_or(&Value::Null)
        )));
    }
    let chunks = usize_list(
        grid.get("configuration").and_then(|c| c.get("chunk_shape")),
        "chunk_shape",
    )?;
    check_grid(&shape, &chunks, dtype)?;
    let key = key_encoding_v3(doc.get("chunk_key_encoding"))?;
    if doc
        .get("storage_transformers")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
    {
        return Err(unsupported("the array uses storage transformers"));
    }
    let codecs = codecs_v3(doc.get("codecs"), &chunks, 0)?;
    let fill = fill_value(doc.get("fill_value").unwrap_or(&Value::Null), dtype)?;
    Ok(Meta {
        zarr_format: 3,
        shape,
        chunks,
        dtype,
        fill,
        codecs,
        key,
    })
}

fn dtype_v3(name: &str) -> Result<DType> {
    Ok(match name {
        "bool" => DType::Bool,
        "int8" => DType::I8,
        "int16" => DType::I16,
        "int32" => DType::I32,
        "int64" => DType::I64,
        "uint8" => DType::U8,
        "uint16" => DType::U16,
        "uint32" => DType::U32,
        "uint64" => DType::U64,
        "float32" => DType::F32,
        "float64" => DType::F64,
        other => {
            return Err(IoError::unsupported(
                format!("the data type {other} is not one gpuscope reads"),
                "store integers (int8-int64, uint8-uint64), float32, float64 or bool",
            ));
        }
    })
}

fn key_encoding_v3(v: Option<&Value>) -> Result<KeyEncoding> {
    let Some(v) = v else {
        return Err(bad("the metadata has no chunk_key_encoding"));
    };
    let name = v.get("name").and_then(Value::as_str).unwrap_or("");
    let sep = v
        .get("configuration")
        .and_then(|c| c.get("separator"))
        .and_then(Value::as_str);
    let (prefix_c, default_sep) = match name {
        "default" => (true, "/"),
        "v2" => (false, "."),
        other => return Err(unsupported(format!("the chunk key encoding {other:?}"))),
    };
    let separator = match sep.unwrap_or(default_sep) {
        "/" => '/',
        "." => '.',
        other => return Err(bad(format!("the chunk key separator {other:?}"))),
    };
    Ok(KeyEncoding {
        prefix_c,
        separator,
    })
}

/// v3 codecs; `depth` bounds sharding nested in sharding.
fn codecs_v3(v: Option<&Value>, chunk: &[usize], depth: usize) -> Result<Vec<Codec>> {
    let list = v
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the metadata has no codecs list"))?;
    let mut out = Vec::with_capacity(list.len());
    let mut shape = chunk.to_vec();
    for c in list {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        let conf = c.get("configuration").unwrap_or(&Value::Null);
        let codec = match name {
            "bytes" | "endian" => {
                let big = match conf.get("endian").and_then(Value::as_str) {
                    None | Some("little") => false,
                    Some("big") => true,
                    Some(o) => return Err(bad(format!("the bytes codec's endian {o:?}"))),
                };
                Codec::Bytes { big }
            }
            "transpose" => {
                let order = transpose_order(conf.get("order"), shape.len())?;
                shape = order.iter().map(|&i| shape[i]).collect();
                Codec::Transpose(order)
            }
            "gzip" => Codec::Gzip,
            "zstd" => Codec::Zstd,
            "crc32c" => Codec::Crc32c,
            "blosc" => Codec::Blosc,
            "sharding_indexed" => {
                if depth > 2 {
                    return Err(unsupported("sharding nested more than twice"));
                }
                let inner = usize_list(conf.get("chunk_shape"), "sharding chunk_shape")?;
                if inner.len() != shape.len()
                    || inner.contains(&0)
                    || shape.iter().zip(&inner).any(|(s, i)| s % i != 0)
                {
                    return Err(bad(format!(
                        "the shard shape {shape:?} is not a whole number of inner chunks {inner:?}"
                    )));
                }
                let codecs = codecs_v3(conf.get("codecs"), &inner, depth + 1)?;
                let index_codecs = codecs_v3(conf.get("index_codecs"), &[1], depth + 1)?;
                if index_codecs
                    .iter()
                    .any(|c| !matches!(c, Codec::Bytes { .. } | Codec::Crc32c))
                {
                    return Err(unsupported(
                        "a shard index encoded with codecs other than bytes and crc32c",
                    ));
                }
                let index_at_end = match conf.get("index_location").and_then(Value::as_str) {
                    None | Some("end") => true,
                    Some("start") => false,
                    Some(o) => return Err(bad(format!("the shard index_location {o:?}"))),
                };
                Codec::Sharding(Box::new(Sharding {
                    inner,
                    codecs,
                    index_codecs,
                    index_at_end,
                }))
            }
            other => {
                // Extensions marked must_understand: false may be skipped.
                if c.get("must_understand") == Some(&Value::Bool(false)) {
                    continue;
                }
                return Err(unsupported(format!(
                    "the codec {other:?} is not one gpuscope decodes"
                )));
            }
        };
        out.push(codec);
    }
    check_order(&out)?;
    Ok(out)
}

/// Exactly one array-to-bytes codec, after the array-to-array ones.
fn check_order(codecs: &[Codec]) -> Result<()> {
    let is_a2b = |c: &Codec| matches!(c, Codec::Bytes { .. } | Codec::Sharding(_));
    let n = codecs.iter().filter(|c| is_a2b(c)).count();
    let at = codecs.iter().position(is_a2b);
    let a2a_after =
        at.is_some_and(|i| codecs[i..].iter().any(|c| matches!(c, Codec::Transpose(_))));
    if n != 1 || a2a_after {
        return Err(bad(
            "the codecs list must hold exactly one bytes (or sharding) codec, after any transpose",
        ));
    }
    Ok(())
}

fn transpose_order(v: Option<&Value>, ndim: usize) -> Result<Vec<usize>> {
    let order = match v {
        Some(Value::String(s)) if s == "C" => (0..ndim).collect(),
        Some(Value::String(s)) if s == "F" => (0..ndim).rev().collect(),
        other => usize_list(other, "transpose order")?,
    };
    let mut seen = vec![false; ndim];
    for &i in &order {
        if i >= ndim || std::mem::replace(&mut seen[i], true) {
            return Err(bad(format!(
                "the transpose order {order:?} is not a permutation of {ndim} axes"
            )));
        }
    }
    if order.len() != ndim {
        return Err(bad(format!(
            "the transpose order {order:?} is not a permutation of {ndim} axes"
        )));
    }
    Ok(order)
}

/// A v2 `.zarray`.
pub(crate) fn parse_v2(doc: &Value) -> Result<Meta> {
    let shape = usize_list(doc.get("shape"), "shape")?;
    let chunks = usize_list(doc.get("chunks"), "chunks")?;
    let dt = doc
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or_else(|| unsupported("a structured dtype"))?;
    let (dtype, big) = dtype_v2(dt)?;
    check_grid(&shape, &chunks, dtype)?;
    if doc
        .get("filters")
        .is_some_and(|f| !f.is_null() && f.as_array().is_none_or(|a| !a.is_empty()))
    {
        return Err(unsupported("the array uses v2 filters"));
    }
    let mut codecs = Vec::new();
    match doc.get("order").and_then(Value::as_str) {
        None | Some("C") => {}
        Some("F") => codecs.push(Codec::Transpose((0..shape.len()).rev().collect())),
        Some(o) => return Err(bad(format!("the order {o:?}"))),
    }
    codecs.push(Codec::Bytes { big });
    match doc.get("compressor") {
        None | Some(Value::Null) => {}
        Some(c) => match c.get("id").and_then(Value::as_str).unwrap_or("") {
            "zlib" => codecs.push(Codec::Zlib),
            "gzip" => codecs.push(Codec::Gzip),
            "zstd" => codecs.push(Codec::Zstd),
            "blosc" => codecs.push(Codec::Blosc),
            other => {
                return Err(unsupported(format!(
                    "the compressor {other:?} is not one gpuscope decodes"
                )));
            }
        },
    }
    let separator = match doc.get("dimension_separator").and_then(Value::as_str) {
        None | Some(".") => '.',
        Some("/") => '/',
        Some(o) => return Err(bad(format!("the dimension_separator {o:?}"))),
    };
    // v2's null fill value leaves missing chunks undefined; zarr-python reads zeros.
    let fill = match doc.get("fill_value") {
        None | Some(Value::Null) => vec![0; dtype.size_bytes()],
        Some(v) => fill_value(v, dtype)?,
    };
    Ok(Meta {
        zarr_format: 2,
        shape,
        chunks,
        dtype,
        fill,
        codecs,
        key: KeyEncoding {
            prefix_c: false,
            separator,
        },
    })
}

/// numpy's typestr (`<u2`, `|b1`, `>f8`) as dtype and byte order.
fn dtype_v2(s: &str) -> Result<(DType, bool)> {
    let refuse = || {
        IoError::unsupported(
            format!("the dtype {s:?} is not one gpuscope reads"),
            "store integers, float32, float64 or bool",
        )
    };
    let mut chars = s.chars();
    let big = match chars.next() {
        Some('>') => true,
        Some('<' | '|' | '=') => false,
        _ => return Err(refuse()),
    };
    let dtype = match chars.as_str() {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return Err(refuse()),
    };
    Ok((dtype, big))
}

/// A JSON fill value as one little-endian element.
fn fill_value(v: &Value, dtype: DType) -> Result<Vec<u8>> {
    let wrong = || bad(format!("the fill_value {v} is not a {}", dtype.name()));
    let float = |v: &Value| -> Result<f64> {
        match v {
            Value::Number(n) => n.as_f64().ok_or_else(wrong),
            Value::String(s) => match s.as_str() {
                "NaN" => Ok(f64::NAN),
                "Infinity" => Ok(f64::INFINITY),
                "-Infinity" => Ok(f64::NEG_INFINITY),
                _ => Err(wrong()),
            },
            _ => Err(wrong()),
        }
    };
    // Floats may also be given as their bits, "0x7fc00000".
    let hex = v
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    macro_rules! int {
        ($t:ty) => {{
            let x: $t = if let Some(i) = v.as_i64() {
                <$t>::try_from(i).map_err(|_| wrong())?
            } else if let Some(u) = v.as_u64() {
                <$t>::try_from(u).map_err(|_| wrong())?
            } else {
                return Err(wrong());
            };
            x.to_le_bytes().to_vec()
        }};
    }
    Ok(match dtype {
        DType::Bool => match v {
            Value::Bool(b) => vec![u8::from(*b)],
            Value::Number(n) if n.as_u64().is_some_and(|x| x <= 1) => {
                vec![u8::from(n.as_u64() == Some(1))]
            }
            _ => return Err(wrong()),
        },
        DType::U8 => int!(u8),
        DType::I8 => int!(i8),
        DType::U16 => int!(u16),
        DType::I16 => int!(i16),
        DType::U32 => int!(u32),
        DType::I32 => int!(i32),
        DType::U64 => int!(u64),
        DType::I64 => int!(i64),
        DType::F32 => match hex {
            Some(bits) => u32::try_from(bits)
                .map_err(|_| wrong())?
                .to_le_bytes()
                .to_vec(),
            None => (float(v)? as f32).to_le_bytes().to_vec(),
        },
        DType::F64 => match hex {
            Some(bits) => bits.to_le_bytes().to_vec(),
            None => float(v)?.to_le_bytes().to_vec(),
        },
    })
}

/// A codec's name, for `info`.
pub(crate) fn codec_names(codecs: &[Codec]) -> Vec<String> {
    codecs
        .iter()
        .map(|c| match c {
            Codec::Transpose(o) => format!("transpose{o:?}"),
            Codec::Bytes { big: true } => "bytes(big)".into(),
            Codec::Bytes { big: false } => "bytes".into(),
            Codec::Sharding(s) => format!(
                "sharding(inner chunks {:?}: {})",
                s.inner,
                codec_names(&s.codecs).join(", ")
            ),
            Codec::Gzip => "gzip".into(),
            Codec::Zlib => "zlib".into(),
            Codec::Zstd => "zstd".into(),
            Codec::Crc32c => "crc32c".into(),
            Codec::Blosc => "blosc".into(),
        })
        .collect()
}
