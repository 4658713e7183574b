"""``dsh-replay scan``: credentials in cassettes and goldens, in parsed values and in the raw text."""

from __future__ import annotations

import argparse
import base64
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

import orjson
import yaml

from ..cassette.secrets import Located, find_file_secrets
from ..errors import DshReplayError

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "run", "run_scan"]


def run_scan(paths: Sequence[str], out: TextIO) -> int:
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files += _files_under(path)
        elif path.is_file():
            files.append(path)
        else:
            raise DshReplayError(f"{path}: no such file or folder")
    hits = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for hit in find_file_secrets(text, _located_values(path, text)):
            hits += 1
            out.write(f"{path}: {hit}\n")
    if hits:
        out.write("remove them (scrub the header, query parameter or body) and rotate any real key\n")
    out.write(f"scanned {len(files)} file(s): {hits} secret(s) found\n")
    return 1 if hits else 0


_SCANNED = (".yaml", ".yml", ".jsonl", ".json")


def _files_under(folder: Path) -> list[Path]:
    """The files to scan anywhere under ``folder``, sorted as paths sort; linked folders are not entered.

    A folder that cannot be listed is an error, as a file that cannot be read
    is: ``rglob`` (and ``os.walk`` left to itself) would pass over it in
    silence, and a scan that missed a folder would still say "0 secret(s) found".
    """

    def refuse(exc: OSError) -> NoReturn:
        raise DshReplayError(f"cannot read folder {exc.filename}: {exc.strerror or exc}")

    found = (Path(root, name) for root, _, names in os.walk(folder, onerror=refuse) for name in names)
    return sorted(path for path in found if path.suffix in _SCANNED and path.is_file())


_BINARY_TAG = "tag:yaml.org,2002:binary"


def _located_values(path: Path, text: str) -> list[Located]:
    """A file's parsed values with their fields and lines, so a hit names its field.

    A line or a file that does not parse gives none: the raw text scan reads it.
    """
    if path.suffix == ".jsonl":
        values: list[Located] = []
        for number, line in enumerate(text.split("\n"), start=1):
            try:
                values.append(Located(f"line {number}", orjson.loads(line), number, number))
            except orjson.JSONDecodeError:
                continue
        return values
    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    return list(_yaml_values(root)) if root is not None else []


def _yaml_values(root: yaml.Node) -> Iterator[Located]:
    """Every scalar of a YAML document (keys too), named as :func:`find_secrets` names fields.

    Nodes, not loaded values, because a node knows its lines. A node reached again
    through an alias is walked once (see ``find_secrets`` on alias bombs).
    """
    seen: set[int] = set()
    pending: list[tuple[str, yaml.Node]] = [("", root)]
    while pending:
        field, node = pending.pop()
        if isinstance(node, yaml.ScalarNode):
            first, end = node.start_mark.line + 1, node.end_mark
            # a block scalar ends at the start of the line after it
            last = end.line + 1 if end.column else end.line
            yield Located(field or "<value>", _scalar_value(node), first, max(first, last))
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[str, yaml.Node]] = []
        if isinstance(node, yaml.MappingNode):
            for key, item in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                children += [(field, key), (f"{field}.{name}" if field else str(name), item)]
        elif isinstance(node, yaml.SequenceNode):
            children = [(f"{field}[{position}]", item) for position, item in enumerate(node.value)]
        pending += reversed(children)


def _scalar_value(node: yaml.ScalarNode) -> str | bytes:
    if node.tag == _BINARY_TAG:
        try:
            return base64.b64decode("".join(str(node.value).split()), validate=True)
        except ValueError:  # binascii.Error: not base64 after all; the raw text scan still reads it
            pass
    return str(node.value)


DESCRIPTION = (
    "Scan YAML/JSON(L) files for credential-shaped strings (OpenAI, Anthropic, Google, AWS keys,\n"
    "bearer tokens): every parsed value, by field, and the raw text, by line (comments, escaped JSON,\n"
    "base64 and gzip bodies decoded). Each sighting once, masked. Exit 1 on any hit."
)
EXAMPLE = "dsh-replay scan cassettes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["cassettes"], metavar="PATHS")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_scan(args.paths, out)
