# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The rolling restart's words when a replica's restart failed (plugins/module_utils/_rolling_restart.py, the
restart_failure filter): the sentence the rolling_restart role stops with, in the words it said before; and the
start-up record its decision reads."""

from __future__ import annotations

import base64

import pytest

from ansible_collections.factory_floor.llm.plugins.filter.restart_failure import FilterModule
from ansible_collections.factory_floor.llm.plugins.module_utils._rolling_restart import failure_message, read_startup

TAIL = ("The replicas not restarted yet keep their old configuration. Fix the cause (journalctl -u vllm-replica.service "
        "on spark-a) and run playbooks/deploy.yml again; spark-a is off the drain list and rejoins the proxy by itself "
        "once it serves.")


def test_a_failure_names_the_error_and_who_still_serves():
    assert failure_message("spark-a", "--max-num-seqs 8 -> 16", "timed out waiting", ["spark-b"],
                           playbook_dir="/src/playbooks") == (
        "The restart of spark-a for its new configuration (--max-num-seqs 8 -> 16) failed: timed out waiting The other "
        "replicas (spark-b) serve. " + TAIL)


def test_a_failure_without_a_message_or_carriers_points_at_the_failed_task():
    assert failure_message("spark-a", "the image", None, [], playbook_dir="/src/playbooks") == (
        "The restart of spark-a for its new configuration (the image) failed: see the failed task above. " + TAIL)


def test_a_long_message_is_cut_as_jinja_truncate_cuts_it():
    error = "word " * 200
    said = failure_message("spark-a", "x", error, [], playbook_dir="/src/playbooks")
    cut = said.split("failed: ", 1)[1].split(" The replicas not", 1)[0]
    assert cut.endswith("...") and len(cut) <= 600


def test_the_filter_is_the_function():
    restart_failure = FilterModule().filters()["restart_failure"]
    assert restart_failure("spark-a", "x", "boom", ("spark-b",), "vllm-replica.service", "/src/playbooks") == \
        failure_message("spark-a", "x", "boom", ["spark-b"], playbook_dir="/src/playbooks")


@pytest.mark.parametrize("slurped, record", [
    ({"content": base64.b64encode(b'{"replicas": 93.5}').decode()}, {"replicas": 93.5}),
    ({"failed": True, "msg": "file not found"}, {}),
    ({"content": base64.b64encode(b"not json").decode()}, {}),
    ({"content": base64.b64encode(b"[1, 2]").decode()}, {}),
    ({"content": "%%%"}, {}),
    (None, {}),
])
def test_the_start_up_record_is_read_or_empty(slurped, record):
    assert read_startup(slurped) == record
