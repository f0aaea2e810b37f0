//! The decoder on the GPU (`shaders/decode/bslz4.wgsl`): the compressed
//! chunks are uploaded with a table of their blocks, one workgroup decodes
//! each block, and a four-word status says whether any stream was damaged.

use bytemuck::{Pod, Zeroable};

use super::{ChunkLayout, check_element_size, damaged};
use crate::engine::{Gpu, Recorder};
use crate::error::{Error, Result};
use crate::shaders::Shader;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    entries: u32,
    elem: u32,
    cutoff: u32,
    _pad1: u32,
}

/// One block (or raw tail) as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct Entry {
    src: u32,
    src_len: u32,
    dst: u32,
    dst_len: u32,
}

/// `Entry::dst_len`'s flag for raw bytes.
const RAW: u32 = 1 << 31;

/// Decoded bytes of a block the workgroup variant holds (its scratch).
const WORKGROUP_BLOCK_BYTES: usize = 8192;

/// Offsets in the kernel are u32 and its bounds arithmetic multiplies word
/// counts by 4: the buffers of one batch stay under 2 GiB.
const MAX_BATCH_BYTES: u64 = 1 << 31;

/// The kernel's error codes (status word 2), as messages.
const CODES: [(u32, &str); 5] = [
    (
        1,
        "the LZ4 stream ends inside a token, length, literal run or offset",
    ),
    (2, "a literal run or match goes past the end of the block"),
    (4, "a match offset of 0 or before the start of the block"),
    (8, "the LZ4 stream ends before the block is filled"),
    (16, "a block outside the buffers or the kernel's limits"),
];

/// `Params::cutoff` when counts are not cut.
const NO_CUTOFF: u32 = u32::MAX;

/// The status words before a decode: no failure, no lowest failed entry.
const STATUS_CLEAR: [u32; 4] = [0, u32::MAX, 0, 0];

/// Where a batch's chunks are in the input and the output, and the table.
struct Plan {
    input: Vec<u8>,
    entries: Vec<Entry>,
    /// (chunk, block) of each entry, for messages.
    origin: Vec<(usize, usize)>,
    /// Offset and decoded bytes of each chunk in the output.
    placed: Vec<(usize, usize)>,
    output_bytes: usize,
    large: bool,
}

fn align4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

fn u32_of(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::InvalidInput(format!("{n} bytes exceed a batch")))
}

