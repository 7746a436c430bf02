# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Memory tables for ``_memory``: a 128 GB GB10 host alone, the report's host
with databases and site builds, and a host where the model cannot fit.

The 128 GB GB10 box is modelled with ``MemTotal: 130023424 kB`` (exactly
124.00 GiB, what Linux reports on such a box give or take a few hundred MiB
of firmware and kernel reservations) and CUDA's total of 121.7 GiB.
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _memory
from ansible_collections.factory_floor.llm.plugins.module_utils._memory import (
    GIB,
    MemoryPlanError,
    parse_meminfo,
    read_cgroup_memory,
    resolve_workloads,
    unit_memory,
    utilization_hundredths,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import (
    at_utilization,
    plan_host,
    plan_hosts,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_report import reasoning_lines, summary

GB10_MEMTOTAL_KB = 130023424  # 124.00 GiB
DEVICE_TOTAL = 121.7
DEVICE_TOTAL_BYTES = int(round(121.7 * GIB))


def meminfo_text(total_kb=GB10_MEMTOTAL_KB, free_kb=None, available_kb=None, cached_kb=0, buffers_kb=0):
    free_kb = total_kb - 4 * 1024 * 1024 if free_kb is None else free_kb
    available_kb = free_kb + cached_kb if available_kb is None else available_kb
    return (
        "MemTotal:       %d kB\n"
        "MemFree:        %d kB\n"
        "MemAvailable:   %d kB\n"
        "Buffers:        %d kB\n"
        "Cached:         %d kB\n"
        "SwapCached:           0 kB\n"
        "HugePages_Total:       0\n"
        % (total_kb, free_kb, available_kb, buffers_kb, cached_kb)
    )


# The report's second machine: databases and site builds next to vLLM.
SEED_WORKLOADS = [
    {"name": "postgresql", "unit": "postgresql.service", "peak_gib": 8, "priority": 10},
    {"name": "site builds", "slice": "site-builds.slice", "peak_gib": 12},
]
MODEL = {"weights_gib": 71.0, "activation_gib": 2.0, "min_kv_gib": 8.0}
# The 9 GiB the operators kept free, less what the plan now counts on its own: the
# 5.6 GiB vLLM holds outside its share (cuda_context_gib) and the start floor (2 GiB).
SEED_HEADROOM = 1.4


def gib(n_bytes):
    return round(n_bytes / GIB, 2)


# ------------------------------------------------------------------ meminfo


def test_parse_meminfo_text_in_bytes():
    parsed = parse_meminfo(meminfo_text(free_kb=1024, available_kb=2048, cached_kb=512, buffers_kb=256))
    assert parsed["MemTotal"] == GB10_MEMTOTAL_KB * 1024
    assert parsed["MemFree"] == 1024 * 1024
    assert parsed["MemAvailable"] == 2048 * 1024
    assert parsed["Cached"] == 512 * 1024
    assert parsed["HugePages_Total"] == 0


@pytest.mark.parametrize("source, expected", [
    ({"MemTotal": 130023424}, 130023424 * 1024),
    ({"MemTotal": "130023424 kB"}, 130023424 * 1024),
    ({"MemTotal": "130023424"}, 130023424),
])
def test_parse_meminfo_mapping(source, expected):
    assert parse_meminfo(source)["MemTotal"] == expected


@pytest.mark.parametrize("source", [42, {"MemTotal": "lots"}])
def test_parse_meminfo_rejects_garbage(source):
    with pytest.raises(MemoryPlanError):
        parse_meminfo(source)


def test_memtotal_is_required():
    with pytest.raises(MemoryPlanError, match="no MemTotal; fields seen: MemFree"):
        plan_host("h", {"MemFree": 1}, **MODEL)


def test_memavailable_falls_back_to_free_plus_cache():
    facts = _memory.memory_facts(parse_meminfo({"MemTotal": 100, "MemFree": 10, "Cached": 20, "Buffers": 5}))
    assert facts["available"] == 35 * 1024


# --------------------------------------------------------------- rounding


@pytest.mark.parametrize("budget, total, expected", [
    (75, 100, 75),            # exactly 0.75 stays 0.75 (no float 0.7499999)
    (7499, 10000, 74),        # rounded down, never up
    (91 * GIB, DEVICE_TOTAL_BYTES, 74),
    (200, 100, 100),          # never above 1.00
    (0, 100, 0),
    (-5, 100, 0),
])
def test_utilization_hundredths(budget, total, expected):
    assert utilization_hundredths(budget, total) == expected


# -------------------------------------------------------------- the tables


def test_gb10_host_vllm_alone():
    """128 GB GB10 box, nothing but the OS next to vLLM.

    host as declared: MemAvailable = 124.00 - 4.00 (OS reserve)   = 120.00 GiB
    start check at 0.92: ceil(121.70 x 0.92) = 111.96 + 5.60 outside the share
                         = 117.57 (rounded up) + 2.00 floor = 119.57 <= 120.00; 0.93 asks 120.78
    left          = 124.00 - 111.96 - 5.60                     =   6.44 GiB
    KV cache      = 111.96 - 71 - 2 - 1.70 (graphs) - 0.50     =  36.76 GiB
    """
    plan = plan_host("spark-b", meminfo_text(), device_total_gib=DEVICE_TOTAL, **MODEL)
    assert plan["gpu_memory_utilization"] == 0.92
    assert plan["granted_bytes"] == _memory.requested_bytes(DEVICE_TOTAL_BYTES, 92)
    assert gib(plan["granted_bytes"]) == 111.96
    assert gib(plan["left_bytes"]) == 6.44
    assert gib(plan["kv_cache_bytes"]) == 36.76
    assert plan["fits_now"] is True
    assert plan["drop_caches_needed"] is False
    assert plan["left_bytes"] >= plan["os_reserve_bytes"]


def test_seed_host_with_databases_and_site_builds():
    """The report: at 0.78 only about 5 GiB were left; 0.74 fixed it.

    Declared on the host: postgresql peak 8 GiB, site builds peak 12 GiB,
    OS reserve 4 GiB, the start floor 2 GiB, vLLM's 5.6 GiB outside its share and
    1.4 GiB of headroom (the 9 GiB the operators kept, less the floor and the 5.6).

    at 0.78: granted 121.70 x 0.78 = 94.93; left 124.00 - 94.93 - 5.60 = 23.47 GiB;
             minus OS 4 + postgresql 8 + builds 12 + floor 2 = -2.53: refused at start
    answer:  host as declared: MemAvailable 124 - 4 - 8 - 12 = 100.00 GiB
             0.74: ceil(121.70 x 0.74) = 90.06 + 5.60 = 95.66 + 2 floor + 1.4 headroom <= 100
             left 124 - 90.06 - 5.60 = 28.34; spare beyond OS, workloads, floor 2.34 >= 1.4
             KV cache 90.06 - 71 - 2 - 1.70 - 0.50 = 14.86 GiB
    """
    plan = plan_host("spark-a", meminfo_text(), device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                     headroom_gib=SEED_HEADROOM, **MODEL)
    assert plan["gpu_memory_utilization"] == 0.74
    assert gib(plan["budget_bytes"]) == 91.0
    assert gib(plan["granted_bytes"]) == 90.06
    assert gib(plan["start_need_bytes"]) == 95.66
    assert gib(plan["left_bytes"]) == 28.34
    assert gib(plan["spare_bytes"]) == 2.34
    assert plan["spare_bytes"] >= plan["headroom_bytes"]
    assert gib(plan["kv_cache_bytes"]) == 14.86

    at_utilization(plan, 78)
    assert gib(plan["left_bytes"]) == 23.47
    assert gib(plan["spare_bytes"]) == -2.53
    assert plan["starts_as_declared"] is False


def test_seed_host_reasoning_table():
    plan = plan_host("spark-a", meminfo_text(), device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                     headroom_gib=SEED_HEADROOM, **MODEL)
    text = "\n".join(reasoning_lines(plan))
    assert "MemTotal 124.00 GiB" in text
    assert "postgresql [declared peak]" in text
    assert "floor(91.00 / 121.70, 0.01) = 0.74" in text
    assert "vLLM asks ceil(121.70 x 0.74) = 90.06 GiB" in text
    assert "MemAvailable >= 95.66 (share + outside it, rounded up) + 2.00 floor = 97.66 GiB" in text
    assert "124.00 - 90.06 - 5.60 = 28.34 GiB" in text
    assert "KV cache 14.86 GiB" in text
    data = summary(plan)
    assert data["gpu_memory_utilization"] == 0.74
    assert data["workloads"][1] == {
        "name": "site builds", "unit": "site-builds.slice", "priority": 0, "peak_gib": 12.0,
        "measured_gib": None, "measured_source": None, "counted_gib": 12.0, "basis": "declared peak",
    }


def test_model_cannot_fit_names_the_numbers():
    """Same host, but the service needs 30 GiB of KV cache: 71 + 2 + 1.7 + 0.5 + 30 = 105.2 > 90.06."""
    with pytest.raises(MemoryPlanError) as err:
        plan_host("spark-a", meminfo_text(), device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                  headroom_gib=SEED_HEADROOM, weights_gib=71, activation_gib=2, min_kv_gib=30)
    msg = str(err.value)
    for figure in ("host spark-a", "weights 71.00", "activations 2.00", "CUDA graphs 1.70", "non-torch 0.50",
                   "minimum KV cache 30.00", "= 105.20 GiB", "33.00 GiB reserved", "postgresql 8.00",
                   "site builds 12.00", "start floor 2.00", "outside its share (CUDA context, processes) 5.60",
                   "only 91.00 of 124.00 GiB MemTotal", "0.74", "grants 90.06 GiB", "Short by 15.14 GiB"):
        assert figure in msg, figure
    # Least important first: site builds alone (12 GiB) frees too little after rounding.
    assert "move site builds, postgresql (lowest priority first)" in msg


def test_model_larger_than_machine():
    with pytest.raises(MemoryPlanError, match="Short by .* move workloads off this host"):
        plan_host("tiny", meminfo_text(total_kb=16 * 1024 * 1024), weights_gib=71, min_kv_gib=1)


def test_device_total_defaults_to_memtotal():
    plan = plan_host("h", meminfo_text(), **MODEL)
    assert plan["device_total_source"] == "MemTotal"
    assert plan["device_total_bytes"] == GB10_MEMTOTAL_KB * 1024
    # 124 - 4 - 2 (floor) - 5.6 = 112.4 >= ceil(124 x 0.90) = 111.6; 0.91 asks 112.84
    assert plan["gpu_memory_utilization"] == 0.90


@pytest.mark.parametrize("field, value", [("weights_gib", None), ("min_kv_gib", -1)])
def test_model_figures_validated(field, value):
    kwargs = dict(MODEL)
    kwargs[field] = value
    with pytest.raises(MemoryPlanError, match=field):
        plan_host("h", meminfo_text(), **kwargs)


# --------------------------------------------------------------- page cache


@pytest.mark.parametrize("free, available, drop, fits_now", [
    (100, 110, False, True),   # free enough: 95.66 GiB asked (share + outside it)
    (20, 99, True, True),      # page cache holds the rest: drop it before start
    (20, 97, False, False),    # 97 < 95.66 + 2 floor: even after dropping caches it would not start
    (20, 50, False, False),
])
def test_page_cache_is_not_used_memory(free, available, drop, fits_now):
    text = meminfo_text(free_kb=free * 1024 * 1024, available_kb=available * 1024 * 1024,
                        cached_kb=(available - free) * 1024 * 1024)
    plan = plan_host("spark-a", text, device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                     headroom_gib=SEED_HEADROOM, **MODEL)
    # The budget starts from MemTotal: page cache does not change the answer.
    assert plan["gpu_memory_utilization"] == 0.74
    assert plan["drop_caches_needed"] is drop
    assert plan["fits_now"] is fits_now


# -------------------------------------------------------------- measurement


class FakeHost:
    """A systemd + cgroup v2 host made of dictionaries."""

    def __init__(self, properties=None, files=None):
        self.properties = properties or {}
        self.files = files or {}

    def show(self, unit, name):
        return self.properties.get((unit, name), "")

    def read(self, path):
        if path not in self.files:
            raise OSError(2, "No such file", path)
        return self.files[path]


def test_unit_memory_reads_cgroup_without_page_cache():
    cg = "/sys/fs/cgroup/system.slice/postgresql.service"
    host = FakeHost(
        {("postgresql.service", "ControlGroup"): "/system.slice/postgresql.service"},
        {cg + "/memory.current": "%d\n" % (9 * GIB),
         cg + "/memory.stat": "anon 6442450944\nfile %d\nkernel 1\n" % (2 * GIB),
         cg + "/memory.peak": "%d\n" % (11 * GIB)},
    )
    measured = unit_memory("postgresql.service", host.show, host.read)
    assert measured["used"] == 7 * GIB
    assert measured["peak"] == 11 * GIB
    assert measured["source"] == cg + "/memory.current - file"


@pytest.mark.parametrize("memory_current, expected", [
    ("5368709120", 5 * GIB),
    ("[not set]", None),                 # cgroup v1 without memory accounting (the lab)
    (str(2 ** 64 - 1), None),            # systemd's "unset"
    ("", None),
])
def test_unit_memory_falls_back_to_memory_current(memory_current, expected):
    host = FakeHost({("x.slice", "MemoryCurrent"): memory_current})
    measured = unit_memory("x.slice", host.show, host.read)
    assert (measured and measured["used"]) == expected


def test_read_cgroup_memory_unreadable():
    assert read_cgroup_memory("/sys/fs/cgroup/nope", FakeHost().read) is None


def test_measured_above_declared_counts_and_warns():
    readings = {"postgresql.service": {"used": int(9.5 * GIB), "source": "test"}}
    resolved, warnings = resolve_workloads(SEED_WORKLOADS, readings.get)
    assert resolved[0]["counted"] == int(9.5 * GIB)
    assert resolved[0]["basis"] == "measured"
    assert resolved[1]["counted"] == 12 * GIB  # nothing measured: the declared peak
    assert len(warnings) == 1
    assert "postgresql: measured 9.50 GiB (test) is above its declared peak 8.00 GiB" in warnings[0]


def test_measured_below_declared_keeps_peak():
    resolved, warnings = resolve_workloads([{"name": "db", "peak_gib": 8, "measured_gib": 3}])
    assert resolved[0]["counted"] == 8 * GIB
    assert resolved[0]["measured"] == 3 * GIB
    assert warnings == []


@pytest.mark.parametrize("workloads, match", [
    ([{"peak_gib": 1}], "has no name"),
    ([{"name": "a"}], "a has no peak_gib"),
    ([{"name": "a", "peak_gib": 1}, {"name": "a", "peak_gib": 2}], "declared twice"),
    ([{"name": "a", "peak_gib": -1}], "must not be negative"),
])
def test_workloads_validated(workloads, match):
    with pytest.raises(MemoryPlanError, match=match):
        resolve_workloads(workloads)


# -------------------------------------------------------------- split hosts


def split_hosts(**overrides):
    a = dict(name="spark-a", meminfo=meminfo_text(), device_total_gib=DEVICE_TOTAL,
             workloads=SEED_WORKLOADS, headroom_gib=SEED_HEADROOM, weights_gib=35.5, activation_gib=2, min_kv_gib=8)
    b = dict(name="spark-b", meminfo=meminfo_text(), device_total_gib=DEVICE_TOTAL,
             weights_gib=35.5, activation_gib=2, min_kv_gib=8)
    a.update(overrides)
    return [b, a]


def test_split_tighter_host_decides():
    result = plan_hosts(split_hosts())
    assert result["gpu_memory_utilization"] == 0.74
    assert result["decided_by"] == "spark-a"
    by_name = {p["host"]: p for p in result["hosts"]}
    assert by_name["spark-b"]["max_hundredths"] == 92
    assert by_name["spark-b"]["gpu_memory_utilization"] == 0.74
    assert gib(by_name["spark-b"]["granted_bytes"]) == 90.06


def test_split_host_that_fits_alone_but_not_at_common_fraction():
    hosts = split_hosts()
    hosts[0]["weights_gib"] = 95  # spark-b alone: 111.96 - 95 - 4.2 = 12.76 GiB KV; at 0.74 it is negative
    with pytest.raises(MemoryPlanError, match="host spark-b.*common gpu_memory_utilization 0.74 set by host spark-a"):
        plan_hosts(hosts)


def test_split_all_failures_reported():
    hosts = split_hosts(min_kv_gib=100)
    hosts[0]["min_kv_gib"] = 100
    with pytest.raises(MemoryPlanError) as err:
        plan_hosts(hosts)
    assert "host spark-a" in str(err.value) and "host spark-b" in str(err.value)


def test_split_needs_hosts():
    with pytest.raises(MemoryPlanError, match="hosts is empty"):
        plan_hosts([])
