"""Cassettes against the fastest peer: loading them and writing them (cassetter, vcrpy).

cassetter (PyPI ``cassetter``: a Rust core behind a vcrpy-style API) keeps no
fragments, but it is what users will time us against. It is installed beside
the venv, never in it (``_cassetter.py`` says why); when it cannot be
installed, this section reports that and measures nothing.

**Load.** 1,000 streamed-response cassettes: the bundled ones (``cassettes/``,
real-shaped recordings of every route: text, tool calls, reasoning, refusals,
errors mid-stream, retried 429s), cycled to 1,000 files. Each tool reads its
own format of the same interactions, written by its own writer:

- ours: the bundled files as they are (``Cassette.dumps``' layout, with the
  fragment timings), read with ``dsh_replay.cassette.store.Cassette.load``;
- vcrpy: ``FilesystemPersister.save_cassette`` with its YAML serializer,
  read with ``vcr.cassette.Cassette.load`` (libyaml: ``CSafeLoader``);
- cassetter: ``cassetter.Cassette(path, record_mode="all")``, each
  interaction ``record()``-ed as its interceptor does, ``save()``; read with
  ``cassetter.Cassette(path, record_mode="none").load()``.

The three loads of all 1,000 files are interleaved, five rounds (three with
``--quick``, over 200 files), medians. cassetter's load leaves the
interactions in Rust; a second figure for it adds reading every response back
as Python (``interactions`` and each body's bytes), which a replay does.

**Write at block end.** The body of ``bench_memory``'s recording rows (one
OpenAI chat generation of 20,000 SSE events, 5,000 with ``--quick``), one
fragment per event. Ours is timed as there: the exit of ``use_cassette(path,
"all")`` around an httpx read of the fragments (``bench_memory.record_once``),
which writes the cassette. cassetter gets the same request and response
(what its interceptor hands it once the body is read): ``record()`` timed, then
``save()`` timed. Each figure is per fragment: seconds over the fragment count
(cassetter writes no fragments; the count is the same stream's). Interleaved,
five rounds after a warm-up, medians.

**Where the time goes.** Our load is taken apart in stages, each timed over
the same files in the same rounds: the reader of our own layout
(``yaml_layout.read_layout``, which reads every file ``Cassette.load`` reads
here; one it declines would go to libyaml, and is counted), then the rest of
``Cassette.load`` (reading the file, checking the fields, the vcrpy
``Request`` and ``Interaction`` objects). For comparison, the libyaml path a
declined file takes, in stages of its own: libyaml's parse alone
(``raw_parse``: no Python objects), PyYAML's node objects on top (composed by
the loader ``yaml_file`` uses), our values built from them
(``yaml_file.load_yaml``). The load row says whether ours is within the
target, 1.5x cassetter's time. The write comes with a ``cProfile`` of one more
pass (not timed): the functions with the most own time, as shares of the
profiled total.
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _cassetter
from _installed import compile_package
from bench_memory import record_once, recording_pieces

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5
#: the most our load may take, in multiples of cassetter's (median, same run)
TARGET = 1.5


# -- the cassettes, in each tool's format ------------------------------------------------


def _sources() -> list[Path]:
    from dsh_replay.cassette.files import has_metadata

    return sorted(path for path in (ROOT / "cassettes").rglob("*.yaml") if has_metadata(path))


def _vcrpy_save(path: Path, interactions: list[Any]) -> None:
    from vcr.persisters.filesystem import FilesystemPersister
    from vcr.serializers import yamlserializer

    from dsh_replay.cassette.interaction import headers_dict

    responses = [{"status": {"code": i.status, "message": i.reason}, "headers": headers_dict(i.headers),
                  "body": {"string": i.body}} for i in interactions]
    FilesystemPersister.save_cassette(path, {"requests": [i.request for i in interactions],
                                             "responses": responses}, yamlserializer)


def _request_headers(request: Any) -> dict[str, list[str]]:
    return {name.lower(): list(value) if isinstance(value, list) else [value]
            for name, value in request.headers.items()}


def _cassetter_record(cassette: Any, interaction: Any) -> None:
    """What cassetter's httpx interceptor does once a response has been read."""
    request = interaction.request
    headers: dict[str, list[str]] = {}
    for name, value in interaction.headers:
        headers.setdefault(name.lower(), []).append(value)
    cassette.record(method=request.method, uri=request.uri, request_headers=_request_headers(request),
                    request_body=request.body, status=interaction.status, response_headers=headers,
                    response_body=interaction.body)


def _cassetter_save(path: Path, interactions: list[Any]) -> None:
    import cassetter

    cassette = cassetter.Cassette(path, record_mode=cassetter.RecordMode.ALL)
    cassette.load()
    for interaction in interactions:
        _cassetter_record(cassette, interaction)
    cassette.save()


