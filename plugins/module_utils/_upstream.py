# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxy membership: which vLLM engines are in nginx's upstream right now.

One place decides it. A small daemon on each proxy host (installed by the
nginx_proxy role next to a copy of _vllm_health.py) probes every candidate
engine directly, writes nginx's ``server`` lines from what it sees, validates
with ``nginx -t`` and reloads only on change. A reload starts new workers with
fresh failure accounting and lets the old ones finish their streams.

Rules (MISSION.md item 1: 30 s of "502 no live upstreams" after a replica came back):
- members are the candidates that serve (``/health`` 200 and the expected model
  in ``/v1/models``) and are not drained;
- when none serves, every non-drained candidate is listed, so the first engine
  that starts listening gets requests at once, before the next probe; nginx turns
  its own 502 into 503 with Retry-After meanwhile;
- servers carry ``max_fails=0``: nginx never marks one failed on its own, so no
  failure accounting can outlive an outage.

Stdlib only (plus requests through _vllm_health), no Ansible imports.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

try:  # inside the collection
    from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_health as health
except ImportError:  # installed next to the daemon on a proxy host
    import _vllm_health as health  # type: ignore[no-redef]

MODE_LIVE = "live"
MODE_FALLBACK = "fallback"
MODE_DRAINED = "drained"
# nginx needs one server per upstream; this one is never tried ("down").
PLACEHOLDER = "server 127.0.0.1:9 down;  # every engine drained: nginx answers 503"


def server_key(candidate):
    """``address:port`` as nginx writes it."""
    return "%s:%s" % (candidate["address"], candidate["port"])


def choose_members(candidates, serving, drained):
    """Return (members, mode) from candidate dicts, names serving, names drained.

    ``live``: the serving, non-drained candidates. ``fallback``: none serves, so
    every non-drained candidate is listed (the first to listen gets requests at
    once). ``drained``: every candidate is drained (maintenance), none is listed
    and nginx answers 503 with Retry-After.
    """
    eligible = [c for c in candidates if c["name"] not in drained]
    live = [c for c in eligible if c["name"] in serving]
    if live:
        return live, MODE_LIVE
    if eligible:
        return eligible, MODE_FALLBACK
    return [], MODE_DRAINED


def render_servers(members, mode):
    """nginx ``server`` lines for the upstream block (stable order: idempotent)."""
    lines = ["# Managed by factory-floor-upstream; mode=%s. Do not edit." % mode]
    for member in sorted(members, key=lambda c: c["name"]):
        lines.append("server %s max_fails=0;  # %s" % (server_key(member), member["name"]))
    if not members:
        lines.append(PLACEHOLDER)
    return "\n".join(lines) + "\n"


def read_drained(drain_dir):
    """Names of drained engines: one empty file per engine in ``drain_dir``."""
    try:
        return set(os.listdir(drain_dir))
    except OSError:
        return set()


def write_atomic(path, text, mode=0o644):
    """Write ``text`` to ``path`` through a temporary file and rename."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _log_stdout(message):
    """One line to stdout (the journal, under systemd)."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


