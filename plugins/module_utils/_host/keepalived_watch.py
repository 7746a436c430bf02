# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The floating address as metrics: a small daemon on each proxy host that runs keepalived.

Every ``interval`` seconds it reads what the ``keepalived_info`` module reads - the host's
addresses (``ip -j addr show``), keepalived's systemd state and the VRRP state its notify
script last wrote - judges them with ``_keepalived.host_status`` and writes
``factory_floor_keepalived.prom`` for node_exporter's textfile collector
(``_textfile.keepalived_families``): whether this host holds the address, whether keepalived
runs, its VRRP state. Prometheus adds the hosts up: no holder, or two (extras/prometheus).

Why a daemon of its own, not keepalived's notify script: the script runs on transitions only,
and a keepalived killed (SIGKILL, OOM) leaves the address on the interface with no transition
written; what the interface holds is read here every look. It never acts on keepalived.

``python3 -m _host.keepalived_watch --config FILE [--check-config | --once]``; the ``keepalived``
role installs it with ``_host/keepalived.py``, ``_host/daemon.py``, ``_host/textfile.py``, ``_host/systemd.py`` and
``_host/proc.py``, and sets ``FACTORY_FLOOR_TEXTFILE_DIR`` and ``FACTORY_FLOOR_HOST`` in its unit.
Standard library only.
"""

from __future__ import annotations

import time

from . import daemon
from . import keepalived as ka
from . import systemd
from . import textfile

NAME = "factory_floor_keepalived"
DEFAULTS = {"interface": "", "state_file": "/run/factory-floor/keepalived.json", "service": "keepalived.service",
            "interval": 5.0, "ip": "ip", "systemctl": "systemctl"}


def load_config(raw):
    """The watch's configuration, checked key by key (ValueError names the key), with the defaults filled in."""
    if not isinstance(raw, dict):
        raise ValueError("the configuration must be a JSON object")
    unknown = sorted(set(raw) - set(DEFAULTS) - {"virtual_ipaddress"})
    if unknown:
        raise ValueError("unknown key(s): %s" % ", ".join(unknown))
    try:
        ka.parse_address(raw.get("virtual_ipaddress"))
    except ValueError as exc:
        raise ValueError("virtual_ipaddress: %s" % exc)
    for key in ("interface", "state_file", "service", "ip", "systemctl"):
        if key in raw and not isinstance(raw[key], str):
            raise ValueError("%s must be a string" % key)
    interval = raw.get("interval", DEFAULTS["interval"])
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
        raise ValueError("interval must be a number of seconds above 0")
    return dict(DEFAULTS, **raw)


def look(config, ip_text, active_state, state_text, now):
    """The families of one look: ``ip_text`` (``ip -j addr show``, None when it failed), keepalived's
    ``active_state`` ("" when systemd could not say), the notify script's file (None when absent)."""
    interfaces = None
    if ip_text is not None:
        try:
            interfaces = ka.parse_ip_addr(ip_text)
        except ValueError:
            interfaces = None
    status = ka.host_status(interfaces or {}, config["interface"], config["virtual_ipaddress"], active_state,
                            ka.parse_state(state_text))
    if interfaces is None:
        status["holds_address"] = None  # unknown, not "no": the sample is left out
    return textfile.keepalived_families(status, str(ka.parse_address(config["virtual_ipaddress"])[0]), now)


class Watch:
    """One look every interval; every read goes through ``run`` (argv -> rc, stdout, stderr) and ``read``."""

    def __init__(self, config, run=systemd.run, read=None, clock=time.time, write=textfile.write_textfile):
        self.config = config
        self.run = run
        self.read = read or _read
        self.clock = clock
        self.write = write

    def tick(self):
        rc, out, _err = self.run([self.config["ip"], "-j", "addr", "show"])
        try:
            active = systemd.show_properties(self.config["service"], ("ActiveState",), self.run,
                                             self.config["systemctl"]).get("ActiveState", "")
        except systemd.UnitStateError:
            active = ""
        families = look(self.config, out if rc == 0 else None, active, self.read(self.config["state_file"]),
                        self.clock())
        self.write(NAME, families)
        return families


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(1 << 16)
    except OSError:
        return None


def main(argv=None):
    args, config = daemon.configure(
        argv, "The floating address as metrics: whether this proxy host holds it, keepalived's state.", load_config,
        lambda path, c: "%s: ok (%s, a look every %gs)" % (path, c["virtual_ipaddress"], float(c["interval"])),
        prefix="keepalived watch: ", prog="python3 -m _host.keepalived_watch")
    if args is None:
        return config
    watch = Watch(config)
    if args.once:
        watch.tick()
        return 0
    daemon.loop(watch.tick, float(config["interval"]), daemon.stop_event())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
