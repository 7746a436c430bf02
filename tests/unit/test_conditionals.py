"""Every assert's ``that`` item is a string.

A plain YAML item holding ``: `` (``x is search('topology: replicas')``) parses as a mapping,
which ansible-core 2.19 refuses at run time ("Conditional expressions must be strings") -
in a scenario, only when that task runs. Caught here for every task file at once.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = sorted(p for top in ("playbooks", "roles", "extensions", "benchmarks") for p in (ROOT / top).rglob("*.yml"))


def that_items(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "that":
                yield from value if isinstance(value, list) else [value]
            yield from that_items(value)
    elif isinstance(node, list):
        for item in node:
            yield from that_items(item)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_that_items_are_strings(path):
    with open(path, encoding="utf-8") as handle:
        documents = list(yaml.safe_load_all(handle))
    bad = [item for doc in documents for item in that_items(doc) if not isinstance(item, str)]
    assert not bad, "quote these (a ': ' inside makes YAML read a mapping): %s" % bad
