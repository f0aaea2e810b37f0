//! Threshold on the GPU against the CPU reference: exact for every dtype,
//! including values that f32 cannot tell apart, NaN/inf and chunking.

mod common;

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::Samples;
use gpuscope_core::segment::threshold::{cpu, threshold_above};

fn both(samples: Samples<'_>, value: f64) -> Vec<bool> {
    let c = cpu::threshold_above(samples, value).unwrap();
    for device in [gpu(), tiny_gpu()] {
        let g = pollster::block_on(threshold_above(device, samples, value)).unwrap();
        assert_eq!(g, c, "{samples:?} > {value}");
    }
    c
}

#[test]
fn every_dtype_is_compared_exactly() {
    let r = noise(70_001, 3);
    let u8s: Vec<u8> = r.iter().map(|v| (v * 256.0) as u8).collect();
    let i8s: Vec<i8> = r.iter().map(|v| (v * 256.0 - 128.0) as i8).collect();
    let u16s: Vec<u16> = r.iter().map(|v| (v * 65536.0) as u16).collect();
    let i16s: Vec<i16> = r.iter().map(|v| (v * 65536.0 - 32768.0) as i16).collect();
    let u32s: Vec<u32> = r.iter().map(|v| 16_777_200 + (v * 40.0) as u32).collect();
    let i32s: Vec<i32> = r.iter().map(|v| (v * 4e9 - 2e9) as i32).collect();
    let f32s: Vec<f32> = r.iter().map(|&v| v as f32).collect();
    let u64s: Vec<u64> = r.iter().map(|v| (1 << 60) + (v * 1000.0) as u64).collect();
    let i64s: Vec<i64> = r.iter().map(|v| (v * 2000.0) as i64 - 1000).collect();
    let f64s: Vec<f64> = r.iter().map(|v| 1.0 + v * 1e-12).collect();
    for v in [-1e30, -1.5, 0.0, 0.5, 127.0, 200.5, 16_777_217.0, 1e30] {
        both(Samples::U8(&u8s), v);
        both(Samples::I8(&i8s), v);
        both(Samples::U16(&u16s), v);
        both(Samples::I16(&i16s), v);
        both(Samples::U32(&u32s), v);
        both(Samples::I32(&i32s), v);
        both(Samples::F32(&f32s), v);
        both(Samples::I64(&i64s), v);
    }
    // Values f32 would merge: only an exact comparison splits them.
    let m = both(Samples::U32(&u32s), 16_777_220.0);
    assert!(m.iter().any(|&b| b) && m.iter().any(|&b| !b));
    let m = both(Samples::F64(&f64s), 1.0 + 0.5e-12);
    assert!(m.iter().any(|&b| b) && m.iter().any(|&b| !b));
    let m = both(Samples::U64(&u64s), (1u64 << 60) as f64 + 600.0);
    assert!(m.iter().any(|&b| b) && m.iter().any(|&b| !b));
}

#[test]
fn nan_and_infinities_follow_numpy() {
    let v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1.0];
    assert_eq!(
        both(Samples::F32(&v), 0.0),
        [false, true, false, false, false, true]
    );
    assert_eq!(
        both(Samples::F32(&v), f64::NEG_INFINITY),
        [false, true, false, true, true, true]
    );
    assert_eq!(both(Samples::F32(&v), f64::INFINITY), [false; 6]);
    let d = [f64::NAN, f64::INFINITY, -1.0];
    assert_eq!(both(Samples::F64(&d), -2.0), [false, true, true]);
    assert!(pollster::block_on(threshold_above(gpu(), Samples::F32(&v), f64::NAN)).is_err());
}

#[test]
fn tiny_and_empty_inputs() {
    assert_eq!(both(Samples::U8(&[5]), 4.0), [true]);
    assert_eq!(both(Samples::U8(&[]), 4.0), Vec::<bool>::new());
}

/// The streamed chain's host threshold (`segment::host::above`) equals the
/// CPU reference on float32 data, NaN and infinities included.
#[test]
fn host_threshold_equals_the_reference() {
    use gpuscope_core::segment::host;
    let mut v: Vec<f32> = noise(10_007, 9)
        .iter()
        .map(|&x| (x * 10.0 - 5.0) as f32)
        .collect();
    v.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0]);
    for value in [0.0, -0.0, 1.25, 1.0000001, f64::INFINITY, f64::NEG_INFINITY] {
        let want = cpu::threshold_above(Samples::F32(&v), value).unwrap();
        let mut got = vec![true];
        host::above(&v, value, &mut got).unwrap();
        assert!(got[0], "appends to what `out` holds");
        assert_eq!(&got[1..], &want[..], "> {value}");
    }
    assert!(host::above(&v, f64::NAN, &mut Vec::new()).is_err());
}
