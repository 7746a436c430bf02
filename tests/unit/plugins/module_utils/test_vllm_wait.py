# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_vllm_wait.py (a wait over probes, the unit watched).

The probes go to a real loopback HTTP server (fake_vllm.FakeVLLM) or to a port nothing
listens on; time is a fake clock, so waits take no real time.
"""

from __future__ import annotations

import inspect
import json
import time

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import systemd as sd
from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_health as vh
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_wait as vw
from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import FakeTime, FakeVLLM, free_port


@pytest.fixture
def server():
    fake = FakeVLLM().start()
    yield fake
    fake.stop()


def test_loading_then_serving():
    """The port refuses while vLLM loads, then the server comes up on it."""
    port = free_port()
    fake = FakeVLLM()

    def world(sleeps):
        if sleeps == 3:
            fake.start(port)

    clock = FakeTime(on_sleep=world)
    try:
        outcome = vw.wait("http://127.0.0.1:%d" % port, model="tiny-llama", kind="generate",
                          timeout=60, interval=2, clock=clock.clock, sleep=clock.sleep)
    finally:
        fake.stop()
    assert outcome.ok and outcome.reason == "reached"
    assert outcome.last.status == vh.SERVING and outcome.last.error is None
    assert outcome.attempts == 4
    assert outcome.elapsed == pytest.approx(6.0)
    assert clock.sleeps == [2, 2, 2]


def test_timeout_names_endpoint_elapsed_and_last_state():
    url = "http://127.0.0.1:%d" % free_port()
    clock = FakeTime()
    outcome = vw.wait(url, timeout=5, interval=2, clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "timeout"
    # Sleeps are shortened so the last probe runs at the deadline.
    assert clock.sleeps == [2, 2, 1]
    assert outcome.attempts == 4
    assert outcome.elapsed == pytest.approx(5.0)
    assert outcome.message == (
        "vLLM at %s was not serving after 5s (timeout 5s, 4 attempts, probe health); "
        "last status loading, last error: GET %s/health: connection refused (nothing listens on the port yet)" % (url, url))


def test_timeout_says_what_the_unit_was_doing():
    """A start-up that never finishes: the message ends with the unit's journal and its processes."""
    url = "http://127.0.0.1:%d" % free_port()
    clock = FakeTime()
    calls = []
    outcome = vw.wait(url, timeout=3, interval=2, clock=clock.clock, sleep=clock.sleep,
                      unit_state=lambda: vw.UnitState(name="vllm-replica.service", active_state="active", sub_state="running"),
                      unit_journal=lambda: calls.append("journal") or ["loading weights"],
                      unit_processes=lambda: calls.append("processes") or ["901 VLLM::EngineCor R 0.3 0 0"])
    assert not outcome.ok and outcome.reason == "timeout" and calls == ["journal", "processes"]
    assert outcome.journal == ["loading weights"] and outcome.processes == ["901 VLLM::EngineCor R 0.3 0 0"]
    assert outcome.message.endswith(
        "\nLast 1 journal lines of the unit:\nloading weights"
        "\nThe unit's processes (pid name state cpu_seconds last_core allowed_cores):\n901 VLLM::EngineCor R 0.3 0 0"
        "\n-- end of the unit's lines --")


def test_timeout_zero_probes_once_and_reports():
    clock = FakeTime()
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=0, clock=clock.clock, sleep=clock.sleep)
    assert outcome.ok and outcome.reason == "probed"
    assert outcome.last.status == vh.LOADING
    assert outcome.attempts == 1 and clock.sleeps == []


def unit(active_state, sub_state, result="success", status=0, load_state="loaded"):
    return vw.UnitState("vllm.service", load_state, active_state, sub_state, result, status)


@pytest.mark.parametrize("state", [
    unit("failed", "failed", "exit-code", 1),
    unit("inactive", "dead"),  # vLLM's API server exits 0 after its engine died
    unit("active", "exited"),
    unit("inactive", "dead", load_state="not-found"),
])
def test_unit_down_fails_at_once_with_journal(state):
    clock = FakeTime()
    journal_calls = []

    def journal():
        journal_calls.append(1)
        return ["vllm[812]: RuntimeError: Engine core initialization failed.", "systemd[1]: vllm.service: Failed."]

    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=1200, interval=2,
                      unit_state=lambda: state, unit_journal=journal, clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "unit_down"
    assert outcome.attempts == 1 and clock.sleeps == []  # not after the timeout
    assert journal_calls == [1]
    assert outcome.unit == state
    assert outcome.journal[0].endswith("Engine core initialization failed.")
    assert outcome.message.startswith("systemd unit vllm.service is %s (ActiveState=%s, SubState=%s, Result=%s" % (
        state.active_state, state.active_state, state.sub_state, state.result))
    assert "last status loading" in outcome.message
    assert "Last 2 journal lines of vllm.service:\nvllm[812]: RuntimeError" in outcome.message


