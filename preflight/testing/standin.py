"""A stand-in for Paddle's launcher where Paddle is not installed: a `paddle.distributed.launch`
package whose `__main__` is the caller's text, so that `python -m paddle.distributed.launch`
runs as the watch's sampler finds a launcher (by its module, in its command line)."""

from __future__ import annotations

from pathlib import Path


def paddle_launcher(root: Path, main: str) -> Path:
    """Writes the package under root with main as its `__main__`; returns the directory to
    put on PYTHONPATH."""
    pkg = root / "paddle" / "distributed" / "launch"
    pkg.mkdir(parents=True)
    for d in (pkg.parent.parent, pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(main)
    return root
