#!/usr/bin/env bash
# The Python package's tests: a virtual environment (target/py-venv) with
# the reference libraries, the package installed by pip from the repository
# root, then pytest against scipy, scikit-image and astropy.
#
# The package is built with the dev profile (opt-level 1, dependencies at 2:
# what `cargo test` builds, so CI reuses that build) instead of release,
# whose optimised build of every dependency costs minutes more on two cores.
# `pip install .` on a user's machine builds the release profile.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/py-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
  "maturin>=1.16,<2" pytest numpy scipy scikit-image astropy "dask[array]" distributed zarr anywidget ipykernel jupyter_client
# No build isolation: maturin is already in the environment (and CI is
# spared a second download of it).
echo "python: reference packages ready in $SECONDS s"
started=$SECONDS
PATH="$PWD/$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" \
  "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall .
echo "python: gpuscope built and installed in $((SECONDS - started)) s"

echo "reference versions: $("$venv/bin/python" -c '
import numpy, scipy, skimage, astropy, dask, distributed, zarr
print(f"numpy {numpy.__version__}, scipy {scipy.__version__}, scikit-image {skimage.__version__}, astropy {astropy.__version__}, dask {dask.__version__}, distributed {distributed.__version__}, zarr {zarr.__version__}")')"
export NODEVICE_SELECT=1
"$venv/bin/python" -m pytest -q -p no:cacheprovider crates/python/tests
