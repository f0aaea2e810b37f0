"""gpuscope.Pipeline: the chain clip -> threshold -> label -> regionprops
gives the answers of the functions one by one, and crosses the bus once
each way (the engine's byte counter)."""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.ndimage as ndi

import gpuscope
from gpuscope import measure, ndimage, stats

PROPS = ("label", "area", "bbox", "centroid", "intensity_mean", "intensity_max")


def sky(shape=(256, 256), seed=3):
    """Gaussian noise with a few bright sources."""
    rng = np.random.default_rng(seed)
    x = rng.normal(100, 5, shape).astype(np.float32)
    for _ in range(12):
        r, c = rng.integers(8, shape[0] - 8), rng.integers(8, shape[1] - 8)
        x[r - 2:r + 3, c - 2:c + 3] += rng.uniform(40, 200)
    return x


def chain():
    return (gpuscope.Pipeline().sigma_clip(sigma=3, maxiters=10).threshold(nsigma=5)
            .label().regionprops_table(properties=PROPS))


def one_by_one(x):
    mean, median, std = stats.sigma_clipped_stats(x, sigma=3, maxiters=10)
    labels, n = ndimage.label(x > median + 5 * std)
    return (mean, median, std), labels, n, measure.regionprops_table(labels, x, properties=PROPS)


def test_chain_equals_the_functions_one_by_one(engine):
    x = sky()
    found = chain().run(x)
    (mean, median, std), labels, n, table = one_by_one(x)
    assert (found["mean"], found["median"], found["std"]) == (mean, median, std)
    # The threshold's value in float32, as the image's values compare to it.
    assert found["threshold"] == pytest.approx(median + 5 * std, rel=1e-12)
    assert found["num_features"] == n >= 10
    np.testing.assert_array_equal(found["labels"], labels)
    want_labels, want_n = ndi.label(x > found["threshold"])
    np.testing.assert_array_equal(found["labels"], want_labels)
    assert list(found["table"]) == list(table)
    for k in table:
        np.testing.assert_allclose(found["table"][k], table[k], rtol=1e-6, err_msg=k)


def test_chain_crosses_the_bus_once_each_way():
    gpuscope.set_device(None)
    if gpuscope.device()["name"] == "cpu":
        pytest.skip("no GPU adapter: nothing crosses a bus")
    x = sky((512, 512))
    image = x.nbytes  # float32: the labels (int32) are as large
    chain().run(x)  # pipelines compiled, buffers pooled
    up0, down0 = gpuscope.bus_bytes()
    chain().run(x)
    up1, down1 = gpuscope.bus_bytes()
    up, down = up1 - up0, down1 - down0
    # The image once up, the labels once down, plus parameters and the
    # statistics and per-region sums (small).
    assert image <= up < image * 1.05, (up, image)
    assert image <= down < image * 1.05, (down, image)
    # One by one, the image goes up twice (clipping, measurements), the
    # mask (labelling) and the labels (measurements) too.
    one_by_one(x)
    up2, down2 = gpuscope.bus_bytes()
    assert up2 - up1 > 3 * image and down2 - down1 >= image, (up2 - up1, down2 - down1)


def test_chain_on_the_cpu_counts_nothing():
    gpuscope.set_device("cpu")
    try:
        assert gpuscope.bus_bytes() == (0, 0)
        assert chain().run(sky())["num_features"] >= 10
    finally:
        gpuscope.set_device(None)


def test_structure_and_workshop(engine):
    x = sky(seed=5)
    s = ndi.generate_binary_structure(2, 2)
    found = (gpuscope.Pipeline().sigma_clip(workshop=True).threshold(nsigma=5).label(structure=s)
             .run(x))
    assert "table" not in found
    want, n = ndi.label(x > found["threshold"], structure=s)
    assert found["num_features"] == n > 0
    np.testing.assert_array_equal(found["labels"], want)
    _, _, std = stats.sigma_clipped_stats(x, workshop=True)
    assert found["threshold"] == pytest.approx(5 * std, rel=1e-12)


def test_only_the_resident_chain_is_offered():
    with pytest.raises(NotImplementedError, match="sigma_clip -> threshold -> label"):
        gpuscope.Pipeline().threshold()
    with pytest.raises(NotImplementedError, match="resident"):
        gpuscope.Pipeline().sigma_clip().label()
    with pytest.raises(NotImplementedError, match="fewer steps"):
        gpuscope.Pipeline().sigma_clip().threshold().run(sky())
    with pytest.raises(AttributeError, match="perimeter"):
        gpuscope.Pipeline().sigma_clip().threshold().label().regionprops_table(properties=("perimeter",))
    with pytest.raises(ValueError, match="nsigma"):
        gpuscope.Pipeline().sigma_clip().threshold(nsigma=float("inf")).label().run(sky())
    assert repr(chain()) == "Pipeline(sigma_clip -> threshold -> label -> regionprops_table)"


CHILD = """
import sys, time, numpy as np, gpuscope
if sys.argv[1] == "cpu":
    gpuscope.set_device("cpu")
x = np.random.default_rng(0).random((48, 384, 384), dtype=np.float32)
gpuscope.ndimage.median_filter(x[:4, :64, :64], size=3)
print("started", flush=True)
for _ in range(100):
    gpuscope.ndimage.median_filter(x, size=9)
print("done", flush=True)
"""


@pytest.mark.parametrize("device", ["gpu", "cpu"])
def test_ctrl_c_interrupts_a_long_call(device):
    # The child's Ctrl-C as a terminal gives it, whatever this process
    # inherited: a shell starting the tests in the background without job
    # control ignores SIGINT, and so would the child.
    p = subprocess.Popen([sys.executable, "-c", CHILD, device], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert p.stdout.readline().strip() == "started", p.stderr.read()
        time.sleep(1.0)  # well inside the first long call
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        waited = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
    # Python re-raises an uncaught KeyboardInterrupt as SIGINT: no crash.
    assert p.returncode in (1, -signal.SIGINT) and "KeyboardInterrupt" in err, (p.returncode, err)
    assert "done" not in out
    assert waited < 2.0, f"the interrupt took {waited:.2f} s to return control"