class Syncer:
    """One membership loop; every side effect goes through injectable callables."""

    def __init__(self, config, probe=None, run=None, log=None, clock=time.time):
        self.config = config
        self.candidates = config["candidates"]
        self.probe = probe or self._probe
        self.run = run or (lambda argv: subprocess.run(argv, capture_output=True, text=True, check=False))
        self.log = log or _log_stdout
        self.clock = clock
        self.last_status = {}
        # nginx -t accepted the servers file but the reload failed: nginx still runs
        # the old upstream, so the next pass reloads again although the file matches.
        self.reload_pending = False
        # The drain dir as of the last pass whose upstream nginx runs (see once()).
        self.applied_drained = []

    def _probe(self, candidate):
        result = health.probe(
            "http://%s" % server_key(candidate),
            api_key=self.config.get("api_key") or None,
            model=self.config.get("model") or None,
            kind="models",
            timeout=float(self.config.get("probe_timeout", 2.0)),
        )
        return result.status

    def current_text(self):
        try:
            with open(self.config["servers_file"], encoding="utf-8") as handle:
                return handle.read()
        except OSError:
            return None

    def _call(self, argv):
        """Run ``argv``; return (returncode, output). A command that cannot run counts as failed."""
        try:
            done = self.run(argv)
        except Exception as exc:  # e.g. nginx not installed: a failure to report, not a crash
            return 127, "%s could not run: %s" % (" ".join(argv), exc)
        return done.returncode, (done.stderr or done.stdout or "").strip()

    def apply(self, text):
        """Install ``text`` as the servers file if nginx accepts it; reload nginx.

        ``nginx -t`` rejecting it restores the previous file. A failed reload keeps
        the file (nginx accepted it, a restart loads it) and is retried every pass.
        """
        path = self.config["servers_file"]
        previous = self.current_text()
        write_atomic(path, text)
        rc, output = self._call(self.config.get("test_command", ["nginx", "-t", "-q"]))
        if rc != 0:
            if previous is None:
                os.unlink(path)
            else:
                write_atomic(path, previous)
            self.log("nginx -t rejected the new upstream, kept the old one: %s" % output)
            return False
        rc, output = self._call(self.config.get("reload_command", ["systemctl", "reload", "nginx"]))
        self.reload_pending = rc != 0
        if rc != 0:
            self.log("nginx reload failed (rc=%s), retrying next pass: %s" % (rc, output))
            return False
        return True

    def once(self):
        """Probe all candidates, update nginx if membership changed; return the state."""
        statuses = {}
        for candidate in self.candidates:
            try:
                statuses[candidate["name"]] = self.probe(candidate)
            except Exception as exc:  # a probe bug must not stop the proxy's membership loop
                statuses[candidate["name"]] = "error: %s" % exc
        serving = {name for name, status in statuses.items() if status == health.SERVING}
        drained = read_drained(self.config.get("drain_dir", "/etc/factory-floor/drain"))
        members, mode = choose_members(self.candidates, serving, drained)
        text = render_servers(members, mode)
        changed = text != self.current_text() or self.reload_pending
        applied = self.apply(text) if changed else False
        if statuses != self.last_status or changed:
            self.log(json.dumps({
                "event": "membership" if changed else "probe",
                "statuses": statuses,
                "drained": sorted(drained),
                "members": [m["name"] for m in members],
                "mode": mode,
                "applied": applied,
            }, sort_keys=True))
        self.last_status = statuses
        installed = self.current_text() == text and not self.reload_pending
        if installed:
            self.applied_drained = sorted(drained)
        # ``drained`` is what nginx runs, not what the drain dir asks for: an engine is
        # reported drained only once an upstream without it is loaded (drain.yml waits
        # for it before the engine is stopped).
        state = {
            "updated": self.clock(),
            "mode": mode if installed else "unknown",
            "members": [m["name"] for m in members] if installed else [],
            "in_rotation": sorted(serving - drained) if installed and mode == MODE_LIVE else [],
            "statuses": statuses,
            "drained": self.applied_drained,
        }
        if self.config.get("state_file"):
            os.makedirs(os.path.dirname(os.path.abspath(self.config["state_file"])), exist_ok=True)
            write_atomic(self.config["state_file"], json.dumps(state, sort_keys=True) + "\n")
        return state


def main(argv=None):
    parser = argparse.ArgumentParser(description="Keep nginx's vLLM upstream equal to the engines that serve.")
    parser.add_argument("--config", required=True, help="JSON file written by the nginx_proxy role")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as handle:
        config = json.load(handle)
    syncer = Syncer(config)
    stop = []
    signal.signal(signal.SIGTERM, lambda *args: stop.append(1))
    interval = float(config.get("interval", 1.0))
    while True:
        started = time.monotonic()
        syncer.once()
        if args.once or stop:
            return 0
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
        if stop:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
