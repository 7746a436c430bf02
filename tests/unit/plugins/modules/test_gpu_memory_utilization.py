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
    "headroom_gib": 1.4,
    "workloads": [
        {"name": "postgresql", "unit": "postgresql.service", "peak_gib": 8, "priority": 10},
        {"name": "site builds", "slice": "site-builds.slice", "peak_gib": 12},
    ],
}


@pytest.fixture
def host(memory_host):
    """The target: /proc/meminfo and a systemd whose units have no cgroup files."""
    files, properties = memory_host
    files["/proc/meminfo"] = MEMINFO
    return files, properties


class FakeModule:
    """What ``systemctl_show`` uses of AnsibleModule: ``get_bin_path`` and ``run_command``."""

    def __init__(self, answer, systemctl="/usr/bin/systemctl"):
        self.answer, self.systemctl, self.calls = answer, systemctl, []

    def get_bin_path(self, name):
        return self.systemctl if name == "systemctl" else None

    def run_command(self, argv):
        self.calls.append(argv)
        return self.answer


def test_systemctl_show_reads_one_property_through_systemd_show_properties():
    fake = FakeModule((0, "ControlGroup=/system.slice/postgresql.service\n", ""))
    assert module.systemctl_show(fake)("postgresql.service", "ControlGroup") == "/system.slice/postgresql.service"
    assert fake.calls == [["/usr/bin/systemctl", "show", "-p", "ControlGroup", "--", "postgresql.service"]]
    # A property systemctl does not print is empty, as with --value; a failing systemctl or none is None.
    assert module.systemctl_show(FakeModule((0, "", "")))("x.service", "MemoryCurrent") == ""
    assert module.systemctl_show(FakeModule((1, "", "Failed to connect to bus")))("x.service", "ControlGroup") is None
    assert module.systemctl_show(FakeModule((0, "", ""), systemctl=None))("x.service", "ControlGroup") is None


@pytest.mark.parametrize("check_mode", [False, True])
def test_seed_host_reads_proc_meminfo(run_module, host, check_mode):
    args = dict(SEED, _ansible_check_mode=check_mode)
    result = run_module(module, args).result
    assert result["changed"] is False
    assert result["gpu_memory_utilization"] == 0.74
    assert result["decided_by"] == "spark-a"
    assert result["granted_gib"] == 90.06
    assert result["start_need_gib"] == 95.66   # 90.06 + 5.6 outside the share
    assert result["floor_gib"] == 2.0
    assert result["left_gib"] == 28.34
    assert result["kv_cache_gib"] == 14.86
    # MemFree 20 GiB < 95.66 needed; MemAvailable 100 GiB >= 95.66 + 2 floor
    assert result["drop_caches_needed"] is True
    assert result["fits_now"] is True
    assert result["hosts"][0]["mem_total_gib"] == 124.0
    assert result["hosts"][0]["spare_gib"] == 2.34
    assert result["measured"] is None and result["declared_vs_measured"] == []
    assert any("floor(91.00 / 121.70, 0.01) = 0.74" in line for line in result["reasoning"])
    assert any("drops the page cache" in line for line in result["reasoning"])


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
    # 124 - 4 - 10 - 12 - 1.4 - 2 (floor) - 5.6 (outside the share) = 89 -> floor(89 / 121.7) = 0.73
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
    assert "= 105.20 GiB" in result["msg"]
    assert "grants 90.06 GiB" in result["msg"]


def test_split_hosts_the_tighter_host_decides(run_module, host):
    host[0].clear()
    args = {
        "device_total_gib": 121.7,
        "weights_gib": 35.5,
        "min_kv_gib": 8,
        "hosts": [
            {"name": "spark-b", "meminfo": {"MemTotal": MEMTOTAL_KB}},
            {"name": "spark-a", "meminfo": MEMINFO, "headroom_gib": 1.4, "workloads": SEED["workloads"]},
        ],
    }
    result = run_module(module, args).result
    assert result["gpu_memory_utilization"] == 0.74
    assert result["decided_by"] == "spark-a"
    assert [h["host"] for h in result["hosts"]] == ["spark-b", "spark-a"]
    assert result["hosts"][0]["max_gpu_memory_utilization"] == 0.92
    assert result["hosts"][0]["gpu_memory_utilization"] == 0.74
    assert result["hosts"][0]["headroom_gib"] == 0.0   # top-level default
    assert result["hosts"][1]["headroom_gib"] == 1.4
    assert result["kv_cache_gib"] == round(90.06 - 35.5 - 2 - 1.7 - 0.5, 2)
    assert "split: gpu_memory_utilization = min over hosts = 0.74, decided by spark-a" in result["reasoning"]


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