def make_cassettes(folder: Path, count: int) -> dict[str, list[Path]]:
    """``count`` cassettes in each tool's format, cycling through the bundled ones: tool -> files."""
    from dsh_replay.cassette.store import Cassette

    sources = _sources()
    files: dict[str, list[Path]] = {"ours": [], "vcrpy": [], "cassetter": []}
    for tool in files:
        (folder / tool).mkdir()
    for n in range(count):
        source = sources[n % len(sources)]
        interactions = Cassette.load(source).interactions
        name = f"{n:04d}-{source.stem}.yaml"
        shutil.copyfile(source, folder / "ours" / name)
        _vcrpy_save(folder / "vcrpy" / name, interactions)
        _cassetter_save(folder / "cassetter" / name, interactions)
        for tool in files:
            files[tool].append(folder / tool / name)
    return files


# -- loading -------------------------------------------------------------------------------


def _load_ours(files: list[Path]) -> None:
    from dsh_replay.cassette.store import Cassette

    for path in files:
        Cassette.load(path)


def _load_vcrpy(files: list[Path]) -> None:
    from vcr.cassette import Cassette
    from vcr.record_mode import RecordMode
    from vcr.serializers import yamlserializer

    for path in files:
        Cassette.load(path=str(path), serializer=yamlserializer, record_mode=RecordMode.NONE)


def _load_cassetter(files: list[Path]) -> None:
    import cassetter

    for path in files:
        cassetter.Cassette(path, record_mode=cassetter.RecordMode.NONE).load()


def _load_cassetter_read(files: list[Path]) -> None:
    import cassetter
    from cassetter.compare import body_to_bytes

    for path in files:
        cassette = cassetter.Cassette(path, record_mode=cassetter.RecordMode.NONE)
        cassette.load()
        for interaction in cassette.interactions:
            body_to_bytes(interaction.response.body)


LOADERS: dict[str, Callable[[list[Path]], None]] = {
    "dsh_replay Cassette.load": _load_ours,
    "vcrpy (libyaml)": _load_vcrpy,
    "cassetter": _load_cassetter,
    "cassetter, + every response read": _load_cassetter_read,
}
_FILES_OF = {"dsh_replay Cassette.load": "ours", "vcrpy (libyaml)": "vcrpy", "cassetter": "cassetter",
             "cassetter, + every response read": "cassetter"}


def _stage_parse(datas: list[bytes]) -> None:
    import _yaml  # PyYAML's libyaml binding

    for data in datas:
        _yaml.CParser(data).raw_parse()


def _stage_compose(datas: list[bytes]) -> None:
    # the loader load_yaml composes with (the stock CSafeLoader's resolver is slower): its nodes only
    from dsh_replay.cassette.yaml_file import _DirectLoader

    for data in datas:
        loader = _DirectLoader(data)
        loader.get_single_node()
        loader.dispose()


def _stage_values(datas: list[bytes]) -> None:
    from dsh_replay.cassette.yaml_file import load_yaml

    for data in datas:
        load_yaml(data)


def _stage_layout(datas: list[bytes]) -> None:
    from dsh_replay.cassette.yaml_layout import read_layout

    for data in datas:
        read_layout(data)


def _declined(datas: list[bytes]) -> int:
    """How many of the files the layout reader leaves to libyaml (their load is then libyaml's)."""
    from dsh_replay.cassette.yaml_layout import DECLINED, read_layout

    return sum(read_layout(data) is DECLINED for data in datas)


#: stage -> what it does to the files' bytes (each includes the ones before it): the libyaml path
STAGES: dict[str, Callable[[list[bytes]], None]] = {
    "libyaml parse": _stage_parse,
    "+ PyYAML node objects": _stage_compose,
    "+ our values from the nodes": _stage_values,
}
#: the layout reader, which Cassette.load uses first
LAYOUT = "layout reader (yaml_layout)"


def where_the_time_goes(work: Callable[[], object], top: int = 5) -> list[tuple[str, float]]:
    """(function, share of the profiled total) for the ``top`` functions by own time, in one profiled pass."""
    profile = cProfile.Profile()
    profile.runcall(work)
    stats = pstats.Stats(profile)
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in entries.values()) or 1.0
    ranked = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [(_label(func), own / total) for func, (_, _, own, _, _) in ranked]


def _label(func: tuple[str, int, str]) -> str:
    filename, _, name = func
    if filename == "~":  # a built-in: "{method 'get_single_node' of '_yaml.CParser' objects}"
        return name.strip("{}").replace("method ", "").replace(" objects", "")
    return f"{Path(filename).stem}.{name}"


