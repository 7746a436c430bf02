# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.proxy_check`` through its action plugin: the role's variables read as a task sees them
(Ansible's own templar), the backends' addresses from ``hostvars``, the missing engine group. The refusals
themselves are tests/unit/plugins/module_utils/test_proxy_check.py's."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.proxy_check import ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_check as pc

KEY = "lab-key-7f3e9a2c41d86b05"


def variables(**changes):
    found = {pc.VARIABLES.get(name, "nginx_proxy_" + name): value for name, value in pc.SETTINGS.items()}
    found.update(site_proxy_port=8080, nginx_proxy_check_interval=1, nginx_proxy_check_fails=3,
                 nginx_proxy_check_passes=2, nginx_proxy_balance="affinity", nginx_proxy_affinity_balance_factor=1.5,
                 nginx_proxy_affinity_body_buffer_size="4m", nginx_proxy_tls_server_name="gateway",
                 # As the role's defaults have them: templates, read when the check reads them.
                 nginx_proxy_backends=trust_as_template("{{ groups[site_engine_group] }}"),
                 nginx_proxy_api_key=trust_as_template("{{ site_api_key }}"), site_api_key=KEY,
                 site_engine_group="gb10", site_engine_port=8000, inventory_hostname="gateway",
                 groups={"gb10": ["spark-a", "spark-b"], "proxy": ["gateway"]},
                 hostvars={"spark-a": {}, "spark-b": {}})
    found.update(changes)
    return found


def run(task_vars, args=None, check_mode=False):
    task = mock.MagicMock(args=dict(args or {}), check_mode=check_mode, async_val=0, action="factory_floor.llm.proxy_check")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    templar = Templar(loader=DataLoader(), variables=task_vars)
    return ActionModule(task, connection, mock.MagicMock(), DataLoader(), templar, None).run(task_vars=task_vars)


@pytest.mark.parametrize("check_mode", [False, True])
def test_settings_that_can_work_pass_and_change_nothing(check_mode):
    result = run(variables(), check_mode=check_mode)
    assert result["changed"] is False and result["errors"] == [] and not result.get("failed")


def test_two_backends_the_inventory_puts_at_one_address_are_refused():
    result = run(variables(hostvars={"spark-a": {"nginx_proxy_backend_address": "10.0.0.5"},
                                     "spark-b": {"nginx_proxy_backend_address": "10.0.0.5"}}))
    assert result["failed"] is True
    assert result["msg"] == ("Two backends in 'gb10' use the same address:port (10.0.0.5:8000, 10.0.0.5:8000): give "
                             "each replica its own vllm_port or host.")


def test_a_templated_key_is_checked_and_never_shown():
    result = run(variables(site_api_key="two words"))
    assert result["failed"] is True and result["errors"][0]["check"] == "key_characters"
    assert "two words" not in str(result)


def test_an_engine_group_the_inventory_lacks_is_refused_by_name():
    result = run(variables(site_engine_group="nope"))
    assert result["failed"] is True and result["errors"][0]["check"] == "layout"
    assert "in group 'nope' (site_engine_group; now: none)" in result["msg"]


def test_a_string_for_the_backends_is_refused_before_its_letters_are_read_as_hosts():
    result = run(variables(nginx_proxy_backends="spark-a"))
    assert result["msg"].startswith("nginx_proxy_backends must be a YAML list")


def test_arguments_are_refused():
    with pytest.raises(AnsibleActionFail, match="takes no arguments"):
        run(variables(), args={"port": 1})
