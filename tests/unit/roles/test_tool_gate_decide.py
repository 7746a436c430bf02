# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool_gate role's verdict in a real ansible-playbook run gives the Python verdict.

Every row of the verdict's table (tests/unit/plugins/module_utils/test_tool_gate_verdict.py)
goes through ``tool_gate_note`` (``note: verdict``, what ``tool_gate_run``'s candidate step
calls) on one host with a local connection, with the role's variables loaded, the candidate's
run as ``__tool_gate_run`` and the incumbent's lookup as ``__tool_gate_found`` (a row without
one leaves it undefined, as when no lookup ran). The ``tool_gate_result`` each gives - what the switch and upgrade reports, the stored
record and the operator read - must equal :func:`_tool_gate_verdict.verdict` for the same
inputs, the time in a failed run's file name aside; and the message is printed.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_verdict as tv
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_tool_gate_verdict import (
    BASE, ROWS, inputs)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
STAMP = re.compile(r"\.\d{8}T\d{6}Z\.json$")

needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


def role_vars(overrides):
    """The role's variables for a row, as the role holds them when decide runs."""
    given = dict(BASE, **overrides)
    variables = {"__tool_gate_run": given["run"], "tool_gate_url": given["url"], "tool_gate_build": {"id": given["build_id"]},
                 "tool_gate_model_path": given["model_path"], "tool_gate_topology": given["topology"],
                 "tool_gate_min_score": given["min_score"], "tool_gate_tolerance": given["tolerance"],
                 "tool_gate_incumbent_build_id": given["incumbent_build_id"], "tool_gate_store_dir": "/store"}
    if "found" in overrides:
        variables["__tool_gate_found"] = overrides["found"]
    return variables


def playbook(result_file):
    """One play: decide for each row, then write every row's tool_gate_result."""
    # The role's variables (_tool_gate_record_file, _tool_gate_failed_dir...) as tool_gate_run sees them.
    tasks = [{"name": "Load the role's variables", "ansible.builtin.include_role": {
        "name": "factory_floor.llm.tool_gate", "tasks_from": "scores", "public": True}}]
    for index, (rule, overrides, _problems, _message) in enumerate(ROWS):
        tasks.append({"name": "Decide: %s" % rule, "factory_floor.llm.tool_gate_note": {"note": "verdict"},
                      "register": "__tool_gate_verdict", "vars": role_vars(overrides)})
        tasks.append({"name": "Say row %d" % index, "ansible.builtin.debug": {"msg": "{{ __tool_gate_verdict.message }}"}})
        tasks.append({"name": "Keep row %d" % index,
                      "ansible.builtin.set_fact": {"verdicts": "{{ verdicts | default([]) + [__tool_gate_verdict.value] }}"}})
    tasks.append({"name": "Write the verdicts", "ansible.builtin.copy": {
        "content": "{{ verdicts | to_json }}", "dest": str(result_file), "mode": "0644"}})
    return [{"name": "The gate's verdict, row by row", "hosts": "spark-t", "gather_facts": False, "tasks": tasks}]


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    """(tool_gate_result of each row, the run's output)."""
    tmp = tmp_path_factory.mktemp("decide")
    (tmp / "inventory.yml").write_text(json.dumps({"all": {"hosts": {"spark-t": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    (tmp / "play.yml").write_text(json.dumps(playbook(tmp / "verdicts.json"), indent=1))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp / "inventory.yml"), str(tmp / "play.yml")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return json.loads((tmp / "verdicts.json").read_text()), output


@needs_tools
@pytest.mark.parametrize("index", range(len(ROWS)), ids=[row[0] for row in ROWS])
def test_the_role_decides_as_the_table(decided, index):
    verdicts, output = decided
    got = verdicts[index]
    want = tv.verdict(now=datetime.datetime.now(datetime.timezone.utc), **inputs(ROWS[index][1]))
    assert STAMP.sub(".T.json", got["record_file"]) == STAMP.sub(".T.json", want["record_file"])
    # As JSON: the same keys in the same order, the same types (50.0 is not 50, true is not 1).
    assert json.dumps(dict(got, record_file=None)) == json.dumps(dict(want, record_file=None))
    assert json.dumps(got["message"]) in output
