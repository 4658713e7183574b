"""Shards: N of them hold every case exactly once, balanced, decided by the keys alone."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_replay.cassette.shard import Shard

KEYS = st.lists(st.text(alphabet="ab/._-é0", max_size=12), max_size=60)


def _split(keys: list[str], total: int) -> list[list[int]]:
    return [Shard(index=index, total=total).select(keys) for index in range(1, total + 1)]


@given(keys=KEYS, total=st.integers(1, 9))
def test_the_shards_hold_every_case_once_and_differ_by_one_at_most(keys: list[str], total: int) -> None:
    shards = _split(keys, total)
    positions = [position for shard in shards for position in shard]
    assert sorted(positions) == list(range(len(keys)))  # all of them, none twice
    sizes = [len(shard) for shard in shards]
    assert max(sizes) - min(sizes) <= 1
    assert all(shard == sorted(shard) for shard in shards)  # in the caller's order


@given(keys=st.lists(st.text(max_size=12), unique=True, max_size=40), total=st.integers(1, 6), seed=st.integers())
def test_the_split_depends_on_the_keys_not_their_order(keys: list[str], total: int, seed: int) -> None:
    shuffled = keys[:]
    random.Random(seed).shuffle(shuffled)
    for index in range(1, total + 1):
        shard = Shard(index=index, total=total)
        assert {keys[n] for n in shard.select(keys)} == {shuffled[n] for n in shard.select(shuffled)}


def test_keys_are_dealt_round_robin_in_code_point_order() -> None:
    keys = ["openai/b.yaml", "Z.yaml", "openai/a.yaml", "anthropic/x.yaml", "openai-responses/r.yaml"]
    # sorted: Z.yaml, anthropic/x.yaml, openai-responses/r.yaml, openai/a.yaml, openai/b.yaml
    assert [[keys[n] for n in shard] for shard in _split(keys, 2)] == [
        ["openai/b.yaml", "Z.yaml", "openai-responses/r.yaml"],
        ["openai/a.yaml", "anthropic/x.yaml"],
    ]


def test_1044_cases_in_4_shards_are_261_each() -> None:
    keys = [f"copy-{n // 87:02d}/case-{n % 87:02d}.yaml" for n in range(1044)]
    assert [len(shard) for shard in _split(keys, 4)] == [261] * 4
    assert Shard.parse("2/4").describe(261, 1044) == "shard 2/4: 261 of 1,044 cases"


def test_more_shards_than_cases_leaves_the_last_ones_empty() -> None:
    assert _split(["a", "b"], 4) == [[0], [1], [], []]


@pytest.mark.parametrize(("text", "message"), [
    ("0/4", "there is no shard 0/4; valid: 1/4, 2/4, 3/4, 4/4"),
    ("5/4", "there is no shard 5/4; valid: 1/4, 2/4, 3/4, 4/4"),
    ("1/0", "there is no shard 1/0: N is 1 or more"),
    ("3/20", None),
    ("21/20", "valid: 1/20, 2/20, ... 20/20"),
    ("x/y", "expected K/N, the K-th of N shards with 1 <= K <= N (e.g. 2/4); got 'x/y'"),
    ("2", "expected K/N"),
    ("-1/4", "expected K/N"),
])
def test_parse_takes_k_of_n_and_lists_the_valid_ones(text: str, message: str | None) -> None:
    if message is None:
        assert Shard.parse(text) == Shard(index=3, total=20)
        return
    with pytest.raises(ValueError) as raised:
        Shard.parse(text)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
