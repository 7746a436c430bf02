# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_engine_reads``: what the engine preflight reads on the host, one row per case the vllm role's preflight tasks
had as a ``when:`` (a model path, the venv runtime, a tool-call parser, a port in range, a listener not ours)."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_reads as er

UNITS = {"replicas": ["vllm-replica.service"], "split": ["vllm-split.service"]}
CONTAINER = {"vllm_model": "/models/qwen", "vllm_runtime": "container", "vllm_venv": "/opt/vllm",
             "vllm_tool_call_parser": "hermes", "vllm_port": 8000, "_vllm_units": UNITS,
             "_vllm_tool_parser_probe": "print('hermes')"}
ACTIVE = ("units_active", "ansible.legacy.command",
          {"argv": ["systemctl", "is-active", "vllm-replica.service", "vllm-split.service"]})
SS = ("port_listeners", "ansible.legacy.command", {"argv": ["ss", "-Hltnp", "sport = :8000"]})


@pytest.mark.parametrize("changes, steps", [
    # The container runtime: the model directory, our units, the port.
    ({}, [("model_dir", "ansible.legacy.stat", {"path": "/models/qwen"}), ACTIVE, SS]),
    # A hub name is not looked for on disk.
    ({"vllm_model": "Qwen/Qwen3-8B"}, [ACTIVE, SS]),
    # The venv runtime: its vllm, and the parsers it knows when one is set.
    ({"vllm_runtime": "venv", "vllm_model": "Qwen/Qwen3-8B"},
     [("venv_vllm", "ansible.legacy.stat", {"path": "/opt/vllm/bin/vllm"}),
      ("tool_parsers", "ansible.legacy.command", {"argv": ["/opt/vllm/bin/python", "-c", "print('hermes')"]}),
      ACTIVE, SS]),
    ({"vllm_runtime": "venv", "vllm_model": "", "vllm_tool_call_parser": ""},
     [("venv_vllm", "ansible.legacy.stat", {"path": "/opt/vllm/bin/vllm"}), ACTIVE, SS]),
    # A port outside 1-65535 (or not a number) is not asked about: the check refuses it by its name.
    ({"vllm_model": "x", "vllm_port": 0}, [ACTIVE]),
    ({"vllm_model": "x", "vllm_port": "80a"}, [ACTIVE]),
    ({"vllm_model": "x", "vllm_port": "8000"}, [ACTIVE, SS]),
], ids=["container", "hub-model", "venv-parser", "venv-no-parser", "port-0", "port-text", "port-string"])
def test_the_reads(changes, steps):
    assert er.reads(dict(CONTAINER, **changes)) == steps


LISTENING = {"rc": 0, "stdout": 'LISTEN 0 4096 *:8000 *:* users:(("python3",pid=4120,fd=3),("python3",pid=4121,fd=3))'}


@pytest.mark.parametrize("listeners, active, step", [
    (LISTENING, {"stdout_lines": ["inactive", "inactive"]},
     ("port_units", "ansible.legacy.command", {"argv": ["ps", "-o", "unit=", "-p", "4120,4121"]})),
    # Our own engine runs: the port is ours.
    (LISTENING, {"stdout_lines": ["active", "inactive"]}, None),
    # No one listens.
    ({"rc": 0, "stdout": ""}, {"stdout_lines": ["inactive", "inactive"]}, None),
], ids=["held", "ours", "free"])
def test_who_holds_the_port_is_asked_only_when_it_is_not_ours(listeners, active, step):
    assert er.port_units_read(listeners, active) == step


def test_a_failed_read_fails_the_preflight_only_where_the_task_failed_before():
    failed = {"failed": True, "msg": "non-zero return code", "rc": 1}
    assert er.read_failure("port_listeners", failed) == "non-zero return code"
    assert er.read_failure("model_dir", {"failed": True}) == "reading model_dir failed"
    # systemctl is-active, the parser list and ps were read with failed_when: false.
    for option in ("units_active", "tool_parsers", "port_units"):
        assert er.read_failure(option, failed) is None
    assert er.read_failure("port_listeners", {"rc": 0, "stdout": ""}) is None
