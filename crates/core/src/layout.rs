//! Rust mirrors of WGSL structs (the uniforms every kernel reads) must have
//! the struct's WGSL layout: same size, members at the same offsets. Each
//! module that mirrors a struct checks it with [`mirror_layout!`], against
//! the layout naga computes from the shader source that is shipped.

/// Compares a Rust mirror's size and field offsets (in declaration order)
/// with the WGSL struct `name` of `source`.
pub(crate) fn check(source: &str, name: &str, size: usize, offsets: &[(&str, usize)]) {
    let module = match naga::front::wgsl::parse_str(source) {
        Ok(m) => m,
        Err(e) => panic!("{}", e.emit_to_string(source)),
    };
    let found = module.types.iter().find_map(|(_, ty)| match &ty.inner {
        naga::TypeInner::Struct { members, span } if ty.name.as_deref() == Some(name) => {
            Some((members.clone(), *span))
        }
        _ => None,
    });
    let Some((members, span)) = found else {
        panic!("no struct {name} in the shader");
    };
    let wgsl: Vec<(String, usize)> = members
        .iter()
        .map(|m| (m.name.clone().unwrap_or_default(), m.offset as usize))
        .collect();
    let rust: Vec<(String, usize)> = offsets.iter().map(|&(n, o)| (n.to_string(), o)).collect();
    // A Rust array field (`_pad: [u32; 3]`, `tiles: [u32; 3]`) may stand for
    // several WGSL members: every Rust field must start where a member
    // starts, and the sizes must agree (Pod mirrors have no hidden padding).
    let starts: Vec<usize> = wgsl.iter().map(|m| m.1).collect();
    let aligned = rust.iter().all(|(_, o)| starts.contains(o));
    assert!(
        aligned && span as usize == size && rust.first().map(|r| r.1) == Some(0),
        "WGSL struct {name} ({span} bytes): {wgsl:?}\nRust mirror ({size} bytes): {rust:?}"
    );
}

/// `mirror_layout!(test_name, RustType, shader_source, "WgslName", [fields...])`
/// adds a test that the listed fields (all of them, in order) sit where the
/// WGSL struct's members do.
macro_rules! mirror_layout {
    ($test:ident, $ty:ty, $source:expr, $name:literal, [$($field:ident),+ $(,)?]) => {
        #[test]
        fn $test() {
            $crate::layout::check(
                $source,
                $name,
                ::std::mem::size_of::<$ty>(),
                &[$((stringify!($field), ::std::mem::offset_of!($ty, $field))),+],
            );
        }
    };
}
pub(crate) use mirror_layout;
