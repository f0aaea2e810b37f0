// Bitshuffle-LZ4 chunks (HDF5 filter 32008) decoded on the GPU: one
// workgroup per block. Invocation 0 decodes the block's LZ4 stream into a
// zeroed scratch (the block's bit rows); then the whole workgroup undoes
// the bit transpose, 8 elements per invocation at a time, into `output`.
//
// The host walked every chunk's header and block sizes (crates/core/src/
// decode/mod.rs) and wrote one table entry per block and per raw tail;
// the kernel checks the entries against the buffers and each LZ4 stream
// against its entry, and flags what fails in `status` instead of writing
// outside the block. The scratch comes from the variant prepended to this
// file: workgroup memory (bslz4_workgroup.wgsl) or a storage buffer laid
// out like the output (bslz4_storage.wgsl, blocks over 8 KiB).

struct Params {
    entries: u32,
    // Bytes per element: 1, 2, 4 or 8.
    elem: u32,
    // 4-byte elements above this become 0xffffffff (-1 as int32: the
    // count cutoff of a detector series); 0xffffffff: none.
    cutoff: u32,
    _pad1: u32,
}

struct Entry {
    // Byte offset of the block's LZ4 stream (or raw bytes) in `input`.
    src: u32,
    src_len: u32,
    // Byte offset of its decoded bytes in `output`: a multiple of 4.
    dst: u32,
    // Decoded bytes; RAW set: the bytes are copied as they are.
    dst_len: u32,
}

const RAW: u32 = 0x80000000u;
const WG: u32 = 64u;

// Error codes, OR-ed into status[2].
const E_INPUT: u32 = 1u;   // the stream ends inside a token, length, literal run or offset
const E_OUTPUT: u32 = 2u;  // a literal run or match runs past the block's decoded size
const E_OFFSET: u32 = 4u;  // a match offset of 0 or before the block's start
const E_SHORT: u32 = 8u;   // the stream ends before the block is filled
const E_ENTRY: u32 = 16u;  // an entry outside the buffers or the kernel's limits

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> input: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<Entry>;
@group(0) @binding(3) var<storage, read_write> output: array<u32>;
// [0] failed entries, [1] the lowest failed entry, [2] the error codes.
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>, 4>;

// The block's error code, set by invocation 0.
var<workgroup> failed: u32;

fn in_byte(p: u32) -> u32 {
    return (input[p >> 2u] >> ((p & 3u) * 8u)) & 0xffu;
}

// Bytes p..p+3 of the input, at any alignment (all four exist).
fn in_word(p: u32) -> u32 {
    let s = (p & 3u) * 8u;
    let lo = input[p >> 2u];
    if (s == 0u) {
        return lo;
    }
    return (lo >> s) | (input[(p >> 2u) + 1u] << (32u - s));
}

// Byte p of the block in scratch (`base` is the block's first word).
fn sc_byte(base: u32, p: u32) -> u32 {
    return (scratch_load(base + (p >> 2u)) >> ((p & 3u) * 8u)) & 0xffu;
}

// Bytes p..p+3 of the block in scratch, at any alignment (all written).
fn sc_word(base: u32, p: u32) -> u32 {
    let s = (p & 3u) * 8u;
    let lo = scratch_load(base + (p >> 2u));
    if (s == 0u) {
        return lo;
    }
    return (lo >> s) | (scratch_load(base + (p >> 2u) + 1u) << (32u - s));
}

// The scratch was zeroed and each byte is written once: zeros need no
// write, others are OR-ed into their word.
fn put_byte(base: u32, p: u32, v: u32) {
    if (v != 0u) {
        scratch_or(base + (p >> 2u), v << ((p & 3u) * 8u));
    }
}

// An LZ4 length continuation from ip: bytes added while they are 255
// (saturated, so that a long run cannot wrap around).
struct Length {
    value: u32,
    ip: u32,
    ok: bool,
}

fn more_length(start: u32, end: u32, value: u32) -> Length {
    var ip = start;
    var v = value;
    loop {
        if (ip >= end) {
            return Length(v, ip, false);
        }
        let b = in_byte(ip);
        ip += 1u;
        v = min(v + b, 0x80000000u);
        if (b != 255u) {
            break;
        }
    }
    return Length(v, ip, true);
}

