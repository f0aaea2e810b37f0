"""The committed typing stubs are what the catalogue and the signatures
give today."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import generate_stubs  # noqa: E402


def test_stubs_are_current():
    assert generate_stubs.main(check=True) == []
