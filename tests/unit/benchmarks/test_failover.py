# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The failover figures (``benchmarks/failover.py``: ``summarize``) from made-up records of a restart of the
address holder, and the address probe against a loopback server."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.factory_floor.llm.benchmarks import failover as fo
from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import free_port

T = 1796162784.0  # the event


def hz(t, proxy, status=200, took=0.002):
    return {"t": T + t, "end": T + t + took, "status": status, "proxy": proxy if status == 200 else None,
            "error": None if status == 200 else "TimeoutError: timed out"}


def chat(t, took, proxy="spark-a", status=200, **extra):
    record = {"t": T + t, "end": T + t + took, "status": status, "proxy": proxy if status == 200 else None,
              "upstream": "10.89.7.10:8000" if status == 200 else None, "error": None}
    if status != 200:
        record["error"] = "ReadTimeout: HTTPConnectionPool(host='10.89.7.100', port=8080): Read timed out."
    record.update(extra)
    return record


def holder_restart():
    """spark-a answers until +0.39 s, spark-b from +0.48 s; two requests were in flight on spark-a,
    two more hit a kept-alive connection to it and were resent once."""
    health = [hz(t / 20.0, "spark-a") for t in range(-20, 8)]  # to +0.35
    health += [hz(0.39, "spark-a"), hz(0.44, None, status=0), hz(0.48, "spark-b")]
    health += [hz(0.5 + t / 20.0, "spark-b") for t in range(40)]
    chats = [chat(t / 4.0, 0.2) for t in range(-8, 1)]
    chats += [chat(0.31, 10.1, status=0), chat(0.33, 10.1, status=0)]  # in flight on spark-a: read timeouts
    reset = "ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))"
    closed = "ConnectionError: ('Connection aborted.', RemoteDisconnected('Remote end closed connection'))"
    chats += [chat(0.40, 0.86, proxy="spark-b", retried=reset), chat(0.41, 0.85, proxy="spark-b", retried=closed)]
    chats += [chat(1.3 + t / 4.0, 0.2, proxy="spark-b") for t in range(20)]
    return health, chats


def test_holder_restart_figures():
    health, chats = holder_restart()
    out = fo.summarize(health, chats, T, "spark-a")
    assert out["last_from_holder"] == pytest.approx(0.392)
    assert out["first_from_other"] == pytest.approx(0.482)
    assert out["moved_to"] == "spark-b"
    assert out["unanswered_probes"] == 1
    assert out["health_proxies_after"] == ["spark-a", "spark-b"]
    assert out["failed"] == 2
    assert out["failed_in_flight"] == 2 and out["failed_after_move"] == 0
    # The reset kept-alive connection counts for a client that never retries; nginx's close does not.
    assert out["failed_without_retry"] == 3
    assert out["proxies_after"] == ["spark-b"]
    assert [f["status"] for f in out["failures"]] == [0, 0, 200]


def test_a_failure_after_the_move_is_counted_apart():
    health, chats = holder_restart()
    chats.append(chat(2.0, 0.01, status=503))
    out = fo.summarize(health, chats, T, "spark-a")
    assert out["failed_after_move"] == 1
    assert out["failed_in_flight"] == 2


def test_the_other_machine_restarts_nothing_moves():
    health = [hz(t / 20.0, "spark-a") for t in range(-20, 200)]
    chats = [chat(t / 4.0, 0.2) for t in range(-8, 40)]
    out = fo.summarize(health, chats, T, None)
    assert out["first_from_other"] is None and out["moved_to"] is None
    assert out["health_proxies_after"] == ["spark-a"]
    assert out["unanswered_probes"] == 0
    assert out["failed"] == 0 and out["failed_without_retry"] == 0


def test_the_address_never_moves():
    health = [hz(t / 20.0, "spark-a") for t in range(-20, 5)] + [hz(0.3 + t / 20.0, None, status=0) for t in range(50)]
    out = fo.summarize(health, [], T, "spark-a")
    assert out["first_from_other"] is None
    assert out["unanswered_probes"] == 50
    assert out["longest_unanswered"] == pytest.approx(2.75 + 0.002 - 0.202, abs=0.01)


def test_longest_gaps():
    health = [hz(-1.0, "spark-a"), hz(0.1, "spark-a"), hz(2.6, "spark-b"), hz(2.7, "spark-b")]
    chats = [chat(-1.0, 0.1), chat(0.0, 0.1), chat(2.0, 1.0, proxy="spark-b"), chat(3.1, 0.1, proxy="spark-b")]
    out = fo.summarize(health, chats, T, "spark-a")
    assert out["longest_unanswered"] == pytest.approx(2.5)
    assert out["longest_without_answer_s"] == pytest.approx(2.9)


