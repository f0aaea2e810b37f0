//! Bitshuffle-LZ4 decoding on the GPU against the CPU twin, bit for bit:
//! the real Eiger chunks of the fixtures (also against the io crate's
//! decoded frames), chunks compressed here (bit-shuffled by this file's
//! own transpose, LZ4 from lz4_flex) of 1, 2, 4 and 8-byte elements and
//! awkward sizes, and damaged chunks, which both decoders must refuse
//! alike, the GPU with a flagged failure rather than a wrong write.

mod common;

use gpuscope_core::decode::{ChunkLayout, cpu, gpu};
use gpuscope_io::hdf5::Hdf5Stack;

const LIMIT: usize = 1 << 30;

fn gpu_decode(chunks: &[&[u8]], elem: usize) -> gpuscope_core::Result<Vec<Vec<u8>>> {
    pollster::block_on(gpu::decode(common::gpu(), chunks, elem, LIMIT))
}

/// The bitshuffle transpose of one block, written from the format's
/// definition: bit `i` of row `8 * b + j` is bit `j` of byte `b` of
/// element `i`.
fn shuffle(data: &[u8], elem: usize) -> Vec<u8> {
    let n = data.len() / elem;
    let row = n / 8;
    let mut out = vec![0u8; data.len()];
    for i in 0..n {
        for b in 0..elem {
            for j in 0..8 {
                if data[i * elem + b] >> j & 1 == 1 {
                    out[(8 * b + j) * row + i / 8] |= 1 << (i % 8);
                }
            }
        }
    }
    out
}

/// A bitshuffle-LZ4 chunk of `data` (`elem`-byte elements) in blocks of
/// `block` elements (0: the header says 0, the library default).
fn compress(data: &[u8], elem: usize, block: usize) -> Vec<u8> {
    let n = data.len() / elem;
    let mut chunk = (data.len() as u64).to_be_bytes().to_vec();
    chunk.extend_from_slice(&((block * elem) as u32).to_be_bytes());
    // The decoders read a size of 0, or not a multiple of 8 elements, as
    // the library's default.
    let block = if block == 0 || !block.is_multiple_of(8) {
        8192 / elem
    } else {
        block
    };
    let mut done = 0;
    while n - done >= 8 {
        let count = block.min((n - done) / 8 * 8);
        let shuffled = shuffle(&data[done * elem..(done + count) * elem], elem);
        let c = lz4_flex::block::compress(&shuffled);
        chunk.extend_from_slice(&(c.len() as u32).to_be_bytes());
        chunk.extend_from_slice(&c);
        done += count;
    }
    chunk.extend_from_slice(&data[done * elem..]);
    chunk
}

/// Deterministic bytes (xorshift).
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// Detector-like counts: mostly 0-3, a few bright pixels and gaps at the
/// type's maximum, as little-endian `elem`-byte elements.
fn counts(n: usize, elem: usize, seed: u64) -> Vec<u8> {
    let r = random_bytes(2 * n, seed);
    let max = if elem == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * elem)) - 1
    };
    let mut out = Vec::with_capacity(n * elem);
    for i in 0..n {
        let v = match r[2 * i] {
            0 => max,
            1..=3 => u64::from(r[2 * i + 1]) * 97,
            x => u64::from(x % 4 == 0) + u64::from(x % 16 == 0),
        };
        out.extend_from_slice(&(v & max).to_le_bytes()[..elem]);
    }
    out
}

fn check_same(data: &[u8], chunk: &[u8], elem: usize, what: &str) {
    let cpu = cpu::decode(chunk, elem, LIMIT).unwrap_or_else(|e| panic!("{what}: CPU: {e}"));
    assert_eq!(cpu, data, "{what}: the CPU twin");
    let gpu = gpu_decode(&[chunk], elem).unwrap_or_else(|e| panic!("{what}: GPU: {e}"));
    assert!(gpu[0] == data, "{what}: the GPU differs from the data");
}

