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
- an engine's probe passes when it serves (``/health`` 200 and the expected model
  in ``/v1/models``);
- hysteresis, in nginx's ``health_check`` words: an engine leaves after ``fails``
  consecutive failed probes (default 3) and joins after ``passes`` consecutive passed
  ones (default 2), so one slow answer under load does not reload nginx twice. An
  engine known gone leaves at once: the port refuses connections (its server exited,
  or the watchdog killed it), ``/health`` answers 503 (vLLM's answer once its engine
  core died), or it serves another model. The counts survive a restart of the
  checker (the state file, written atomically after every pass);
- members are the engines in by that rule that are not drained; ``in_rotation``
  lists only the members whose latest probe passed;
- when no engine is in, every non-drained candidate is listed, so the first engine
  that starts listening gets requests at once, before the next probe; nginx turns
  its own 502 into 503 with Retry-After meanwhile;
- servers carry ``max_fails=0``: nginx never marks one failed on its own, so no
  failure accounting can outlive an outage;
- servers are written by address, never by name: the checker resolves each
  candidate's address itself every pass (the last address that resolved is kept),
  so nginx resolves nothing when it loads its configuration. A name that does not
  resolve at that moment (a machine that is down, DNS not up yet at boot) would make
  ``nginx -t`` - and so nginx's start - fail, and a name whose address changed
  would keep the old one until the next reload. A candidate whose name has never
  resolved is left out and counts as unreachable.

Stdlib only (plus requests through _vllm_health), no Ansible imports.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
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


# Consecutive failed probes before an engine leaves, passed ones before it joins
# (nginx's health_check fails= and passes=).
DEFAULT_FAILS = 3
DEFAULT_PASSES = 2


def known_gone(status, http_status=None):
    """The engine's answer is final, not slow: refused (nothing listens), 503 (vLLM's engine core
    died) or another model served. Such an engine leaves the upstream at once."""
    return status in (health.LOADING, health.WRONG_MODEL) or (status == health.DEAD and http_status == 503)


class Membership:
    """Which engines are in, with hysteresis. Pure: probe results in, members out.

    ``state`` is ``{name: {"member": bool, "fails": int, "passes": int}}``, what the
    state file keeps between runs of the checker.
    """

    def __init__(self, names, fails=DEFAULT_FAILS, passes=DEFAULT_PASSES, state=None, members=()):
        if not isinstance(fails, int) or isinstance(fails, bool) or fails < 1:
            raise ValueError("fails must be an integer >= 1, got %r" % (fails,))
        if not isinstance(passes, int) or isinstance(passes, bool) or passes < 1:
            raise ValueError("passes must be an integer >= 1, got %r" % (passes,))
        self.fails, self.passes = fails, passes
        state = state if isinstance(state, dict) else {}
        self.state = {}
        for name in names:
            kept = state.get(name)
            if isinstance(kept, dict):
                self.state[name] = {"member": bool(kept.get("member")), "fails": _count(kept.get("fails")),
                                    "passes": _count(kept.get("passes"))}
            else:
                # No counts kept (first run, or a state file from before them): what nginx runs.
                self.state[name] = {"member": name in members, "fails": 0, "passes": 0}

    def update(self, name, status, http_status=None):
        """Count one probe of ``name``; return whether it is a member now."""
        entry = self.state[name]
        # Counted up to the threshold only: what matters is whether it was reached.
        if status == health.SERVING:
            entry["passes"], entry["fails"] = min(entry["passes"] + 1, self.passes), 0
            if not entry["member"] and entry["passes"] >= self.passes:
                entry["member"] = True
        else:
            entry["fails"], entry["passes"] = min(entry["fails"] + 1, self.fails), 0
            if entry["member"] and (known_gone(status, http_status) or entry["fails"] >= self.fails):
                entry["member"] = False
        return entry["member"]

    def members(self):
        return {name for name, entry in self.state.items() if entry["member"]}

    def snapshot(self):
        """A copy of ``state``, for the state file and the journal."""
        return {name: dict(entry) for name, entry in self.state.items()}


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def server_key(candidate):
    """``address:port`` as nginx writes it (an IPv6 address in brackets)."""
    address = str(candidate["address"])
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%s" % (address, candidate["port"])


