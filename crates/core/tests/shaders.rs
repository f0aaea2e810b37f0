//! Every WGSL shader parses and validates with naga: no GPU needed, so a
//! broken shader fails fast on any machine.

#[test]
fn every_shader_validates() {
    assert!(!gpuscope_core::shaders::ALL.is_empty());
    for (name, source) in gpuscope_core::shaders::ALL {
        let module = naga::front::wgsl::parse_str(source)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    }
}
