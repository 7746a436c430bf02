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

from ansible_collections.factory_floor.llm.plugins.module_utils._host import memory as _memory
from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_plan
from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import (
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


@pytest.mark.parametrize("free, available, share, drop", [
    (100, 110, 0.74, False),   # free enough: 95.66 GiB asked (share + outside it)
    (20, 99, 0.74, True),      # page cache holds the rest: drop it before start
    # 97 < 95.66 + 2 floor: 0.74 would leave the host under its floor once started, so the
    # share is the largest that fits now: 0.73 asks 88.85 + 5.60 = 94.45 + 2 <= 97.
    (20, 97, 0.73, True),
])
def test_page_cache_is_not_used_memory(free, available, share, drop):
    text = meminfo_text(free_kb=free * 1024 * 1024, available_kb=available * 1024 * 1024,
                        cached_kb=(available - free) * 1024 * 1024)
    plan = plan_host("spark-a", text, device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                     headroom_gib=SEED_HEADROOM, **MODEL)
    # Page cache is available memory: MemFree alone does not lower the share.
    assert plan["gpu_memory_utilization"] == share
    assert plan["drop_caches_needed"] is drop
    assert plan["fits_now"] is True
    assert plan["available_after_start_bytes"] >= plan["floor_bytes"]


def test_a_host_that_cannot_hold_the_model_now_is_refused_naming_memavailable():
    # 50 GiB available now: even the smallest share with the minimum KV cache (0.69) would not start.
    text = meminfo_text(free_kb=20 * 1024 * 1024, available_kb=50 * 1024 * 1024, cached_kb=30 * 1024 * 1024)
    with pytest.raises(MemoryPlanError) as err:
        plan_host("spark-a", text, device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                  headroom_gib=SEED_HEADROOM, **MODEL)
    msg = str(err.value)
    assert "The host as it is now allows less: MemAvailable 50.00 GiB" in msg
    assert ("min_kv_gib 8.00 needs gpu_memory_utilization 0.69 on host spark-a: MemAvailable now 50.00 GiB is "
            "41.58 GiB short of the 91.58 GiB it needs with floor_gib 2.00") in msg


# ----------------------------------------------- the host as it is now (issue 33, item 17)


def test_share_fits_what_the_host_has_available_now():
    """Declared: 0.74. But 5 GiB more is in use now than the declarations say (MemAvailable 95, not 100).

    At 0.74 the engine would take 90.06 + 5.60 = 95.66 GiB: MemAvailable after start -0.66 GiB,
    under the 2 GiB floor. The largest share that keeps the floor now: 95 - 2 - 5.6 = 87.4 GiB for
    the share, 0.71 asks 86.41 (0.72 would ask 87.63).
    """
    text = meminfo_text(free_kb=95 * 1024 * 1024, available_kb=95 * 1024 * 1024)
    plan = plan_host("spark-a", text, device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                     headroom_gib=SEED_HEADROOM, reference_gpu_memory_utilization=0.74, **MODEL)
    assert plan["max_hundredths_declared"] == 74
    assert plan["max_hundredths_now"] == 71
    assert plan["gpu_memory_utilization"] == 0.71
    assert plan["limited_by"] == "now"
    assert plan["fits_now"] is True
    assert gib(plan["available_after_start_bytes"]) == 2.99   # 95 - 86.41 - 5.60 (rounded up): >= 2 floor
    # One line says what keeps it from 0.74: the memory in use now, not a declared reserve.
    assert plan["difference"] == (
        "gpu_memory_utilization 0.74 on host spark-a: MemAvailable now 95.00 GiB is 2.66 GiB short of the 97.66 GiB it "
        "needs with floor_gib 2.00 (memory in use now beyond the declarations: a workload above its peak, or "
        "something undeclared)")
    text = "\n".join(reasoning_lines(plan))
    assert "largest share that fits the host as it is now = 0.71" in text
    assert "= 2.99 GiB >= the 2.00 floor" in text


def test_the_running_engine_gives_its_memory_back_to_its_restart():
    """A routine deploy plans while the engine runs: MemAvailable 8 GiB, the engine holds its 0.74.

    A restart finds 8 + ceil(121.70 x 0.74) 90.06 + 5.60 = 103.66 GiB: the declared 0.74 fits,
    and keeps 103.66 - 95.66 = 8.00 GiB >= the floor. Without counting it, the share would fall
    to nothing and the host would be called full.
    """
    text = meminfo_text(free_kb=8 * 1024 * 1024, available_kb=8 * 1024 * 1024)
    engines = [{"unit": "vllm-replica.service", "gpu_memory_utilization": 0.74, "measured_bytes": 3 * GIB},
               {"unit": "vllm-split.service", "gpu_memory_utilization": None, "measured_bytes": None}]
    plan = plan_host("spark-a", text, device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                     headroom_gib=SEED_HEADROOM, engines=engines, **MODEL)
    assert plan["gpu_memory_utilization"] == 0.74
    assert plan["limited_by"] == "declared"
    assert gib(plan["engines_held_bytes"]) == 95.66
    assert [e["held_basis"] for e in plan["engines"]] == [
        "its --gpu-memory-utilization 0.74 + cuda_context_gib", "not measurable"]
    assert plan["fits_now"] is True
    assert gib(plan["available_after_start_bytes"]) == 8.0
    assert plan["reference_hundredths"] == 74 and plan["difference"] == ""
    # The same host with the engine's memory not counted back is full.
    with pytest.raises(MemoryPlanError, match="MemAvailable now 8.00 GiB"):
        plan_host("spark-a", text, device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                  headroom_gib=SEED_HEADROOM, engines_held_gib=0, **MODEL)


def test_an_engine_running_above_the_share_is_the_reference_and_the_line_says_why():
    """The engine runs with 0.78 (set by hand, as in the report); the host as declared allows 0.74."""
    text = meminfo_text(free_kb=4 * 1024 * 1024, available_kb=4 * 1024 * 1024)
    engines = [{"unit": "vllm-replica.service", "gpu_memory_utilization": 0.785, "measured_bytes": None}]
    plan = plan_host("spark-a", text, device_total_gib=DEVICE_TOTAL, workloads=SEED_WORKLOADS,
                     headroom_gib=SEED_HEADROOM, engines=engines, **MODEL)
    assert plan["gpu_memory_utilization"] == 0.74
    assert plan["reference_hundredths"] == 78 and plan["reference_source"] == "running engine"
    assert plan["difference"].startswith("gpu_memory_utilization 0.78 on host spark-a: 3.93 GiB more than its "
                                         "declarations leave")
    assert plan["difference"].endswith("os_reserve_gib or cuda_context_gib alone make the difference "
                                       "(os_reserve_gib 0.06 instead of 4.00, cuda_context_gib 1.66 instead of 5.60)")


@pytest.mark.parametrize("share, measured, expected_gib, basis", [
    (0.74, None, 95.66, "its --gpu-memory-utilization 0.74 + cuda_context_gib"),
    (0.74, 100 * GIB, 100.0, "measured"),       # it holds more than it was admitted with
    (None, 3 * GIB, 3.0, "measured"),            # vLLM's CPU build: no share, its cgroup
    (None, None, 0.0, "not measurable"),
])
def test_what_a_running_engine_holds(share, measured, expected_gib, basis):
    held, why = _memory_plan.engines_held_bytes(share, measured, DEVICE_TOTAL_BYTES, int(round(5.6 * GIB)))
    assert gib(held) == expected_gib
    assert why == basis


@pytest.mark.parametrize("words, share", [
    (["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/m", "--gpu-memory-utilization", "0.74"], 0.74),
    (["docker", "run", "img", "serve", "/m", "--gpu-memory-utilization=0.7", "--port", "8000"], 0.7),
    (["vllm", "serve", "/m", "--gpu_memory_utilization", "0.5", "--gpu-memory-utilization", "0.6"], 0.6),
    (["vllm", "serve", "/m", "--max-num-seqs", "12"], None),              # the CPU build: no share
    (["vllm", "serve", "/m", "--gpu-memory-utilization"], None),
    (["vllm", "serve", "/m", "--gpu-memory-utilization", "lots"], None),
    ([], None),
])
def test_running_share_from_the_command_line(words, share):
    assert _memory_plan.running_share(words) == share


# The seed's own figures (issue 33, item 17; MISSION.md "what went wrong", item 5): CUDA's
# 121.7 GiB on GB10, databases at 9.8 GiB and site builds at 12 GiB at their peaks, 71 GiB of
# weights, the operators wanting 9 GiB free. The team ran 0.74: 121.70 - ceil(121.70 x 0.74)
# 90.06 - 9.8 - 12 = 9.84 GiB >= 9 (0.75 leaves 8.62; their 0.78, 4.97: "only 5 GiB were left").
SEED_REPORT_MEMTOTAL_KB = 127611700          # 121.70 GiB as /proc/meminfo gives it
SEED_REPORT_WORKLOADS = [{"name": "databases", "peak_gib": 9.8}, {"name": "site builds", "peak_gib": 12}]
SEED_REPORT = dict(device_total_gib=121.7, workloads=SEED_REPORT_WORKLOADS, weights_gib=71.0, activation_gib=2.0,
                   floor_gib=9.0)          # "9 GiB free" once vLLM has its memory: MemAvailable kept, the floor


def seed_report(**changes):
    """SEED_REPORT with some figures changed."""
    args = dict(SEED_REPORT)
    args.update(changes)
    return args


def seed_report_meminfo(os_gib):
    """The host with the OS at ``os_gib`` and both workloads at their peaks, vLLM stopped."""
    total_kb = SEED_REPORT_MEMTOTAL_KB
    available_kb = total_kb - int(round((os_gib + 21.8) * 1024 * 1024))
    return meminfo_text(total_kb=total_kb, free_kb=available_kb, available_kb=available_kb)


def test_seed_report_the_teams_own_arithmetic_gives_their_074():
    """Everything else (the OS, vLLM's own processes) came out of their 9 GiB: no OS reserve, nothing outside."""
    plan = plan_host("spark-b", seed_report_meminfo(0.0), os_reserve_gib=0.0, cuda_context_gib=0.0,
                     min_kv_gib=12.0, reference_gpu_memory_utilization=0.74, **SEED_REPORT)
    assert plan["gpu_memory_utilization"] == 0.74
    assert gib(plan["granted_bytes"]) == 90.06
    assert gib(plan["available_after_start_bytes"]) == 9.84
    assert plan["difference"] == ""
    at_utilization(plan, 75)
    assert plan["starts_as_declared"] is False         # 0.75 leaves 8.62 < 9


def _reserve_named(line, option):
    """The value the one line gives for ``option`` ("floor_gib 0.24 instead of 9.00")."""
    import re
    return float(re.search(r"%s (\d+\.\d\d) instead of" % option, line).group(1))


@pytest.mark.parametrize("min_kv_gib", [4.0, 12.0])
def test_seed_report_with_the_declared_reserves_names_the_one_that_makes_the_difference(min_kv_gib):
    """The module's reserves besides the team's: the OS (4 GiB) and what vLLM holds outside its share (5.6).

    0.74 then needs 90.06 + 5.60 + 9 = 104.66 GiB where MemTotal 121.70 - 4 - 21.80 = 95.90 are available:
    8.76 GiB more. The module does not refuse outright: with a 4 GiB minimum KV cache it recommends 0.66 and
    says in one line that floor_gib makes the difference (0.24 instead of 9); with the inventory's 12 GiB
    minimum (0.72 needed) it refuses, naming the same reserve for 0.72 and for the team's 0.74.
    """
    meminfo = seed_report_meminfo(4.0)
    why = ("gpu_memory_utilization 0.74 on host spark-b: 8.76 GiB more than its declarations leave (it takes 90.06 "
           "GiB + 5.60 outside its share (cuda_context_gib) and keeps floor_gib 9.00 + headroom_gib 0.00 free = "
           "104.66 GiB, where MemTotal 121.70 - os_reserve_gib 4.00 - workloads 21.80 = 95.90 GiB); floor_gib alone "
           "makes the difference (floor_gib 0.24 instead of 9.00)")
    if min_kv_gib == 4.0:
        plan = plan_host("spark-b", meminfo, min_kv_gib=min_kv_gib, reference_gpu_memory_utilization=0.74,
                         **SEED_REPORT)
        assert plan["gpu_memory_utilization"] == 0.66
        assert plan["difference"] == why
        assert why in reasoning_lines(plan)
    else:
        with pytest.raises(MemoryPlanError) as err:
            plan_host("spark-b", meminfo, min_kv_gib=min_kv_gib, reference_gpu_memory_utilization=0.74,
                      **SEED_REPORT)
        assert "min_kv_gib 12.00 needs gpu_memory_utilization 0.72 on host spark-b: 6.33 GiB more" in str(err.value)
        assert "floor_gib alone makes the difference (floor_gib 2.67 instead of 9.00)" in str(err.value)
        assert "The reference share: " + why in str(err.value)
        plan = plan_host("spark-b", meminfo, min_kv_gib=min_kv_gib, **seed_report(floor_gib=2.67))
        assert plan["gpu_memory_utilization"] == 0.72 and plan["fits"]
    # "By how much" is exact: the named floor gives the team's share back, on the same memory.
    plan = plan_host("spark-b", meminfo, min_kv_gib=min_kv_gib, **seed_report(floor_gib=_reserve_named(why, "floor_gib")))
    assert plan["gpu_memory_utilization"] == 0.74
    assert plan["available_after_start_bytes"] >= plan["floor_bytes"]


def test_seed_report_read_as_headroom_names_every_reserve():
    """The 9 GiB declared as headroom on top of the 2 GiB floor: no one reserve alone covers 10.76 GiB."""
    plan = plan_host("spark-b", seed_report_meminfo(4.0), min_kv_gib=3.0, reference_gpu_memory_utilization=0.74,
                     **seed_report(floor_gib=2.0, headroom_gib=9.0))
    assert plan["gpu_memory_utilization"] == 0.65
    assert plan["difference"].endswith(
        "no declared reserve alone makes the difference: together os_reserve_gib 4.00 + cuda_context_gib 5.60 + "
        "floor_gib 2.00 + headroom_gib 9.00 hold 20.60 GiB, 10.76 GiB of it would have to go")
    assert "10.76 GiB more than its declarations leave" in plan["difference"]


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
