# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Where the nginx proxy reaches its backends (``_proxy_view.py``, read by the proxy_check action)."""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._proxy_view import backend_endpoints


def test_each_backend_at_its_address_and_port_as_the_upstream_writes_them():
    hostvars = {"spark-a": {"nginx_proxy_backend_address": "127.0.0.1", "vllm_port": 8001}, "spark-b": {},
                "spark-c": {"vllm_port": "9000"}}
    assert backend_endpoints(["spark-a", "spark-b", "spark-c", "spark-d"], hostvars, 8000) == [
        "127.0.0.1:8001", "spark-b:8000", "spark-c:9000", "spark-d:8000"]
