"""The report as a person sees it: headless Chromium renders the page of bundled cassettes.

Skipped when no Chromium is on PATH; with DSH_REPLAY_REQUIRE_CHROMIUM=1 (as
``make report-screenshot`` sets it) a missing browser is a failure instead.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cli.report import write_report

ROOT = Path(__file__).resolve().parents[2]
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture
def chromium() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        if os.environ.get("DSH_REPLAY_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"DSH_REPLAY_REQUIRE_CHROMIUM=1 but none of {', '.join(BROWSERS)} is on PATH")
        pytest.skip(f"none of {', '.join(BROWSERS)} is on PATH")
    return found


def browse(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    # a profile of its own: a browser already open on the machine must not take the call over
    return subprocess.run([chromium, "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={tmp_path / 'profile'}",
                           *args], capture_output=True, timeout=120, check=True)


def pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, one bytes object per pixel) of an 8-bit RGB or RGBA PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    stream, idat = io.BytesIO(png[8:]), b""
    width = height = depth = colour = 0
    while True:
        length, kind = struct.unpack(">I4s", stream.read(8))
        data = stream.read(length)
        stream.read(4)  # CRC
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", data[:10])
        elif kind == b"IDAT":
            idat += data
        elif kind == b"IEND":
            break
    assert depth == 8 and colour in (2, 6), (depth, colour)
    step = 3 if colour == 2 else 4
    raw, row_size = zlib.decompress(idat), width * step
    previous, rows = bytearray(row_size), []
    for y in range(height):
        start = y * (row_size + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + row_size])
        for i in range(row_size):
            left = line[i - step] if i >= step else 0
            up, corner = previous[i], previous[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, [row[x:x + 3] for row in rows for x in range(0, row_size, step)]


def bundled_report(tmp_path: Path) -> Path:
    page = tmp_path / "report.html"
    code = write_report([ROOT / "cassettes" / "anthropic", ROOT / "cassettes" / "openai"], str(page), io.StringIO(),
                        routes=RouteTable.load())
    assert code == 0
    return page


def test_the_report_renders_to_a_picture_that_is_not_blank(chromium: str, tmp_path: Path) -> None:
    page, shot = bundled_report(tmp_path), tmp_path / "report.png"
    browse(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
    width, height, colours = pixels(shot.read_bytes())
    assert (width, height) == (1200, 1600)
    counts = Counter(colours)
    plain = counts.most_common(1)[0][1]  # the background's share
    ink = 1 - plain / len(colours)
    assert len(counts) > 20, "hardly any colours: was anything drawn?"
    assert ink > 0.03, f"only {ink:.1%} of the picture differs from its background"
    # the timelines' blue lines (#2563eb and its anti-aliased neighbours) are on screen
    assert any(pixel[2] > 200 and pixel[0] < 80 for pixel in colours)


def test_clicking_a_header_sorts_the_index(chromium: str, tmp_path: Path) -> None:
    page = bundled_report(tmp_path)
    text = page.read_text(encoding="utf-8")
    click = 'var th = document.querySelectorAll("table.index th")[3]; th.click(); th.click();'
    # the page's policy runs only scripts it names by hash: name the click too, and keep the page's own
    digest = base64.b64encode(hashlib.sha256(click.encode()).digest()).decode()
    assert text.count("script-src 'sha256-") == 1
    text = text.replace("script-src 'sha256-", f"script-src 'sha256-{digest}' 'sha256-")
    text = text.replace("</body>", f"<script>{click}</script></body>")
    clicked = tmp_path / "clicked.html"
    clicked.write_text(text, encoding="utf-8")
    dom = browse(chromium, tmp_path, "--dump-dom", clicked.as_uri()).stdout.decode()
    index = dom.split('<table class="index">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", index, flags=re.S)[1:]
    chunks = [int(re.findall(r'data-value="([^"]*)"', row)[3]) for row in rows]
    assert len(chunks) == text.count('<section class="case"') > 2
    assert chunks == sorted(chunks, reverse=True)  # clicked twice: descending
    assert 'aria-sort="descending"' in index
