# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The watchdog's tests share these: its configuration, a unit, counters and a look as the Judge
gets them (test_watchdog_judge.py hands them to the Judge, test_watchdog.py to the daemon)."""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog_config as _watchdog_config
from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog_judge as _watchdog_judge

# The judgement's names (the daemon, _watchdog, has the same objects).
Counters, Probe, Sample = _watchdog_judge.Counters, _watchdog_judge.Probe, _watchdog_judge.Sample
UnitInfo = _watchdog_config.UnitInfo
load_config = _watchdog_config.load_config

UNIT = "vllm-replica.service"
KILL = [["systemctl", "kill", "--signal=SIGKILL", UNIT]]
WALL0 = 1_767_225_600.0
# The default stall window (seconds).
W = 120


def config(tmp_path, **overrides):
    raw = {"unit": UNIT, "state_file": str(tmp_path / "state.json"), "status_file": str(tmp_path / "status.json"),
           "model": "lab-chat", "lock_file": str(tmp_path / "maintenance"), "kill_commands": KILL,
           "dropin_dir": str(tmp_path / "run-systemd")}
    raw.update(overrides)
    return load_config(raw)


def unit(**overrides):
    values = {"name": UNIT, "load_state": "loaded", "active_state": "active", "sub_state": "running",
              "result": "success", "exec_main_status": 0, "main_pid": 100, "invocation_id": "inv-1",
              "unit_file_state": "enabled", "n_restarts": 0, "started_mono": None}
    values.update(overrides)
    return UnitInfo(**values)


def counters(gen=100, running=2, waiting=0, prompt=50, success=10, kv=0.1, start=1000.0, steps=40):
    return Counters(num_requests_running=running, num_requests_waiting=waiting, generation_tokens_total=gen,
                    prompt_tokens_total=prompt, iteration_tokens_total_count=steps, request_success_total=success,
                    num_preemptions_total=0, kv_cache_usage_perc=kv, process_start_time_seconds=start)


def look(t, health="serving", cnt=None, u=None, peer=None, peer_error=None, http_status=None, error=None):
    return Sample(time=t, unit=u or unit(),
                  health=Probe(health, http_status=http_status, error=error), counters=cnt,
                  peer=peer, peer_error=peer_error)


TIMEOUT = Probe("dead", error="1-token generation did not finish within 15s", latency=15.0)
OK = Probe("serving", latency=0.2)
# /health under load: connected, no answer within the request timeout.
READ_TIMEOUT = {"health": "dead", "error": "GET http://127.0.0.1:8000/health: connected, but no HTTP answer within 5s"}