impl Plan {
    /// Reads every chunk's layout (all sizes checked here) and lays the
    /// chunks out one after another, each from a multiple of 4 bytes.
    /// Chunks are named `first + k` in messages when `several`.
    fn new(
        chunks: &[&[u8]],
        (first, several): (usize, bool),
        elem: usize,
        limit: usize,
    ) -> Result<Plan> {
        check_element_size(elem)?;
        let layouts = chunks
            .iter()
            .enumerate()
            .map(|(k, c)| {
                ChunkLayout::parse(c, elem, limit).map_err(|e| match e {
                    Error::InvalidInput(m) if several => {
                        Error::InvalidInput(format!("chunk {}: {m}", first + k))
                    }
                    e => e,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let input_bytes: usize = chunks.iter().map(|c| align4(c.len())).sum();
        let output_bytes: usize = layouts.iter().map(|l| align4(l.total)).sum();
        if (input_bytes.max(output_bytes) as u64) >= MAX_BATCH_BYTES {
            return Err(Error::InvalidInput(format!(
                "{} chunks of {input_bytes} compressed and {output_bytes} decoded bytes: decode fewer at once (under 2 GiB)",
                chunks.len()
            )));
        }
        let mut input = Vec::with_capacity(input_bytes);
        let mut entries = Vec::new();
        let mut origin = Vec::new();
        let mut placed = Vec::with_capacity(chunks.len());
        let mut out_at = 0usize;
        for (k, (chunk, layout)) in chunks.iter().zip(&layouts).enumerate() {
            let in_at = input.len();
            input.extend_from_slice(chunk);
            input.resize(align4(input.len()), 0);
            for (i, b) in layout.blocks.iter().enumerate() {
                entries.push(Entry {
                    src: u32_of(in_at + b.src)?,
                    src_len: u32_of(b.src_len)?,
                    dst: u32_of(out_at + b.dst)?,
                    dst_len: u32_of(b.dst_len)?,
                });
                origin.push((first + k, i));
            }
            let (at, len) = layout.tail;
            if len > 0 {
                entries.push(Entry {
                    src: u32_of(in_at + at)?,
                    src_len: u32_of(len)?,
                    dst: u32_of(out_at + layout.total - len)?,
                    dst_len: u32_of(len)? | RAW,
                });
                origin.push((first + k, layout.blocks.len()));
            }
            placed.push((out_at, layout.total));
            out_at += align4(layout.total);
        }
        let large = layouts
            .iter()
            .any(|l| l.largest_block() > WORKGROUP_BLOCK_BYTES);
        Ok(Plan {
            input,
            entries,
            origin,
            placed,
            output_bytes: out_at,
            large,
        })
    }
}

/// How a [`Resident`] is made: chunk numbers for messages, whether it has
/// an output buffer of its own, the count cutoff.
struct How {
    first: usize,
    several: bool,
    own_output: bool,
    cutoff: Option<u32>,
}

/// Compressed chunks resident on the device with their block table, and
/// the buffer they decode into: decode them as often as asked
/// ([`Resident::run`], the benchmark's loop), read them back
/// ([`Resident::read`]).
pub struct Resident {
    input: wgpu::Buffer,
    table: wgpu::Buffer,
    status: wgpu::Buffer,
    params: wgpu::Buffer,
    scratch: Option<wgpu::Buffer>,
    /// None: the caller's buffer ([`Resident::record_to`]).
    output: Option<wgpu::Buffer>,
    entries: u32,
    origin: Vec<(usize, usize)>,
    placed: Vec<(usize, usize)>,
    several: bool,
}

impl Resident {
    /// Uploads `chunks` (bitshuffle-LZ4, `elem`-byte elements) with their
    /// block table. `limit` bounds the decoded size a chunk header may
    /// declare. Every size is checked here, before anything runs.
    pub async fn new(gpu: &Gpu, chunks: &[&[u8]], elem: usize, limit: usize) -> Result<Resident> {
        let how = How {
            first: 0,
            several: chunks.len() > 1,
            own_output: true,
            cutoff: None,
        };
        Self::with(gpu, chunks, how, elem, limit).await
    }

    /// One frame's chunk of 4-byte counts, to be decoded into the caller's
    /// buffer ([`Resident::record_to`]) with counts above `cutoff` set to
    /// 0xffffffff (-1 as int32).
    pub(crate) async fn frame(
        gpu: &Gpu,
        chunk: &[u8],
        limit: usize,
        cutoff: Option<u32>,
    ) -> Result<Resident> {
        let how = How {
            first: 0,
            several: false,
            own_output: false,
            cutoff,
        };
        Self::with(gpu, &[chunk], how, 4, limit).await
    }

    async fn with(
        gpu: &Gpu,
        chunks: &[&[u8]],
        how: How,
        elem: usize,
        limit: usize,
    ) -> Result<Resident> {
        let (first, several) = (how.first, how.several);
        let plan = Plan::new(chunks, (first, several), elem, limit)?;
        let table_bytes = std::mem::size_of_val(plan.entries.as_slice()) as u64;
        let biggest = (plan.input.len() as u64)
            .max(plan.output_bytes as u64)
            .max(table_bytes);
        if biggest > gpu.max_binding_size() {
            return Err(Error::InvalidInput(format!(
                "decoding {} chunks needs a buffer of {biggest} bytes, over the device's binding limit of {} bytes: decode fewer chunks at once",
                chunks.len(),
                gpu.max_binding_size()
            )));
        }
        let mut taken: Vec<wgpu::Buffer> = Vec::new();
        let mut take = async |bytes: u64, what: &str| -> Result<wgpu::Buffer> {
            let b = gpu.storage(bytes.max(16), what).await?;
            taken.push(b.clone());
            Ok(b)
        };
        let made = async {
            let input = take(plan.input.len() as u64, "bslz4 input").await?;
            let table = take(table_bytes, "bslz4 table").await?;
            let status = take(16, "bslz4 status").await?;
            let output = match how.own_output {
                true => Some(take(plan.output_bytes as u64, "bslz4 output").await?),
                false => None,
            };
            let scratch = match plan.large {
                true => Some(take(plan.output_bytes as u64, "bslz4 scratch").await?),
                false => None,
            };
            Ok::<_, Error>((input, table, status, output, scratch))
        }
        .await;
        let (input, table, status, output, scratch) = match made {
            Ok(b) => b,
            Err(e) => {
                for b in taken {
                    gpu.recycle(b);
                }
                return Err(e);
            }
        };
        gpu.upload(&input, &plan.input);
        gpu.upload(&table, bytemuck::cast_slice(&plan.entries));
        let entries = u32_of(plan.entries.len())?;
        let params = gpu.uniform(&Params {
            entries,
            elem: elem as u32,
            cutoff: how.cutoff.unwrap_or(NO_CUTOFF),
            _pad1: 0,
        });
        Ok(Resident {
            input,
            table,
            status,
            params,
            scratch,
            output,
            entries,
            origin: plan.origin,
            placed: plan.placed,
            several,
        })
    }

    /// Clears the status words; decodes recorded after this are checked by
    /// the next [`Resident::check_status`].
    pub(crate) fn clear_status(&self, gpu: &Gpu) {
        gpu.upload(&self.status, bytemuck::cast_slice(&STATUS_CLEAR));
    }

    /// Records one decode of every chunk into the output buffer.
    pub(crate) fn record(&self, gpu: &Gpu, rec: &mut Recorder<'_>) -> Result<()> {
        let output = self
            .output
            .as_ref()
            .ok_or_else(|| Error::Device("a decode without its output buffer".into()))?;
        self.record_to(gpu, rec, output)
    }

    /// Records one decode of every chunk into `output` (at least as large
    /// as the decoded chunks, laid out as [`Resident::decoded`] says).
    pub(crate) fn record_to(
        &self,
        gpu: &Gpu,
        rec: &mut Recorder<'_>,
        output: &wgpu::Buffer,
    ) -> Result<()> {
        let mut buffers = vec![&self.params, &self.input, &self.table, output, &self.status];
        let shader = match &self.scratch {
            Some(s) => {
                buffers.push(s);
                Shader::DecodeBslz4Large
            }
            None => Shader::DecodeBslz4,
        };
        rec.dispatch_workgroups(
            &gpu.pipeline(shader, "decode")?,
            &buffers,
            u64::from(self.entries),
        )
    }

    /// The status words read back: an error naming the first damaged block
    /// when the kernel flagged any.
    pub(crate) fn check_status(&self, status: &[u8]) -> Result<()> {
        let Some((failed, first, what)) = failure(status)? else {
            return Ok(());
        };
        let (chunk, block) = self.origin.get(first as usize).copied().unwrap_or((0, 0));
        let chunk = if self.several {
            format!("chunk {chunk}, ")
        } else {
            String::new()
        };
        Err(damaged(format!(
            "{chunk}block {block} and {} more blocks failed on the GPU: {what}",
            failed - 1
        )))
    }

    /// Decodes every chunk `times` times on the device, waits for the
    /// last, and checks the status. Returns the kernel time in
    /// milliseconds where the adapter has timestamps.
    pub async fn run(&self, gpu: &Gpu, times: usize) -> Result<Option<f64>> {
        self.clear_status(gpu);
        let before = gpu.kernel_ns_total();
        let mut left = times;
        // Dispatches of one recording are timed while its query set has room.
        let per_recording = (crate::engine::MAX_TIMED_PASSES as usize / 2).max(1);
        while left > 0 {
            let n = left.min(per_recording);
            let mut rec = gpu.recorder();
            for _ in 0..n {
                self.record(gpu, &mut rec)?;
            }
            let pending = rec.submit_with_readback(&self.status, 16, None);
            let status = gpu.finish_with(pending, |b| Ok(b.to_vec())).await?;
            self.check_status(&status)?;
            left -= n;
        }
        let ns = before
            .zip(gpu.kernel_ns_total())
            .map(|(a, b)| b.saturating_sub(a));
        Ok(ns.map(|ns| ns as f64 / 1e6))
    }

    /// Where each chunk lands in the output: byte offset, decoded bytes.
    pub(crate) fn decoded(&self) -> &[(usize, usize)] {
        &self.placed
    }

    /// The four status words, read back with a result and handed to
    /// [`Resident::check_status`].
    pub(crate) fn status(&self) -> &wgpu::Buffer {
        &self.status
    }

    /// The decoded chunks, read back.
    pub async fn read(&self, gpu: &Gpu) -> Result<Vec<Vec<u8>>> {
        let output = self
            .output
            .as_ref()
            .ok_or_else(|| Error::Device("a decode without its output buffer".into()))?;
        let end = self.placed.last().map_or(0, |&(at, len)| at + len);
        let bytes = gpu.read(output, end as u64).await?;
        Ok(self
            .placed
            .iter()
            .map(|&(at, len)| bytes[at..at + len].to_vec())
            .collect())
    }

    /// Returns the buffers to the pool.
    pub fn free(self, gpu: &Gpu) {
        for b in [self.input, self.table, self.status] {
            gpu.recycle(b);
        }
        for b in [self.output, self.scratch].into_iter().flatten() {
            gpu.recycle(b);
        }
    }
}

/// The failed blocks, the first failed entry and what went wrong, from
/// the four status words; None when nothing failed.
fn failure(status: &[u8]) -> Result<Option<(u32, u32, String)>> {
    let words: Vec<u32> = status
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let [failed, first, codes, ..] = words[..] else {
        return Err(Error::Device("the decoder's status came back short".into()));
    };
    if failed == 0 {
        return Ok(None);
    }
    let what: Vec<&str> = CODES
        .iter()
        .filter(|(c, _)| codes & c != 0)
        .map(|(_, m)| *m)
        .collect();
    Ok(Some((failed, first, what.join("; "))))
}

/// [`Resident::check_status`] for frame `z` of a series, decoded by a
/// [`Resident::frame`] no longer held.
pub(crate) fn check_frame_status(status: &[u8], z: usize) -> Result<()> {
    match failure(status)? {
        None => Ok(()),
        Some((failed, _, what)) => Err(damaged(format!(
            "frame {z}: {failed} blocks failed on the GPU: {what}"
        ))),
    }
}

/// Decodes bitshuffle-LZ4 `chunks` of `elem`-byte elements on the GPU,
/// host to host: [`super::cpu::decode`]'s twin, chunk by chunk. `limit`
/// bounds the decoded size a chunk header may declare. Chunks go in
/// batches that fit the device's bindings.
pub async fn decode(
    gpu: &Gpu,
    chunks: &[&[u8]],
    elem: usize,
    limit: usize,
) -> Result<Vec<Vec<u8>>> {
    let budget = (gpu.max_binding_size().min(MAX_BATCH_BYTES - 1) as usize).max(1);
    let mut out = Vec::with_capacity(chunks.len());
    let mut start = 0;
    while start < chunks.len() {
        // Chunks while their compressed and declared decoded bytes fit.
        let (mut end, mut inb, mut outb) = (start, 0usize, 0usize);
        while end < chunks.len() {
            let c = chunks[end];
            let declared = c
                .get(..8)
                .map_or(0, |h| u64::from_be_bytes(h.try_into().unwrap_or([0; 8])));
            let declared = usize::try_from(declared).unwrap_or(usize::MAX);
            let (i, o) = (
                inb.saturating_add(align4(c.len())),
                outb.saturating_add(align4(declared.min(limit))),
            );
            if end > start && (i > budget || o > budget) {
                break;
            }
            (inb, outb, end) = (i, o, end + 1);
        }
        let batch = &chunks[start..end];
        let how = How {
            first: start,
            several: chunks.len() > 1,
            own_output: true,
            cutoff: None,
        };
        let resident = Resident::with(gpu, batch, how, elem, limit).await?;
        let decoded = async {
            resident.run(gpu, 1).await?;
            resident.read(gpu).await
        }
        .await;
        resident.free(gpu);
        out.extend(decoded?);
        start = end;
    }
    Ok(out)
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::DECODE_BSLZ4,
        "Params",
        [entries, elem, cutoff, _pad1]
    );
    mirror_layout!(
        entry_matches_wgsl,
        Entry,
        crate::shaders::DECODE_BSLZ4,
        "Entry",
        [src, src_len, dst, dst_len]
    );
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod kernel_checks {
    use super::*;
    use crate::GpuOptions;

    /// Table entries the host never writes, forced into the table: the
    /// kernel checks each against the buffers and its limits and flags it.
    #[test]
    fn entries_outside_the_buffers_are_flagged() {
        let gpu = pollster::block_on(Gpu::new(GpuOptions::default()))
            .expect("GPU tests need a Vulkan driver (apt-get install mesa-vulkan-drivers)");
        // 64 one-byte elements in one block of 64 literals.
        let data: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
        let mut stream = vec![0xf0, 64 - 15];
        stream.extend(super::super::cpu::shuffle(&data, 1));
        let mut chunk = 64u64.to_be_bytes().to_vec();
        chunk.extend_from_slice(&0u32.to_be_bytes());
        chunk.extend_from_slice(&(stream.len() as u32).to_be_bytes());
        chunk.extend_from_slice(&stream);
        let r = pollster::block_on(Resident::new(&gpu, &[&chunk], 1, 1 << 20)).unwrap();
        pollster::block_on(r.run(&gpu, 1)).unwrap();
        assert_eq!(pollster::block_on(r.read(&gpu)).unwrap(), vec![data]);
        let good = Entry {
            src: 16,
            src_len: stream.len() as u32,
            dst: 0,
            dst_len: 64,
        };
        let bad = [
            Entry {
                dst: 1 << 30,
                ..good
            },
            Entry { dst: 2, ..good },
            Entry {
                src_len: 1 << 30,
                ..good
            },
            Entry {
                src: u32::MAX,
                ..good
            },
            Entry {
                dst_len: 60,
                ..good
            },
            Entry {
                dst_len: 1 << 30,
                ..good
            },
            Entry {
                dst_len: 8 | RAW,
                ..good
            },
        ];
        for e in bad {
            gpu.upload(&r.table, bytemuck::bytes_of(&e));
            let m = pollster::block_on(r.run(&gpu, 1)).unwrap_err().to_string();
            assert!(m.contains("outside the buffers"), "{e:?}: {m}");
        }
        r.free(&gpu);
    }

    /// A frame decoded with the count cutoff: counts above it (in blocks
    /// and in the raw tail) become 0xffffffff, the others stay.
    #[test]
    fn the_count_cutoff_masks_counts_above_it() {
        let gpu = pollster::block_on(Gpu::new(GpuOptions::default()))
            .expect("GPU tests need a Vulkan driver (apt-get install mesa-vulkan-drivers)");
        // 2053 counts: one block of 2048 and a raw tail of 5.
        let counts: Vec<u32> = (0..2053u32).map(|i| (i * 7919) % 1000).collect();
        let bytes: Vec<u8> = counts.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut stream = vec![0xf0];
        let mut more = 8192 - 15;
        while more >= 255 {
            stream.push(255);
            more -= 255;
        }
        stream.push(more as u8);
        stream.extend(super::super::cpu::shuffle(&bytes[..8192], 4));
        let mut chunk = (bytes.len() as u64).to_be_bytes().to_vec();
        chunk.extend_from_slice(&0u32.to_be_bytes());
        chunk.extend_from_slice(&(stream.len() as u32).to_be_bytes());
        chunk.extend_from_slice(&stream);
        chunk.extend_from_slice(&bytes[8192..]);
        assert_eq!(
            super::super::cpu::decode(&chunk, 4, 1 << 20).unwrap(),
            bytes
        );
        let r = pollster::block_on(Resident::frame(&gpu, &chunk, 1 << 20, Some(300))).unwrap();
        let out = pollster::block_on(gpu.storage(bytes.len() as u64, "test")).unwrap();
        r.clear_status(&gpu);
        let mut rec = gpu.recorder();
        r.record_to(&gpu, &mut rec, &out).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got: Vec<u32> = pollster::block_on(gpu.read_vec(&out, counts.len())).unwrap();
        let want: Vec<u32> = counts
            .iter()
            .map(|&v| if v > 300 { u32::MAX } else { v })
            .collect();
        assert_eq!(got, want);
        gpu.recycle(out);
        r.free(&gpu);
    }
}
