# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.keepalived_wait`` as a whole module: it asks until 200 or its tries are spent, and fails naming
the address and curl's error (the request and the words: tests/unit/plugins/module_utils/test_keepalived_wait.py)."""

from __future__ import annotations

from unittest import mock

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.modules import keepalived_wait


def test_the_module_asks_until_200_or_the_timeout():
    module = mock.MagicMock()
    module.run_command.side_effect = [(7, "000", "refused"), (0, "503", ""), (0, "200", "")]
    sleep = mock.MagicMock()
    assert keepalived_wait.wait(module, ["curl"], 5, sleep=sleep) == ("200", "", 3)
    assert sleep.call_count == 2
    module.run_command.side_effect = [(7, "000", "refused")] * 3
    assert keepalived_wait.wait(module, ["curl"], 2, sleep=sleep) == ("000", "refused", 3)


def test_an_answer_passes_and_check_mode_asks_too(run_module, monkeypatch):
    monkeypatch.setattr(AnsibleModule, "run_command", lambda self, argv: (0, "200", ""))
    code, result = run_module(keepalived_wait, {"address": "192.0.2.10/24", "port": 8080, "_ansible_check_mode": True})
    assert code == 0 and result["changed"] is False and result["status"] == "200" and result["tries"] == 1
    assert result["cmd"][-1] == "http://192.0.2.10:8080/healthz"


def test_no_answer_fails_naming_the_address_and_curls_error(run_module, monkeypatch):
    monkeypatch.setattr(AnsibleModule, "run_command", lambda self, argv: (7, "000", "curl: (7) Failed to connect"))
    monkeypatch.setattr(keepalived_wait.time, "sleep", lambda seconds: None)
    code, result = run_module(keepalived_wait, {"address": "192.0.2.10/24", "port": 8080, "timeout": 2})
    assert code == 1 and result["tries"] == 3
    assert result["msg"].startswith("The floating address 192.0.2.10 did not answer 200 on /healthz within 2 s "
                                    "(http://192.0.2.10:8080/healthz): HTTP 000, curl: (7) Failed to connect.")
