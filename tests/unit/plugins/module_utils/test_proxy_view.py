# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the nginx_proxy role reads of its backends and drain files (``_proxy_view.py``), and the filters that give it
to the role (backend_endpoints, drain_holders)."""

from __future__ import annotations

import base64
import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.backend_endpoints import backend_endpoints as endpoints_filter
from ansible_collections.factory_floor.llm.plugins.filter.drain_holders import drain_holders as holders_filter
from ansible_collections.factory_floor.llm.plugins.module_utils._proxy_view import backend_endpoints, drain_holders


def test_each_backend_at_its_address_and_port_as_the_upstream_writes_them():
    hostvars = {"spark-a": {"nginx_proxy_backend_address": "127.0.0.1", "vllm_port": 8001}, "spark-b": {},
                "spark-c": {"vllm_port": "9000"}}
    assert backend_endpoints(["spark-a", "spark-b", "spark-c", "spark-d"], hostvars, 8000) == [
        "127.0.0.1:8001", "spark-b:8000", "spark-c:9000", "spark-d:8000"]
    assert endpoints_filter(["spark-b"], hostvars, 8000) == ["spark-b:8000"]
    with pytest.raises(AnsibleFilterError, match="a list"):
        endpoints_filter("spark-b", hostvars, 8000)


def _file(name, text):
    return {"item": {"path": "/var/lib/factory-floor/drain/" + name},
            "content": base64.b64encode(text.encode()).decode()}


def test_who_drained_each_engine():
    files = [_file("spark-a", json.dumps({"holder": "switch-model", "run": "20261129T110000Z-3f9a1c"})),
             _file("spark-b", ""), _file("spark-c", "  ops, by hand\n"), _file("spark-d", json.dumps({"run": "x"}))]
    assert drain_holders(files) == {"spark-a": "switch-model", "spark-b": "", "spark-c": "ops, by hand", "spark-d": ""}
    assert drain_holders([]) == {} and holders_filter(files) == drain_holders(files)
    with pytest.raises(AnsibleFilterError, match="not the JSON it starts as"):
        holders_filter([_file("spark-e", "{not json")])