def test_pinned_share_is_evaluated_and_one_above_the_largest_refused(run_module, host):
    result = run_module(module, dict(SEED, gpu_memory_utilization=0.70)).result
    assert result["gpu_memory_utilization"] == 0.70
    assert result["max_gpu_memory_utilization"] == 0.74
    assert result["granted_gib"] == 85.19
    failed = run_module(module, dict(SEED, gpu_memory_utilization=0.78)).result
    assert failed["failed"] is True
    for figure in ("gpu_memory_utilization 0.78 is above 0.74", "host spark-a", "vLLM asks 94.93 GiB",
                   "holds 5.60 GiB outside it", "MemAvailable 102.53 GiB", "has 100.00 GiB"):
        assert figure in failed["msg"], figure


# A GB10 start as vLLM 0.32 logs it. The "Available KV cache memory" and "Estimated CUDA graph
# memory" lines are vLLM's, as published in a GB10-class start-up log (gpustack/runner#251);
# the "Model loading took", "Free memory on device" and "KV cache size" lines are vLLM 0.32's
# format strings (gpu_model_runner.py, gpu_worker.py, kv_cache_utils.py) with this host's figures.
GB10_LOG = """\
(EngineCore pid=367) INFO 08-14 14:05:01 [gpu_model_runner.py:5150] Model loading took 40.2 GiB memory and 21.512345 seconds
(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_model_runner.py:6806] Estimated CUDA graph memory: 0.36 GiB total
(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_worker.py:563] Available KV cache memory: 6.87 GiB
(Worker_TP0 pid=447) INFO 08-14 14:08:40 [gpu_worker.py:1034] Free memory on device (101.3/121.69 GiB) on startup. \
Desired GPU memory utilization is (0.82, 99.79 GiB). Actual usage is 40.71 GiB for consumed memory (weights + non-torch), \
2.21 GiB for peak activation, and 0.35 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with \
`--kv-cache-memory=...` to fit into requested memory. Current kv cache memory in use is 6.87 GiB.
(EngineCore pid=367) INFO 08-14 14:08:41 [kv_cache_utils.py:2330] GPU KV cache size: 600,416 tokens, \
Maximum concurrency for 262,144 tokens per request: 2.29x
"""


def test_engine_log_figures_beside_the_declared_ones(run_module, host):
    log = GB10_LOG
    result = run_module(module, dict(SEED, engine_log=log)).result
    measured = result["measured"]
    assert measured["weights_gib"] == 40.2
    assert measured["non_torch_gib"] == 0.51
    assert measured["peak_activation_gib"] == 1.85   # 2.21 logged - 0.36 graph estimate vLLM adds in
    assert measured["cuda_graph_estimated_gib"] == 0.36
    assert measured["kv_cache_tokens"] == 600416
    assert len(measured["lines"]) == 5
    rows = dict((row["name"], row) for row in result["declared_vs_measured"])
    assert rows["activation_gib"] == {"name": "activation_gib", "declared_gib": 2.0, "measured_gib": 1.85,
                                      "measured_as": "peak_activation_gib", "difference_gib": -0.15}
    assert rows["cuda_graph_gib"]["measured_as"] == "cuda_graph_estimated_gib"
    assert rows["kv_cache_gib"]["measured_gib"] == 6.87
    assert any("measured at the last start: non_torch_gib declared 0.5 GiB, vLLM non_torch_gib 0.51 GiB (+0.01)"
               in line for line in result["reasoning"])


