# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A real nginx running the nginx_proxy role's configuration, on this machine's loopback.

The role's ``templates/nginx.conf.j2`` is rendered by Ansible's own templating with the
role's ``defaults/main.yml`` and ``vars/main.yml`` (and the ``site`` role's defaults), as the
role renders it on a proxy host; only the host's fixed paths (``/etc/nginx``, ``/run``,
``/var/log``, Debian's module directory) are pointed into a temporary directory. nginx
itself is Debian's, taken out of its packages without installing them (``make nginx``:
``.cache/nginx/root``; installed, Debian's nginx package starts a service on this machine,
whose stop would reach other nginx masters here by name). Each proxy runs under its own
prefix and pid file, listens on loopback only, and is stopped by its own PID.

Stand-in engines (:class:`Engine`) are stdlib HTTP servers on 127.0.0.1 that record what
reached them.
"""

from __future__ import annotations

import atexit
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "nginx_proxy")
KEY = "ff-test-key.A1~b2+c3/d4-e5_f6="
# Where the proxy's "network" listeners (all addresses, on a host) listen here: another loopback
# address, so nothing listens beyond this machine, and 127.0.0.1 stays the host's own loopback.
NET = "127.0.0.2"


def nginx_root():
    """Where Debian's nginx with the Lua module lies, unpacked (``make nginx``), or fail saying how to get it."""
    found = os.environ.get("FF_NGINX_ROOT") or os.path.join(ROOT, ".cache", "nginx", "root")
    if not os.path.exists(os.path.join(found, "usr", "sbin", "nginx")):
        pytest.fail("nginx not found under %s: `make nginx` unpacks Debian's nginx and Lua module there without "
                    "installing them (make units does it first), or set FF_NGINX_ROOT" % found)
    return found


def self_signed(directory, name):
    """A self-signed certificate for DNS name ``name`` (EC P-256, valid two days): (certificate, key) PEM files.

    Made with ``cryptography`` (ansible-core's own dependency), so the tests need no openssl binary."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = os.path.join(str(directory), name + ".crt"), os.path.join(str(directory), name + ".key")
    with open(cert_file, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_file, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    os.chmod(key_file, 0o600)
    return cert_file, key_file


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Engine:
    """A stand-in engine: answers every request 200 with JSON, and records it (method, path, headers, body)."""

    def __init__(self, status=200):
        self.requests = []
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                engine.requests.append({"method": self.command, "path": self.path,
                                        "authorization": self.headers.get("Authorization"), "body": body})
                payload = json.dumps({"path": self.path, "object": "stand-in"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def paths(self):
        return [r["path"] for r in self.requests]

    def track_connections(self):
        """Record when each connection the engine accepted was closed (by the client: nginx), in
        ``self.closed`` (time.monotonic() values)."""
        self.closed = []
        finish = self.server.shutdown_request

        def shutdown_request(request):
            self.closed.append(time.monotonic())
            finish(request)

        self.server.shutdown_request = shutdown_request
        return self

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# Run in a child process: importing Ansible's controller code into the test process would
# change how other tests' modules report warnings (see tests/unit/plugins/filter).
_RENDER = r"""
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
sys.path.insert(0, sys.argv[1])
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters

def trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value

for line in sys.stdin:
    job = json.loads(line)
    variables = trusted(job["role_variables"])
    variables.update(job["variables"])
    try:
        templar = with_filters(Templar(loader=DataLoader(), variables=variables))
        answer = {"text": templar.template(trust_as_template(job["source"]))}
    except Exception as exc:
        answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