@pytest.mark.parametrize("state", [unit("activating", "start"), unit("activating", "auto-restart"),
                                   unit("active", "running"), unit("deactivating", "stop-sigterm")])
def test_unit_still_working_keeps_waiting(state):
    clock = FakeTime()
    read = []
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=4, interval=2,
                      unit_state=lambda: state, unit_journal=lambda: read.append(clock.clock()) or [],
                      clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "timeout" and outcome.attempts == 3
    assert read == [pytest.approx(1004.0)]  # the journal only once the wait gave up (FakeTime starts at 1000)


def test_unit_goes_down_while_waiting():
    states = iter([unit("activating", "start"), unit("active", "running"), unit("failed", "failed", "exit-code", 1)])
    clock = FakeTime()
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=1200, interval=2,
                      unit_state=lambda: next(states), unit_journal=lambda: [], clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "unit_down" and outcome.attempts == 3
    assert outcome.elapsed == pytest.approx(4.0)


# --- crash loops --------------------------------------------------------------------------------


def run_of(n_restarts, started, sub_state="start", active_state="activating"):
    """One read of a unit under Restart=always: NRestarts, ExecMainStartTimestampMonotonic (us), SubState."""
    return vw.UnitState("vllm.service", "loaded", active_state, sub_state, "success", 0, n_restarts, started)


@pytest.mark.parametrize("reads, crashes", [
    # Baseline, then systemd restarts it twice (each seen between two reads).
    ([run_of(0, 100), run_of(1, 200), run_of(2, 300)], [0, 1, 2]),
    # Two restarts between two reads (RestartSec shorter than the poll interval).
    ([run_of(0, 100), run_of(2, 300)], [0, 2]),
    # Each crash seen while systemd waits RestartSec (auto-restart), then its restart: counted once.
    ([run_of(0, 100), run_of(0, 100, "auto-restart"), run_of(1, 200), run_of(1, 200, "auto-restart")], [0, 1, 1, 2]),
    # systemd counts the restart before the new main process starts (ExecStartPre= runs between:
    # seconds for a container unit); that start, seen at the next read, is the same restart.
    ([run_of(0, 100, "running", "active"), run_of(1, 100), run_of(1, 200), run_of(1, 200, "running", "active")],
     [0, 1, 1, 1]),
    ([run_of(0, 100), run_of(0, 100, "auto-restart"), run_of(1, 100), run_of(1, 200), run_of(2, 200), run_of(2, 300)],
     [0, 1, 1, 1, 2, 2]),
    # systemd raises NRestarts when it queues the restart, while the unit still waits (auto-restart):
    # seen waiting, then with the raised count, then started: one crash (the watchdog scenario's SIGKILL).
    ([run_of(0, 100, "running", "active"), run_of(0, 100, "auto-restart"), run_of(1, 100, "auto-restart"),
      run_of(1, 100), run_of(1, 200, "running", "active")], [0, 1, 1, 1, 1]),
    # The raised count seen first, the unit still waiting at the next read: one crash.
    ([run_of(0, 100, "running", "active"), run_of(1, 100, "auto-restart"), run_of(1, 100, "auto-restart"),
      run_of(1, 200)], [0, 1, 1, 1]),
    # Started again by hand (systemctl restart resets NRestarts): the run ended all the same.
    ([run_of(3, 100), run_of(0, 200), run_of(0, 300)], [0, 1, 2]),
    # A run that ended before the wait began is not the wait's, nor its restart.
    ([run_of(0, 100, "auto-restart"), run_of(1, 200), run_of(1, 200)], [0, 0, 0]),
    # Nothing changes: a long start-up.
    ([run_of(5, 100)] * 4, [0, 0, 0, 0]),
    # systemd too old to say (no NRestarts): the start timestamps alone.
    ([run_of(None, 100), run_of(None, 100), run_of(None, 250)], [0, 0, 1]),
])
def test_crash_counter(reads, crashes):
    counter = vw.CrashCounter()
    assert [counter.update(unit, t) for t, unit in enumerate(reads)] == crashes


