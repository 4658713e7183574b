"""pytest does not walk a folder of nothing but cassettes and goldens (unless cassettes are items).

Each file pytest walks is offered to every plugin's collection hooks; a
recorded suite has two files per test (the cassette and its golden) that none
of them makes a test of. The folders are told apart by what they hold, so a
test module, a ``conftest.py`` or anything else in one is collected as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.pytest_plugin.items import only_cassettes_under

from .helpers import ini

PLAIN_TEST = "def test_plain():\n    assert True\n"


def _cassette_folder(root: Path, folder: str = "cassettes") -> Path:
    module = root / folder / "test_plain"
    module.mkdir(parents=True)
    for name in ("test_one.yaml", "test_two.yml", "test_one.chunks.jsonl", "test_one.2.chunks.jsonl",
                 "vcrpy_json.json"):
        (module / name).write_text("interactions: []\n")
    return module.parent


def _offered(pytester: pytest.Pytester, *args: str) -> tuple[list[Path], pytest.HookRecorder]:
    """The files pytest offered to ``pytest_collect_file`` in an inner run, and the run."""
    run = pytester.inline_run("-p", "no:cacheprovider", *args)
    return [call.file_path for call in run.getcalls("pytest_collect_file")], run


def test_a_folder_of_cassettes_and_goldens_is_not_walked(project: pytest.Pytester) -> None:
    project.makepyfile(test_plain=PLAIN_TEST)
    folder = _cassette_folder(project.path)

    offered, run = _offered(project)

    run.assertoutcome(passed=1)
    assert project.path / "test_plain.py" in offered
    assert [path for path in offered if folder in path.parents] == []


@pytest.mark.parametrize("stranger", ["test_recorded.py", "conftest.py", "README.md", "deeper/notes.txt"])
def test_any_other_file_in_the_folder_gets_it_walked_as_before(project: pytest.Pytester, stranger: str) -> None:
    project.makepyfile(test_plain=PLAIN_TEST)
    folder = _cassette_folder(project.path)
    other = folder / "test_plain" / stranger
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text("def test_inside():\n    assert True\n" if stranger.endswith(".py") else "notes\n")

    offered, run = _offered(project)

    assert other in offered
    assert folder / "test_plain" / "test_one.yaml" in offered
    run.assertoutcome(passed=2 if stranger == "test_recorded.py" else 1)


def test_with_cassette_items_on_the_folder_is_walked(project: pytest.Pytester) -> None:
    project.makeini(ini("dsh_replay_collect = true"))
    project.makepyfile(test_plain=PLAIN_TEST)
    folder = _cassette_folder(project.path)

    offered, _ = _offered(project)

    assert folder / "test_plain" / "test_one.yaml" in offered


def test_the_configured_cassette_dir_is_not_walked_either(project: pytest.Pytester) -> None:
    project.makeini(ini("dsh_replay_cassette_dir = recordings"))
    project.makepyfile(test_plain=PLAIN_TEST)
    folder = _cassette_folder(project.path, "recordings")
    plain_folder = project.path / "fixtures"  # named like no cassette folder: walked
    plain_folder.mkdir()
    (plain_folder / "data.yaml").write_text("a: 1\n")

    offered, run = _offered(project)

    run.assertoutcome(passed=1)
    assert [path for path in offered if folder in path.parents] == []
    assert plain_folder / "data.yaml" in offered


def test_only_cassette_folders_below_the_rootdir_are_judged(tmp_path: Path) -> None:
    folder = _cassette_folder(tmp_path)

    assert only_cassettes_under(folder, root=tmp_path, cassette_dir=None)
    assert not only_cassettes_under(folder, root=folder, cassette_dir=None)  # the rootdir itself
    assert not only_cassettes_under(folder, root=tmp_path / "elsewhere", cassette_dir=None)  # above the rootdir
    assert not only_cassettes_under(folder / "test_plain", root=tmp_path, cassette_dir=None)  # not named so
    assert only_cassettes_under(folder / "test_plain", root=tmp_path, cassette_dir=folder / "test_plain")
    assert not only_cassettes_under(folder / "test_plain" / "test_one.yaml", root=tmp_path,
                                    cassette_dir=folder / "test_plain" / "test_one.yaml")  # a file


def test_a_link_or_what_cannot_be_listed_leaves_the_walk_to_pytest(tmp_path: Path) -> None:
    folder = _cassette_folder(tmp_path)
    (folder / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    assert not only_cassettes_under(folder, root=tmp_path, cassette_dir=None)

    a_file = tmp_path / "sub" / "cassettes"  # scandir fails on it as on a folder it may not read
    a_file.parent.mkdir()
    a_file.write_text("not a folder\n")
    assert not only_cassettes_under(a_file, root=tmp_path, cassette_dir=None)
