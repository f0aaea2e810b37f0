//! Every WGSL shader parses and validates with naga: no GPU needed, so a
//! broken shader fails fast on any machine.

fn validate(name: &str, source: &str) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{name}: {e:?}"));
}

#[test]
fn every_shader_validates() {
    assert!(!gpuscope_core::shaders::ALL.is_empty());
    for (name, source) in gpuscope_core::shaders::ALL {
        validate(name, source);
    }
}

/// The shaders generated on the host (what `cargo xtask wgsl` writes): every
/// median network size on every key template, the tiled and untiled boxes,
/// and the unrolled correlations.
#[test]
fn every_generated_shader_validates() {
    let generated = gpuscope_core::shaders::generated();
    let networks = generated
        .iter()
        .filter(|(_, s)| s.contains("fn network_select"))
        .count();
    // 49 1-D sizes, 6 squares and 6 other boxes, on three templates.
    assert_eq!(networks, 3 * (49 + 6 + 6));
    assert!(
        generated
            .iter()
            .any(|(_, s)| s.contains("fn median_network_tile"))
    );
    assert!(generated.iter().any(|(_, s)| s.contains("fn interior_sum")));
    let mut names: Vec<&str> = generated.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), generated.len(), "one file per shader");
    for (name, source) in &generated {
        validate(name, source);
    }
}