def crash_loop_world(restart_sec, crash_after):
    """A unit under Restart=always whose run k starts at k x (crash_after + restart_sec), crashes
    ``crash_after`` seconds later and is started again ``restart_sec`` after that; its port never
    opens. Returns (clock, unit_state, crash time of run k)."""
    clock = FakeTime()
    t0, period = clock.now, crash_after + restart_sec

    def unit_state():
        k = int((clock.now - t0) // period)
        crashed = clock.now - t0 - k * period >= crash_after
        return run_of(k, 1000 + k, "auto-restart" if crashed else "start")

    return clock, unit_state, lambda k: t0 + k * period + crash_after


@pytest.mark.parametrize("restart_sec, crash_after", [(5, 40), (0.1, 40), (25, 10), (5, 1)])
def test_a_crash_loop_gives_up_within_30_s_of_the_second_crash(restart_sec, crash_after):
    clock, unit_state, crash_time = crash_loop_world(restart_sec, crash_after)
    journal = ["vllm[812]: RuntimeError: Engine core initialization failed."]
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=1800, interval=2, unit_state=unit_state,
                      unit_journal=lambda: journal, clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "crash_loop" and outcome.crashes == 2
    assert 0 <= clock.now - crash_time(1) <= 30
    assert outcome.journal == journal and outcome.unit is not None
    assert outcome.message.startswith("systemd unit vllm.service crashed 2 times since the wait for vLLM at ")
    assert "Last 1 journal lines of vllm.service:\nvllm[812]: RuntimeError" in outcome.message


# Seen (issue 35): docker refused vllm_container_run_args' --ulimit=memlock=-1; the headline said "a crash loop", and
# the cause was the 27th of 30 journal lines, the last one running into abort.yml's note on the maintenance lock.
DOCKER_REFUSED = ("docker: Error response from daemon: failed to create task for container: failed to create shim task: "
                  "OCI runtime create failed: runc create failed: unable to start container process: error during "
                  "container init: error setting rlimit type 8: operation not permitted: unknown.")
SECRET = "sk-lab-0123456789abcdef"
NEXT = "sk-next-fedcba9876543210"


def crash_loop_message(journal, api_key=None):
    clock, unit_state, _crash_time = crash_loop_world(5, 10)
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), api_key=api_key, timeout=1800, interval=2,
                      unit_state=unit_state, unit_journal=lambda: journal, clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "crash_loop"
    return outcome


def test_a_crash_loop_quotes_the_engines_own_error_in_its_headline():
    journal = ["Jan 02 03:04:05 spark-a systemd[1]: Starting vllm-replica.service - vLLM replica: lab-chat on port 8000...",
               "Jan 02 03:04:06 spark-a vllm-replica[4242]: " + DOCKER_REFUSED,
               "Jan 02 03:04:06 spark-a vllm-replica[4242]: Run 'docker run --help' for more information",
               "Jan 02 03:04:06 spark-a systemd[1]: vllm-replica.service: Main process exited, code=exited, status=125/n/a",
               "Jan 02 03:04:06 spark-a systemd[1]: vllm-replica.service: Failed with result 'exit-code'."]
    outcome = crash_loop_message(journal)
    headline = outcome.message.split("\n")[0]
    assert headline.startswith("systemd unit vllm.service crashed 2 times since the wait for vLLM at ")
    assert ': a crash loop, giving up - its journal says: "%s" (' % DOCKER_REFUSED in headline
    # A longer line is cut to 300 characters.
    longer = DOCKER_REFUSED + " See 'docker run --help'." * 4
    assert vw.cause_line(journal[:1] + ["spark-a vllm-replica[4242]: " + longer] + journal[2:]) == (
        "spark-a vllm-replica[4242]: " + longer)[:297] + "..."
    # The rest as before: every journal line, then a line that ends them (abort.yml's note comes after it).
    assert outcome.message.endswith("\nLast 5 journal lines of vllm.service:\n%s\n-- end of the unit's lines --"
                                    % "\n".join(journal))


