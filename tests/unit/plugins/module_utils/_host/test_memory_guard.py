# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's start check (``_memory_guard``) on memory tables.

The GB10 figures are the report's second machine (see ``test_memory.py``):
at ``gpu_memory_utilization`` 0.74 of CUDA's 121.7 GiB vLLM asks for 90.06 GiB.
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import memory_guard as guard
from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import GIB, memory_facts, parse_meminfo

NEED = int(round(121.7 * GIB)) * 74 // 100  # 90.06 GiB: what vLLM asks for at 0.74
FLOOR = 2 * GIB


def meminfo(free_gib, available_gib=None, total_gib=124.0):
    """``/proc/meminfo`` text with MemFree/MemAvailable in GiB (None leaves MemAvailable out)."""
    lines = ["MemTotal:       %d kB" % int(total_gib * 1024 * 1024),
             "MemFree:        %d kB" % int(free_gib * 1024 * 1024)]
    if available_gib is not None:
        lines.append("MemAvailable:   %d kB" % int(available_gib * 1024 * 1024))
    lines.append("Buffers:          262144 kB")
    lines.append("Cached:         %d kB" % int(max((available_gib or free_gib) - free_gib, 0) * 1024 * 1024))
    return "\n".join(lines) + "\n"


def facts(free_gib, available_gib):
    return memory_facts(parse_meminfo(meminfo(free_gib, available_gib)))


@pytest.mark.parametrize("free, available, require_free, dropped, action, reason", [
    # enough free memory: start, nothing dropped
    (95, 110, True, False, "start", "free"),
    # the report's host after a day of builds: MemFree low, MemAvailable high -> drop the page cache
    (20, 100, True, False, "drop_caches", "page_cache"),
    (20, 100, False, False, "drop_caches", "page_cache"),
    # after the drop, still not free (dirty pages, tmpfs): vLLM would fail, so refuse ...
    (50, 100, True, True, "refuse", "free_after_drop"),
    # ... unless the engine takes reclaimable memory as it allocates (vLLM's CPU backend)
    (50, 100, False, True, "start", "available"),
    # MemAvailable too low: a workload holds the memory; starting would wedge the host
    (10, 60, True, False, "refuse", "available"),
    (10, 60, False, False, "refuse", "available"),
    (95, 91, True, False, "refuse", "available"),   # 91 < 90.06 + 2 floor, even with MemFree "enough"
])
def test_start_decision_table(free, available, require_free, dropped, action, reason):
    decision = guard.start_decision(facts(free, available), NEED, FLOOR, require_free=require_free, dropped=dropped)
    assert (decision["action"], decision["reason"]) == (action, reason)
    assert decision["need"] == NEED and decision["floor"] == FLOOR


def test_refusal_names_the_numbers():
    decision = guard.start_decision(facts(10, 60), NEED, FLOOR)
    assert decision["message"] == (
        "MemAvailable 60.00 GiB < 90.06 GiB it asks for + 2.00 GiB floor for the rest of the host = 92.06 GiB "
        "(MemFree 10.00 GiB); starting it would wedge the host")


def test_drop_message_names_the_numbers():
    decision = guard.start_decision(facts(20, 100), NEED, FLOOR)
    assert decision["message"] == (
        "MemFree 20.00 GiB < 90.06 GiB it asks for, but MemAvailable 100.00 GiB is enough (floor 2.00 GiB): "
        "dropping the page cache")


def test_exactly_enough_starts():
    exact = {"free": NEED, "available": NEED + FLOOR}
    assert guard.start_decision(exact, NEED, FLOOR)["action"] == "start"
    assert guard.start_decision(dict(exact, available=NEED + FLOOR - 1), NEED, FLOOR)["action"] == "refuse"


def test_old_kernel_without_memavailable_counts_free_plus_cache():
    # MemAvailable missing: MemFree + Buffers + Cached (20 + 0.25 + 80 GiB)
    text = "MemTotal: %d kB\nMemFree: %d kB\nBuffers: 262144 kB\nCached: %d kB\n" % (
        124 * 1024 * 1024, 20 * 1024 * 1024, 80 * 1024 * 1024)
    decision = guard.start_decision(memory_facts(parse_meminfo(text)), NEED, FLOOR)
    assert decision["action"] == "drop_caches"
    assert decision["available"] == int(100.25 * GIB)


def test_unreadable_meminfo_refuses():
    decision = guard.start_decision({"free": None, "available": None}, NEED, FLOOR)
    assert decision["action"] == "refuse" and decision["reason"] == "unreadable"


class Host:
    """A fake host: a sequence of /proc/meminfo texts, a clock, and what the loop did."""

    def __init__(self, readings, drop_error=None, after_drop=None):
        self.readings = list(readings)
        self.after_drop = after_drop
        self.drop_error = drop_error
        self.now = 1000.0
        self.drops = 0
        self.sleeps = []
        self.lines = []

    def read(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def drop(self):
        self.drops += 1
        if self.drop_error is None and self.after_drop is not None:
            self.readings = [self.after_drop]
        return self.drop_error

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self):
        return self.now

    def run(self, wait=0.0, require_free=True, **kwargs):
        return guard.run_start_check(self.read, self.drop, self.lines.append, NEED, FLOOR,
                                     require_free=require_free, wait=wait, unit="vllm-replica.service",
                                     sleep=self.sleep, clock=self.clock, **kwargs)


