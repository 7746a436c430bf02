# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The metrics_view filter (site_view's metrics entry point): its lines are _serving_engines.view's."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.metrics_view import metrics_view


def test_the_lines():
    assert metrics_view({"topology": "replicas", "total": {"engines_counted": 0}, "engines": [], "table": ["t"]},
                        "metrics_topology") == ["topology: replicas (from metrics_topology); 0 of 0 engine(s) read", "t"]


def test_a_result_that_is_not_one_is_refused():
    with pytest.raises(AnsibleFilterError, match="expects the vllm_metrics result"):
        metrics_view("no", "x")
