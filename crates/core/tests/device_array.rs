//! Arrays kept on the GPU between operations: every operation on a device
//! array gives what the same operation gives on host memory, bit for bit
//! (the same kernels), its input survives, and wrong inputs are refused
//! with a message.

mod common;

use common::{gpu, noise};
use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval, Outliers};
use gpuscope_core::filters::{self, Boundary, Filter, Mode, Output};
use gpuscope_core::keys::SampleVec;
use gpuscope_core::segment::{label, measure, on_device};
use gpuscope_core::{DeviceArray, Elements, Gpu, Samples};

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

fn read_f32(g: &Gpu, a: &DeviceArray) -> Vec<f32> {
    let mut out = vec![0f32; a.len()];
    block(a.read_into(g, &mut out)).unwrap();
    out
}

fn image(shape: &[usize], seed: u64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    noise(n, seed)
        .iter()
        .enumerate()
        .map(|(i, v)| (v * 10.0) as f32 + if i % 97 < 9 { 30.0 } else { 0.0 })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn upload_and_read_back_every_element_type() {
    let g = gpu();
    let shape = [3, 5, 7];
    let data = image(&shape, 1);
    let a = block(DeviceArray::from_f32(g, &data, &shape)).unwrap();
    assert_eq!(
        (a.shape(), a.elements(), a.bytes()),
        (&shape[..], Elements::F32, 420)
    );
    assert_eq!(bits(&read_f32(g, &a)), bits(&data));
    let labels: Vec<i32> = (0..105).map(|i| i % 7 - 1).collect();
    let l = block(DeviceArray::from_i32(g, &labels, &shape)).unwrap();
    let mut back = vec![0i32; 105];
    block(l.read_into(g, &mut back)).unwrap();
    assert_eq!(back, labels);
    // 105 mask bytes: not a whole number of words.
    let mask: Vec<bool> = (0..105).map(|i| i % 3 == 0).collect();
    let m = block(DeviceArray::from_bool(g, &mask, &shape)).unwrap();
    let mut bytes = vec![9u8; 105];
    block(m.read_into(g, &mut bytes)).unwrap();
    assert_eq!(bytes, mask.iter().map(|&b| u8::from(b)).collect::<Vec<_>>());
    for x in [a, l, m] {
        x.free(g);
    }
}

#[test]
fn filters_on_the_device_equal_the_host_path() {
    let g = gpu();
    for shape in [vec![61, 83], vec![9, 20, 31]] {
        let data = image(&shape, 2);
        let x = block(DeviceArray::from_f32(g, &data, &shape)).unwrap();
        let nd = shape.len();
        let kernel: Vec<f64> = (0..3usize.pow(nd as u32))
            .map(|i| (i as f64 - 4.0) * 0.1)
            .collect();
        let filters = [
            Filter::gaussian(nd, &vec![1.5; nd], 4.0).unwrap(),
            Filter::correlate(nd, &kernel, &vec![3; nd]).unwrap(),
            Filter::convolve(nd, &kernel, &vec![3; nd]).unwrap(),
        ];
        for f in &filters {
            for mode in [Mode::Reflect, Mode::Constant, Mode::Wrap] {
                let b = Boundary { mode, cval: 0.5 };
                let want = block(filters::apply(g, f, &data, &shape, b, Output::Float)).unwrap();
                let y = block(filters::apply_on_device(g, f, &x, b)).unwrap();
                assert_eq!(bits(&read_f32(g, &y)), bits(&want), "{shape:?} {mode:?}");
                y.free(g);
            }
        }
        // The input is left as it was.
        assert_eq!(bits(&read_f32(g, &x)), bits(&data));
        x.free(g);
    }
}

#[test]
fn median_and_outliers_on_the_device_equal_the_host_path() {
    let g = gpu();
    let shape = [70, 90];
    let mut data = image(&shape, 3);
    data[5] = f32::NAN;
    let x = block(DeviceArray::from_f32(g, &data, &shape)).unwrap();
    // A sorting network (3x3) and the bitwise search (9x9).
    for size in [3, 9] {
        let fp = Footprint::size(2, &[size, size]).unwrap();
        let b = Boundary {
            mode: Mode::Mirror,
            cval: 0.0,
        };
        let want = block(median::median_filter(
            g,
            Samples::F32(&data),
            &shape,
            &fp,
            b,
        ))
        .unwrap();
        let SampleVec::F32(want) = want else {
            panic!("f32 in, f32 out")
        };
        let y = block(median::median_on_device(g, &x, &fp, b, None)).unwrap();
        assert_eq!(bits(&read_f32(g, &y)), bits(&want), "size {size}");
        y.free(g);
    }
    let removal = OutlierRemoval::new(4.0, 3, Outliers::Bright).unwrap();
    let want = block(median::remove_outliers(
        g,
        Samples::F32(&data),
        &shape,
        &removal,
    ))
    .unwrap();
    let SampleVec::F32(want) = want else {
        panic!("f32 in, f32 out")
    };
    let fp = removal.footprint(2).unwrap();
    let y = block(median::median_on_device(
        g,
        &x,
        &fp,
        OutlierRemoval::boundary(),
        Some(&removal),
    ))
    .unwrap();
    assert_eq!(bits(&read_f32(g, &y)), bits(&want));
    y.free(g);
    x.free(g);
}

#[test]
fn threshold_label_and_regionprops_on_the_device_equal_the_host_path() {
    let g = gpu();
    for shape in [vec![120, 97], vec![12, 30, 41]] {
        let mut data = image(&shape, 4);
        data[3] = f32::NAN; // NaN is below every threshold
        let t = 8.5;
        let x = block(DeviceArray::from_f32(g, &data, &shape)).unwrap();
        let m = block(on_device::threshold_above(g, &x, t)).unwrap();
        let mask: Vec<bool> = data.iter().map(|&v| f64::from(v) > t).collect();
        let mut got = vec![0u8; mask.len()];
        block(m.read_into(g, &mut got)).unwrap();
        assert_eq!(got, mask.iter().map(|&b| u8::from(b)).collect::<Vec<_>>());
        for connectivity in 1..=shape.len() {
            let want = block(label::label(g, &mask, &shape, connectivity)).unwrap();
            let (l, count) = block(on_device::label(g, &m, connectivity)).unwrap();
            assert_eq!(count, want.count);
            assert!(count > 5, "the test image has regions");
            let mut labels = vec![0i32; mask.len()];
            block(l.read_into(g, &mut labels)).unwrap();
            assert_eq!(labels, want.labels);
            let regions = block(on_device::regionprops(g, &l, &x)).unwrap();
            let host = block(measure::regionprops(g, &want.labels, &data, &shape, count)).unwrap();
            assert_eq!(regions.len(), host.len());
            for (a, b) in regions.iter().zip(&host) {
                assert_eq!(format!("{a:?}"), format!("{b:?}"));
            }
            l.free(g);
        }
        m.free(g);
        x.free(g);
    }
}

fn err<T>(r: gpuscope_core::Result<T>) -> String {
    match r {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn wrong_inputs_are_refused_with_a_message() {
    let g = gpu();
    let shape = [8, 8];
    let data = image(&shape, 5);
    let x = block(DeviceArray::from_f32(g, &data, &shape)).unwrap();
    let m = block(on_device::threshold_above(g, &x, 5.0)).unwrap();
    assert!(err(block(on_device::label(g, &x, 1))).contains("takes a bool device array"));
    let f = Filter::gaussian(2, &[1.0, 1.0], 4.0).unwrap();
    let b = Boundary {
        mode: Mode::Reflect,
        cval: 0.0,
    };
    assert!(err(block(filters::apply_on_device(g, &f, &m, b))).contains("float32"));
    assert!(err(block(DeviceArray::from_f32(g, &data, &[8, 9]))).contains("shape"));
    let (l, _) = block(on_device::label(g, &m, 1)).unwrap();
    let y = block(DeviceArray::from_f32(g, &data[..56], &[7, 8])).unwrap();
    assert!(err(block(on_device::regionprops(g, &l, &y))).contains("shapes must match"));
    // Negative labels, and NaN in a region.
    let neg: Vec<i32> = (0..64).map(|i| if i == 9 { -2 } else { i % 3 }).collect();
    let nl = block(DeviceArray::from_i32(g, &neg, &shape)).unwrap();
    assert!(err(block(on_device::regionprops(g, &nl, &x))).contains("negative"));
    let mut nan = data.clone();
    nan[1] = f32::NAN;
    let nx = block(DeviceArray::from_f32(g, &nan, &shape)).unwrap();
    let ones = block(DeviceArray::from_i32(g, &[1; 64], &shape)).unwrap();
    assert!(err(block(on_device::regionprops(g, &ones, &nx))).contains("NaN"));
    let mut wrong = vec![0f32; 3];
    assert!(err(block(x.read_into(g, &mut wrong))).contains("asked of a float32 array"));
    for a in [x, m, l, y, nl, nx, ones] {
        a.free(g);
    }
}
