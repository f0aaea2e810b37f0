"""The notebook-style example in docs/python_example.py runs from top to
bottom (its own asserts check its answers)."""

import pathlib
import runpy

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "python_example.py"


def test_docs_example_runs(capsys):
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "sources" in out and "pixels replaced" in out