def test_records_outside_the_window_are_ignored():
    health, chats = holder_restart()
    chats.append(chat(-30.0, 0.1, status=0))
    chats.append(chat(90.0, 0.1, status=0))
    assert fo.summarize(health, chats, T, "spark-a")["failed"] == 2


def test_read_lines_skips_a_cut_line(tmp_path):
    path = tmp_path / "probe.jsonl"
    path.write_text('{"t": 1}\n{"t": 2}\n{"t": ')
    assert fo.read_lines(str(path)) == [{"t": 1}, {"t": 2}]


# ------------------------------------------------------------------ the address probe

class Proxy:
    def __init__(self, name="spark-a"):
        self.name = name
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server's naming
                self.send_response(200)
                self.send_header("Content-Length", "3")
                self.send_header(fo.PROXY_HEADER, proxy.name)
                self.end_headers()
                self.wfile.write(b"ok\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/healthz" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_probe_records_the_proxy_host(tmp_path):
    proxy = Proxy("spark-b")
    out = tmp_path / "hz.jsonl"
    try:
        fo.probe(proxy.url, str(out), interval=0.01, timeout=0.5, duration=0.2)
    finally:
        proxy.close()
    records = fo.read_lines(str(out))
    assert len(records) >= 3
    assert {r["status"] for r in records} == {200}
    assert {r["proxy"] for r in records} == {"spark-b"}


def test_probe_once_refused_is_status_zero():
    record = fo.probe_once("127.0.0.1", free_port(), timeout=0.5)
    assert record["status"] == 0 and record["proxy"] is None
    assert record["error"].startswith("ConnectionRefusedError")


def test_main_summary(tmp_path, capsys):
    health, chats = holder_restart()
    (tmp_path / "hz.jsonl").write_text("".join(json.dumps(r) + "\n" for r in health))
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chats))
    code = fo.main(["summary", "--health", str(tmp_path / "hz.jsonl"), "--chat", str(tmp_path / "chat.jsonl"),
                    "--event", str(T), "--holder", "spark-a"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["moved_to"] == "spark-b"


def test_table_of_restarts(tmp_path, capsys):
    health, chats = holder_restart()
    one = dict(fo.summarize(health, chats, T, "spark-a"), event="restart_holder", holder_before="spark-a",
               rejoined_s=48.0)
    two = dict(one, first_from_other=0.9, last_from_holder=0.34, holder_before="spark-b", moved_to="spark-a")
    lines = fo.table([one, two])
    assert len(lines) == 6
    assert "spark-a -> spark-b" in lines[1] and "0.48" in lines[1] and "48.00" in lines[1]
    assert lines[3] == ("failover time (s, from the event until another proxy host answered the address): "
                        "min 0.48, median 0.69, max 0.90 over 2")
    assert lines[5].startswith("failed requests: 4 in all, 4 in flight when the address moved, 0 after it; 6 at the first try")
    (tmp_path / "r.json").write_text(json.dumps([one]))
    assert fo.main(["table", "--results", str(tmp_path / "r.json")]) == 0
    assert "over 1" in capsys.readouterr().out


def test_stats_without_values():
    assert fo.table([{"first_from_other": None}])[2].endswith("n/a over 0")


def test_probe_duration_is_measured_on_the_monotonic_clock(tmp_path, monkeypatch):
    """The wall clock steps back an hour just after the probe starts: --duration still ends it."""
    real, calls = time.time, [0]

    def stepped():
        calls[0] += 1
        return real() - (3600.0 if calls[0] > 1 else 0.0)

    monkeypatch.setattr(time, "time", stepped)
    proxy, stop = Proxy("spark-b"), threading.Event()
    out = tmp_path / "hz.jsonl"
    worker = threading.Thread(target=fo.probe, args=(proxy.url, str(out)),
                              kwargs={"interval": 0.01, "timeout": 0.5, "duration": 0.3, "stop": stop}, daemon=True)
    try:
        worker.start()
        worker.join(10)
        stopped_by_itself = not worker.is_alive()
        stop.set()
        worker.join(10)
    finally:
        proxy.close()
    assert stopped_by_itself, "--duration 0.3 ran on for 10 s after the wall clock stepped back an hour"
    records = fo.read_lines(str(out))
    assert len(records) >= 3 and {r["status"] for r in records} == {200}