@pytest.mark.parametrize("journal, quoted", [
    # the last line that looks like a cause, not the first
    (["vllm[9]: ValueError: No available memory for the cache blocks.",
      "vllm[9]: RuntimeError: Engine core initialization failed. See root cause above.",
      "systemd[1]: vllm.service: Failed."], "vllm[9]: RuntimeError: Engine core initialization failed. See root cause above."),
    (["(EngineCore pid=88) ERROR 12-01 23:57:17 [core.py:700] torch.OutOfMemoryError: CUDA out of memory."],
     "(EngineCore pid=88) ERROR 12-01 23:57:17 [core.py:700] torch.OutOfMemoryError: CUDA out of memory."),
    (["Jan 02 03:04:05 spark-a podman[77]: Error: crun: setrlimit `RLIMIT_MEMLOCK`: Operation not permitted: OCI "
      "permission denied"], "Error: crun: setrlimit `RLIMIT_MEMLOCK`: Operation not permitted: OCI permission denied"),
    (["Jan 02 03:04:05 spark-a vllm-replica[7]: exec /usr/bin/python3: exec format error"],
     "exec /usr/bin/python3: exec format error"),
    # nothing that looks like a cause: no quote
    (["systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE",
      "INFO 12-01 23:57:17 [api_server.py:1] the last error: none", "loading weights"], ""),
    ([], ""),
])
def test_the_cause_line(journal, quoted):
    assert vw.cause_line(journal) == quoted
    outcome = crash_loop_message(journal)
    assert (' - its journal says: "%s" (' % quoted in outcome.message) == bool(quoted)
    assert ("its journal says" in outcome.message) == bool(quoted)


def test_a_unit_that_stopped_quotes_its_error_too():
    clock = FakeTime()
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=1200, interval=2,
                      unit_state=lambda: unit("failed", "failed", "exit-code", 125),
                      unit_journal=lambda: ["vllm[4242]: " + DOCKER_REFUSED], clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "unit_down"
    assert ' to be serving - its journal says: "vllm[4242]: docker: Error response from daemon: ' in outcome.message
    assert outcome.message.endswith("\n-- end of the unit's lines --")


@pytest.mark.parametrize("line", [
    # the known key, the line cut in the middle of it: no_log would miss the half that is left
    "x" * 280 + "RuntimeError: the server rejected Bearer " + SECRET,
    "RuntimeError: could not start with --api-key " + SECRET,
    # a rotation's next key, which no_log does not know: vLLM's dump of its arguments, a config, an environment
    "ValueError: bad args {'model': '/opt/models/x', 'api_key': ['%s', '%s'], 'port': 8000}" % (SECRET, NEXT),
    "docker: Error response from daemon: bad env VLLM_API_KEY=%s" % NEXT,
    "Error: config api-key: %s" % NEXT,
    "RuntimeError: --api-key=%s refused" % NEXT,
])
def test_no_key_reaches_the_message_whole_or_cut(line):
    journal = ["vllm[9]: " + line, "systemd[1]: vllm.service: Failed."]
    outcome = crash_loop_message(journal, api_key=SECRET)
    for key in (SECRET, NEXT):
        for piece in (key[:6], key[-6:]):
            assert piece not in outcome.message and not any(piece in text for text in outcome.journal), line
    assert "<hidden>" in outcome.message and "its journal says" in outcome.message


def test_key_words_hide_only_the_key():
    assert vw.cause_line(["RuntimeError: args {'api_key': ['a1b2', 'c3d4'], 'port': 8000}"]) == (
        "RuntimeError: args {'api_key': <hidden>, 'port': 8000}")
    assert vw.cause_line(["RuntimeError: --api-key abcd --port 8000"]) == "RuntimeError: --api-key <hidden> --port 8000"
    assert vw.cause_line(["RuntimeError: the api_key (HTTP 401) was rejected"]) == (
        "RuntimeError: the api_key (HTTP 401) was rejected")


def test_one_crash_keeps_the_wait_going():
    reads = iter([run_of(0, 100), run_of(0, 100, "auto-restart")] + [run_of(1, 200)] * 100)
    clock = FakeTime()
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=60, interval=2, unit_state=lambda: next(reads),
                      unit_journal=lambda: [], clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "timeout" and outcome.crashes == 1


def _sliced(report_after, **kwargs):
    """vw.wait cut into calls of ``report_after`` seconds, each resuming the last; returns the calls' outcomes."""
    outcomes, resume = [], None
    for _call in range(1000):
        outcome = vw.wait(report_after=report_after, resume=resume, **kwargs)
        outcomes.append(outcome)
        if outcome.reason != "waiting":
            return outcomes
        assert outcome.ok and outcome.resume is not None
        resume = outcome.resume
    raise AssertionError("the wait never ended")


