# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool gate's stored scores (``_tool_gate_scores``): which record counts, what a record holds and its text."""

from __future__ import annotations

import datetime
import json

import pytest

from ansible.plugins.filter.core import to_nice_json

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_scores as ts

BUILD = "b" * 64
DIGEST = "d" * 64
RUN = {"url": "http://127.0.0.1:8000", "model": "lab-chat", "score": 38.9, "total": 18, "passed_count": 7,
       "by_category": {"single": 50.0}, "failed_cases": [{"id": "weather", "raw": "{}"}], "latency_mean": 1.25,
       "suite_name": "default", "suite_digest": DIGEST, "elapsed": 90}


@pytest.mark.parametrize("records, epoch", [
    ([], None),
    ([{"measured_epoch": 1.0}, {"measured_epoch": 3.0, "passed": True}, {"measured_epoch": 2.0, "passed": None}], 3.0),
    ([{"measured_epoch": 1.0}, {"measured_epoch": 3.0, "passed": False}], 1.0),
    ([{"measured_epoch": 3.0, "passed": False}], None),
    ([{"measured_epoch": "1796000001.5"}, {"measured_epoch": 1796000000.5}], "1796000001.5"),
])
def test_the_latest_record_not_marked_failed_counts(records, epoch):
    found = ts.latest(records)
    assert (found or {}).get("measured_epoch") == epoch


def test_a_lookup_reads_every_hosts_score_of_the_build_and_suite_and_never_failed(tmp_path):
    for name, epoch in (("spark-a", 1.0), ("spark-b", 2.0)):
        (tmp_path / ("%s.%s.%s.json" % (BUILD[:16], DIGEST[:16], name))).write_text(json.dumps(
            {"host": name, "measured_epoch": epoch}))
    (tmp_path / ("%s.%s.spark-c.json" % (BUILD[:16], "e" * 16))).write_text(json.dumps({"measured_epoch": 9.0}))
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / ("%s.%s.spark-a.20261206T000000Z.json" % (BUILD[:16], DIGEST[:16]))).write_text(
        json.dumps({"measured_epoch": 9.0, "passed": False}))
    assert ts.lookup(str(tmp_path), BUILD, DIGEST)["host"] == "spark-b"
    assert ts.lookup(str(tmp_path), "c" * 64, DIGEST) is None
    assert ts.lookup(str(tmp_path / "none"), BUILD, DIGEST) is None


@pytest.mark.parametrize("role, passed, stored", [("candidate", False, False), ("candidate", True, True),
                                                  ("incumbent", True, None)])
def test_a_record_holds_the_build_the_run_and_the_verdict(role, passed, stored):
    now = datetime.datetime(2026, 12, 6, 22, 0, 1, 500000, tzinfo=datetime.timezone.utc)
    one = ts.record({"id": BUILD, "parts": {"model_path": "/models/m"}}, RUN, "spark-a", role, passed, now)
    assert one == dict({key: RUN[key] for key in ts.RUN_KEYS}, build_id=BUILD, build={"model_path": "/models/m"},
                       host="spark-a", role=role, passed=stored, measured_at="2026-12-06T22:00:01Z",
                       measured_epoch=now.timestamp())


def test_a_records_text_is_what_to_nice_json_wrote():
    one = ts.record({"id": BUILD, "parts": {"files": {"é.json": "x"}}}, RUN, "spark-a", "incumbent")
    assert ts.text(one) == to_nice_json(one) + "\n"


def test_a_lookup_for_some_hosts_reads_only_theirs(tmp_path):
    for host, score, epoch in (("spark-a", 70.0, 1), ("elsewhere", 90.0, 2)):
        (tmp_path / ("b" * 16 + "." + "d" * 16 + ".%s.json" % host)).write_text(
            json.dumps({"host": host, "score": score, "measured_epoch": epoch}), encoding="utf-8")
    assert ts.lookup(str(tmp_path), "b" * 64, "d" * 64, hosts=["spark-a", "spark-b"])["score"] == 70.0
    assert ts.lookup(str(tmp_path), "b" * 64, "d" * 64)["score"] == 90.0
    assert ts.lookup(str(tmp_path), "b" * 64, "d" * 64, hosts=[]) is None


PASSED = {"score": 94.4, "measured_at": "2026-12-01T10:02:11Z", "host": "spark-a", "role": "candidate", "passed": True}


@pytest.mark.parametrize("found, min_score, admit, known, why", [
    (PASSED, 80, True, True,
     "the build bbbbbbbbbbbbbbbb passed the gate here on 2026-12-01T10:02:11Z (spark-a) with score 94.4"),
    (dict(PASSED, role="incumbent", passed=None), 80, True, True,
     "the build bbbbbbbbbbbbbbbb was scored here while it served on 2026-12-01T10:02:11Z (spark-a) with score 94.4"),
    (None, 80, True, False,
     "the build bbbbbbbbbbbbbbbb has no score stored on this site's engine hosts with this suite (never gated here)"),
    (dict(PASSED, score=70.0), 80, True, False,
     "the build bbbbbbbbbbbbbbbb's last stored score here, 70.0 (2026-12-01T10:02:11Z), is below tool_gate_min_score 80 or 0"),
    (dict(PASSED, score=0), 0, True, False,
     "the build bbbbbbbbbbbbbbbb's last stored score here, 0 (2026-12-01T10:02:11Z), is below tool_gate_min_score 0 or 0"),
    (PASSED, 80, False, False,
     "tool_gate_admit_known_builds is false: the build bbbbbbbbbbbbbbbb is gated before it joins the proxy"),
])
def test_a_build_is_known_when_its_stored_score_here_clears_the_bar(found, min_score, admit, known, why):
    fact = ts.known("b" * 64, found, min_score, admit)
    assert fact["known"] is known and fact["why"] == why and fact["admit"] is admit
    assert fact["score"] == (found["score"] if found and admit else None)
