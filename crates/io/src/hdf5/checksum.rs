//! HDF5's Fletcher-32 filter: `rust-hdf5` strips the checksum without
//! comparing it, so a flipped byte would be read as data. Before a read,
//! each chunk it touches is taken as stored (a direct chunk read), the
//! filters applied after the checksum are undone, and the checksum is
//! compared as libhdf5's H5Z_filter_fletcher32 does; a mismatch is an
//! error naming the chunk.

use rust_hdf5::format::messages::filter::{FilterPipeline, reverse_filters_masked_bounded};
use rust_hdf5::{Filter, H5Dataset};

use super::guard;
use crate::{IoError, Result};

const FLETCHER32: u16 = 3;

/// Verifies the chunks of `ds` that the box `starts`/`counts` touches, when
/// its pipeline carries a Fletcher-32 checksum. `limit`: the most bytes a
/// stage may decode to.
pub(super) fn verify_box(
    ds: &H5Dataset,
    path: &str,
    starts: &[usize],
    counts: &[usize],
    limit: usize,
) -> Result<()> {
    let filters = guard(path, || ds.filters())?;
    let Some(k) = filters.iter().position(|f| f.id == FLETCHER32) else {
        return Ok(());
    };
    let Some(chunk) = guard(path, || Ok(ds.chunk_dims()))? else {
        return Ok(());
    };
    if chunk.len() != starts.len() || chunk.contains(&0) || counts.contains(&0) {
        return Ok(());
    }
    let after: Vec<Filter> = filters[k + 1..].to_vec();
    let lo: Vec<usize> = starts.iter().zip(&chunk).map(|(s, c)| s / c).collect();
    let hi: Vec<usize> = (0..chunk.len())
        .map(|d| (starts[d] + counts[d]).div_ceil(chunk[d]))
        .collect();
    let mut c = lo.clone();
    loop {
        verify_chunk(ds, path, &c, k, &after, limit)?;
        // Odometer over the chunk grid the box touches.
        let mut d = c.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            c[d] += 1;
            if c[d] < hi[d] {
                break;
            }
            c[d] = lo[d];
        }
    }
}

fn verify_chunk(
    ds: &H5Dataset,
    path: &str,
    c: &[usize],
    k: usize,
    after: &[Filter],
    limit: usize,
) -> Result<()> {
    // A chunk never written reads as the fill value: nothing to verify.
    let Ok((raw, mask)) = guard(path, || ds.read_chunk_raw_at(c)) else {
        return Ok(());
    };
    if k < 32 && mask & (1 << k) != 0 {
        return Ok(());
    }
    let pipeline = FilterPipeline {
        filters: after.to_vec(),
    };
    let shift = (k + 1).min(31) as u32;
    let later_mask = if k + 1 >= 32 { 0 } else { mask >> shift };
    let what = format!("{path}: chunk {c:?}");
    let bytes = guard(&what, || {
        reverse_filters_masked_bounded(&pipeline, &raw, later_mask, limit.saturating_add(4))
            .map_err(rust_hdf5::Hdf5Error::from)
    })?;
    let ok = bytes.len() >= 4 && {
        let (data, sum) = bytes.split_at(bytes.len() - 4);
        let stored = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
        hdf5_reader::checksum::fletcher32(data) == stored
    };
    if ok {
        Ok(())
    } else {
        Err(IoError::corrupt(format!(
            "{path}: chunk {c:?} fails its Fletcher-32 checksum (the stored data changed since it was written)"
        )))
    }
}
