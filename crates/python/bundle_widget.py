"""Copies the page's viewer modules (web/viewer.js and every module it
imports by a relative path) into the Python package, where the Jupyter
widget (gpuscope.show) loads them from. Run after a change of those files:

    python crates/python/bundle_widget.py

A test (crates/python/tests/test_widget.py) fails when the shipped copies
differ from web/, so the notebook never shows an older viewer than the page.
"""

import pathlib
import re
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
SHIPPED = pathlib.Path(__file__).resolve().parent / "python" / "gpuscope" / "_widget" / "web"
ENTRY = "viewer.js"
# Static `from './x.js'`, side-effect `import './x.js'` and dynamic
# `import('./x.js')`: the same pattern widget.js rewrites in the browser.
IMPORT = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.{1,2}/[^'"]+)\1""")


def closure(entry=ENTRY):
    """Paths (relative to web/, with '/') of `entry` and of every module it
    reaches through relative imports."""
    seen = []
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        text = (WEB / name).read_text(encoding="utf-8")
        base = pathlib.PurePosixPath(name).parent
        for _, spec in IMPORT.findall(text):
            parts = []
            for part in (base / spec).parts:
                if part == "..":
                    if not parts:
                        raise ValueError(f"{name} imports {spec}, outside web/")
                    parts.pop()
                elif part != ".":
                    parts.append(part)
            todo.append("/".join(parts))
    return sorted(seen)


def main(check=False):
    """Copies (or with check=True, lists the differences: the files that
    would change)."""
    want = closure()
    have = sorted(p.relative_to(SHIPPED).as_posix() for p in SHIPPED.rglob("*.js")) if SHIPPED.exists() else []
    stale = [f"{p} (no longer imported by {ENTRY})" for p in have if p not in want]
    changed = [p for p in want if not (SHIPPED / p).exists() or (SHIPPED / p).read_bytes() != (WEB / p).read_bytes()]
    if check:
        return [f"{p} differs from web/{p}" for p in changed] + stale
    for p in changed:
        (SHIPPED / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(WEB / p, SHIPPED / p)
    for p in have:
        if p not in want:
            (SHIPPED / p).unlink()
    return changed


if __name__ == "__main__":
    done = main(check="--check" in sys.argv)
    print("\n".join(done) if done else "the shipped viewer modules are those of web/")