def load_peers(count: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-peers-") as tmp:
        files = make_cassettes(Path(tmp), count)
        sizes = {tool: sum(path.stat().st_size for path in paths) for tool, paths in files.items()}
        for name, load in LOADERS.items():  # warm-up: imports, first-use caches
            load(files[_FILES_OF[name]][:20])
        samples: dict[str, list[float]] = {name: [] for name in LOADERS}
        for _ in range(runs):
            for name, load in LOADERS.items():
                start = time.perf_counter()
                load(files[_FILES_OF[name]])
                samples[name].append(time.perf_counter() - start)
        datas = [path.read_bytes() for path in files["ours"]]
        declined = _declined(datas)
        stages: dict[str, list[float]] = {name: [] for name in [LAYOUT, *STAGES]}
        for _ in range(runs):
            for name, stage in {LAYOUT: _stage_layout, **STAGES}.items():
                start = time.perf_counter()
                stage(datas)
                stages[name].append(time.perf_counter() - start)
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    medians = {name: statistics.median(values) for name, values in stages.items()}
    ours = seconds["dsh_replay Cassette.load"]
    parts = {LAYOUT: medians[LAYOUT], "+ file, fields, Request/Interaction objects": ours - medians[LAYOUT]}
    cumulative = [medians[name] for name in STAGES]
    libyaml = {name: now - before for name, before, now in zip(STAGES, [0.0, *cumulative], cumulative, strict=False)}
    ratio = ours / seconds["cassetter"]
    return {"cassettes": count, "bytes": sizes, "samples": samples, "seconds": seconds,
            "vs_cassetter": ratio, "target": TARGET, "met": ratio <= TARGET, "declined": declined,
            "stages_s": parts, "libyaml_stages_s": libyaml, "stage_samples": stages}


# -- writing -------------------------------------------------------------------------------


def write_peers(count: int, runs: int) -> dict[str, Any]:
    import cassetter

    _, pieces = recording_pieces(count)
    ours: list[float] = []
    records: list[float] = []
    saves: list[float] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-peers-write-") as tmp:
        for run in range(runs + 1):  # the first round is a warm-up
            _, _, written, session = record_once(pieces, Path(tmp) / f"ours{run}.yaml")
            interaction = session.cassette.interactions[0]
            theirs = cassetter.Cassette(Path(tmp) / f"cassetter{run}.yaml", record_mode=cassetter.RecordMode.ALL)
            theirs.load()
            start = time.perf_counter()
            _cassetter_record(theirs, interaction)
            recorded = time.perf_counter() - start
            start = time.perf_counter()
            theirs.save()
            saved = time.perf_counter() - start
            if not Path(theirs.path).is_file():
                raise AssertionError("cassetter wrote no cassette")
            if run:
                ours.append(written)
                records.append(recorded)
                saves.append(saved)
        profile = where_the_time_goes(lambda: record_once(pieces, Path(tmp) / "profiled.yaml"))
    n = len(pieces)
    return {"fragments": n, "samples": {"ours_s": ours, "cassetter_record_s": records, "cassetter_save_s": saves},
            "ours_us": statistics.median(ours) / n * 1e6,
            "cassetter_save_us": statistics.median(saves) / n * 1e6,
            "cassetter_record_us": statistics.median(records) / n * 1e6,
            "profile": profile}


def run(quick: bool = False) -> list[dict[str, object]]:
    """One row for the load, one for the write; a row that only says why when cassetter cannot be installed."""
    folder = _cassetter.ensure()
    if isinstance(folder, str):
        return [{"benchmark": "peers", "name": "cassetter unavailable", "reason": folder}]
    _cassetter.importable(folder)
    compile_package()
    runs = 3 if quick else RUNS
    load = load_peers(200 if quick else 1000, runs)
    write = write_peers(5_000 if quick else 20_000, runs)
    return [{"benchmark": "peers", "name": "load", "runs": runs, **load},
            {"benchmark": "peers", "name": "write", "runs": runs, **write}]


def render(rows: list[dict[str, Any]]) -> str:
    if rows[0]["name"] == "cassetter unavailable":
        return f"cassetter unavailable: {rows[0]['reason']}"
    load, write = rows
    seconds = load["seconds"]
    ours = seconds["dsh_replay Cassette.load"]
    lines = [f"load of {load['cassettes']:,} cassettes (median of {load['runs']}):"]
    lines += [f"  {name:<36}{value * 1000:>8.0f} ms{value / ours:>8.2f}x ours" for name, value in seconds.items()]
    verdict = "met" if load["met"] else "NOT met"
    lines.append(f"  target: ours <= {load['target']:.2f}x cassetter: {verdict} ({load['vs_cassetter']:.2f}x); "
                 f"files the layout reader left to libyaml: {load['declined']}")
    lines += [f"  ours: {name} {part * 1000:.0f} ms" for name, part in load["stages_s"].items()]
    lines += [f"  libyaml path, for comparison: {name} {part * 1000:.0f} ms"
              for name, part in load["libyaml_stages_s"].items()]
    lines.append(f"write at block end, {write['fragments']:,} fragments: ours {write['ours_us']:.2f} us/fragment, "
                 f"cassetter save {write['cassetter_save_us']:.2f} (+ record {write['cassetter_record_us']:.2f})")
    lines += [f"  ours: {name} {share:.0%}" for name, share in write["profile"]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run(quick="--quick" in sys.argv[1:])))