// Copies `n` literal bytes from input byte ip to block byte op: bytes up
// to a word boundary of the block, whole words, then the rest.
fn copy_literals(base: u32, ip: u32, op: u32, n: u32) {
    var k = 0u;
    loop {
        if (k >= n || ((op + k) & 3u) == 0u) {
            break;
        }
        put_byte(base, op + k, in_byte(ip + k));
        k += 1u;
    }
    loop {
        if (n - k < 4u) {
            break;
        }
        scratch_store(base + ((op + k) >> 2u), in_word(ip + k));
        k += 4u;
    }
    loop {
        if (k >= n) {
            break;
        }
        put_byte(base, op + k, in_byte(ip + k));
        k += 1u;
    }
}

// Copies a match of `n` bytes from `offset` bytes back to block byte op.
fn copy_match(base: u32, op: u32, offset: u32, n: u32) {
    let back = op - offset;
    // A repeat of zero bytes (the empty high bit rows of small counts)
    // leaves the zeroed scratch as it is.
    let period = min(offset, n);
    if (period <= 8u) {
        var zero = true;
        for (var k = 0u; k < period; k += 1u) {
            zero = zero && sc_byte(base, back + k) == 0u;
        }
        if (zero) {
            return;
        }
    }
    var k = 0u;
    if (offset >= 4u) {
        // Four bytes at a time never read bytes not yet written.
        loop {
            if (k >= n || ((op + k) & 3u) == 0u) {
                break;
            }
            put_byte(base, op + k, sc_byte(base, back + k));
            k += 1u;
        }
        loop {
            if (n - k < 4u) {
                break;
            }
            scratch_store(base + ((op + k) >> 2u), sc_word(base, back + k));
            k += 4u;
        }
    }
    loop {
        if (k >= n) {
            break;
        }
        put_byte(base, op + k, sc_byte(base, back + k));
        k += 1u;
    }
}

// Decodes the LZ4 stream at input bytes [src, src + len) into `cap` bytes
// of scratch from word `base`: 0, or an error code. The checks are
// lz4_flex's, so both decoders accept and refuse the same streams. Every
// turn of the loop reads a token, so it ends within `len` turns.
fn lz4_block(src: u32, len: u32, base: u32, cap: u32) -> u32 {
    let end = src + len;
    var ip = src;
    var op = 0u;
    loop {
        if (ip >= end) {
            return E_INPUT;
        }
        let token = in_byte(ip);
        ip += 1u;
        var literals = token >> 4u;
        if (literals == 15u) {
            let l = more_length(ip, end, literals);
            if (!l.ok) {
                return E_INPUT;
            }
            literals = l.value;
            ip = l.ip;
        }
        if (literals > end - ip) {
            return E_INPUT;
        }
        if (literals > cap - op) {
            return E_OUTPUT;
        }
        copy_literals(base, ip, op, literals);
        ip += literals;
        op += literals;
        if (ip >= end) {
            break;
        }
        if (end - ip < 2u) {
            return E_INPUT;
        }
        let offset = in_byte(ip) | (in_byte(ip + 1u) << 8u);
        ip += 2u;
        if (offset == 0u) {
            return E_OFFSET;
        }
        var length = (token & 15u) + 4u;
        if (length == 19u) {
            let l = more_length(ip, end, length);
            if (!l.ok) {
                return E_INPUT;
            }
            length = l.value;
            ip = l.ip;
        }
        if (length > cap - op) {
            return E_OUTPUT;
        }
        if (offset > op) {
            return E_OFFSET;
        }
        copy_match(base, op, offset, length);
        op += length;
    }
    if (op != cap) {
        return E_SHORT;
    }
    return 0u;
}

// A 4-byte element through the count cutoff.
fn cut(v: u32) -> u32 {
    return select(v, 0xffffffffu, v > params.cutoff);
}

// Raw bytes copied word by word (the tail of a chunk: under 8 elements);
// a last partial word is padded with zeros.
fn copy_raw(e: Entry, len: u32) {
    let words = (len + 3u) / 4u;
    for (var w = 0u; w < words; w += 1u) {
        var v = 0u;
        for (var t = 0u; t < 4u; t += 1u) {
            let k = 4u * w + t;
            if (k < len) {
                v = v | (in_byte(e.src + k) << (8u * t));
            }
        }
        if (params.elem == 4u) {
            v = cut(v);
        }
        output[min(e.dst / 4u + w, arrayLength(&output) - 1u)] = v;
    }
}

