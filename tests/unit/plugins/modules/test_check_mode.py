# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every module supports check mode, says how, and has a run in check mode in its own tests (issue 35).

The runs themselves are in each module's test file: a module that only reads runs in full and
predicts ``changed: false``; one that writes (``maintenance_lock``, ``concurrency_plot``) writes
nothing and predicts the ``changed`` a real run reports (both are compared there); one that loads
an engine (``tool_call_test``, ``concurrency_sweep``, ``workload_replay``) sends nothing and says what it would send.
``command_progress`` runs an arbitrary command: like ``ansible.builtin.command`` it cannot predict
and is skipped in check mode (``check_mode: partial``), which its benchmarks rely on to send no load.
"""

from __future__ import annotations

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULES = sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "plugins", "modules"))
                 if name.endswith(".py") and not name.startswith("_"))
# Modules whose check mode support is partial, and why (the documentation says the same).
PARTIAL = {"command_progress": "In check mode the command does not run"}
# The runs that prove each non-read-only module's check mode (test file, test function).
WRITES = {
    "maintenance_lock": ("test_maintenance_lock.py", "test_an_expired_lock_is_taken_over_with_a_warning"),
    "concurrency_plot": ("test_concurrency_plot.py", "test_writes_a_png_once_then_changes_nothing"),
    "tool_call_test": ("test_tool_call_test.py", "test_check_mode_sends_nothing_and_says_what_a_run_would"),
    "concurrency_sweep": ("test_concurrency_sweep.py", "test_check_mode_sends_no_load"),
    "command_progress": ("test_command_progress.py", "test_check_mode_runs_nothing"),
    "workload_profile": ("test_workload_profile.py", "test_reads_every_engine_and_writes_the_profile_unless_checking"),
    "workload_replay": ("test_workload_replay.py", "test_check_mode_sends_nothing"),
    "topology_advice": ("test_topology_advice.py", "test_check_mode_writes_nothing"),
}


def _source(name):
    with open(os.path.join(ROOT, "plugins", "modules", name + ".py"), encoding="utf-8") as handle:
        return handle.read()


def _action_only(name):
    """The module file is documentation only: its action plugin does the work, on the controller."""
    return "def main" not in _source(name) and os.path.exists(os.path.join(ROOT, "plugins", "action", name + ".py"))


def _check_mode_support(name):
    text = _source(name)
    doc = yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', text, re.S).group(1))
    attributes = doc.get("attributes") or {}
    if "check_mode" in attributes:
        return attributes["check_mode"]
    if "factory_floor.llm.attributes.READ_ONLY" in (doc.get("extends_documentation_fragment") or []):
        return {"support": "full", "details": "read only"}
    return None


@pytest.mark.parametrize("name", MODULES)
def test_every_module_supports_check_mode_and_says_how(name):
    if _action_only(name):
        with open(os.path.join(ROOT, "plugins", "action", name + ".py"), encoding="utf-8") as handle:
            assert "_supports_check_mode = True" in handle.read(), name
    else:
        assert "supports_check_mode=True" in _source(name)
    support = _check_mode_support(name)
    assert support is not None, "%s documents no check_mode attribute" % name
    if name in PARTIAL:
        assert support["support"] == "partial" and PARTIAL[name] in support["details"]
    else:
        assert support["support"] == "full", name


@pytest.mark.parametrize("name", MODULES)
def test_every_module_has_a_run_in_check_mode(name):
    path = os.path.join(ROOT, "tests", "unit", "plugins", "modules", "test_%s.py" % name)
    assert os.path.exists(path), "no tests/unit/plugins/modules/test_%s.py" % name
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    # A module run takes check mode as an argument; an action plugin's run, from its task.
    assert ("check_mode=check_mode" if _action_only(name) else "_ansible_check_mode") in text, name
    if name in WRITES:
        filename, function = WRITES[name]
        assert os.path.basename(path) == filename and ("def " + function) in text, name