@pytest.mark.parametrize("restart_sec, crash_after", [(5, 40), (25, 10), (5, 1)])
def test_a_wait_cut_into_calls_still_catches_a_crash_loop_at_the_second_crash(restart_sec, crash_after):
    clock, unit_state, crash_time = crash_loop_world(restart_sec, crash_after)
    outcomes = _sliced(30, base_url="http://127.0.0.1:%d" % free_port(), timeout=1800, interval=2, unit_state=unit_state,
                       unit_journal=lambda: ["x"], clock=clock.clock, sleep=clock.sleep)
    last = outcomes[-1]
    assert last.reason == "crash_loop" and last.crashes == 2
    assert 0 <= clock.now - crash_time(1) <= 30
    # a line at least every 30 s of the wait (plus one probe) until it ended
    assert len(outcomes) >= (clock.now - crash_time(0) + crash_after) // 32
    assert all(o.reason == "waiting" and o.last_unit is not None for o in outcomes[:-1])


def test_a_wait_cut_into_calls_keeps_its_deadline_and_attempts():
    clock = FakeTime()
    outcomes = _sliced(30, base_url="http://127.0.0.1:%d" % free_port(), timeout=100, interval=2,
                       clock=clock.clock, sleep=clock.sleep)
    assert [o.reason for o in outcomes] == ["waiting"] * 3 + ["timeout"]
    assert [round(o.elapsed) for o in outcomes] == [30, 60, 90, 100]
    assert outcomes[-1].attempts == 51 and "was not serving after 100s (timeout 100s, 51 attempts" in outcomes[-1].message
    assert outcomes[0].last_unit is None


def test_a_wait_cut_into_calls_ends_as_soon_as_the_engine_serves(server):
    outcome = vw.wait(server.url, report_after=30, resume={"started": time.monotonic() - 600, "attempts": 300,
                                                           "crashes": {"crashes": 1, "seen": True}})
    assert outcome.ok and outcome.reason == "reached" and outcome.attempts == 301 and outcome.crashes == 1
    assert outcome.elapsed >= 600 and outcome.resume is None


def test_a_resumed_wait_whose_start_lies_in_the_future_starts_afresh():
    clock = FakeTime()
    outcome = vw.wait("http://127.0.0.1:%d" % free_port(), timeout=10, interval=2, clock=clock.clock, sleep=clock.sleep,
                      resume={"started": clock.now + 5000, "attempts": 7, "crashes": {"crashes": 1}})
    assert outcome.reason == "timeout" and outcome.attempts == 6 and outcome.crashes == 0


@pytest.mark.parametrize("resume", [{"attempts": 3}, {"started": "soon"}, {"started": None}])
def test_a_resume_that_no_wait_returned_is_refused(resume):
    with pytest.raises(ValueError, match="resume must be"):
        vw.wait("http://127.0.0.1:%d" % free_port(), timeout=10, resume=resume, clock=FakeTime().clock)


def test_crash_counter_state_round_trip():
    counter = vw.CrashCounter()
    for t, unit in enumerate([run_of(0, 100), run_of(0, 100, "auto-restart")]):
        counter.update(unit, t)
    again = vw.CrashCounter.from_state(json.loads(json.dumps(counter.state())))
    # its restart is the same crash, not another; the next one is the second
    assert again.update(run_of(1, 200), 3) == 1
    assert again.update(run_of(2, 300), 4) == 2


def test_default_budget_covers_a_20_minute_start_up():
    # GB10: up to 20 minutes from start to serving; the default leaves half as much again.
    assert inspect.signature(vw.wait).parameters["timeout"].default == 1800 >= 1.5 * 20 * 60


def test_unit_not_read_when_serving(server):
    outcome = vw.wait(server.url, unit_state=lambda: pytest.fail("unit read"), clock=FakeTime().clock)
    assert outcome.ok and outcome.attempts == 1


def test_wait_for_dead_serving_then_engine_dies(server):
    """wait_for dead: /health 200 until the EngineCore is killed, then 503."""

    def world(sleeps):
        if sleeps == 2:
            server.health_status = 503

    clock = FakeTime(on_sleep=world)
    # A down unit does not matter when waiting for dead.
    outcome = vw.wait(server.url, wait_for="dead", timeout=60, interval=1,
                      unit_state=lambda: unit("failed", "failed"), clock=clock.clock, sleep=clock.sleep)
    assert outcome.ok and outcome.reason == "reached"
    assert outcome.last.status == vh.DEAD and outcome.attempts == 3