// Whether the entry stays inside the buffers and the kernel's limits.
fn entry_fits(e: Entry, len: u32, raw: bool) -> bool {
    let in_bytes = arrayLength(&input) * 4u;
    let out_bytes = arrayLength(&output) * 4u;
    let elem_ok = params.elem >= 1u && params.elem <= 8u;
    let inside = elem_ok && e.src <= in_bytes && e.src_len <= in_bytes - e.src
        && e.dst <= out_bytes && len <= out_bytes - e.dst && (e.dst & 3u) == 0u;
    if (raw) {
        return inside && e.src_len == len;
    }
    return inside && len % (8u * params.elem) == 0u && scratch_fits(e.dst / 4u, len);
}

// The 8x8 bit transpose of bytes x (rows 0-3) and y (rows 4-7): byte m of
// the result is column m (bitshuffle's TRANS_BIT_8X8 on two halves).
fn transpose8(xy: vec2<u32>) -> vec2<u32> {
    var x = xy.x;
    var y = xy.y;
    var t = (x ^ (x >> 7u)) & 0x00AA00AAu;
    x = x ^ t ^ (t << 7u);
    t = (y ^ (y >> 7u)) & 0x00AA00AAu;
    y = y ^ t ^ (t << 7u);
    t = (x ^ (x >> 14u)) & 0x0000CCCCu;
    x = x ^ t ^ (t << 14u);
    t = (y ^ (y >> 14u)) & 0x0000CCCCu;
    y = y ^ t ^ (t << 14u);
    t = (x ^ (y << 4u)) & 0xF0F0F0F0u;
    x = x ^ t;
    y = y ^ (t >> 4u);
    return vec2<u32>(x, y);
}

// Elements 8g..8g+7 of the block at scratch word `base`, `row` bytes per
// bit row, written to output word `out` on.
fn unshuffle_group(base: u32, row: u32, g: u32, out: u32) {
    let elem = params.elem;
    // Byte b of the 8 elements, one vec2 (elements 0-3, 4-7) per b.
    var bytes: array<vec2<u32>, 8>;
    for (var b = 0u; b < elem; b += 1u) {
        var x = 0u;
        var y = 0u;
        for (var j = 0u; j < 4u; j += 1u) {
            x = x | (sc_byte(base, (8u * b + j) * row + g) << (8u * j));
            y = y | (sc_byte(base, (8u * b + j + 4u) * row + g) << (8u * j));
        }
        bytes[b] = transpose8(vec2<u32>(x, y));
    }
    // Output byte q of the 8 elements is byte q % elem of element q / elem.
    let limit = arrayLength(&output);
    for (var w = 0u; w < 2u * elem; w += 1u) {
        var v = 0u;
        for (var t = 0u; t < 4u; t += 1u) {
            let q = 4u * w + t;
            let m = q / elem;
            let half = select(bytes[q % elem].x, bytes[q % elem].y, m >= 4u);
            v = v | (((half >> (8u * (m & 3u))) & 0xffu) << (8u * t));
        }
        if (elem == 4u) {
            v = cut(v);
        }
        output[min(out + w, limit - 1u)] = v;
    }
}

fn flag(index: u32, code: u32) {
    atomicAdd(&status[0], 1u);
    atomicMin(&status[1], index);
    atomicOr(&status[2], code);
}

@compute @workgroup_size(64)
fn decode(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let index = wid.x + wid.y * groups.x;
    if (index >= params.entries) {
        return;
    }
    let e = table[index];
    let raw = (e.dst_len & RAW) != 0u;
    let len = e.dst_len & ~RAW;
    let fits = entry_fits(e, len, raw);
    let base = scratch_base(e.dst / 4u);
    if (fits && !raw) {
        for (var w = lid; w < len / 4u; w += WG) {
            scratch_store(base + w, 0u);
        }
    }
    scratch_sync();
    if (lid == 0u) {
        var code = 0u;
        if (!fits) {
            code = E_ENTRY;
        } else if (raw) {
            copy_raw(e, len);
        } else {
            code = lz4_block(e.src, e.src_len, base, len);
        }
        if (code != 0u) {
            flag(index, code);
        }
        failed = code;
    }
    scratch_sync();
    let code = workgroupUniformLoad(&failed);
    if (code != 0u || raw) {
        return;
    }
    let row = len / (8u * params.elem);
    for (var g = lid; g < row; g += WG) {
        unshuffle_group(base, row, g, e.dst / 4u + 2u * params.elem * g);
    }
}
