// Bitshuffle-LZ4 chunks (HDF5 filter 32008) decoded on the GPU: one
// workgroup per block. Invocation 0 parses the block's LZ4 stream one
// sequence ahead of half the workgroup, which copies each literal run and
// match word by word into a zeroed scratch (the block's bit rows); then the
// workgroup undoes the bit transpose into `output`.
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

// One LZ4 sequence, parsed: a literal run, then a match (none after the
// last literal run: length 0).
struct Seq {
    // Input byte of the literal run, the block byte it goes to, its length.
    lit: u32,
    op: u32,
    literals: u32,
    // The match after it: bytes back and length.
    offset: u32,
    length: u32,
}

// Invocation 0 parses sequence t into seqs[t % 2] while the second half of
// the workgroup copies sequence t - 1 from the other slot; ctl[t % 2] says
// how step t ended. Two of each, so that step t + 1 never writes what step
// t's barrier published and others may still read.
var<workgroup> seqs: array<Seq, 2>;
var<workgroup> ctl: array<u32, 2>;

// ctl bits besides the error code (shifted up by 2).
const PARSED: u32 = 1u;

// The parser's state between sequences.
struct Parse {
    ip: u32,
    op: u32,
    code: u32,
    done: bool,
}

// Parses one sequence of the stream ending at input byte `end` from input
// byte ip and block byte op into seqs[slot]; the block holds `cap` bytes.
// The checks are lz4_flex's, in its order, so both decoders accept and
// refuse the same streams. Every sequence reads a token, so a stream of
// `len` bytes is done within `len` sequences.
fn parse_one(ip0: u32, op0: u32, end: u32, cap: u32, slot: u32) -> Parse {
    var ip = ip0;
    var op = op0;
    if (ip >= end) {
        return Parse(ip, op, E_INPUT, true);
    }
    let token = in_byte(ip);
    ip += 1u;
    var literals = token >> 4u;
    if (literals == 15u) {
        let l = more_length(ip, end, literals);
        if (!l.ok) {
            return Parse(ip, op, E_INPUT, true);
        }
        literals = l.value;
        ip = l.ip;
    }
    if (literals > end - ip) {
        return Parse(ip, op, E_INPUT, true);
    }
    if (literals > cap - op) {
        return Parse(ip, op, E_OUTPUT, true);
    }
    let lit = ip;
    let lop = op;
    ip += literals;
    op += literals;
    if (ip >= end) {
        seqs[slot] = Seq(lit, lop, literals, 0u, 0u);
        return Parse(ip, op, select(E_SHORT, 0u, op == cap), true);
    }
    if (end - ip < 2u) {
        return Parse(ip, op, E_INPUT, true);
    }
    let offset = in_byte(ip) | (in_byte(ip + 1u) << 8u);
    ip += 2u;
    if (offset == 0u) {
        return Parse(ip, op, E_OFFSET, true);
    }
    var length = (token & 15u) + 4u;
    if (length == 19u) {
        let l = more_length(ip, end, length);
        if (!l.ok) {
            return Parse(ip, op, E_INPUT, true);
        }
        length = l.value;
        ip = l.ip;
    }
    if (length > cap - op) {
        return Parse(ip, op, E_OUTPUT, true);
    }
    if (offset > op) {
        return Parse(ip, op, E_OFFSET, true);
    }
    seqs[slot] = Seq(lit, lop, literals, offset, length);
    return Parse(ip, op + length, 0u, false);
}

// Writes bytes [lo, hi) of block word w (hi - lo <= 4), their values in
// `v`. Each byte is written once into the zeroed scratch: zeros need no
// write, a whole word is stored, a part OR-ed in (its other bytes are
// another sequence's).
fn put_word(base: u32, w: u32, lo: u32, hi: u32, v: u32) {
    if (v == 0u) {
        return;
    }
    if (hi - lo == 4u) {
        scratch_store(base + w, v);
    } else {
        scratch_or(base + w, v);
    }
}