#[test]
fn real_eiger_chunks_decode_as_the_cpu_and_the_reader() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../io/tests/fixtures/hdf5");
    let fuzz = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/hdf5");
    for spec in [
        format!("{dir}/eiger_master.h5"),
        format!("{fuzz}/eiger_data_000001.h5::/entry/data/data"),
    ] {
        let mut s = Hdf5Stack::open(&spec).unwrap();
        assert!(s.frames_are_bslz4_chunks(), "{spec}");
        assert_eq!(s.dtype().size_bytes(), 4);
        let frames = s.shape()[0];
        let chunks: Vec<Vec<u8>> = (0..frames)
            .map(|z| s.read_frame_chunk(z).unwrap().expect("a filtered chunk"))
            .collect();
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        // Every frame in one batch, so chunks follow one another on the GPU.
        let decoded = gpu_decode(&refs, 4).unwrap();
        assert_eq!(decoded.len(), frames);
        for z in 0..frames {
            let read = s.read_slab(z, 1).unwrap();
            let gpuscope_io::ArrayData::U32(v) = read.data else {
                panic!("{spec}: not u32")
            };
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(
                cpu::decode(&chunks[z], 4, LIMIT).unwrap(),
                bytes,
                "{spec} {z}"
            );
            assert!(decoded[z] == bytes, "{spec}: frame {z} differs on the GPU");
            // Real data has more than one block and a chunk that is not
            // all zero.
            let layout = ChunkLayout::parse(&chunks[z], 4, LIMIT).unwrap();
            assert!(layout.blocks.len() > 1 && bytes.iter().any(|&b| b != 0));
        }
    }
}

#[test]
fn a_chunk_the_filter_cannot_decode_fails_on_both() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../io/tests/fixtures/hdf5");
    let mut s = Hdf5Stack::open(&format!("{dir}/broken_filter.h5::/data")).unwrap();
    assert!(s.frames_are_bslz4_chunks());
    let good = s.read_frame_chunk(0).unwrap().unwrap();
    let bad = s.read_frame_chunk(1).unwrap().unwrap();
    assert!(gpu_decode(&[&good], 4).is_ok());
    let cpu = cpu::decode(&bad, 4, LIMIT).unwrap_err().to_string();
    let gpu = gpu_decode(&[&good, &bad], 4).unwrap_err().to_string();
    assert!(cpu.contains("damaged"), "{cpu}");
    assert!(gpu.contains("chunk 1"), "{gpu}");
}

#[test]
fn compressed_here_every_element_size_and_length() {
    for elem in [1usize, 2, 4, 8] {
        let block = 8192 / elem;
        let lengths = [
            0,
            1,
            3,
            7,
            8,
            9,
            15,
            16,
            63,
            64,
            65,
            1001,
            block - 1,
            block,
            block + 13,
            3 * block + 7,
        ];
        let mut all: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (k, &n) in lengths.iter().enumerate() {
            for (p, data) in [
                random_bytes(n * elem, k as u64),
                counts(n, elem, k as u64),
                vec![0u8; n * elem],
                vec![0xffu8; n * elem],
                (0..n * elem).map(|i| (i / elem) as u8).collect(),
            ]
            .into_iter()
            .enumerate()
            {
                let chunk = compress(&data, elem, 0);
                let cpu = cpu::decode(&chunk, elem, LIMIT).unwrap();
                assert!(cpu == data, "CPU: elem {elem}, {n} elements, pattern {p}");
                all.push((data, chunk));
            }
        }
        // One batch: chunks of every length one after another.
        let chunks: Vec<&[u8]> = all.iter().map(|(_, c)| c.as_slice()).collect();
        let gpu = gpu_decode(&chunks, elem).unwrap();
        for (i, ((data, _), got)) in all.iter().zip(&gpu).enumerate() {
            assert!(
                got == data,
                "GPU: elem {elem}, chunk {i} of {} bytes",
                data.len()
            );
        }
    }
}

#[test]
fn block_sizes_other_than_the_default() {
    for elem in [1usize, 2, 4] {
        let data = counts(20_000 / elem + 5, elem, 7);
        // Small blocks, a block size the library replaces (not a multiple
        // of 8 elements), and blocks over the workgroup scratch (16 KiB
        // and 64 KiB: the storage variant).
        for block in [8, 64, 100, 16384 / elem, 65536 / elem] {
            check_same(
                &data,
                &compress(&data, elem, block),
                elem,
                &format!("elem {elem}, block {block}"),
            );
        }
    }
}

#[test]
fn an_eiger_like_frame_and_the_binding_limit() {
    // 1030 x 1065 u32 detector counts: 540 blocks and a raw tail.
    let data = counts(1030 * 1065, 4, 3);
    let chunk = compress(&data, 4, 0);
    assert!(chunk.len() < data.len() / 2);
    check_same(&data, &chunk, 4, "1030 x 1065 u32");
    // Bindings capped at 64 KiB: three frames go in separate batches, and
    // one too large for a binding is refused with the limit named.
    let small: Vec<Vec<u8>> = (0..3).map(|s| counts(9000, 4, s)).collect();
    let chunks: Vec<Vec<u8>> = small.iter().map(|d| compress(d, 4, 0)).collect();
    let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    let got = pollster::block_on(gpu::decode(common::tiny_gpu(), &refs, 4, LIMIT)).unwrap();
    assert_eq!(got, small);
    let e = pollster::block_on(gpu::decode(common::tiny_gpu(), &[&chunk], 4, LIMIT)).unwrap_err();
    assert!(e.to_string().contains("binding limit"), "{e}");
}

