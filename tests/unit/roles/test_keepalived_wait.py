# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The keepalived role's wait for the floating address, in a real ansible-playbook run against loopback.

The task is the role's own (read from roles/keepalived/tasks/run.yml), run with a local connection;
the "floating address" is 127.0.0.1 and the proxy behind it a loopback server that answers
``/healthz``. With ``nginx_proxy_tls_certificate`` set, the proxy serves TLS on every address but
loopback's own listeners: the wait must speak https to the floating address, verify the certificate
for ``nginx_proxy_tls_server_name`` against ``nginx_proxy_tls_ca_file``, and refuse one it cannot verify.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.roles import nginx_proxy_harness as harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NAME = "llm.factory-floor.test"  # resolves nowhere: the wait must connect to the floating address itself


class Healthz:
    """A loopback server answering GET /healthz 200, with TLS when given (certificate, key)."""

    def __init__(self, certificate=None):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server's naming
                ok = self.path == "/healthz"
                self.send_response(200 if ok else 404)
                self.send_header("Content-Length", "3")
                self.end_headers()
                self.wfile.write(b"ok\n" if ok else b"no\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if certificate:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*certificate)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wait_tasks():
    """The role's wait (factory_floor.llm.keepalived_wait, which fails itself), as run.yml has it."""
    with open(os.path.join(ROOT, "roles", "keepalived", "tasks", "run.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    names = [t.get("name", "") for t in tasks]
    first = [i for i, name in enumerate(names) if name.startswith("Wait until the floating address")]
    assert len(first) == 1, names
    return tasks[first[0]:first[0] + 1]


def run_wait(tmp_path, port, **settings):
    """ansible-playbook with the role's wait task on one local "proxy host"; (rc, output)."""
    (tmp_path / "inventory.yml").write_text(
        "proxy:\n  hosts:\n    proxy-a: {ansible_connection: local, ansible_python_interpreter: %s}\n" % sys.executable)
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "proxy", "gather_facts": False,
                                                        "tasks": wait_tasks()}], sort_keys=False))
    extra = {"__keepalived_address": "127.0.0.1/8", "site_proxy_port": port, "keepalived_status_timeout": 2}
    extra.update(settings)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    return done.returncode, done.stdout + done.stderr


needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


@needs_tools
def test_plain_http_floating_address_answers(tmp_path):
    server = Healthz()
    try:
        rc, output = run_wait(tmp_path, server.port)
    finally:
        server.close()
    assert rc == 0, output


@needs_tools
def test_with_tls_the_wait_speaks_https_to_the_floating_address_and_verifies_the_name(tmp_path):
    certificate = harness.self_signed(tmp_path, NAME)
    server = Healthz(certificate)
    tls = {"nginx_proxy_tls_certificate": "/etc/ssl/proxy.crt", "nginx_proxy_tls_certificate_key": "/etc/ssl/proxy.key",
           "nginx_proxy_tls_server_name": NAME, "nginx_proxy_tls_ca_file": certificate[0]}
    try:
        rc, output = run_wait(tmp_path, server.port, **tls)
        assert rc == 0, output
        # A certificate it cannot verify (another CA) is no answer: the run fails, naming the address.
        (tmp_path / "other").mkdir()
        other = harness.self_signed(tmp_path / "other", "other.test")
        rc, output = run_wait(tmp_path, server.port, **{**tls, "nginx_proxy_tls_ca_file": other[0]})
        assert rc != 0 and "The floating address 127.0.0.1 did not answer 200" in output, output
        assert "SSL certificate problem" in output, output
        # Nor is one for another name.
        rc, output = run_wait(tmp_path, server.port, **{**tls, "nginx_proxy_tls_server_name": "other.test"})
        assert rc != 0, output
    finally:
        server.close()
