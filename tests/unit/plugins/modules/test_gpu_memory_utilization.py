# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.gpu_memory_utilization``."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import gpu_memory_utilization as module

GIB = 1024 ** 3
MEMTOTAL_KB = 130023424  # 124.00 GiB: a 128 GB GB10 box
MEMINFO = (
    "MemTotal:       %d kB\n"
    "MemFree:        %d kB\n"
    "MemAvailable:   %d kB\n"
    "Buffers:          262144 kB\n"
    "Cached:         %d kB\n" % (MEMTOTAL_KB, 20 * 1024 * 1024, 100 * 1024 * 1024, 80 * 1024 * 1024)
)
SEED = {
    "host": "spark-a",
    "device_total_gib": 121.7,
    "weights_gib": 71,
    "activation_gib": 2,
    "min_kv_gib": 8,
    "headroom_gib": 9,
    "workloads": [
        {"name": "postgresql", "unit": "postgresql.service", "peak_gib": 8, "priority": 10},
        {"name": "site builds", "slice": "site-builds.slice", "peak_gib": 12},
    ],
}


@pytest.fixture
def host(monkeypatch):
    """The target: /proc/meminfo and a systemd whose units have no cgroup files."""
    files = {"/proc/meminfo": MEMINFO}
    properties = {}

    def read_text(path):
        if path not in files:
            raise OSError(2, "No such file", path)
        return files[path]

    monkeypatch.setattr(module, "read_text", read_text)
    monkeypatch.setattr(module, "systemctl_show", lambda m: lambda unit, name: properties.get((unit, name)))
    return files, properties


@pytest.mark.parametrize("check_mode", [False, True])
def test_seed_host_reads_proc_meminfo(run_module, host, check_mode):
    args = dict(SEED, _ansible_check_mode=check_mode)
    result = run_module(module, args).result
    assert result["changed"] is False
    assert result["gpu_memory_utilization"] == 0.74
    assert result["decided_by"] == "spark-a"
    assert result["granted_gib"] == 90.06
    assert result["left_gib"] == 33.94
    assert result["kv_cache_gib"] == 17.06
    # MemFree 20 GiB < 90.06 asked <= MemAvailable 100 GiB
    assert result["drop_caches_needed"] is True
    assert result["fits_now"] is True
    assert result["hosts"][0]["mem_total_gib"] == 124.0
    assert result["hosts"][0]["spare_gib"] == 9.94
    assert any("floor(91.00 / 121.70, 0.01) = 0.74" in line for line in result["reasoning"])
    assert any("drop page cache" in line for line in result["reasoning"])


def test_meminfo_option_overrides_the_host(run_module, host):
    args = dict(SEED, meminfo={"MemTotal": MEMTOTAL_KB, "MemFree": 110 * 1024 * 1024,
                               "MemAvailable": 115 * 1024 * 1024})
    host[0].clear()  # /proc/meminfo must not be read
    result = run_module(module, args).result
    assert result["gpu_memory_utilization"] == 0.74
    assert result["drop_caches_needed"] is False


def test_measured_use_above_peak_is_counted_with_a_warning(run_module, host):
    files, properties = host
    properties[("postgresql.service", "ControlGroup")] = "/system.slice/postgresql.service"
    cgroup = "/sys/fs/cgroup/system.slice/postgresql.service"
    files[cgroup + "/memory.current"] = str(12 * GIB)
    files[cgroup + "/memory.stat"] = "anon 1\nfile %d\n" % (2 * GIB)  # 10 GiB without page cache
    properties[("site-builds.slice", "MemoryCurrent")] = "[not set]"
    result = run_module(module, dict(SEED)).result
    postgresql, builds = result["hosts"][0]["workloads"]
    assert postgresql["measured_gib"] == 10.0
    assert postgresql["counted_gib"] == 10.0
    assert postgresql["basis"] == "measured"
    assert builds["measured_gib"] is None
    assert builds["counted_gib"] == 12.0
    # 124 - 4 - 10 - 12 - 9 = 89 -> floor(89 / 121.7) = 0.73
    assert result["gpu_memory_utilization"] == 0.73
    # ansible-core 2.19 returns warnings as structured events; look inside them.
    assert "postgresql: measured 10.00 GiB" in json.dumps(result["warnings"])


def test_measurement_can_be_switched_off(run_module, host):
    files, properties = host
    properties[("postgresql.service", "MemoryCurrent")] = str(50 * GIB)
    result = run_module(module, dict(SEED, measure_workloads=False)).result
    assert result["gpu_memory_utilization"] == 0.74
    assert result["hosts"][0]["workloads"][0]["measured_gib"] is None


def test_model_does_not_fit(run_module, host):
    result = run_module(module, dict(SEED, min_kv_gib=30)).result
    assert result["failed"] is True
    assert "host spark-a" in result["msg"]
    assert "= 103.00 GiB" in result["msg"]
    assert "grants 90.06 GiB" in result["msg"]


def test_split_hosts_the_tighter_host_decides(run_module, host):
    host[0].clear()
    args = {
        "device_total_gib": 121.7,
        "weights_gib": 35.5,
        "min_kv_gib": 8,
        "hosts": [
            {"name": "spark-b", "meminfo": {"MemTotal": MEMTOTAL_KB}},
            {"name": "spark-a", "meminfo": MEMINFO, "headroom_gib": 9, "workloads": SEED["workloads"]},
        ],
    }
    result = run_module(module, args).result
    assert result["gpu_memory_utilization"] == 0.74
    assert result["decided_by"] == "spark-a"
    assert [h["host"] for h in result["hosts"]] == ["spark-b", "spark-a"]
    assert result["hosts"][0]["max_gpu_memory_utilization"] == 0.98
    assert result["hosts"][0]["gpu_memory_utilization"] == 0.74
    assert result["hosts"][0]["headroom_gib"] == 0.0   # top-level default
    assert result["hosts"][1]["headroom_gib"] == 9.0
    assert result["kv_cache_gib"] == round(90.06 - 35.5 - 2, 2)
    assert "decided by spark-a" in result["reasoning"][-1]


@pytest.mark.parametrize("args, match", [
    (dict(SEED, weights_gib=None), "weights_gib is not set"),
    (dict(SEED, min_kv_gib=None), "min_kv_gib is not set"),
    (dict(SEED, workloads=[{"name": "x", "unit": "x.service", "slice": "x.slice", "peak_gib": 1}]),
     "names both unit x.service and slice x.slice"),
    (dict(SEED, hosts=[{"name": "a", "meminfo": MEMINFO}]), "mutually exclusive"),
])
def test_bad_arguments(run_module, host, args, match):
    result = run_module(module, args).result
    assert result["failed"] is True
    assert match in result["msg"]


def test_unreadable_meminfo(run_module, host):
    host[0].clear()
    result = run_module(module, dict(SEED)).result
    assert result["failed"] is True
    assert "Reading /proc/meminfo on the target" in result["msg"]
    assert "Pass the host's memory facts as meminfo" in result["msg"]
