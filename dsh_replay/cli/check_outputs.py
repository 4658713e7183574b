"""What ``dsh-replay check`` writes besides its table: JUnit XML, GitHub annotations, the progress line."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..cassette.files import atomic_write

__all__ = ["Progress", "github_annotations", "junit_xml", "write_junit_xml"]

Row = dict[str, Any]


def junit_xml(rows: Sequence[Row]) -> bytes:
    """One ``testcase`` per case (classname: the route, name: the case), a ``failure`` per failing one."""
    import xml.etree.ElementTree as ET  # only a run that asks for the report pays for it

    failures = sum(1 for row in rows if not row["ok"])
    skipped = sum(1 for row in rows if row["ok"] and row.get("golden_only"))
    seconds = sum(row["seconds"] for row in rows)
    suite = ET.Element("testsuite", {
        "name": "dsh-replay check", "tests": str(len(rows)), "failures": str(failures), "errors": "0",
        "skipped": str(skipped), "time": f"{seconds:.3f}",
    })
    for row in rows:
        case = ET.SubElement(suite, "testcase", {
            "classname": row["route"] or "-", "name": row["case"], "file": row["path"],
            "time": f"{row['seconds']:.3f}",
        })
        if not row["ok"]:
            failure = ET.SubElement(case, "failure", {"message": row["verdict"]})
            failure.text = row["problem"]
        elif row.get("golden_only"):
            # a golden without its cassette tests no adapter: shown as skipped, never as a pass
            ET.SubElement(case, "skipped", {"message": row["verdict"]})
    root = ET.Element("testsuites", {"tests": suite.get("tests", "0"), "failures": str(failures)})
    root.append(suite)
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def write_junit_xml(path: Path, rows: Sequence[Row]) -> None:
    # atomic: a CI step that reads the report never sees half of it
    atomic_write(path, junit_xml(rows))


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(rows: Sequence[Row]) -> str:
    """One ``::error`` workflow command per failing case, at the file and line of its first problem."""
    lines = []
    for row in rows:
        if row["ok"]:
            continue
        where = row.get("where")
        file, line = (where[0], where[1]) if where else (row["path"], 1)
        title = f"dsh-replay check: {row['case']}"
        message = f"{row['verdict']}\n{row['problem']}" if row["problem"] else row["verdict"]
        lines.append(f"::error file={_escape_property(str(file))},line={int(line)},"
                     f"title={_escape_property(title)}::{_escape_data(message)}\n")
    return "".join(lines)


class Progress:
    """``[done/total] rate, ETA, case`` on one rewritten line of a terminal; nothing on anything else.

    Redrawn at most every ``interval`` seconds (a thousand writes to a
    terminal would cost more than the cases), and cleared at the end.
    """

    def __init__(self, stream: TextIO, total: int, *, clock: Callable[[], float] = time.monotonic,
                 interval: float = 0.1) -> None:
        self.stream, self.total, self.clock, self.interval = stream, total, clock, interval
        self.shown = _isatty(stream) and total > 0
        self.started = clock()
        self._drawn: float | None = None

    def update(self, done: int, label: str) -> None:
        if not self.shown:
            return
        now = self.clock()
        if self._drawn is not None and now - self._drawn < self.interval and done < self.total:
            return
        self._drawn = now
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = f", ETA {(self.total - done) / rate:.0f} s" if rate > 0 and done < self.total else ""
        speed = f" {rate:.0f} cases/s{eta}" if rate > 0 else ""
        self.stream.write(f"\r\033[K[{done}/{self.total}]{speed} {label}")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown and self._drawn is not None:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed stream, or a stand-in without isatty
        return False