def test_wait_for_dead_hung_engine(server):
    server.completion_delay = 30
    outcome = vw.wait(server.url, wait_for="dead", kind="generate", generate_timeout=0.3, timeout=0,
                      clock=FakeTime().clock)
    assert outcome.ok and outcome.last.status == vh.DEAD
    assert "1-token generation did not finish within 0.3s" in outcome.last.error


def test_wait_for_dead_times_out_while_serving(server):
    clock = FakeTime()
    outcome = vw.wait(server.url, wait_for="dead", timeout=3, interval=1, clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "timeout"
    assert outcome.message.startswith("vLLM at %s was not dead (no longer serving) after 3s" % server.url)
    assert "last status serving, last error: None" in outcome.message


@pytest.mark.parametrize("wait_for", ["serving", "dead"])
def test_rejected_api_key_fails_at_once(server, wait_for):
    server.api_key = "sk-right"
    clock = FakeTime()
    outcome = vw.wait(server.url, api_key="sk-wrong", kind="models", wait_for=wait_for,
                      clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "rejected" and clock.sleeps == []
    assert "rejected the api_key (HTTP 401)" in outcome.message


@pytest.mark.parametrize("kwargs", [
    {"kind": "metrics"}, {"wait_for": "loading"}, {"timeout": -1}, {"interval": 0}, {"generate_timeout": 0},
    {"base_url": "localhost:8000"},
])
def test_wait_rejects_bad_arguments(kwargs):
    args = {"base_url": "http://127.0.0.1:8000"}
    args.update(kwargs)
    with pytest.raises(ValueError):
        vw.wait(**args)


# --- the unit's state a wait reads ----------------------------------------------------------


SHOW_FAILED = "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=1\n"


def test_systemd_unit_state_parses_systemctl_show():
    calls = []

    def run_command(argv):
        calls.append(argv)
        return 0, SHOW_FAILED, ""

    state = vw.systemd_unit_state("vllm.service", run_command, systemctl="/usr/bin/systemctl")
    assert calls == [["/usr/bin/systemctl", "show", "-p", "LoadState,ActiveState,SubState,Result,ExecMainStatus,"
                      "NRestarts,ExecMainStartTimestampMonotonic,InvocationID", "--", "vllm.service"]]
    assert state == vw.UnitState("vllm.service", "loaded", "failed", "failed", "exit-code", 1)
    assert state.down


def test_systemd_unit_state_reads_restarts_and_the_main_process_start():
    text = SHOW_FAILED + "NRestarts=4\nExecMainStartTimestampMonotonic=1284077332\n"
    state = vw.systemd_unit_state("vllm.service", lambda argv: (0, text, ""))
    assert (state.n_restarts, state.main_started) == (4, 1284077332)
    never_ran = vw.systemd_unit_state("vllm.service", lambda argv: (0, SHOW_FAILED + "ExecMainStartTimestampMonotonic=0\n", ""))
    assert (never_ran.n_restarts, never_ran.main_started) == (None, None)


@pytest.mark.parametrize("answer", [(1, "", "Failed to connect to bus"), (0, "garbage\n", "")])
def test_systemd_unit_state_errors(answer):
    with pytest.raises(sd.UnitStateError):
        vw.systemd_unit_state("vllm.service", lambda argv: answer)


@pytest.mark.parametrize("wait_for", ["serving", "dead"])
@pytest.mark.parametrize("timeout", [0, 60])
def test_a_key_that_is_no_bearer_token_ends_the_wait_at_once(server, wait_for, timeout):
    """The probe could not ask the engine: it is neither serving nor gone, and waiting cannot change that."""
    server.api_key = "sk-7f3e9a2c41d86b05"
    clock = FakeTime()
    outcome = vw.wait(server.url, api_key="sk-7f3e9a2c41d86b05\n", model="tiny-llama", wait_for=wait_for,
                      timeout=timeout, interval=2, clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "config_error"
    assert outcome.attempts == 1 and clock.sleeps == []
    assert outcome.last.status == vh.CONFIG_ERROR
    assert "ends with a newline" in outcome.message and "7f3e" not in outcome.message
    assert server.requests == []
