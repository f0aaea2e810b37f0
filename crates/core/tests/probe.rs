//! The conformance probe that every device runs when it opens: the shipped
//! kernels pass on the test adapter, and a kernel that maps a boundary
//! wrongly is refused with a message naming the mode and the wrong answer.

mod common;

use gpuscope_core::{Error, Remedy, probe, shaders};

fn refusal(source: &str) -> Option<String> {
    match pollster::block_on(probe::check_source(common::gpu(), source)) {
        Ok(()) => None,
        Err(e @ Error::Nonconformant { .. }) => {
            // What to do is a typed remedy, worded by each front end.
            assert_eq!(e.remedies(), &[Remedy::OtherAdapter, Remedy::UseCpu]);
            Some(e.to_string())
        }
        Err(e) => panic!("the probe itself failed: {e}"),
    }
}

#[test]
fn the_shipped_kernels_pass_on_the_test_adapter() {
    assert_eq!(refusal(shaders::PROBE), None);
}

#[test]
fn a_wrong_boundary_mode_is_refused_with_what_it_got_wrong() {
    // wrap folded like nearest: right inside the array, wrong outside.
    let broken = shaders::PROBE.replacen(
        "case 3u: { // wrap",
        "case 3u: { return clamp(c, 0, n - 1); }\n        case 99u: { //",
        1,
    );
    assert_ne!(broken, shaders::PROBE, "the probe's wrap case moved");
    let message = refusal(&broken).expect("a wrong wrap mode is refused");
    assert!(message.contains("boundary mode wrap"), "{message}");
    assert!(
        !message.contains("--"),
        "a front end's words in the core: {message}"
    );
}

/// The remainder of a negative integer, which WGSL defines and GLSL does
/// not: the boundary code before it was made non-negative. It passes where
/// the backend follows WGSL (Vulkan, Metal, DX12, WebGPU); on GL the probe
/// must refuse it rather than let it give wrong edges.
#[test]
fn negative_remainders_are_refused_where_the_backend_does_not_define_them() {
    let old = r#"
fn map_coordinate(c: i32, n: i32, mode: u32) -> i32 {
    if (c >= 0 && c < n) {
        return c;
    }
    switch mode {
        case 0u: {
            let period = 2 * n;
            var r = c % period;
            if (r < 0) { r += period; }
            if (r >= n) { r = period - 1 - r; }
            return r;
        }
        case 1u: {
            if (n == 1) { return 0; }
            let period = 2 * n - 2;
            var r = c % period;
            if (r < 0) { r += period; }
            if (r >= n) { r = period - r; }
            return r;
        }
        case 2u: { return clamp(c, 0, n - 1); }
        case 3u: {
            var r = c % n;
            if (r < 0) { r += n; }
            return r;
        }
        default: { return -1; }
    }
}
"#;
    let probe_body = shaders::PROBE
        .split_once("// The conformance probe")
        .map(|(_, rest)| rest)
        .expect("the probe follows the boundary snippet");
    let source = format!("{old}\n// The conformance probe{probe_body}");
    let backend = common::gpu().summary().backend;
    let refused = refusal(&source);
    if backend == "Gl" {
        assert!(refused.is_some(), "GL accepted negative remainders");
    } else {
        assert_eq!(refused, None, "{backend} follows WGSL's remainder");
    }
}

/// The bandwidth probe's copies (f32 and vec4 words, one or several per
/// invocation) move every value, a count that does not fill the last
/// invocation's words included; bad widths are refused.
#[test]
fn the_copy_kernels_copy_every_value() {
    use gpuscope_core::bandwidth::{Width, copy, copy_ms};
    let g = common::gpu();
    let data: Vec<f32> = (0..4 * 1037).map(|i| i as f32 * 0.5 - 7.0).collect();
    for (width, per_thread) in [
        (Width::F32, 1),
        (Width::F32, 3),
        (Width::Vec4, 1),
        (Width::Vec4, 4),
    ] {
        let got = pollster::block_on(copy(g, &data, width, per_thread)).unwrap();
        assert_eq!(got, data, "{width:?} x{per_thread}");
        pollster::block_on(copy_ms(g, &data, width, per_thread, 2)).unwrap();
    }
    assert!(pollster::block_on(copy(g, &data[..5], Width::Vec4, 1)).is_err());
    assert!(pollster::block_on(copy(g, &data, Width::F32, 0)).is_err());
}
