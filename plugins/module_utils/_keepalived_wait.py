# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The keepalived role's wait for the floating address: the request a client makes, and the refusal when it never
answers. Pure logic, standard library only; behind ``factory_floor.llm.keepalived_wait``, which runs ``curl`` with
``curl_argv`` on the proxy host once a second until it answers 200 or ``timeout`` tries have failed."""

from __future__ import annotations


def curl_argv(address, port, tls=False, server_name="", ca_file=""):
    """curl asking ``address``'s /healthz: plain http, or with TLS https to ``server_name`` (the name the certificate
    carries), connected to the address itself (``--resolve``) and verified against ``ca_file`` (the trust store when
    empty)."""
    ip = str(address).split("/", 1)[0]
    argv = ["curl", "--silent", "--show-error", "--noproxy", "*", "--max-time", "2", "--output", "/dev/null",
            "--write-out", "%{http_code}"]
    if not tls:
        return argv + ["http://%s:%s/healthz" % (ip, port)]
    argv += ["--resolve", "%s:%s:%s" % (server_name, port, ip)]
    if ca_file:
        argv += ["--cacert", ca_file]
    return argv + ["https://%s:%s/healthz" % (server_name, port)]


def truncate(text, length=200, end="...", leeway=5):
    """Jinja's ``truncate(length)``: ``text`` as it is within ``leeway`` characters, else cut at a word and ``end``."""
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def failure(address, timeout, argv, status, stderr, tls=False):
    """Why the wait failed: the address, the time waited, the request, the last status and curl's first error line,
    where to look next."""
    lines = (stderr or "").splitlines()
    return ("The floating address %s did not answer 200 on /healthz within %s s (%s): HTTP %s%s. Which host holds it, "
            "and why: journalctl -u keepalived.service on the proxy hosts, /run/factory-floor/keepalived.json there.%s"
            % (str(address).split("/", 1)[0], timeout, argv[-1] if argv else "", status or "none",
               (", " + truncate(lines[0])) if lines else "",
               " With TLS: the certificate must carry nginx_proxy_tls_server_name and verify against "
               "nginx_proxy_tls_ca_file." if tls else ""))
