# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxy membership: which vLLM engines are in nginx's upstream right now.

One place decides it. A small daemon on each proxy host (installed by the
nginx_proxy role next to a copy of _host/vllm_health.py) probes every candidate
engine directly, writes nginx's ``server`` lines from what it sees, validates
with ``nginx -t`` and reloads only on change. A reload starts new workers with
fresh failure accounting and lets the old ones finish their streams.

Rules (an engine that serves must be in rotation at once: nginx's own passive checks gave 30 s of
"502 no live upstreams" after a replica came back):
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
  candidate's address itself every pass (IPv4 first; the last address that resolved is kept),
  so nginx resolves nothing when it loads its configuration. A name that does not
  resolve at that moment (a machine that is down, DNS not up yet at boot) would make
  ``nginx -t`` - and so nginx's start - fail, and a name whose address changed
  would keep the old one until the next reload. A candidate whose name has never
  resolved is left out and counts as unreachable;
- with conversation affinity (the role's ``nginx_proxy_balance: affinity``) the same
  pass also writes ``members_file``, the members as nginx's Lua balancer reads them
  (name, resolved address, port, ``max_num_seqs``): both files are checked by one
  ``nginx -t`` and loaded by one reload, so the balancer always hashes over exactly
  the engines nginx's upstream holds.

- nginx's own failures are escalated, not repeated: a reload (or ``nginx -t``, or a write)
  that fails is retried every pass; the first ``escalate_after`` (3) failures in a row are
  warnings, then one ``err`` line (``reload_failing``), again every 60 failures, and a
  ``notice`` once it works again. The same for nginx's master not running (``nginx_down``;
  systemd's ``Restart=always`` drop-in of the role brings it back). Both are in the state
  file (``nginx``) and the textfile metrics (``factory_floor_upstream_nginx_up``,
  ``factory_floor_upstream_reload_failures``);
- an I/O error (a full disk, EIO) never ends the checker: the files nginx loads are
  written to temporary files first (fsync'ed), renamed over the old ones only when
  every one was written, and put back from a hard link when ``nginx -t`` rejects them;
  the pass goes on, the error is an ``err`` line and ``factory_floor_upstream_io_error``
  is 1 until a pass writes everything again.

Stdlib only (plus requests through _vllm_health), no Ansible imports. The daemon's
shell (command line, journal lines, atomic writes, sd_notify) is ``_host/daemon.py``'s;
``--check-config`` validates the configuration before the role installs it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from . import daemon
from . import textfile
from . import vllm_health as health
from .daemon import write_atomic, write_temp

MODE_LIVE = "live"
MODE_FALLBACK = "fallback"
MODE_DRAINED = "drained"
# nginx needs one server per upstream; this one is never tried ("down").
PLACEHOLDER = "server 127.0.0.1:9 down;  # every engine drained: nginx answers 503"


# Consecutive failed probes before an engine leaves, passed ones before it joins
# (nginx's health_check fails= and passes=).
DEFAULT_FAILS = 3
DEFAULT_PASSES = 2
# Passes in a row with nginx failing (a reload, nginx -t, nginx not running) before an err line.
DEFAULT_ESCALATE_AFTER = 3
# Once escalated, the err line again every this many failing passes (a minute at 1 s).
REPEAT_EVERY = 60


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
    """``address:port`` as nginx writes it: the resolved ``host`` when the candidate has one, else
    its ``address``; an IPv6 address in brackets."""
    address = str(candidate.get("host") or candidate["address"])
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%s" % (address, candidate["port"])


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


def resolve_address(address, port):
    """The address ``address`` (a name or a literal) resolves to, as text; IPv4 first.

    nginx resolves a server's name when it loads its configuration; the Lua balancer
    needs the address itself (``ngx.balancer.set_current_peer`` takes no names) and
    uses one per engine. The first IPv4 address ``getaddrinfo`` gives, else its first
    (vLLM listens on ``0.0.0.0`` by default: a name such as ``localhost`` that also
    resolves to ``::1`` must not pick the address nothing listens on). None when the
    name does not resolve.
    """
    try:
        infos = socket.getaddrinfo(address, int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return None
    for info in infos:
        if info[0] == socket.AF_INET:
            return info[4][0]
    return infos[0][4][0] if infos else None


def render_members(members, mode, hosts):
    """The member list nginx's Lua balancer reads at every (re)load: JSON text.

    ``members`` are candidate dicts (``name``, ``address``, ``port``, optional
    ``max_num_seqs``: the engine's ``--max-num-seqs``, in requests); ``hosts`` maps a name to
    its resolved address. A member without one is left out (nginx -t would refuse its
    server line anyway). Sorted by name: idempotent, and the balancer's tie order.
    """
    out = []
    for member in sorted(members, key=lambda c: c["name"]):
        host = hosts.get(member["name"])
        if not host:
            continue
        entry = {"name": member["name"], "address": member["address"], "host": host, "port": int(member["port"])}
        seqs = member.get("max_num_seqs")
        if isinstance(seqs, int) and not isinstance(seqs, bool) and seqs > 0:
            entry["max_num_seqs"] = seqs
        out.append(entry)
    return json.dumps({"mode": mode, "members": out}, indent=1, sort_keys=True) + "\n"


def read_drained(drain_dir):
    """Names of drained engines: one empty file per engine in ``drain_dir``."""
    try:
        return set(os.listdir(drain_dir))
    except OSError:
        return set()


def _read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def nginx_running(pid_file, proc="/proc"):
    """Whether nginx's master runs: the PID in its pid file is a live process named nginx.

    A master killed with SIGKILL leaves its pid file behind; one that quit removes it."""
    text = _read_text(pid_file)
    try:
        master = int((text or "").strip())
        with open("%s/%d/comm" % (proc, master), encoding="utf-8") as handle:
            return handle.read().strip().startswith("nginx")
    except (OSError, ValueError):
        return False


def nginx_workers(pid_file, proc="/proc"):
    """The PIDs of the nginx master's children (its workers), or None when they cannot be read."""
    text = _read_text(pid_file)
    try:
        master = int((text or "").strip())
        with open("%s/%d/task/%d/children" % (proc, master, master), encoding="ascii") as handle:
            return {int(pid) for pid in handle.read().split()}
    except (OSError, ValueError):
        return None


def install_files(files):
    """Install each ``(path, text)`` of ``files`` all-or-nothing; return what :func:`undo_files` needs.

    Every text goes to a temporary file next to its path first, on disk (fsync): a full disk
    or an I/O error raises OSError before any file is replaced, and a crash never leaves a
    file cut short for nginx's next start. The files replaced are kept as hard links (no
    space needed) until :func:`drop_backups` or :func:`undo_files`.
    """
    temps = []
    try:
        for path, text in files:
            temps.append((path, write_temp(path, text, 0o644, sync=True)))
    except BaseException:
        for dummy, tmp in temps:
            _unlink(tmp)
        raise
    undo = []
    for path, tmp in temps:
        backup = None
        if os.path.exists(path):
            backup = tmp + ".previous"
            os.link(path, backup)
        os.replace(tmp, path)
        undo.append((path, backup))
    return undo


def undo_files(undo):
    """Put back what :func:`install_files` replaced (a file that was not there is removed)."""
    for path, backup in undo:
        if backup:
            os.replace(backup, path)
        else:
            _unlink(path)


def drop_backups(undo):
    for dummy, backup in undo:
        if backup:
            _unlink(backup)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


# The configuration the nginx_proxy role writes (upstream.json.j2), key by key.
# members_file: with conversation affinity, the member list nginx's Lua balancer reads.
# pid_file: nginx's master, whose new workers show that a reload is live.
_STRINGS = ("model", "api_key", "servers_file", "state_file", "drain_dir", "members_file", "pid_file")
_POSITIVE = ("interval", "probe_timeout", "reload_timeout")
_COUNTS = ("fails", "passes", "escalate_after")
_COMMANDS = ("test_command", "reload_command")


def load_config(raw):
    """The checker's configuration, checked key by key (ValueError names the key); returned as given."""
    if not isinstance(raw, dict):
        raise ValueError("the configuration must be a JSON object")
    unknown = sorted(set(raw) - set(("candidates",) + _STRINGS + _POSITIVE + _COUNTS + _COMMANDS))
    if unknown:
        raise ValueError("unknown key(s): %s" % ", ".join(unknown))
    candidates = raw.get("candidates")
    if not isinstance(candidates, list):
        raise ValueError("candidates must be a list of engines")
    for candidate in candidates:
        if not (isinstance(candidate, dict) and isinstance(candidate.get("name"), str) and candidate["name"]
                and isinstance(candidate.get("address"), str) and candidate["address"]
                and isinstance(candidate.get("port"), int) and 0 < candidate["port"] < 65536):
            raise ValueError("candidates: each needs a name, an address and a port 1-65535, got %r" % (candidate,))
        seqs = candidate.get("max_num_seqs")
        if seqs is not None and (isinstance(seqs, bool) or not isinstance(seqs, int) or seqs < 0):
            raise ValueError("candidates: max_num_seqs must be a whole number of requests, 0 or more, got %r"
                             % (candidate,))
    for key in _STRINGS:
        # No model or key to check is null or "".
        if key in raw and not isinstance(raw[key], str) and not (key in ("model", "api_key") and raw[key] is None):
            raise ValueError("%s must be a string" % key)
    for key in _POSITIVE:
        if key in raw and (isinstance(raw[key], bool) or not isinstance(raw[key], (int, float)) or raw[key] <= 0):
            raise ValueError("%s must be a number of seconds above 0" % key)
    for key in _COUNTS:
        if key in raw and (isinstance(raw[key], bool) or not isinstance(raw[key], int) or raw[key] < 1):
            raise ValueError("%s must be a whole number of probes, 1 or more" % key)
    for key in _COMMANDS:
        if key in raw and not (isinstance(raw[key], list) and raw[key] and all(isinstance(a, str) for a in raw[key])):
            raise ValueError("%s must be a command (a list of strings)" % key)
    return raw


class Syncer:
    """One membership loop; every side effect goes through injectable callables."""

    def __init__(self, config, probe=None, run=None, log=None, clock=time.time, resolve=resolve_address,
                 workers=None, sleep=time.sleep, nginx_up=None, monotonic=time.monotonic):
        self.config = config
        # Whether nginx's master runs (its pid file names a live nginx process).
        self.nginx_up = nginx_up or (lambda: nginx_running(config.get("pid_file", "/run/nginx.pid")))
        self.escalate_after = config.get("escalate_after", DEFAULT_ESCALATE_AFTER)
        # Passes in a row whose upstream nginx did not get (test rejected, reload or write failed),
        # and passes in a row with nginx's master not running.
        self.reload_failures = 0
        self.down_passes = 0
        # The I/O error of this pass's writes (None: everything written), and the last pass's.
        self.io_error = None
        self.last_io_error = None
        # nginx's workers, read around a reload (``systemctl reload nginx`` returns once the
        # master got the signal, before it has started workers with the new upstream).
        self.workers = workers or (lambda: nginx_workers(config.get("pid_file", "/run/nginx.pid")))
        self.sleep = sleep
        self.candidates = config["candidates"]
        self.probe = probe or self._probe
        self.resolve = resolve
        # Last address each name resolved to: a name that fails to resolve once keeps it.
        self.hosts = {}
        # The membership checker is a daemon on the proxy host: no AnsibleModule, so no run_command.
        # pylint: disable-next=ansible-bad-function
        self.run = run or (lambda argv: subprocess.run(argv, capture_output=True, text=True, check=False))
        # Writes one journal line (stdout under systemd); tests collect them.
        self.write_line = log or daemon.emit
        # Wall clock for what people read (``updated``); waits on the monotonic clock, which no
        # clock step moves.
        self.clock = clock
        self.monotonic = monotonic
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

    def log(self, priority, event, **fields):
        """One journal line as the watchdog writes them: the priority, then a JSON object named by ``event``."""
        self.write_line(daemon.event_line(priority, event, fields))

    def current_text(self):
        return _read_text(self.config["servers_file"])

    def current_members(self):
        """The member list nginx's Lua balancer reads (None without ``members_file``, or no file)."""
        path = self.config.get("members_file")
        return _read_text(path) if path else None

    def member_hosts(self, members):
        """name -> resolved address for ``members``; a name that does not resolve now keeps its last one."""
        for member in members:
            host = member.get("host") or self.resolve(member["address"], member["port"])
            if host:
                self.hosts[member["name"]] = host
        return {m["name"]: self.hosts[m["name"]] for m in members if m["name"] in self.hosts}

    def _call(self, argv):
        """Run ``argv``; return (returncode, output). A command that cannot run counts as failed."""
        try:
            done = self.run(argv)
        except Exception as exc:  # e.g. nginx not installed: a failure to report, not a crash
            return 127, "%s could not run: %s" % (" ".join(argv), exc)
        return done.returncode, (done.stderr or done.stdout or "").strip()

    def apply(self, text, members_text=None):
        """Install ``text`` as the servers file (and ``members_text`` as the member list) if
        nginx accepts them; reload nginx.

        ``nginx -t`` rejecting them restores the previous files. A failed reload keeps
        the files (nginx accepted them, a restart loads them) and is retried every pass.
        """
        files = [(self.config["servers_file"], text)]
        if members_text is not None:
            files.append((self.config["members_file"], members_text))
        try:
            undo = install_files(files)
        except OSError as exc:
            # Nothing was replaced: nginx keeps (and a restart loads) the last good files.
            self.io_error = "%s: %s" % (exc.filename or files[0][0], exc.strerror or exc)
            self._failed("write_failed", daemon.WARNING, error=self.io_error,
                         note="the upstream was not written (disk full?); nginx keeps the last good one, tried again next pass")
            return False
        rc, output = self._call(self.config.get("test_command", ["nginx", "-t", "-q"]))
        if rc != 0:
            undo_files(undo)
            # An error from the first time: nginx refusing what the checker wrote is no hiccup.
            self._failed("nginx_test_rejected", daemon.ERR, rc=rc, output=output,
                         note="nginx -t rejected the new upstream, kept the old one; tried again next pass")
            return False
        drop_backups(undo)
        before = self.workers()
        rc, output = self._call(self.config.get("reload_command", ["systemctl", "reload", "nginx"]))
        self.reload_pending = rc != 0
        if rc != 0:
            self._failed("reload_failed", daemon.WARNING, rc=rc, output=output,
                         note="nginx kept the old upstream; the reload is retried next pass")
            return False
        self._wait_reloaded(before)
        if self.reload_failures:
            self.log(daemon.NOTICE, "reload_recovered", failures=self.reload_failures,
                     note="nginx runs the upstream of this pass again")
        self.reload_failures = 0
        return True

    def _failed(self, event, priority, **fields):
        """Count one pass whose upstream nginx did not get. ``event`` is logged at ``priority`` while
        the failures in a row are below ``escalate_after``; then one ``reload_failing`` at err, again
        every REPEAT_EVERY failures, instead of a line every pass."""
        self.reload_failures += 1
        count = self.reload_failures
        if count < self.escalate_after:
            self.log(priority, event, failures=count, nginx_up=self.nginx_up(), **fields)
        elif (count - self.escalate_after) % REPEAT_EVERY == 0:
            fields["note"] = ("nginx has not run the checker's upstream for %d passes in a row (%s): "
                              "systemctl status nginx.service, /var/log/nginx/error.log" % (count, fields.get("note")))
            self.log(daemon.ERR, "reload_failing", failures=count, cause=event, nginx_up=self.nginx_up(), **fields)

    def _wait_reloaded(self, before):
        """Wait until nginx runs a worker that was not there before the reload: from then on new
        connections get the new upstream, and the state file may say so (a drain waits for it
        before an engine stops). Bounded by ``reload_timeout`` (10 s); workers that cannot be
        read (no pid file) are not waited for."""
        if before is None:
            return
        deadline = self.monotonic() + float(self.config.get("reload_timeout", 10))
        while True:
            now = self.workers()
            if now is None or now - before:
                return
            if self.monotonic() >= deadline:
                self.log(daemon.WARNING, "reload_unconfirmed", timeout=float(self.config.get("reload_timeout", 10)),
                         note="nginx reloaded but no new worker within the timeout: the state may run ahead of nginx")
                return
            self.sleep(0.1)

    def _resolved(self, candidate):
        """``candidate`` with ``host``, the address its ``address`` resolves to (kept from an earlier
        pass when it does not resolve now), or None when it never resolved."""
        host = self.resolve(candidate["address"], candidate["port"])
        if host:
            self.hosts[candidate["name"]] = host
        host = self.hosts.get(candidate["name"])
        return dict(candidate, host=host) if host else None

    def once(self):
        """Probe all candidates, update nginx if membership changed; return the state."""
        self.io_error = None
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
        members_text = None
        if self.config.get("members_file"):
            members_text = render_members(members, mode, self.member_hosts(members))
        changed = (text != self.current_text() or self.reload_pending
                   or (members_text is not None and members_text != self.current_members()))
        applied = self.apply(text, members_text) if changed else False
        if statuses != self.last_status or changed:
            self.log(daemon.INFO, "membership" if changed else "probe",
                     statuses=statuses,
                     membership=self.membership.snapshot(),
                     drained=sorted(drained),
                     members=[m["name"] for m in members],
                     mode=mode,
                     applied=applied)
        self.last_status = statuses
        installed = (self.current_text() == text and not self.reload_pending
                     and (members_text is None or self.current_members() == members_text))
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
            # nginx itself: its master runs (up), passes in a row whose upstream it did not get
            # (reload_failures), and this pass's I/O error (io_error, null when all was written).
            "nginx": {"up": self._watch_nginx(), "reload_failures": self.reload_failures, "io_error": self.io_error},
        }
        if self.config.get("state_file"):
            try:
                write_atomic(self.config["state_file"], json.dumps(state, sort_keys=True) + "\n")
            except OSError as exc:
                self.io_error = state["nginx"]["io_error"] = "%s: %s" % (self.config["state_file"], exc.strerror or exc)
        self._note_io_error()
        # The verdict for node_exporter's textfile collector (when the unit names its directory).
        textfile.write_textfile("factory_floor_upstream", textfile.upstream_families(state, [c["name"] for c in self.candidates]))
        return state

    def tick(self):
        """One pass of the daemon's loop: :meth:`once`, and an error in it is a journal line, never the
        end of the checker (systemd would restart it in a loop with the member list frozen)."""
        try:
            return self.once()
        except Exception as exc:  # the loop must go on: the next pass may work (disk freed, file back)
            self.log(daemon.ERR, "pass_failed", error="%s: %s" % (type(exc).__name__, exc),
                     note="this pass ended early; the next one runs as usual")
            return None

    def _watch_nginx(self):
        """Whether nginx's master runs now; an err line once it has not for ``escalate_after`` passes in a
        row (again every REPEAT_EVERY), a notice when it is back."""
        running = bool(self.nginx_up())
        if running:
            if self.down_passes >= self.escalate_after:
                self.log(daemon.NOTICE, "nginx_up", down_passes=self.down_passes, note="nginx's master runs again")
            self.down_passes = 0
            return True
        self.down_passes += 1
        if self.down_passes >= self.escalate_after and (self.down_passes - self.escalate_after) % REPEAT_EVERY == 0:
            self.log(daemon.ERR, "nginx_down", down_passes=self.down_passes,
                     note="nginx's master is not running (pid file %s): the proxy answers nothing. nginx.service "
                          "restarts it (Restart=always) unless it was stopped on purpose: systemctl status nginx.service"
                     % self.config.get("pid_file", "/run/nginx.pid"))
        return False

    def _note_io_error(self):
        """An err line when this pass could not write a file and the last one could (or another error),
        a notice when the passes write everything again."""
        if self.io_error != self.last_io_error:
            if self.io_error:
                self.log(daemon.ERR, "io_error", error=self.io_error,
                         note="the checker goes on probing; nginx keeps the last good upstream")
            else:
                self.log(daemon.NOTICE, "io_recovered", note="every file of this pass was written")
        self.last_io_error = self.io_error


def main(argv=None):
    args, config = daemon.configure(
        argv, "Keep nginx's vLLM upstream equal to the engines that serve.", load_config,
        lambda path, c: "%s: ok (%d engines, a probe every %gs)" % (path, len(c["candidates"]), float(c.get("interval", 1.0))))
    if args is None:
        return config
    try:
        syncer = Syncer(config)
    except (OSError, ValueError) as exc:
        sys.stderr.write("%s: %s\n" % (args.config, exc))
        return 2
    if args.once:
        syncer.once()
        return 0
    daemon.loop(syncer.tick, float(config.get("interval", 1.0)), daemon.stop_event())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