def resolve_address(name):
    """The first address ``name`` resolves to (an address resolves to itself), or None."""
    text = str(name).strip("[]")
    try:
        infos = socket.getaddrinfo(text, None, socket.AF_UNSPEC, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    return infos[0][4][0] if infos else None


def choose_members(candidates, serving, drained):
    """Return (members, mode) from candidate dicts, names in (``serving``), names drained.

    ``live``: the candidates in, not drained. ``fallback``: none is in, so
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

    def __init__(self, config, probe=None, run=None, log=None, clock=time.time, resolve=resolve_address):
        self.config = config
        self.candidates = config["candidates"]
        self.probe = probe or self._probe
        self.resolve = resolve
        # name -> the last address its candidate's address (a name or an address) resolved to.
        self.resolved = {}
        self.run = run or (lambda argv: subprocess.run(argv, capture_output=True, text=True, check=False))
        self.log = log or _log_stdout
        self.clock = clock
        self.last_status = {}
        # nginx -t accepted the servers file but the reload failed: nginx still runs
        # the old upstream, so the next pass reloads again although the file matches.
        self.reload_pending = False
        # The drain dir as of the last pass whose upstream nginx runs (see once()).
        self.applied_drained = []
        previous = self._read_state()
        self.membership = Membership(
            [c["name"] for c in self.candidates],
            fails=config.get("fails", DEFAULT_FAILS),
            passes=config.get("passes", DEFAULT_PASSES),
            state=previous.get("membership"),
            # Without kept counts, start from what nginx runs: a restarted checker must not reload it.
            members=set(previous.get("members") or ()) if previous.get("mode") == MODE_LIVE else (),
        )

    def _read_state(self):
        """The last pass's state file (an empty dict when there is none or it is unreadable)."""
        path = self.config.get("state_file")
        if not path:
            return {}
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _probe(self, candidate):
        return health.probe(
            "http://%s" % server_key(candidate),
            api_key=self.config.get("api_key") or None,
            model=self.config.get("model") or None,
            kind="models",
            timeout=float(self.config.get("probe_timeout", 2.0)),
        )

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

    def _resolved(self, candidate):
        """``candidate`` with its address resolved (kept from an earlier pass when it does not
        resolve now), or None when it never resolved."""
        address = self.resolve(candidate["address"])
        if address:
            self.resolved[candidate["name"]] = address
        address = self.resolved.get(candidate["name"])
        return dict(candidate, address=address) if address else None

    def once(self):
        """Probe all candidates, update nginx if membership changed; return the state."""
        statuses = {}
        resolved = []
        for named in self.candidates:
            http_status = None
            candidate = self._resolved(named)
            if candidate is None:
                statuses[named["name"]] = health.UNREACHABLE
                self.membership.update(named["name"], health.UNREACHABLE)
                continue
            resolved.append(candidate)
            try:
                result = self.probe(candidate)
                # A _vllm_health.ProbeResult, or only its status.
                status = getattr(result, "status", result)
                http_status = getattr(result, "http_status", None)
            except Exception as exc:  # a probe bug must not stop the proxy's membership loop
                status = "error: %s" % exc
            statuses[candidate["name"]] = status
            self.membership.update(candidate["name"], status, http_status)
        passed = {name for name, status in statuses.items() if status == health.SERVING}
        drained = read_drained(self.config.get("drain_dir", "/etc/factory-floor/drain"))
        members, mode = choose_members(resolved, self.membership.members(), drained)
        if mode == MODE_DRAINED and any(c["name"] not in drained for c in self.candidates):
            # Not every engine is drained: some have no address yet. None to list, nginx answers 503.
            mode = MODE_FALLBACK
        text = render_servers(members, mode)
        changed = text != self.current_text() or self.reload_pending
        applied = self.apply(text) if changed else False
        if statuses != self.last_status or changed:
            self.log(json.dumps({
                "event": "membership" if changed else "probe",
                "statuses": statuses,
                "membership": self.membership.snapshot(),
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
            # Members whose latest probe passed: a member on its way out (failed probes below
            # ``fails``) is still in nginx's upstream, but not counted as serving.
            "in_rotation": sorted(m["name"] for m in members if m["name"] in passed) if installed and mode == MODE_LIVE else [],
            "statuses": statuses,
            "drained": self.applied_drained,
            "membership": self.membership.snapshot(),
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
    try:
        with open(args.config, encoding="utf-8") as handle:
            config = json.load(handle)
        syncer = Syncer(config)
    except (OSError, ValueError) as exc:
        sys.stderr.write("%s: %s\n" % (args.config, exc))
        return 2
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
