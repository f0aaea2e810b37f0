"""Peak host memory of calls on arrays larger than the memory budget, held
to the bounds docs/memory.md states for Python. Each call runs in a fresh
interpreter: the input is made, the device opened and warmed on a tiny
array, the peak resident size reset (/proc/self/clear_refs), then the call;
the peak above the resident size before it is the call's own."""

import json
import subprocess
import sys
import textwrap

import pytest

MIB = 1 << 20

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads the peak resident size from /proc")


def peak_above(setup, call, budget):
    """Runs `setup` (defines x), a warm-up, then `call`; returns (result,
    peak resident bytes above the resident bytes before the call)."""
    script = textwrap.dedent("""
        import json, numpy as np, gpuscope
        from gpuscope import ndimage, stats
        gpuscope.set_device(memory_budget={budget})
        {setup}
        stats.sigma_clipped_stats(np.ones((4, 4), np.float32))
        ndimage.median_filter(np.ones((4, 4), np.uint16), 3)
        def status(key):
            for line in open("/proc/self/status"):
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = status("VmRSS")
        result = {call}
        print(json.dumps({{"result": result, "extra": status("VmHWM") - before}}))
    """).format(budget=budget, setup=setup, call=call)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["result"], out["extra"]


@pytest.mark.parametrize("dtype", ["float32", "uint16"])
def test_sigma_clipped_stats_beyond_the_budget_reads_in_place(dtype):
    astropy_stats = pytest.importorskip("astropy.stats").sigma_clipped_stats
    import numpy as np
    make = (f"x = np.random.default_rng(3).normal(1000, 30, 16 * {MIB})"
            f".astype(np.{dtype})\nx[::997] = 5000")
    got, extra = peak_above(make, "list(stats.sigma_clipped_stats(x))", 8 * MIB)
    namespace = {"np": np}
    exec(make, namespace)
    x = namespace["x"]
    want = astropy_stats(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # One slab of 1 Mi values and three 64 Ki-entry histograms (a few
    # MiB); before, the float32 words and the GPU's copies: 4x the input
    # (32 or 64 MiB here).
    assert extra < 16 * MIB, f"{extra / MIB:.0f} MiB above the input"


def test_median_of_an_image_beyond_the_budget_within_three_times_it():
    import numpy as np
    import scipy.ndimage as ndi
    make = "x = (np.random.default_rng(5).random((4096, 4096)) * 1000).astype(np.uint16)"
    got, extra = peak_above(make, "int(ndimage.median_filter(x, 3).sum(dtype=np.int64))",
                            8 * MIB)
    namespace = {"np": np}
    exec(make, namespace)
    assert got == int(ndi.median_filter(namespace["x"], 3).sum(dtype=np.int64))
    # The output (1x), twice the image more (keys made whole) and a fixed
    # part (device buffers of the chunks within the budget, pipelines),
    # measured at 30 MiB on an idle machine; 96 MiB allows for the
    # allocator arenas of a loaded one (docs/memory.md).
    assert extra < 3 * 32 * MIB + 96 * MIB, f"{extra / MIB:.0f} MiB above the 32 MiB input"


def test_sigma_clipped_stats_beyond_the_budget_with_a_mask():
    astropy_stats = pytest.importorskip("astropy.stats").sigma_clipped_stats
    import numpy as np
    make = ("rng = np.random.default_rng(4)\n"
            f"x = rng.normal(100, 10, 4 * {MIB}).astype(np.int32)\n"
            "m = rng.random(x.shape) < 0.1\n"
            "x[m] = 100000")
    got, _ = peak_above(make, "list(stats.sigma_clipped_stats(x, mask=m))", MIB)
    namespace = {"np": np}
    exec(make, namespace)
    want = astropy_stats(namespace["x"], mask=namespace["m"])
    np.testing.assert_allclose(got, want, rtol=1e-6)