/// Both decoders accept a chunk with the same bytes, or both refuse it.
fn agree(chunk: &[u8], elem: usize, what: &str) -> bool {
    let cpu = cpu::decode(chunk, elem, LIMIT);
    let gpu = gpu_decode(&[chunk], elem);
    match (&cpu, &gpu) {
        (Ok(c), Ok(g)) => assert!(c == &g[0], "{what}: decoded differently"),
        (Err(_), Err(g)) => {
            let m = g.to_string();
            assert!(m.contains("damaged") && !m.contains('\n'), "{what}: {m}");
        }
        _ => panic!(
            "{what}: CPU {:?}, GPU {:?}",
            cpu.map(|_| ()),
            gpu.map(|_| ())
        ),
    }
    cpu.is_ok()
}

#[test]
fn damaged_chunks_fail_alike() {
    let elem = 2;
    let data = counts(300, elem, 11);
    // Blocks of 64 elements: four blocks and a tail of 44.
    let chunk = compress(&data, elem, 64);
    // Every truncation: the host walk or the kernel refuses it.
    for cut in 0..chunk.len() {
        assert!(!agree(&chunk[..cut], elem, &format!("cut at {cut}")));
    }
    // Every byte flipped: each outcome the same on both.
    let mut refused = 0;
    for at in 0..chunk.len() {
        let mut c = chunk.clone();
        c[at] ^= 0x5a;
        refused += usize::from(!agree(&c, elem, &format!("byte {at} flipped")));
    }
    eprintln!("refused {refused} of {}", chunk.len());
    assert!(refused > chunk.len() / 4, "only {refused} flips refused");
    // A header that declares more than the limit, a length not whole
    // elements.
    let mut c = chunk.clone();
    c[..8].copy_from_slice(&(1u64 << 40).to_be_bytes());
    assert!(
        gpu_decode(&[&c], elem)
            .unwrap_err()
            .to_string()
            .contains("declares")
    );
    c[..8].copy_from_slice(&601u64.to_be_bytes());
    assert!(gpu_decode(&[&c], elem).is_err());
}

/// A chunk of 8 one-byte elements whose single block is `stream`.
fn one_block(stream: &[u8]) -> Vec<u8> {
    let mut c = 8u64.to_be_bytes().to_vec();
    c.extend_from_slice(&8u32.to_be_bytes());
    c.extend_from_slice(&(stream.len() as u32).to_be_bytes());
    c.extend_from_slice(stream);
    c
}

#[test]
fn lz4_streams_that_overrun_are_flagged_by_the_kernel() {
    // The host's walk accepts these chunks; only the kernel sees the
    // stream. Each names what it does wrong.
    let cases: [(&[u8], &str); 6] = [
        // 8 literals: fine.
        (&[0x80, 1, 2, 3, 4, 5, 6, 7, 8], ""),
        // 15 + 200 literals announced, 8 given.
        (&[0xf0, 200, 1, 2, 3, 4, 5, 6, 7, 8], "ends inside"),
        // 9 literals into an 8-byte block.
        (
            &[0x90, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            "past the end of the block",
        ),
        // 1 literal, then a match of 4 + 15 + 255 + 3 bytes.
        (&[0x1f, 9, 1, 0, 255, 3, 0x00], "past the end of the block"),
        // A match at offset 0, then at offset 5 with one byte written.
        (&[0x10, 9, 0, 0, 0x30, 1, 2, 3], "offset"),
        // 4 literals and the stream ends: the block is not filled.
        (&[0x40, 1, 2, 3, 4], "before the block is filled"),
    ];
    for (stream, says) in cases {
        let chunk = one_block(stream);
        let ok = agree(&chunk, 1, &format!("{stream:?}"));
        assert_eq!(ok, says.is_empty(), "{stream:?}");
        if !ok {
            let m = gpu_decode(&[&chunk], 1).unwrap_err().to_string();
            assert!(
                m.contains("on the GPU") && m.contains(says),
                "{stream:?}: {m}"
            );
        }
    }
    let offset_5 = one_block(&[0x10, 9, 5, 0, 0x30, 1, 2, 3]);
    let m = gpu_decode(&[&offset_5], 1).unwrap_err().to_string();
    assert!(m.contains("before the start of the block"), "{m}");
}