def test_drop_lets_vllm_start():
    host = Host([meminfo(20, 100)], after_drop=meminfo(99, 100))
    assert host.run() == 0
    assert host.drops == 1 and host.sleeps == []
    assert "dropping the page cache" in host.lines[0]
    assert host.lines[-1].startswith("memory guard: vllm-replica.service may start: MemFree 99.00 GiB >= 90.06 GiB")


def test_too_little_available_refuses_at_once_without_dropping():
    host = Host([meminfo(10, 60)])
    assert host.run() == guard.EXIT_REFUSED
    assert host.drops == 0
    assert host.lines == [
        "memory guard: refusing to start vllm-replica.service: MemAvailable 60.00 GiB < 90.06 GiB it asks for "
        "+ 2.00 GiB floor for the rest of the host = 92.06 GiB (MemFree 10.00 GiB); starting it would wedge the host."]


def test_waits_for_the_other_topology_to_let_go():
    # The split engine is still draining when the replica's start check runs (no ordering between
    # Conflicts= units); two polls later its memory is back.
    host = Host([meminfo(10, 30), meminfo(10, 30), meminfo(100, 110)])
    assert host.run(wait=120) == 0
    assert host.sleeps == [guard.POLL_INTERVAL, guard.POLL_INTERVAL]
    assert "waiting up to 120 s" in host.lines[0]
    assert "may start" in host.lines[-1]


def test_gives_up_after_the_wait_and_says_how_long():
    host = Host([meminfo(10, 60)])
    assert host.run(wait=10, hint=" Stop or shrink co-resident workloads.") == guard.EXIT_REFUSED
    assert sum(host.sleeps) == pytest.approx(10)
    assert host.lines[-1].startswith("memory guard: refusing to start vllm-replica.service after waiting 10 s: "
                                     "MemAvailable 60.00 GiB")
    assert host.lines[-1].endswith("would wedge the host. Stop or shrink co-resident workloads.")


def test_drop_that_frees_too_little_refuses_when_free_memory_is_required():
    host = Host([meminfo(20, 100)], after_drop=meminfo(50, 100))
    assert host.run() == guard.EXIT_REFUSED
    assert host.drops == 1
    assert "after dropping the page cache MemFree 50.00 GiB is still below the 90.06 GiB" in host.lines[-1]


def test_drop_is_not_repeated_on_every_poll():
    host = Host([meminfo(20, 100)], after_drop=meminfo(50, 100))
    assert host.run(wait=30) == guard.EXIT_REFUSED
    # one drop at once, then at most one per DROP_INTERVAL (15 s) while waiting: at 0 s and 16 s
    assert host.drops == 2


@pytest.mark.parametrize("require_free, expected", [(False, 0), (True, guard.EXIT_REFUSED)])
def test_drop_not_permitted_as_in_a_lab_container(require_free, expected):
    # /proc/sys is read-only inside the lab's podman containers.
    host = Host([meminfo(20, 100)], drop_error="[Errno 30] Read-only file system: '/proc/sys/vm/drop_caches'")
    assert host.run(require_free=require_free) == expected
    assert host.drops == 1
    assert "could not drop the page cache: [Errno 30] Read-only file system" in host.lines[1]


def test_drop_page_cache_syncs_then_writes_3(tmp_path):
    calls = []
    path = tmp_path / "drop_caches"
    assert guard.drop_page_cache(str(path), sync=lambda: calls.append("sync")) is None
    assert calls == ["sync"] and path.read_text() == "3\n"
    assert "No such file or directory" in guard.drop_page_cache(str(tmp_path / "no" / "such"), sync=lambda: None)


def test_main_dry_run_and_real_run(tmp_path, capsys):
    proc_meminfo = tmp_path / "meminfo"
    proc_meminfo.write_text(meminfo(20, 100))
    drop = tmp_path / "drop_caches"
    common = ["start-check", "--need-gib", "90.06", "--floor-gib", "2", "--require-free",
              "--unit", "vllm-split.service", "--meminfo", str(proc_meminfo), "--drop-caches-path", str(drop)]
    assert guard.main(common + ["--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("memory guard (dry run): vllm-split.service: drop_caches: MemFree 20.00")
    assert not drop.exists()
    # The fake drop frees nothing: MemFree stays 20 GiB, so vLLM would fail; refuse, naming the slice.
    assert guard.main(common + ["--slice", "factory-floor-workloads.slice"]) == guard.EXIT_REFUSED
    out = capsys.readouterr().out
    assert drop.read_text() == "3\n"
    assert "(systemctl status factory-floor-workloads.slice)" in out.splitlines()[-1]


def test_main_unreadable_meminfo_refuses(tmp_path, capsys):
    assert guard.main(["start-check", "--need-gib", "4", "--meminfo", str(tmp_path / "none")]) == guard.EXIT_REFUSED
    assert "has no MemFree/MemAvailable" in capsys.readouterr().out
