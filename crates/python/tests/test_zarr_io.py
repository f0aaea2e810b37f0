"""Zarr through gpuscope against zarr-python: stores zarr-python writes (v3
and v2, every codec gpuscope decodes, every numeric dtype) read by
gpuscope.io.read equal zarr's arrays; stores the command line writes read
by zarr-python equal the .npy the same command writes."""

import os
import pathlib
import subprocess
import zlib

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import (BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec,
                         TransposeCodec, ZstdCodec)

import gpuscope

REPO = pathlib.Path(__file__).resolve().parents[3]
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "bool"]


def sample(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("float"):
        return (rng.standard_normal(shape) * 1000).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


LAYOUTS = {
    # zarr-python's defaults for v3: zstd.
    "v3_default": dict(zarr_format=3),
    "v3_gzip_sharded": dict(zarr_format=3, shards=(2, 16, 24), chunks=(1, 8, 8),
                            compressors=[GzipCodec(level=1)]),
    "v3_transpose_big_crc": dict(zarr_format=3, filters=[TransposeCodec(order=(2, 0, 1))],
                                 serializer=BytesCodec(endian="big"),
                                 compressors=[ZstdCodec(level=1), Crc32cCodec()]),
    "v3_nested_sharding_index_start": dict(
        zarr_format=3, chunks=(2, 16, 24),
        serializer=ShardingCodec(chunk_shape=(1, 8, 12), codecs=[BytesCodec(), GzipCodec()],
                                 index_location="start"),
        compressors=None),
    # zarr-python's blosc: zstd with bit shuffle (v3), lz4 with byte shuffle (v2).
    "v3_blosc": dict(zarr_format=3, compressors=[BloscCodec()]),
    "v2_blosc_default": dict(zarr_format=2, compressors=numcodecs.Blosc()),
    "v2_blosc_blosclz_bitshuffle": dict(
        zarr_format=2, compressors=numcodecs.Blosc(cname="blosclz", shuffle=numcodecs.Blosc.BITSHUFFLE)),
    "v2_zlib": dict(zarr_format=2, compressors=numcodecs.Zlib(level=1)),
    "v2_zstd_order_f": dict(zarr_format=2, compressors=numcodecs.Zstd(level=1), order="F"),
    "v2_raw": dict(zarr_format=2, compressors=None),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_read_equals_zarr_python(tmp_path, layout, dtype):
    shape = (5, 30, 45)
    kw = dict(LAYOUTS[layout])
    kw.setdefault("chunks", (2, 16, 24))
    store = tmp_path / f"{layout}.zarr"
    z = zarr.create_array(store, shape=shape, dtype=dtype, fill_value=0, **kw)
    data = sample(dtype, shape, zlib.crc32(f"{layout} {dtype}".encode()))
    # One region left unwritten: those chunks read as the fill value.
    z[:, :, :24] = data[:, :, :24]
    z[:3, :, 24:] = data[:3, :, 24:]
    want = z[...]
    got = gpuscope.io.read(str(store))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def cli():
    """The command line built by `cargo test --workspace` (tests/all.sh runs
    it before this suite)."""
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    for profile in ["debug", "release"]:
        exe = target / profile / "gpuscope"
        if exe.exists():
            return str(exe)
    pytest.skip("the gpuscope command line is not built (cargo build --workspace)")


@pytest.mark.parametrize("dtype", ["uint16", "float32", "int32"])
def test_cli_outputs_read_by_zarr_python_equal_npy(tmp_path, dtype):
    exe = cli()
    data = sample(dtype, (6, 40, 50), 7)
    np.save(tmp_path / "in.npy", data)
    env = dict(os.environ, NODEVICE_SELECT="1")
    for out in ["out.zarr", "out.npy"]:
        subprocess.run([exe, "median", str(tmp_path / "in.npy"), str(tmp_path / out),
                        "--size", "1,3,3", "--memory-budget", "64K"],
                       check=True, env=env, capture_output=True)
    group = zarr.open_group(tmp_path / "out.zarr", mode="r")
    ms = group.attrs["ome"]["multiscales"][0]
    level = group[ms["datasets"][0]["path"]]
    assert level.chunks == (1, 40, 50)
    want = np.load(tmp_path / "out.npy")
    got = level[...]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # A 2-D output (the in-memory path) too.
    np.save(tmp_path / "plane.npy", data[0])
    for out in ["p.zarr", "p.npy"]:
        subprocess.run([exe, "median", str(tmp_path / "plane.npy"), str(tmp_path / out),
                        "--size", "3"], check=True, env=env, capture_output=True)
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "p.zarr" / "0", mode="r")[...],
                                  np.load(tmp_path / "p.npy"))
