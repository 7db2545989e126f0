"""The gateway's tool names: valid for strict clients, short, reversible, collisions refused."""

from __future__ import annotations

import re

import pytest

from toolagent.gateway.names import HASH_DIGITS, KEPT_CHARS, MAX_NAME_CHARS, NameCollision, NameMap, gateway_name

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.mark.parametrize(
    ("qualified", "name"),
    [
        ("supabase/get-schema", "supabase__get-schema"),
        ("everything/echo", "everything__echo"),
        ("fs/read.file", "fs__read_file"),
        ("my server/tool:x", "my_server__tool_x"),
    ],
)
def test_a_qualified_name_becomes_namespace__tool(qualified: str, name: str) -> None:
    assert gateway_name(qualified) == name


def test_a_long_name_keeps_its_start_and_ends_in_a_hash_of_the_whole_name() -> None:
    long_a = "server/" + "a" * 80
    long_b = "server/" + "a" * 81
    a, b = gateway_name(long_a), gateway_name(long_b)
    assert len(a) == MAX_NAME_CHARS == KEPT_CHARS + 1 + HASH_DIGITS
    assert a[:KEPT_CHARS] == b[:KEPT_CHARS] and a != b
    assert VALID.match(a) and VALID.match(b)


def test_a_name_of_exactly_the_limit_is_kept_whole() -> None:
    qualified = "ns/" + "t" * (MAX_NAME_CHARS - len("ns__"))
    assert gateway_name(qualified) == "ns__" + "t" * (MAX_NAME_CHARS - 4)


def test_the_map_reverses_by_lookup() -> None:
    names = NameMap.build(["a/x", "b/y.z", "c/" + "q" * 90])
    for qualified, name in names.to_gateway.items():
        assert names.qualified(name) == qualified
        assert VALID.match(name)
    assert names.qualified("a/x") is None and names.qualified("nothing__here") is None


def test_two_tools_with_one_gateway_name_are_an_error_naming_both() -> None:
    with pytest.raises(NameCollision) as caught:
        NameMap.build(["fs/read.file", "fs/read_file"])
    assert "'fs/read.file'" in caught.value.message and "'fs/read_file'" in caught.value.message
