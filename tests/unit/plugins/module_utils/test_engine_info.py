# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_engine_info.py: the running engine against its rendered configuration."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_info as ei

RENDERED = ["/usr/bin/docker", "run", "--name", "vllm-replica", "--entrypoint", "vllm", "vllm/vllm-openai:v0.32.0", "serve",
            "/models/A", "--port", "8000", "--max-num-seqs", "12"]
# /proc/PID/cmdline of the running client: NUL-separated, NUL-terminated.
RUNNING = b"/usr/bin/docker\0run\0--name\0vllm-replica\0--entrypoint\0vllm\0vllm/vllm-openai:v0.32.0\0serve\0/models/A\0" \
          b"--port\08000\0--max-num-seqs\08\0"


def test_serve_args_are_the_model_then_one_item_per_flag():
    assert ei.serve_args(RENDERED) == ["/models/A", "--port 8000", "--max-num-seqs 12"]
    # A script's interpreter leads a venv engine's command line: only what follows "serve" counts.
    assert ei.serve_args(["/opt/vllm/bin/python3", "/opt/vllm/bin/vllm", "serve", "/models/A", "--port", "8000"]) == [
        "/models/A", "--port 8000"]


def test_compare_a_running_engine():
    environ = ei.split_nul(b"PATH=/usr/bin\0FACTORY_FLOOR_CONFIG=abc\0VLLM_API_KEY=secret\0")
    result = ei.compare(ei.split_nul(RUNNING), environ, RENDERED, "abc")
    assert result == {"running": True, "config_differs": False,
                      "args_now": ["/models/A", "--port 8000", "--max-num-seqs 8"],
                      "args_new": ["/models/A", "--port 8000", "--max-num-seqs 12"],
                      "args_removed": ["--max-num-seqs 8"], "args_added": ["--max-num-seqs 12"]}
    assert ei.compare(ei.split_nul(RUNNING), environ, RENDERED, "other")["config_differs"] is True
    assert "secret" not in repr(result)


@pytest.mark.parametrize("fingerprint", [None, "abc"])
def test_compare_nothing_running(fingerprint):
    result = ei.compare(None, None, RENDERED, fingerprint)
    assert result["running"] is False and result["config_differs"] is False
    assert (result["args_removed"], result["args_added"]) == ([], [])


def test_a_read_without_argv_wants_nothing():
    # vllm_engine_info with no argv (what runs, as tune.yml reads it): nothing to add.
    result = ei.compare(ei.split_nul(RUNNING), [], [], None)
    assert result["args_new"] == [] and result["args_added"] == []
    assert result["args_now"] == ["/models/A", "--port 8000", "--max-num-seqs 8"]
    assert ei.serve_args([]) == []


def _result(running=True, differs=False, removed=(), added=()):
    return {"running": running, "config_differs": differs, "args_removed": list(removed), "args_added": list(added)}


@pytest.mark.parametrize("result, rendered", [
    (_result(), True),
    (_result(running=False), True),
    (_result(differs=True), False),
    (_result(removed=["--max-num-seqs 12"], added=["--max-num-seqs 10"]), False),
])
def test_runs_rendered(result, rendered):
    assert ei.runs_rendered(result) is rendered


def test_not_rendered_message_names_the_reload_when_systemd_had_the_old_unit():
    result = _result(differs=True, removed=["--max-num-seqs 12"], added=["--max-num-seqs 10"])
    message = ei.not_rendered_message("vllm-replica.service", result, True)
    assert message == (
        "vllm-replica.service was just started, and it does not run the configuration rendered for it: its vLLM"
        " arguments differ (runs --max-num-seqs 12; rendered --max-num-seqs 10); its configuration fingerprint"
        " (FACTORY_FLOOR_CONFIG) is not the rendered one (the command line, the environment or the API key differ)."
        " It ran the unit file systemd had loaded before (NeedDaemonReload=yes): run systemctl daemon-reload, then"
        " restart it.")
