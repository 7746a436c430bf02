# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The restart_announcement filter: deploy.yml's rolling restart, announced (site_deploy's deploy_preflight)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.restart_announcement import restart_announcement


def test_restart_announcement_reads_each_engine_plan():
    """The restart_announcement filter: each engine host's vllm_service_plan, read from hostvars."""
    hostvars = {"spark-a": {"vllm_service_plan": {"restart_pending": False, "change": ""}},
                "spark-b": {"vllm_service_plan": {"restart_pending": True, "change": "image"}},
                "spark-c": {"vllm_service_plan": None}, "spark-d": {}}
    said = restart_announcement(["spark-a", "spark-b", "spark-c", "spark-d"], hostvars, "yes")
    assert said.startswith("Configuration changed on spark-b (image). ") and "(or forced: vllm_restart_force)" in said
    assert said.endswith("Not restarted (unchanged, or not running yet): spark-a, spark-c, spark-d.")
    assert restart_announcement(["spark-a"], hostvars) == ""
    with pytest.raises(AnsibleFilterError, match="expects host names"):
        restart_announcement("spark-a", hostvars)