// Copies sequence `s`, its literal run and match together, one word per
// invocation of `lanes` at a time (this is `lane`). A match `offset` bytes
// back repeats the `offset` bytes before it: byte k of the match is byte
// k % offset of those. Those of this sequence's literal run are read from
// the input (other invocations write them now), the rest from the scratch
// (written in earlier steps).
fn copy_seq(base: u32, s: Seq, lane: u32, lanes: u32) {
    let start = s.op + s.literals;
    let stop = start + s.length;
    if (stop == s.op) {
        return;
    }
    let d = max(s.offset, 1u);
    let back = start - min(s.offset, start);
    let last = (stop - 1u) >> 2u;
    for (var w = (s.op >> 2u) + lane; w <= last; w += lanes) {
        let lo = max(4u * w, s.op);
        let hi = min(4u * w + 4u, stop);
        var v = 0u;
        var r = (max(lo, start) - start) % d;
        if (hi - lo == 4u && hi <= start) {
            v = in_word(s.lit + lo - s.op);
        } else if (hi - lo == 4u && lo >= start && r + 4u <= d && back + r + 4u <= s.op) {
            v = sc_word(base, back + r);
        } else {
            for (var p = lo; p < hi; p += 1u) {
                var q = p;
                if (p >= start) {
                    q = back + r;
                    r += 1u;
                    if (r == d) {
                        r = 0u;
                    }
                }
                var b = 0u;
                if (q >= s.op) {
                    b = in_byte(s.lit + q - s.op);
                } else {
                    b = sc_byte(base, q);
                }
                v = v | (b << ((p & 3u) * 8u));
            }
        }
        put_word(base, w, lo, hi, v);
    }
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

// Elements 32h..32h+31 of a block of 4-byte elements (the Eiger case)
// whose bit rows are whole words (`rw` words each), written to output word
// `out` on: word h of each of the 32 bit rows holds byte u of group 4h+u,
// so a word is read where unshuffle_group reads four bytes.
fn unshuffle4(base: u32, rw: u32, h: u32, out: u32) {
    var words: array<u32, 32>;
    for (var r = 0u; r < 32u; r += 1u) {
        words[r] = scratch_load(base + r * rw + h);
    }
    let limit = arrayLength(&output);
    let at = vec4<u32>(0u, 8u, 16u, 24u);
    for (var u = 0u; u < 4u; u += 1u) {
        // Elements 0-3 and 4-7 of group 4h+u, byte b added per turn.
        var lo = vec4<u32>(0u);
        var hi = vec4<u32>(0u);
        for (var b = 0u; b < 4u; b += 1u) {
            var x = 0u;
            var y = 0u;
            for (var j = 0u; j < 4u; j += 1u) {
                x = x | (((words[8u * b + j] >> (8u * u)) & 0xffu) << (8u * j));
                y = y | (((words[8u * b + j + 4u] >> (8u * u)) & 0xffu) << (8u * j));
            }
            // Byte m of t.x (t.y) is byte b of element m (m + 4).
            let t = transpose8(vec2<u32>(x, y));
            lo = lo | (((vec4<u32>(t.x) >> at) & vec4<u32>(0xffu)) << vec4<u32>(8u * b));
            hi = hi | (((vec4<u32>(t.y) >> at) & vec4<u32>(0xffu)) << vec4<u32>(8u * b));
        }
        let o = out + 8u * u;
        for (var m = 0u; m < 4u; m += 1u) {
            output[min(o + m, limit - 1u)] = cut(lo[m]);
            output[min(o + 4u + m, limit - 1u)] = cut(hi[m]);
        }
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
    if (lid == 0u) {
        failed = select(0u, E_ENTRY, !fits);
        if (fits && raw) {
            copy_raw(e, len);
        }
    }
    scratch_sync();
    // Step t: invocation 0 parses sequence t while invocations WG/2 on
    // (another subgroup where subgroups have 32 or fewer) copy sequence
    // t - 1, then a barrier. A step without a new sequence is the last, so
    // the loop ends within the stream's length in steps.
    var ip = e.src;
    var op = 0u;
    var parsing = fits && !raw;
    var have = false;
    var t = 0u;
    loop {
        if (lid == 0u) {
            var c = 0u;
            if (parsing) {
                let p = parse_one(ip, op, e.src + e.src_len, len, t % 2u);
                ip = p.ip;
                op = p.op;
                parsing = !p.done;
                c = (p.code << 2u) | select(PARSED, 0u, p.code != 0u);
            }
            ctl[t % 2u] = c;
        }
        if (have && lid >= WG / 2u) {
            copy_seq(base, seqs[(t + 1u) % 2u], lid - WG / 2u, WG / 2u);
        }
        scratch_publish();
        let c = workgroupUniformLoad(&ctl[t % 2u]);
        if (lid == 0u && c >= 4u) {
            failed = c >> 2u;
        }
        if ((c & PARSED) == 0u) {
            break;
        }
        have = true;
        t += 1u;
    }
    let code = workgroupUniformLoad(&failed);
    if (lid == 0u && code != 0u) {
        flag(index, code);
    }
    if (code != 0u || raw) {
        return;
    }
    let row = len / (8u * params.elem);
    if (params.elem == 4u && row % 4u == 0u) {
        for (var h = lid; h < row / 4u; h += WG) {
            unshuffle4(base, row / 4u, h, e.dst / 4u + 32u * h);
        }
        return;
    }
    for (var g = lid; g < row; g += WG) {
        unshuffle_group(base, row, g, e.dst / 4u + 2u * params.elem * g);
    }
}
