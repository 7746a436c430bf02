# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""No client of an engine quotes the API key in what it reports.

requests refuses a header value with a newline (what ``echo KEY | ansible-vault
encrypt_string`` stores) before it connects, and its message quotes the value: the
key. Every client built on ``_vllm_client`` (the metrics reader, the tool-calling
test, the load generator, the probe client) names such a request as not sent, with
the kind of fault, and never the header. (The health probe and the watchdog: in
test_vllm_health.py and test_watchdog.py.)
"""

from __future__ import annotations

import json

import pytest
import requests

from ansible_collections.factory_floor.llm.plugins.module_utils._host import load
from ansible_collections.factory_floor.llm.plugins.module_utils._host import probe_client
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_call as tool_call
from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_metrics as metrics

SECRET = "sk-7f3e9a2c41d86b05"
BAD = SECRET + "\n"
# What requests raises for it, word for word (requests 2.32).
INVALID_HEADER = requests.exceptions.InvalidHeader(
    "Invalid leading whitespace, reserved character(s), or return character(s) in header value: %r" % ("Bearer " + BAD))


class Refusing:
    """A session whose every request raises what requests raises before sending."""

    def __init__(self, exc=INVALID_HEADER):
        self.exc = exc

    def get(self, *args, **kwargs):
        raise self.exc

    post = get

    def close(self):
        pass


def _clean(text):
    assert text and SECRET not in text and "7f3e" not in text, text
    return text


def test_metrics_reader():
    with pytest.raises(metrics.MetricsError) as raised:
        metrics.make_fetch(api_key=BAD)
    assert "ends with a newline" in _clean(str(raised.value))


def test_metrics_reader_when_requests_refuses(monkeypatch):
    monkeypatch.setattr(metrics.client, "session", Refusing)
    fetch = metrics.make_fetch(api_key=SECRET)
    with pytest.raises(metrics.ScrapeError) as raised:
        fetch("http://127.0.0.1:8000/metrics")
    assert "InvalidHeader" in _clean(str(raised.value))


def test_tool_calling_test():
    body = {"model": "m", "messages": [], "stream": False}
    exchange = tool_call.post(Refusing(), "http://127.0.0.1:8000/v1/chat/completions", body, BAD, 5)
    assert "ends with a newline" in _clean(exchange.error)
    exchange = tool_call.post(Refusing(), "http://127.0.0.1:8000/v1/chat/completions", body, SECRET, 5)
    assert "not sent" in _clean(exchange.error)
    with pytest.raises(tool_call.AbortRun) as raised:
        tool_call.first_model("http://127.0.0.1:8000", api_key=SECRET, session=Refusing())
    assert "InvalidHeader" in _clean(str(raised.value))


def test_load_generator():
    with pytest.raises(load.LoadError) as raised:
        load.auth_headers(BAD)
    _clean(str(raised.value))
    record = load.stream_chat(Refusing(), "http://127.0.0.1:8000/v1/chat/completions", {}, {"Authorization": "x"})
    assert not record["ok"] and "not sent" in _clean(record["error"])
    with pytest.raises(load.LoadError) as raised:
        load.engine_model(Refusing(), "http://127.0.0.1:8000", "m")
    assert "not sent" in _clean(str(raised.value))


def test_probe_client(tmp_path, capsys):
    record = probe_client.one_request(Refusing(), "http://127.0.0.1:8080/v1/chat/completions", {}, {}, 5)
    assert record["status"] == 0 and "InvalidHeader" in _clean(record["error"])
    key_file = tmp_path / "client-api-key"
    # A key that is no bearer token is refused at start, before a record is written (a file's
    # own line end is not part of the key).
    key_file.write_text(" " + SECRET + "\n")
    out = tmp_path / "records.jsonl"
    assert probe_client.main(["--url", "http://127.0.0.1:9/v1/chat/completions", "--model", "m", "--out", str(out),
                              "--duration", "0.1", "--api-key-file", str(key_file)]) == 2
    assert "whitespace" in _clean(capsys.readouterr().err)
    assert not out.exists()
    assert json.dumps(record)
