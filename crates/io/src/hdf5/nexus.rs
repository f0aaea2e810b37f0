//! NeXus conventions: which dataset a file means when none is named, and
//! the detector metadata the operations use (pixel mask, count cutoff) or
//! report (beam centre, distance, wavelength, NXtomo's image_key).

use std::panic::AssertUnwindSafe;
use std::path::Path;

use rust_hdf5::{H5Dataset, H5File, H5Group, Hdf5Error, LinkClass};

use super::links::Links;
use super::{bytes_of, convert, guard};
use crate::{Array, IoError, Result};

/// The detector group of NeXus/Eiger files.
const DETECTOR: &str = "/entry/instrument/detector";
/// The Eiger master's group of `data_000001`... links.
const EIGER_DATA: &str = "/entry/data";
/// `default` hops followed before a loop is assumed.
const MAX_HOPS: usize = 16;

/// What a NeXus file says about its detector; fields absent from the file
/// are absent here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Detector {
    /// Name and value (with units) of every field found, for `info`.
    pub fields: Vec<(String, String)>,
    /// `detectorSpecific/pixel_mask`: non-zero marks a bad pixel.
    pub pixel_mask: Option<Array>,
    /// Counts above this are not trusted (`saturation_value`, else
    /// `detectorSpecific/countrate_correction_count_cutoff`).
    pub count_cutoff: Option<f64>,
    /// NXtomo's `image_key`: 0 projection, 1 flat, 2 dark, 3 invalid.
    pub image_key: Option<Vec<i64>>,
}

/// `file`'s dataset, `None` when no object of that name is a dataset;
/// what it links to is checked first ([`Links::check`]).
fn try_dataset(file: &H5File, links: &Links, path: &str) -> Result<Option<H5Dataset>> {
    links.check(file, path)?;
    match std::panic::catch_unwind(AssertUnwindSafe(|| file.dataset(path))) {
        Ok(Ok(ds)) => Ok(Some(ds)),
        Ok(Err(Hdf5Error::NotFound(_))) => Ok(None),
        Ok(Err(e)) => Err(convert(path, e)),
        Err(_) => Err(IoError::corrupt(format!(
            "{path}: the HDF5 decoder failed on damaged data"
        ))),
    }
}

/// The group at `path`, its links checked first: a link out of bounds is an
/// error, a path that is no group `None`.
fn group(file: &H5File, links: &Links, path: &str) -> Result<Option<H5Group>> {
    links.check(file, path)?;
    Ok(group_in(file, path))
}

/// The group at `path` as the crate finds it, nothing checked.
pub(super) fn group_in(file: &H5File, path: &str) -> Option<H5Group> {
    let rel = path.trim_matches('/');
    let root = file.root_group();
    if rel.is_empty() {
        return Some(root);
    }
    guard(path, || root.group(rel)).ok()
}

fn attr(g: &H5Group, name: &str) -> Option<String> {
    guard(name, || g.attr_string(name)).ok()
}

fn join(base: &str, child: &str) -> String {
    if child.starts_with('/') {
        child.to_string()
    } else {
        format!("{}/{}", base.trim_end_matches('/'), child)
    }
}

/// The dataset paths `path` means: a dataset itself, or the NeXus default
/// of a group; with no path, the file's NeXus default, else an Eiger
/// master's `/entry/data/data_*` series.
pub(super) fn resolve(file: &H5File, links: &Links, path: Option<&str>) -> Result<Vec<String>> {
    if let Some(p) = path {
        let p = join("/", p);
        if try_dataset(file, links, &p)?.is_some() {
            return Ok(vec![p]);
        }
        if group(file, links, &p)?.is_none() {
            return Err(IoError::invalid(
                format!("no dataset or group {p}"),
                listing_hint(file),
            ));
        }
        return match follow_default(file, links, &p)? {
            Some(d) => Ok(vec![d]),
            None => match eiger_series(file, links, &p)? {
                Some(series) => Ok(series),
                None => Err(IoError::invalid(
                    format!("{p} is a group without a NeXus default (`default`/`signal`)"),
                    listing_hint(file),
                )),
            },
        };
    }
    if let Some(d) = follow_default(file, links, "/")? {
        return Ok(vec![d]);
    }
    if let Some(series) = eiger_series(file, links, EIGER_DATA)? {
        return Ok(series);
    }
    if let Some(d) = follow_default(file, links, EIGER_DATA)? {
        return Ok(vec![d]);
    }
    Err(IoError::invalid(
        "the file names no default dataset (no NeXus `default` attribute, no Eiger /entry/data/data_* links)",
        listing_hint(file),
    ))
}

