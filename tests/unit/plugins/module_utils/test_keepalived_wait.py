# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The keepalived role's wait for the floating address (``_keepalived_wait``): the request a client makes, the
refusal's words (the module: tests/unit/plugins/modules/test_keepalived_wait.py; the role's task against loopback:
tests/unit/roles/test_keepalived_wait.py)."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _keepalived_wait as kw

HEAD = ["curl", "--silent", "--show-error", "--noproxy", "*", "--max-time", "2", "--output", "/dev/null",
        "--write-out", "%{http_code}"]


def test_plain_http_asks_the_address_itself():
    assert kw.curl_argv("192.0.2.10/24", 8080) == HEAD + ["http://192.0.2.10:8080/healthz"]


@pytest.mark.parametrize("ca_file, verify", [("/etc/ssl/ca.pem", ["--cacert", "/etc/ssl/ca.pem"]), ("", [])])
def test_tls_asks_the_certificates_name_connected_to_the_address(ca_file, verify):
    assert kw.curl_argv("192.0.2.10/24", 443, True, "llm.example", ca_file) == (
        HEAD + ["--resolve", "llm.example:443:192.0.2.10"] + verify + ["https://llm.example:443/healthz"])


def test_the_refusal_names_the_address_the_request_the_status_and_curls_error():
    argv = kw.curl_argv("192.0.2.10/24", 8080)
    assert kw.failure("192.0.2.10/24", 30, argv, "000", "curl: (7) Failed to connect\nmore") == (
        "The floating address 192.0.2.10 did not answer 200 on /healthz within 30 s (http://192.0.2.10:8080/healthz): "
        "HTTP 000, curl: (7) Failed to connect. Which host holds it, and why: journalctl -u keepalived.service on the "
        "proxy hosts, /run/factory-floor/keepalived.json there.")
    tls = kw.failure("192.0.2.10", 5, argv, "", "", tls=True)
    assert "HTTP none. Which host" in tls
    assert tls.endswith("there. With TLS: the certificate must carry nginx_proxy_tls_server_name and verify against "
                        "nginx_proxy_tls_ca_file.")


def test_a_long_error_is_cut_at_a_word_as_jinjas_truncate():
    assert kw.truncate("x" * 205) == "x" * 205
    assert kw.truncate("word " * 60) == " ".join(["word"] * 39) + "..."