def test_a_running_engine_is_read_and_gives_its_memory_back(run_module, host):
    """A deploy plans while the engine runs: its share comes from its command line, its memory back to its restart."""
    files, properties = host
    files["/proc/meminfo"] = ("MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\n"
                              % (MEMTOTAL_KB, 6 * 1024 * 1024, 8 * 1024 * 1024))
    properties[("vllm-replica.service", "MainPID")] = "4242"
    properties[("vllm-split.service", "MainPID")] = "0"          # inactive: holds nothing
    files["/proc/4242/cmdline"] = "\0".join(["docker", "run", "--rm", "vllm-gb10:0.32.0", "serve", "/models/m",
                                             "--gpu-memory-utilization", "0.74", "--port", "8000", ""])
    result = run_module(module, dict(SEED, engine_units=["vllm-replica.service", "vllm-split.service"])).result
    assert result["gpu_memory_utilization"] == 0.74
    assert result["engines_held_gib"] == 95.66          # ceil(121.70 x 0.74) + 5.60 outside the share
    assert result["hosts"][0]["engines"] == [{
        "unit": "vllm-replica.service", "gpu_memory_utilization": 0.74, "measured_gib": None, "held_gib": 95.66,
        "held_basis": "its --gpu-memory-utilization 0.74 + cuda_context_gib"}]
    assert result["fits_now"] is True
    assert result["available_after_start_gib"] == 8.0     # 8 + 95.66 given back - 95.66 it takes
    assert result["max_gpu_memory_utilization_declared"] == 0.74
    assert result["limited_by"] == "declared"
    assert result["difference"] == ""                     # the share it runs with is the one computed
    # The same host read as if nothing ran: 8 GiB cannot hold the model.
    failed = run_module(module, dict(SEED, engines_held_gib=0)).result
    assert failed["failed"] is True and "MemAvailable now 8.00 GiB" in failed["msg"]


# The seed's own figures (issue 33, item 17): 121.7 GiB, databases 9.8 + site builds 12 GiB at
# their peaks, 71 GiB of weights, the operators wanting 9 GiB free; the team ran 0.74.
SEED_REPORT_MEMINFO = {"MemTotal": 127611700, "MemFree": 100558439, "MemAvailable": 100558439}  # OS 4, both at peak
SEED_REPORT = {
    "host": "spark-b",
    "meminfo": SEED_REPORT_MEMINFO,
    "device_total_gib": 121.7,
    "weights_gib": 71,
    "min_kv_gib": 4,
    "floor_gib": 9,
    "workloads": [{"name": "databases", "peak_gib": 9.8}, {"name": "site builds", "peak_gib": 12}],
}
SEED_REPORT_WHY = (
    "gpu_memory_utilization 0.74 on host spark-b: 8.76 GiB more than its declarations leave (it takes 90.06 GiB + 5.60 "
    "outside its share (cuda_context_gib) and keeps floor_gib 9.00 + headroom_gib 0.00 free = 104.66 GiB, where "
    "MemTotal 121.70 - os_reserve_gib 4.00 - workloads 21.80 = 95.90 GiB); floor_gib alone makes the difference "
    "(floor_gib 0.24 instead of 9.00)")


def test_seed_report_figures_name_the_reserve_that_makes_the_difference(run_module, host):
    result = run_module(module, dict(SEED_REPORT, reference_gpu_memory_utilization=0.74)).result
    assert result["gpu_memory_utilization"] == 0.66
    assert result["difference"] == SEED_REPORT_WHY
    assert result["reasoning"][-1] == SEED_REPORT_WHY
    # The team's 0.74 pinned in the inventory: refused before anything changes, with the same line.
    failed = run_module(module, dict(SEED_REPORT, gpu_memory_utilization=0.74)).result
    assert failed["failed"] is True
    assert "gpu_memory_utilization 0.74 is above 0.66" in failed["msg"]
    assert SEED_REPORT_WHY in failed["msg"]
    # Their own arithmetic - the OS and vLLM's processes inside the 9 GiB - is their 0.74.
    team = run_module(module, dict(SEED_REPORT, os_reserve_gib=0, cuda_context_gib=0,
                                   meminfo=dict(SEED_REPORT_MEMINFO, MemAvailable=104752743))).result
    assert team["gpu_memory_utilization"] == 0.74
    assert team["available_after_start_gib"] == 9.84