fn listing_hint(file: &H5File) -> String {
    let names = guard("", || Ok(file.dataset_names())).unwrap_or_default();
    let shown: Vec<String> = names.iter().take(12).map(|n| join("/", n)).collect();
    let more = if names.len() > shown.len() {
        ", ..."
    } else {
        ""
    };
    format!(
        "name a dataset as FILE.h5::/path; the file holds {}{more}",
        if shown.is_empty() {
            "no dataset".to_string()
        } else {
            shown.join(", ")
        }
    )
}

/// Follows `default` attributes from group `start` to an NXdata group's
/// `signal` dataset.
fn follow_default(file: &H5File, links: &Links, start: &str) -> Result<Option<String>> {
    let mut at = start.to_string();
    for _ in 0..MAX_HOPS {
        let Some(g) = group(file, links, &at)? else {
            return Ok(None);
        };
        if let Some(signal) = attr(&g, "signal") {
            let d = join(&at, &signal);
            return Ok(try_dataset(file, links, &d)?.map(|_| d));
        }
        let Some(next) = attr(&g, "default") else {
            return Ok(None);
        };
        let next = join(&at, &next);
        if try_dataset(file, links, &next)?.is_some() {
            return Ok(Some(next));
        }
        at = next;
    }
    Err(IoError::corrupt(format!(
        "the NeXus `default` attributes from {start} go round in a loop"
    )))
}

/// The `data_*` links of an Eiger master's data group, in name order.
fn eiger_series(file: &H5File, links: &Links, at: &str) -> Result<Option<Vec<String>>> {
    let Some(g) = group(file, links, at)? else {
        return Ok(None);
    };
    let mut names: Vec<String> = guard(at, || g.link_names())?
        .into_iter()
        .filter(|n| n.starts_with("data_"))
        .collect();
    names.sort();
    Ok((!names.is_empty()).then(|| names.iter().map(|n| join(at, n)).collect()))
}

/// Bytes of the data file an external link at `path` points to (0 for
/// anything else); a bound on what reading it may decode.
pub(super) fn linked_file_bytes(file: &H5File, file_path: &Path, path: &str) -> u64 {
    let (parent, leaf) = match path.rsplit_once('/') {
        Some((p, l)) => (if p.is_empty() { "/" } else { p }, l),
        None => ("/", path),
    };
    let Some(g) = group_in(file, parent) else {
        return 0;
    };
    match guard(path, || g.link_class(leaf)) {
        Ok(LinkClass::External { file: f, .. }) => {
            let beside = file_path.parent().unwrap_or(Path::new(".")).join(&f);
            std::fs::metadata(beside).map_or(0, |m| m.len())
        }
        _ => 0,
    }
}

/// A numeric scalar (or the first value of a small array) with its units.
fn scalar(file: &H5File, links: &Links, path: &str) -> Result<Option<(f64, String)>> {
    let Some(ds) = try_dataset(file, links, path)? else {
        return Ok(None);
    };
    if guard(path, || Ok(ds.total_elements()))? > 64 {
        return Ok(None);
    }
    // The crate refuses integers as f64 (precision above 2^53): read
    // integers as integers.
    let v = guard(path, || ds.read_numeric_as::<f64>())
        .or_else(|_| {
            guard(path, || ds.read_numeric_as::<i64>())
                .map(|v| v.into_iter().map(|x| x as f64).collect())
        })
        .or_else(|_| {
            guard(path, || ds.read_numeric_as::<u64>())
                .map(|v| v.into_iter().map(|x| x as f64).collect())
        });
    let Ok(v) = v else {
        return Ok(None);
    };
    let units = guard(path, || ds.attr("units").and_then(|a| a.read_string())).unwrap_or_default();
    Ok(v.first().map(|&x| (x, units)))
}

