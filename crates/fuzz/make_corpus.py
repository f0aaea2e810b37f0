#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (crates/fuzz/corpus/TARGET/): small
valid files of each format copied from crates/io/tests/fixtures, a tiny CBF
(plain and gzipped) and .raw inputs made here, and CLI command lines.
Standard library only; rerun after changing a fixture."""
import gzip
import shutil
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIX = HERE.parent / "io" / "tests" / "fixtures"
OUT = HERE / "corpus"


def put(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def copy(target, pattern, max_bytes=16384):
    for p in sorted(FIX.glob(pattern)):
        if p.stat().st_size <= max_bytes:
            put(target, p.name, p.read_bytes())


def mini_cbf(fast, slow, values):
    """A Pilatus-style CBF with byte_offset data (8-, 16- and 32-bit deltas)."""
    data = bytearray()
    prev = 0
    for x in values:
        d = x - prev
        prev = x
        if -127 <= d <= 127:
            data += struct.pack("<b", d)
        elif -32767 <= d <= 32767:
            data += b"\x80" + struct.pack("<h", d)
        else:
            data += b"\x80" + struct.pack("<h", -32768) + struct.pack("<i", d)
    head = (
        "###CBF: VERSION 1.5\r\ndata_test\r\n"
        '_array_data.header_convention "PILATUS_1.2"\r\n'
        "_array_data.header_contents\r\n;\r\n# Detector: TEST 1M\r\n"
        "# Exposure_time 0.1 s\r\n# Wavelength 1.0 A\r\n;\r\n"
        "_array_data.data\r\n;\r\n--CIF-BINARY-FORMAT-SECTION--\r\n"
        "Content-Type: application/octet-stream;\r\n"
        '     conversions="x-CBF_BYTE_OFFSET"\r\n'
        "Content-Transfer-Encoding: BINARY\r\n"
        f"X-Binary-Size: {len(data)}\r\nX-Binary-ID: 1\r\n"
        'X-Binary-Element-Type: "signed 32-bit integer"\r\n'
        "X-Binary-Element-Byte-Order: LITTLE_ENDIAN\r\n"
        f"X-Binary-Number-of-Elements: {fast * slow}\r\n"
        f"X-Binary-Size-Fastest-Dimension: {fast}\r\n"
        f"X-Binary-Size-Second-Dimension: {slow}\r\n"
        "X-Binary-Size-Padding: 4095\r\n\r\n"
    )
    return (head.encode() + b"\x0c\x1a\x04\xd5" + bytes(data)
            + b"\r\n--CIF-BINARY-FORMAT-SECTION----\r\n;\r\n")


def zarr_seed(kind, meta, chunk):
    """The zarr target's input: format byte, u16 metadata length, metadata, chunk."""
    meta = meta.encode()
    return bytes([kind]) + struct.pack("<H", len(meta)) + meta + chunk


def v3_meta(shape, chunks, dtype="uint8", codecs='[{"name": "bytes"}]'):
    return (
        '{"zarr_format": 3, "node_type": "array", "shape": %s, "data_type": "%s", '
        '"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": %s}}, '
        '"chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": %s}'
        % (list(shape), dtype, list(chunks), codecs)
    )


def zarr_hostile():
    """Seeds of the zarr target for links, special files and declared sizes
    (the hdf5 target's are written by crates/io/tests/hostile.rs)."""
    # Key c/0/0 (key index 1) of a 2-D array; storage in bits 4-5: a file,
    # a symlink out of the store, a FIFO, a symlink to /dev/zero.
    meta = v3_meta([2, 4], [1, 4])
    for storage, name in enumerate(["file", "symlink_out", "fifo", "dev_zero"]):
        put("zarr", f"hostile_{name}", zarr_seed(storage << 4 | 1 << 1, meta, b"root:x:0"))
    # A chunk that is zstd's magic-number error on "root": the error must
    # not quote it.
    put("zarr", "hostile_zstd_leak",
        zarr_seed(1 << 1, v3_meta([2, 4], [1, 4], codecs='[{"name": "bytes"}, {"name": "zstd"}]'),
                  b"root:x:0:0::/root"))
    # Declared sizes: 10^12 frames of 64 x 80, a first chunk of the wrong
    # size; a 8000 x 8000 gzip chunk of zeros (64 MiB from 62 KiB).
    put("zarr", "hostile_declared_frames",
        zarr_seed(0, v3_meta([10**12, 64, 80], [1, 64, 80], "uint16"), b"\0" * 16))
    put("zarr", "hostile_gzip_bomb",
        zarr_seed(1 << 1, v3_meta([8000, 8000], [8000, 8000],
                                  codecs='[{"name": "bytes"}, {"name": "gzip"}]'),
                  gzip.compress(bytes(8000 * 8000), 9, mtime=0)))


def main():
    # The hdf5 and zarr seeds are written by other means too (see
    # zarr_hostile): only the targets rewritten whole here are cleared.
    for t in ["npy", "tiff", "png", "jpeg", "fits", "cbf", "raw", "argv"]:
        shutil.rmtree(OUT / t, ignore_errors=True)
    zarr_hostile()
    copy("npy", "npy/*.npy", 4096)
    copy("tiff", "tiff/*.tif")
    copy("png", "png/*.png")
    copy("jpeg", "png/*.jpg")
    copy("fits", "fits/*.fits", 8640)
    values = [0, 5, -1, 100, 127, -128, 30000, -30000, 40000, 7, -1, 3]
    cbf = mini_cbf(4, 3, values)
    put("cbf", "mini.cbf", cbf)
    put("cbf", "mini.cbf.gz", gzip.compress(cbf, mtime=0))
    put("raw", "u16.raw", b'{"shape": [2, 3, 2], "dtype": "uint16"}\0'
        + struct.pack("<12H", *range(12)))
    put("raw", "f32_be.raw", b'{"shape": [2, 2], "dtype": "float32", '
        b'"byte_order": "big", "offset": 4}\0' + b"\0" * 4
        + struct.pack(">4f", 1.0, -2.0, 3.5, 0.0))
    argv = [
        "clip\0a.npy\0--sigma\0003\0--maxiters\0none\0--cenfunc\0mean",
        "threshold\0a.npy\0b.npy\0--nsigma\0005\0--workshop",
        "sources\0a.npy\0--catalogue\0c.csv\0--nsigma\0-2",
        "convolve\0a.npy\0b.npy\0--gaussian\0001,2,3\0--truncate\0004\0--mode\0wrap",
        "median\0a.npy\0b.npy\0--size\0003,3\0--mode\0constant\0--cval\0nan",
        "outliers\0a.npy\0b.npy\0--diff\0010\0--mode\0both",
        "label\0a.npy\0b.npy\0--connectivity\0002\0--background\0-1",
        "spots\0a.cbf\0--kernel-size\0003,3\0--gain\0001.5",
        "slic\0a.png\0b.npy\0--n-segments\0100\0--sigma\0001",
        "--memory-budget\00016M\0--cpu\0clip\0a.npy",
        "--raw-shape\0004,4\0--raw-dtype\0uint16\0info\0a.raw",
    ]
    for i, a in enumerate(argv):
        put("argv", f"argv{i:02}", a.encode())


if __name__ == "__main__":
    main()