def _yaml(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def render(template, variables):
    """``roles/nginx_proxy/templates/<template>`` rendered by Ansible's templating with the role's
    defaults and vars (templates themselves, as in a play), then ``variables`` (inventory-like
    values, taken as given)."""
    role_variables = {}
    role_variables.update(_yaml("roles", "site", "defaults", "main.yml"))
    role_variables.update(_yaml("roles", "nginx_proxy", "defaults", "main.yml"))
    role_variables.update(_yaml("roles", "nginx_proxy", "vars", "main.yml"))
    with open(os.path.join(ROLE, "templates", template), encoding="utf-8") as handle:
        source = handle.read()
    job = json.dumps({"role_variables": role_variables,
                      "variables": dict({"ansible_managed": "Ansible managed (test)"}, **variables), "source": source},
                     sort_keys=True)
    if job not in _rendered:
        renderer = _renderer()
        renderer.stdin.write(job + "\n")
        renderer.stdin.flush()
        answer = json.loads(renderer.stdout.readline() or '{"error": "the renderer exited"}')
        assert "text" in answer, "rendering %s failed: %s" % (template, answer.get("error"))
        _rendered[job] = answer["text"]
    return _rendered[job]


# One child process for the whole run (it takes seconds to import Ansible), and one render per
# distinct input (the proxies render with placeholders for their directory and port).
_rendered = {}
_child = []


def _renderer():
    if not _child or _child[0].poll() is not None:
        _child[:] = [subprocess.Popen([sys.executable, "-c", _RENDER, os.path.join(ROOT, "build", "collections")],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)]
        atexit.register(_stop_renderer, _child[0])
    return _child[0]


def _stop_renderer(child):
    child.stdin.close()
    child.wait(timeout=30)


class Proxy:
    """The role's nginx.conf under a private prefix ``tmp``, on a free loopback port.

    ``overrides``: role variables as an inventory would set them (nginx_proxy_balance,
    nginx_proxy_affinity_body_fields, nginx_proxy_tls_certificate, ...). ``engines``: the
    stand-ins the servers file (and, with affinity, the member list) names.
    """

    def __init__(self, tmp, engines=(), api_key=KEY, members=True, **overrides):
        self.tmp = str(tmp)
        self.root = nginx_root()
        self.port = free_port()
        self.api_key = api_key
        self.proc = None
        self.engines = list(engines)
        self.paths = {
            "conf": os.path.join(self.tmp, "nginx.conf"),
            "servers": os.path.join(self.tmp, "factory-floor-upstream.conf"),
            "members": os.path.join(self.tmp, "factory-floor-members.json"),
            "key": os.path.join(self.tmp, "nginx-api-key.conf"),
            "lua": os.path.join(self.tmp, "lua"),
            "pid": os.path.join(self.tmp, "nginx.pid"),
            "error_log": os.path.join(self.tmp, "error.log"),
        }
        names = ["engine-%d" % i for i in range(len(self.engines))] or ["engine-0"]
        hostvars = {name: {"inventory_hostname": name, "nginx_proxy_backend_address": "127.0.0.1",
                           "vllm_port": (self.engines[i].port if self.engines else 9),
                           "vllm_served_model_name": "lab-chat", "vllm_api_key": api_key}
                    for i, name in enumerate(names)}
        self.variables = {
            "inventory_hostname": "gateway",
            "groups": {"gb10": names, "proxy": ["gateway"]},
            "hostvars": hostvars,
            "site_proxy_port": self.port,
            "nginx_proxy_api_key": api_key,
            "_nginx_proxy_servers_file": self.paths["servers"],
            "_nginx_proxy_members_file": self.paths["members"],
            "_nginx_proxy_key_map": self.paths["key"],
            "_nginx_proxy_lua_dir": self.paths["lua"],
        }
        self.variables.update(overrides)
        self.names = names
        self.write(members=members)

    # --------------------------------------------------------------- files

    def render_conf(self):
        # Placeholders for what differs between proxies of the same settings (directory, port).
        placeholders = {key: value.replace(self.tmp, "/@tmp@") if isinstance(value, str) else value
                        for key, value in self.variables.items() if key != "hostvars"}
        placeholders["site_proxy_port"] = 1
        placeholders["hostvars"] = {name: dict(hv, vllm_port=9) for name, hv in self.variables["hostvars"].items()}
        text = render("nginx.conf.j2", placeholders)
        assert "@tmp@" not in text.replace("/@tmp@", ""), "unexpected placeholder"
        text = text.replace("/@tmp@", self.tmp)
        text = text.replace("listen 1 ", "listen %d " % self.port).replace("listen [::]:1 ", "listen [::]:%d " % self.port)
        text = text.replace("listen 127.0.0.1:1;", "listen 127.0.0.1:%d;" % self.port)
        text = text.replace("listen [::1]:1;", "listen [::1]:%d;" % self.port)
        assert not [line for line in text.splitlines() if line.strip().startswith("listen") and ":1;" in line]
        root, tmp = self.root, self.tmp
        replacements = [
            ("user www-data;", "user root;"),
            ("pid /run/nginx.pid;", "pid %s;" % self.paths["pid"]),
            ("error_log /var/log/nginx/error.log;", "error_log %s;" % self.paths["error_log"]),
            # Debian's modules-enabled (the Lua module when the role installs it: affinity), whose
            # files load the modules by a path relative to nginx's prefix (write_modules).
            ("include /etc/nginx/modules-enabled/*.conf;",
             "include %s/modules-enabled/*.conf;" % tmp if "_by_lua" in text else "# no Lua: least_conn"),
            ("include /etc/nginx/mime.types;",
             "include %s/etc/nginx/mime.types;\n"
             "    client_body_temp_path %s/body;\n    proxy_temp_path %s/proxy;\n"
             "    fastcgi_temp_path %s/fastcgi;\n    uwsgi_temp_path %s/uwsgi;\n    scgi_temp_path %s/scgi;"
             % (root, tmp, tmp, tmp, tmp, tmp)),
            ("access_log /var/log/nginx/access.log", "access_log %s/access.log" % tmp),
        ]
        lua_path = 'lua_package_path "%s/?.lua;;";' % self.paths["lua"]
        if lua_path in text:
            replacements.append((lua_path, 'lua_package_path "%s/?.lua;%s/usr/share/lua/5.1/?.lua;;";\n'
                                           '    lua_package_cpath "%s/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;;";'
                                 % (self.paths["lua"], root, root)))
        port = self.variables["site_proxy_port"]
        replacements += [("listen %d " % port, "listen %s:%d " % (NET, port)),
                         ("listen [::]:%d " % port, "# (no IPv6 wildcard here) listen [::]:%d " % port)]
        for old, new in replacements:
            assert old in text, "the role's nginx.conf no longer has %r: adapt the test harness" % old
            text = text.replace(old, new)
        return text

    def write_modules(self):
        """Debian's modules-enabled as the Lua module's packages leave it: links to
        ``modules-available/*.conf``, whose ``load_module modules/...;`` is relative to nginx's
        prefix (``/usr/share/nginx``, where ``modules`` links to the modules); here the prefix is
        ``tmp`` (:meth:`argv`), so ``tmp/modules`` links to them."""
        enabled = os.path.join(self.tmp, "modules-enabled")
        os.makedirs(enabled, exist_ok=True)
        available = os.path.join(self.root, "usr", "share", "nginx", "modules-available")
        for name, link in (("mod-http-ndk.conf", "10-mod-http-ndk.conf"), ("mod-http-lua.conf", "50-mod-http-lua.conf")):
            if not os.path.lexists(os.path.join(enabled, link)):
                os.symlink(os.path.join(available, name), os.path.join(enabled, link))
        if not os.path.lexists(os.path.join(self.tmp, "modules")):
            os.symlink(os.path.join(self.root, "usr", "lib", "nginx", "modules"), os.path.join(self.tmp, "modules"))

    def write(self, members=True):
        os.makedirs(self.paths["lua"], exist_ok=True)
        self.write_modules()
        shutil.copy(os.path.join(ROLE, "files", "factory_floor_affinity.lua"), self.paths["lua"])
        with open(self.paths["conf"], "w", encoding="utf-8") as handle:
            handle.write(self.render_conf())
        if self.api_key:
            with open(self.paths["key"], "w", encoding="utf-8") as handle:
                handle.write(render("nginx-api-key.conf.j2", self.variables))
        lines = ["server 127.0.0.1:%d max_fails=0;  # %s" % (self.engines[i].port, name)
                 for i, name in enumerate(self.names) if self.engines]
        self.write_file("servers", "\n".join(lines) + "\n")
        if members and self.engines:
            self.write_file("members", json.dumps({"mode": "live", "members": [
                {"name": name, "address": "127.0.0.1", "host": "127.0.0.1", "port": self.engines[i].port,
                 "max_num_seqs": 4} for i, name in enumerate(self.names)]}))

    def write_file(self, which, text):
        with open(self.paths[which], "w", encoding="utf-8") as handle:
            handle.write(text)

    # ------------------------------------------------------------- process

    def env(self):
        libs = [os.path.join(self.root, "usr", "lib", "x86_64-linux-gnu"), os.path.join(self.root, "lib", "x86_64-linux-gnu")]
        return dict(os.environ, LD_LIBRARY_PATH=":".join(libs))

    def argv(self, *extra):
        return [os.path.join(self.root, "usr", "sbin", "nginx"), "-p", self.tmp + "/", "-c", self.paths["conf"],
                "-e", self.paths["error_log"]] + list(extra)

    def test(self):
        """The role's check of nginx.conf (files/nginx-check: nginx -t, then the balancer's init):
        (returncode, its output)."""
        # nginx's prefix, as the server it checks runs with it (argv's -p; on a host, nginx's own).
        env = dict(self.env(), FF_NGINX=os.path.join(self.root, "usr", "sbin", "nginx"), FF_NGINX_PREFIX=self.tmp + "/")
        done = subprocess.run([os.path.join(ROLE, "files", "nginx-check"), self.paths["conf"]], capture_output=True,
                              text=True, env=env, timeout=60, check=False)
        return done.returncode, done.stdout + done.stderr

    def start(self):
        rc, output = self.test()
        assert rc == 0, "nginx -t failed: %s" % output
        self.proc = subprocess.Popen(self.argv("-g", "daemon off;"), env=self.env(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("nginx exited (%s): %s" % (self.proc.returncode, self.error_log()))
            try:
                with socket.create_connection((NET, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("nginx did not listen on %s:%d within 20 s: %s" % (NET, self.port, self.error_log()))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def error_log(self):
        try:
            with open(self.paths["error_log"], encoding="utf-8", errors="replace") as handle:
                return handle.read()[-3000:]
        except OSError:
            return ""