fn text(file: &H5File, links: &Links, path: &str) -> Result<Option<String>> {
    let Some(ds) = try_dataset(file, links, path)? else {
        return Ok(None);
    };
    if guard(path, || Ok(ds.total_elements()))? > 1 {
        return Ok(None);
    }
    Ok(guard(path, || ds.read_strings())
        .ok()
        .and_then(|v| v.into_iter().next()))
}

/// The detector metadata of `file` whose frames have shape `shape[1..]`;
/// arrays larger than `limit` bytes are refused.
pub(super) fn detector(
    file: &H5File,
    links: &Links,
    shape: &[usize],
    limit: usize,
) -> Result<Detector> {
    let mut d = Detector::default();
    if let Some(t) = text(file, links, "/entry/definition")? {
        d.fields.push(("definition".into(), t));
    }
    if let Some(t) = text(file, links, &format!("{DETECTOR}/description"))? {
        d.fields.push(("detector".into(), t));
    }
    let numbers = [
        ("beam_center_x", format!("{DETECTOR}/beam_center_x")),
        ("beam_center_y", format!("{DETECTOR}/beam_center_y")),
        ("detector_distance", format!("{DETECTOR}/detector_distance")),
        ("x_pixel_size", format!("{DETECTOR}/x_pixel_size")),
        ("y_pixel_size", format!("{DETECTOR}/y_pixel_size")),
        (
            "incident_wavelength",
            "/entry/instrument/beam/incident_wavelength".to_string(),
        ),
        ("saturation_value", format!("{DETECTOR}/saturation_value")),
        (
            "countrate_correction_count_cutoff",
            format!("{DETECTOR}/detectorSpecific/countrate_correction_count_cutoff"),
        ),
    ];
    for (key, path) in &numbers {
        if let Some((v, units)) = scalar(file, links, path)? {
            let shown = if units.is_empty() {
                format!("{v}")
            } else {
                format!("{v} {units}")
            };
            d.fields.push(((*key).into(), shown));
            if d.count_cutoff.is_none()
                && (*key == "saturation_value" || *key == "countrate_correction_count_cutoff")
            {
                d.count_cutoff = Some(v);
            }
        }
    }
    let mask_path = format!("{DETECTOR}/detectorSpecific/pixel_mask");
    if let Some(ds) = try_dataset(file, links, &mask_path)? {
        d.pixel_mask = Some(read_mask(&ds, &mask_path, shape, limit)?);
        d.fields.push(("pixel_mask".into(), mask_path));
    }
    for key_path in [
        format!("{DETECTOR}/image_key"),
        "/entry/data/image_key".to_string(),
    ] {
        if let Some(ds) = try_dataset(file, links, &key_path)? {
            if guard(&key_path, || Ok(ds.total_elements()))? > limit / 8 {
                return Err(IoError::too_large(format!("{key_path} is too long")));
            }
            let keys: Vec<i64> = guard(&key_path, || ds.read_numeric_as::<i64>())?;
            let count = |k: i64| keys.iter().filter(|&&x| x == k).count();
            d.fields.push((
                "image_key".into(),
                format!(
                    "{} projections, {} flats, {} darks, {} invalid",
                    count(0),
                    count(1),
                    count(2),
                    count(3)
                ),
            ));
            d.image_key = Some(keys);
            break;
        }
    }
    Ok(d)
}

fn read_mask(ds: &H5Dataset, path: &str, shape: &[usize], limit: usize) -> Result<Array> {
    let s = guard(path, || Ok(ds.shape()))?;
    let frame = shape.get(shape.len().saturating_sub(2)..).unwrap_or(&[]);
    if s != frame {
        return Err(IoError::corrupt(format!(
            "{path}: a mask of {s:?} for frames of {frame:?}"
        )));
    }
    let t = super::dtype_of(path, &guard(path, || ds.datatype())?)?;
    if bytes_of(&s, t.size_bytes()).is_none_or(|b| b > limit) {
        return Err(IoError::too_large(format!("{path}: the mask is too large")));
    }
    let starts = vec![0; s.len()];
    let data = super::read_selection(ds, path, t, &starts, &s, limit)?;
    Array::new(s, data)
}
