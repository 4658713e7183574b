"""The fragment previews ``show`` prints and ``report`` puts in its tables."""

from __future__ import annotations

import pytest

from dsh_replay.cli.timeline import fragment_preview


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        (b'data: {"text":"Hi"}\n\n', 'data: {"text":"Hi"}\\n\\n'),
        ("é 日本 \t tab".encode(), "é 日本 \t tab"),
        (b"\x1b[31mred\x00", "\\x1b[31mred\\x00"),  # an ESC would colour the reader's terminal
        ("a\u2028b\x85c".encode(), "a\\u2028b\\x85c"),  # line breaks of other names break rows too
        (b"\xe6\x97", "\ufffd"),  # a character cut by the fragment boundary
        (b"\r\n", "\\r\\n"),
    ],
)
def test_previews_are_one_printable_line(data: bytes, shown: str) -> None:
    preview = fragment_preview(data)
    assert preview == shown
    assert preview.isprintable() or "\t" in preview
