# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""deploy.yml's refusal of engines drained by another holder, on a proxy host."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._deploy_rotation import drained_other, refusal

TAIL = ("Drained by switch-to-replicas or switch-to-split: that switch was interrupted before its tool-calling gate's "
        "verdict; run it again (playbooks/switch-to-replicas.yml or playbooks/switch-to-split.yml), which gates them "
        "and puts them back. By switch-model: run playbooks/switch-model.yml again. No holder: an operator's drain; "
        "remove /etc/factory-floor/drain/NAME on the proxy host when the engine may serve again. ")


def test_drained_by_deploy_or_not_expected_is_no_refusal():
    assert drained_other({"spark-a": "deploy", "spark-c": "switch-to-split"}, ["spark-a", "spark-b"]) == []
    assert refusal({"spark-a": "deploy"}, ["spark-a"], "gateway") == ""
    assert refusal({}, ["spark-a"], "gateway") == ""


@pytest.mark.parametrize("check_mode, end", [
    (False, "Everything else is deployed."),
    (True, "A real run would deploy everything else and stop here the same way (--check changed nothing)."),
])
def test_each_holder_is_named_and_the_way_on(check_mode, end):
    drained = {"spark-b": "switch-to-split", "spark-a": "", "spark-c": "switch-model"}
    assert refusal(drained, ["spark-a", "spark-b"], "gateway", check_mode, "/src/ff/playbooks") == (
        "Drained from the proxy on gateway, so not in its rotation: spark-b (drained by: switch-to-split), spark-a "
        "(drained by: no holder). " + TAIL + end)


def test_an_installed_collection_names_its_playbooks():
    message = refusal({"spark-a": "switch-model"}, ["spark-a"], "gateway")
    assert "(factory_floor.llm.switch_to_replicas or factory_floor.llm.switch_to_split)" in message
    assert "run factory_floor.llm.switch_model again" in message
