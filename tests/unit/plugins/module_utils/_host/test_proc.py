# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/proc.py on a fake ``/proc`` (the watchdog's ``cpu_progress``)."""

from __future__ import annotations

import os

from ansible_collections.factory_floor.llm.plugins.module_utils._host.proc import engine_cpu


def _stat(tmp_path, pid, ppid, utime, stime=0, name="python3", state="S"):
    (tmp_path / str(pid)).mkdir()
    rest = [state, str(ppid)] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 30
    (tmp_path / str(pid) / "stat").write_text("%d (%s) %s\n" % (pid, name, " ".join(rest)))


def test_engine_cpu_reads_proc(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    _stat(tmp_path, 10, 1, ticks * 2, ticks)                       # the API server (MainPID)
    _stat(tmp_path, 11, 10, ticks * 5, name="VLLM::EngineCor")     # its engine core (/proc cuts names at 15)
    _stat(tmp_path, 12, 11, ticks * 7, name="VLLM::Worker")        # its worker: computes during a long step
    _stat(tmp_path, 13, 10, ticks, name="a b) c")                  # another child with an odd name
    _stat(tmp_path, 20, 1, ticks * 100)                            # someone else
    # The API server is left out: it answers /health while its engine hangs.
    assert engine_cpu(10, proc=str(tmp_path)) == (13.0, [])
    assert engine_cpu(99, proc=str(tmp_path)) == (None, [])


def test_engine_cpu_names_a_stopped_engine_core(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    _stat(tmp_path, 10, 1, ticks)
    _stat(tmp_path, 11, 10, ticks * 5, name="VLLM::EngineCor", state="T")
    _stat(tmp_path, 12, 11, ticks * 7, name="VLLM::Worker", state="R")
    assert engine_cpu(10, proc=str(tmp_path)) == (12.0, ["VLLM::EngineCor pid 11"])
