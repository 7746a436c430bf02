# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One view of the site from what each host says: the topology, each engine, the watchdogs, memory, locks, peers.

Pure logic (and one reader of the tool gate's score files on the controller), standard
library only. ``playbooks/status.yml`` reads each host with the roles' ``status`` entry
points (what they read, raw: ``systemctl show`` text, module results, the daemons' status
files) and hands it here once, on the controller; :func:`build` makes sense of it and
:func:`table` writes it for people. Nothing here reaches a host.

A host that could not be read (unreachable, a read that failed) is shown as such, never
an error: the view is for the moment something is wrong.
"""

from __future__ import annotations

import datetime
import json
import os

from ansible_collections.factory_floor.llm.plugins.module_utils._host import systemd
from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr
from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import split_rank
from ansible_collections.factory_floor.llm.plugins.module_utils._running_topology import BOTH, running_topology

UNITS = {"replicas": "vllm-replica.service", "split": "vllm-split.service"}
WATCHDOG_UNITS = {"replicas": "vllm-replica-watchdog.service", "split": "vllm-split-watchdog.service"}
# The proxy checker's state older than this (seconds) is stale: it writes it every few seconds.
STALE_ROTATION = 60.0
# Passes in a row whose upstream nginx did not load before the status view names it (the
# checker's own err line comes at 3 too: _upstream.DEFAULT_ESCALATE_AFTER).
RELOAD_FAILURES = 3
# The watchdog's status older than this (seconds) is stale: it writes it after every look.
STALE_VERDICT = 300.0


def when(epoch, now):
    """``2026-12-01 21:02 UTC (12 min ago)`` for people; ``-`` without a time."""
    if epoch is None:
        return "-"
    try:
        epoch = float(epoch)
    except (TypeError, ValueError):
        return str(epoch)
    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "%s (%s)" % (stamp, ago(now - epoch))


def ago(seconds):
    """``12 s ago``, ``5 min ago``, ``3.2 h ago``, ``in 2 min``."""
    span = abs(seconds)
    words = "%d s" % round(span) if span < 120 else ("%d min" % round(span / 60) if span < 7200 else "%.1f h" % (span / 3600))
    return ("%s ago" if seconds >= 0 else "in %s") % words


def parse_units(text):
    """``systemctl show -p Id,... -- U1 U2 ...`` output (one block per unit) as ``{unit: state}``.

    Each state: ``load_state``, ``active_state``, ``sub_state``, ``result``, ``unit_file_state``,
    ``n_restarts`` (int or None).
    """
    units = {}
    for block in (text or "").split("\n\n"):
        values = systemd.parse_properties(block)
        name = values.get("Id")
        if not name:
            continue
        restarts = values.get("NRestarts")
        units[name] = {"load_state": values.get("LoadState") or None, "active_state": values.get("ActiveState") or None,
                       "sub_state": values.get("SubState") or None, "result": values.get("Result") or None,
                       "unit_file_state": values.get("UnitFileState") or None,
                       "n_restarts": int(restarts) if (restarts or "").isdigit() else None}
    return units


def unit_words(state):
    """``active (running)``, ``inactive``, ``not installed``, ``unknown`` (not read)."""
    if not state:
        return "unknown"
    if state.get("load_state") == "not-found":
        return "not installed"
    words = state.get("active_state") or "unknown"
    if state.get("sub_state") and state["sub_state"] != words:
        words += " (%s)" % state["sub_state"]
    if state.get("unit_file_state") in ("disabled", "masked"):
        words += ", %s" % state["unit_file_state"]
    return words


def _units(observation):
    """The engine units' states of a host's observation (``units``: systemctl show text, or already parsed)."""
    units = observation.get("units")
    return parse_units(units) if isinstance(units, str) else (units or {})


def _up(state):
    return bool(state) and state.get("active_state") in ("active", "activating", "reloading")


def arg_value(args, flag):
    """The value of ``--flag`` in vllm_engine_info's ``args_now`` (``["MODEL", "--flag value", ...]``), or None."""
    for item in args or []:
        name, _sep, value = str(item).partition(" ")
        if name == flag:
            return value.strip() or True
    return None


def _failed(result):
    """Why a registered read failed, or None when it did not (an absent result is no failure)."""
    if isinstance(result, dict) and (result.get("failed") or result.get("unreachable")):
        return str(result.get("msg") or "failed").strip().splitlines()[0][:300]
    return None


def _json(value):
    """A daemon's status file as given: already parsed, JSON text, or None."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        try:
            parsed = json.loads(value)
            return parsed if isinstance(parsed, dict) else None
        except ValueError:
            return None
    return None


# ----------------------------------------------------------------------------- the tool gate's scores


def read_gate_records(store_dir, hosts):
    """The newest score file of each host under the tool gate's store (passing, and failed/), on the controller.

    Returns ``{host: record}`` (the file's JSON plus ``file``); a host with none is left out.
    Only files named for the host are read (``<build>.<digest>.<host>.json`` and
    ``failed/<build>.<digest>.<host>.<UTC time>.json``), newest first, until one holds it.
    """
    found = {}
    if not store_dir:
        return found
    paths = []
    for directory in (store_dir, os.path.join(store_dir, "failed")):
        try:
            paths.extend(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".json"))
        except OSError:
            continue
    dated = []
    for path in paths:
        try:
            dated.append((os.path.getmtime(path), path))
        except OSError:
            continue
    for _mtime, path in sorted(dated, reverse=True):
        name = os.path.basename(path)
        host = next((h for h in hosts if h not in found and ".%s." % h in name), None)
        if host is None:
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("host") == host:
            found[host] = dict(record, file=path)
    return found


def gate_view(record, model, parser, image_id):
    """The last gate score of a host's engine: score, verdict, when, and whether it is the running build."""
    if not record:
        return None
    build = record.get("build") or {}
    same = [build.get("model_path") == model if model else None,
            build.get("tool_call_parser", "") == (parser or "") if model else None,
            ((build.get("image") or {}).get("id") == image_id) if image_id and build.get("image") else None]
    verdict = {True: "passed", False: "failed"}.get(record.get("passed"), "measured (%s)" % (record.get("role") or "?"))
    return {"score": record.get("score"), "verdict": verdict, "role": record.get("role"),
            "measured_at": record.get("measured_at"), "measured_epoch": record.get("measured_epoch"),
            "model": build.get("model_path"), "build_id": record.get("build_id"),
            "suite_digest": record.get("suite_digest"), "file": record.get("file"),
            "running_build": None if same[0] is None else all(s is not False for s in same)}


# ----------------------------------------------------------------------------- the view


def _topology(engines, inventory):
    """What the hosts run (their active engine units), what they record, what the inventory says, and whether all agree."""
    # Each host's engine units' states, in _topology_record's order, for running_topology (and the comparison below).
    states = {}
    for host, e in engines.items():
        units = _units(e)
        states[host] = [(units.get(UNITS[name]) or {}).get("active_state") or "unknown"
                        for name in tr.UNIT_ORDER] if units else None
    live = running_topology(states)
    running = list(tr.UNIT_ORDER) if live == BOTH else ([live] if live in tr.UNIT_ORDER else [])
    recorded = {}
    for host, e in engines.items():
        record = (e.get("record") or {})
        if record.get("recorded"):
            recorded[host] = record
    kinds = sorted({r["recorded"] for r in recorded.values()})
    runs = running[0] if len(running) == 1 else ("none" if not running else "both (" + " and ".join(running) + ")")
    latest = max(recorded.values(), key=lambda r: (r.get("record") or {}).get("since") or 0) if recorded else None
    agrees = (not kinds or kinds == [inventory]) and runs in ("none", inventory)
    view = {"running": runs, "recorded": kinds[0] if len(kinds) == 1 else (kinds or None), "inventory": inventory,
            "agrees": agrees,
            "by_host": {h: r.get("recorded") for h, r in recorded.items()},
            "last": None, "advice": None}
    if latest is not None:
        rec = latest.get("record") or {}
        view["last"] = {"topology": rec.get("topology"), "by": rec.get("by"), "playbook": rec.get("playbook"),
                        "since": rec.get("since"), "run": rec.get("run"), "note": rec.get("note")}
    if kinds and kinds != [inventory]:
        view["advice"] = next((r.get("message") for r in recorded.values() if r.get("message")), None)
    # Each host's record next to what its units run, and records that differ between hosts
    # (_topology_record's comparison, as deploy.yml and the switches make it).
    observed = {host: {"record": (e.get("record") or {}).get("record"), "runs": tr.runs(states[host])}
                for host, e in engines.items()}
    view["disagreements"] = tr.compare(list(engines), observed)["disagreements"]
    return view


def _rotation(host, proxies):
    """``{proxy: in | drained | out (...) | not a member | unknown (...)}`` for one engine."""
    seen = {}
    for name, proxy in proxies.items():
        if not proxy.get("reachable", True):
            seen[name] = "unknown (proxy unreachable)"
            continue
        state = _json(proxy.get("rotation")) or {}
        if not state:
            seen[name] = "unknown (no checker state)"
        elif host in (state.get("in_rotation") or []):
            seen[name] = "in"
        elif host in (state.get("drained") or []):
            seen[name] = "drained"
        elif host in (state.get("members") or []) or host in (state.get("statuses") or {}):
            probe = (state.get("statuses") or {}).get(host)
            seen[name] = "out" + (" (%s)" % (probe if isinstance(probe, str) else json.dumps(probe))[:80] if probe else "")
        else:
            seen[name] = "not a member"
    return seen


def _engine(host, e, topology, split_head, proxies, gate, rank=1):
    """One engine's row: the unit that runs (else the topology's), serving, rotation, model, build, last gate."""
    units = _units(e)
    up = [u for u in UNITS.values() if _up(units.get(u))]
    unit = up[0] if up else UNITS.get(topology, UNITS["replicas"])
    api = unit == UNITS["replicas"] or host == split_head
    health = e.get("health") or {}
    info = next((i for i in (e.get("engine") or []) if isinstance(i, dict) and i.get("item") == unit and i.get("running")),
                None)
    args = (info or {}).get("args_now") or []
    container = (e.get("containers") or {}).get(unit[:-len(".service")]) or {}
    model = args[0] if args else None
    if not api:
        serving = "headless rank (the split's rank %s)" % rank
    elif _failed(health):
        serving = "not probed: " + _failed(health)[:60]
    else:
        serving = health.get("status") or "not probed"
        # Why it does not serve, when it should (its unit runs); the whole error is in status's health.
        if serving != "serving" and health.get("error") and up:
            serving += " (%s)" % str(health["error"])[:60]
    return {
        "host": host, "unit": unit, "unit_state": unit_words(units.get(unit)), "active": bool(up), "api": api,
        "serving": serving, "status": health.get("status") if api else None,
        "rotation": _rotation(host, proxies) if api else {},
        "served_model": ", ".join(health.get("models") or []) or arg_value(args, "--served-model-name"),
        "model": model, "vllm_version": health.get("version"),
        "image_id": container.get("image_id") if container.get("running") else None,
        "runtime": e.get("runtime"),
        "gpu_memory_utilization": arg_value(args, "--gpu-memory-utilization"),
        "gate": gate_view(gate.get(host), model, arg_value(args, "--tool-call-parser"), container.get("image_id")),
    }


def _watchdog(host, e, now):
    wd = e.get("watchdog") or {}
    units = parse_units(wd.get("units")) if isinstance(wd.get("units"), str) else (wd.get("units") or {})
    statuses = wd.get("status") or {}
    rows = []
    for unit in WATCHDOG_UNITS.values():
        state = units.get(unit)
        status = _json(statuses.get(unit))
        if not _up(state) and status is None and (not state or state.get("load_state") == "not-found"):
            continue
        budget = (status or {}).get("budget") or {}
        left = None
        if budget.get("max_restarts") is not None and budget.get("used") is not None:
            left = max(0, int(budget["max_restarts"]) - int(budget["used"]))
        gave_up = (status or {}).get("gave_up")
        rows.append({"host": host, "unit": unit, "unit_state": unit_words(state),
                     "verdict": (status or {}).get("verdict"), "reason": (status or {}).get("reason"),
                     "updated": (status or {}).get("updated"),
                     # Only a running watchdog writes verdicts: the other topology's, stopped
                     # after a switch, keeps its last one.
                     "stale": _up(state) and bool(status) and status.get("updated") is not None
                     and now - float(status["updated"]) > STALE_VERDICT,
                     "restarts_left": left, "max_restarts": budget.get("max_restarts"),
                     "restart_window": budget.get("restart_window"),
                     "gave_up": gave_up.get("why") if isinstance(gave_up, dict) else gave_up})
    return rows


def _memory(host, e, share_running):
    memory = e.get("memory") or {}
    plan = memory.get("share") or {}
    guard = _json(memory.get("watch"))
    if not memory.get("enabled", True):
        return {"host": host, "enabled": False}
    first = (plan.get("hosts") or [{}])[0] if not _failed(plan) else {}
    available = (guard or {}).get("mem_available_gib", first.get("mem_available_gib"))
    floor = (guard or {}).get("floor_gib", first.get("floor_gib"))
    return {
        "host": host, "enabled": True,
        "share_running": share_running,
        "share_largest_safe": plan.get("gpu_memory_utilization") if not _failed(plan) else None,
        "share_error": _failed(plan),
        "mem_available_gib": available, "floor_gib": floor,
        "headroom_gib": round(available - floor, 2) if available is not None and floor is not None else None,
        "below_floor": (guard or {}).get("below_floor"),
        "source": "memory guard watch" if guard else ("gpu_memory_utilization (/proc/meminfo)" if first else None),
        "workloads": [{"name": w.get("name"), "state": w.get("state"), "used_gib": w.get("used_gib"),
                       "peak_gib": w.get("peak_gib"), "guard": w.get("guard")} for w in (guard or {}).get("workloads") or []],
    }


def floating_address(keepalived):
    """The floating address's entry of the view from the keepalived role's ``keepalived_status``
    (``_keepalived.summarize``: holders, address, ok, hosts, message), or None without one."""
    if not isinstance(keepalived, dict) or not keepalived.get("address"):
        return None
    holders = [str(name) for name in keepalived.get("holders") or []]
    hosts = keepalived.get("hosts") if isinstance(keepalived.get("hosts"), dict) else {}
    states = []
    for name in sorted(hosts):
        status = hosts[name] if isinstance(hosts[name], dict) else {}
        current = status.get("vrrp_state") if status.get("vrrp_state_current") else ""
        states.append("%s %s" % (name, current or "keepalived %s" % (status.get("service_state") or "unknown")))
    if len(holders) == 1:
        state = "; ".join(states)
    else:
        state = ("NO HOLDER" if not holders else "TWO HOLDERS") + ("; " + "; ".join(states) if states else "")
    return {"name": "keepalived", "address": keepalived["address"], "holder": " and ".join(holders) or None,
            "holders": holders, "state": state, "ok": len(holders) == 1, "message": keepalived.get("message")}


def build(engines, proxies, inventory_topology, split_head=None, gate=None, floating=None, now=0.0, keepalived=None):
    """The site's view from each host's raw observations (see the module's options for their shape)."""
    gate = gate or {}
    reachable = {h: e for h, e in engines.items() if e and e.get("reachable", True)}
    proxies_ok = {h: (p or {"reachable": False, "error": "not read"}) for h, p in proxies.items()}
    topology = _topology(reachable, inventory_topology)
    split_head = split_head or (sorted(engines)[0] if engines else None)
    view = {"time": now, "topology": topology, "engines": [], "watchdogs": [], "memory": [], "locks": [], "peers": [],
            "proxies": [], "floating_addresses": list(floating or []), "not_read": [], "attention": []}
    attention = view["attention"]
    address = floating_address(keepalived)
    if address:
        view["floating_addresses"].append(address)
        if not address["ok"]:
            attention.append("floating address: %s" % address["message"])
    # The topology whose unit a host shows when none of its engine units runs.
    fallback = topology["running"] if topology["running"] in UNITS else (
        topology["recorded"] if isinstance(topology["recorded"], str) else inventory_topology)
    for host in engines:
        e = engines[host] or {"reachable": False, "error": "not read (no observation from this host)"}
        if not e.get("reachable", True):
            view["not_read"].append({"host": host, "error": e.get("error")})
            attention.append("%s could not be read: %s" % (host, e.get("error") or "unreachable"))
            continue
        # A headless rank's number as the vllm_split role gives it (the head 0, the others in inventory order).
        rank = split_rank(list(engines), host, split_head)["rank"]
        row = _engine(host, e, fallback, split_head, proxies_ok, gate, 1 if rank is None else rank)
        view["engines"].append(row)
        if row["api"] and row["active"] and row["status"] != "serving":
            attention.append("%s: %s is %s but does not serve: %s" % (host, row["unit"], row["unit_state"], row["serving"]))
        for proxy, where in row["rotation"].items():
            if row["status"] == "serving" and where != "in":
                attention.append("%s serves but is %s on %s" % (host, where, proxy))
        if row["gate"] and row["gate"]["verdict"] == "failed":
            attention.append("%s: the last tool-calling gate here failed (%s, %s)" % (
                host, row["gate"]["score"], row["gate"]["measured_at"]))
        for wd in _watchdog(host, e, now):
            view["watchdogs"].append(wd)
            if wd["gave_up"]:
                attention.append("%s: %s gave up: %s" % (host, wd["unit"], wd["gave_up"]))
            elif wd["restarts_left"] == 0:
                attention.append("%s: %s has no restart left in its budget" % (host, wd["unit"]))
            if wd["stale"]:
                attention.append("%s: %s has not written its verdict since %s" % (host, wd["unit"], when(wd["updated"], now)))
        memory = _memory(host, e, row["gpu_memory_utilization"])
        view["memory"].append(memory)
        if memory.get("below_floor"):
            attention.append("%s: MemAvailable is below the memory guard's floor" % host)
        view["locks"].append(_lock(host, e, now))
        if view["locks"][-1]["state"] in ("held", "expired"):
            attention.append("%s: maintenance lock %s by %s" % (host, view["locks"][-1]["state"], view["locks"][-1]["holder"]))
        view["peers"].append(_peers(host, e))
        if view["peers"][-1]["bypassing"]:
            attention.append("%s: clients bypass the proxy: %s" % (host, ", ".join(view["peers"][-1]["bypassing"])))
    for host, proxy in proxies_ok.items():
        state = _json(proxy.get("rotation")) or {}
        units = parse_units(proxy.get("checker")) if isinstance(proxy.get("checker"), str) else {}
        nginx = state.get("nginx") if isinstance(state.get("nginx"), dict) else {}
        row = {"host": host, "reachable": proxy.get("reachable", True), "error": proxy.get("error"),
               "checker": unit_words(units.get("factory-floor-upstream.service")),
               # nginx.service as systemd has it (NRestarts: how often Restart= brought it back) and as the
               # checker saw it at its last pass.
               "nginx": unit_words(units.get("nginx.service")),
               "nginx_restarts": (units.get("nginx.service") or {}).get("n_restarts"),
               "nginx_up": nginx.get("up"), "reload_failures": nginx.get("reload_failures") or 0,
               "io_error": nginx.get("io_error"),
               "mode": state.get("mode"), "in_rotation": state.get("in_rotation") or [],
               "drained": state.get("drained") or [], "updated": state.get("updated"),
               "stale": bool(state) and state.get("updated") is not None and now - float(state["updated"]) > STALE_ROTATION}
        view["proxies"].append(row)
        if row["reachable"]:
            attention.extend("proxy %s: %s" % (host, words) for words in _nginx_attention(row, units.get("nginx.service")))
        if not row["reachable"]:
            attention.append("proxy %s could not be read: %s" % (host, row["error"] or "unreachable"))
        elif not state:
            attention.append("proxy %s: no membership checker state (is nginx_proxy deployed?)" % host)
        elif row["stale"]:
            attention.append("proxy %s: the membership checker's state is from %s" % (host, when(row["updated"], now)))
        elif not row["in_rotation"] and topology["running"] != "none":
            attention.append("proxy %s has no engine in its rotation" % host)
    if not topology["agrees"]:
        attention.append("topology: the hosts run %s (recorded %s), the inventory says %s" % (
            topology["running"], topology["recorded"], inventory_topology))
    attention.extend("topology records: %s" % words for words in topology["disagreements"])
    return view


def _nginx_attention(row, unit):
    """What needs attention about one proxy host's nginx: not running, or not loading the checker's upstream."""
    found = []
    if unit and not _up(unit):
        found.append("nginx.service is %s: this proxy answers nothing (systemctl status nginx.service)" % row["nginx"])
    elif row["nginx_up"] is False and not row["stale"]:
        found.append("the membership checker found nginx's master not running at its last pass")
    if row["reload_failures"] >= RELOAD_FAILURES:
        found.append("nginx has not loaded the membership checker's upstream for %d passes in a row "
                     "(journalctl -p warning -u factory-floor-upstream.service)" % row["reload_failures"])
    if row["io_error"]:
        found.append("the membership checker cannot write its files: %s" % row["io_error"])
    return found


def _lock(host, e, now):
    lock = e.get("lock") or {}
    if _failed(lock):
        return {"host": host, "state": "unknown", "holder": None, "error": _failed(lock), "lock": None}
    return {"host": host, "state": lock.get("state") or "unknown", "holder": lock.get("holder"), "lock": lock.get("lock"),
            "error": None}


def _peers(host, e):
    peers = e.get("peers") or {}
    if _failed(peers):
        return {"host": host, "bypassing": [], "counts": {}, "error": _failed(peers)}
    counts = {}
    for peer in peers.get("peers") or []:
        counts[peer.get("class")] = counts.get(peer.get("class"), 0) + int(peer.get("connections") or 0)
    return {"host": host, "bypassing": list(peers.get("others") or []), "counts": counts,
            "error": None if peers else "not read"}


# ----------------------------------------------------------------------------- for people


def columns(rows):
    """Rows of cells as aligned lines (two spaces between columns; the last cell is not padded)."""
    widths = [max(len(str(row[i])) for row in rows if i < len(row)) for i in range(max(len(r) for r in rows))]
    return ["  ".join(str(cell).ljust(widths[i]) if i < len(row) - 1 else str(cell) for i, cell in enumerate(row)).rstrip()
            for row in rows]


def _gib(value):
    return "-" if value is None else "%.1f GiB" % value


def table(view, now):
    """The view as lines a person reads."""
    t = view["topology"]
    lines = ["Factory Floor status, %s" % datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
             .strftime("%Y-%m-%d %H:%M:%S UTC")]
    last = t.get("last") or {}
    recorded = ("recorded %s: %s by %s, %s" % (last.get("topology"), last.get("playbook"), last.get("by"),
                                               when(last.get("since"), now)) if last else "no topology record")
    lines.append("topology: the hosts run %s (%s); the inventory says %s%s" % (
        t["running"], recorded, t["inventory"], "" if t["agrees"] else " - DIFFERS"))
    if t.get("advice"):
        lines.append("  " + t["advice"].splitlines()[0])
    if view["engines"] or view["not_read"]:
        lines.append("engines:")
        rows = []
        for u in view["not_read"]:
            rows.append([u["host"], "-", "could not be read (see attention)"])
        for row in view["engines"]:
            gate = row["gate"]
            gate_words = "-" if not gate else "%s %s %s%s" % (
                gate["score"], gate["verdict"], gate["measured_at"] or "",
                "" if gate["running_build"] is None else (", this build" if gate["running_build"]
                                                          else ", another build (%s)" % gate["model"]))
            rows.append([row["host"], row["unit"], row["unit_state"], row["serving"],
                         ", ".join("%s: %s" % kv for kv in row["rotation"].items()) or "-",
                         "%s = %s" % (row["served_model"] or "?", row["model"]) if row["model"] else (row["served_model"] or "-"),
                         "vLLM %s, %s" % (row["vllm_version"] or "?",
                                          ("image " + row["image_id"][7:19]) if row["image_id"] else (row["runtime"] or "?")),
                         gate_words])
        rows.sort(key=lambda cells: cells[0])
        header = ["HOST", "UNIT", "STATE", "SERVING", "ROTATION", "MODEL", "BUILD", "LAST GATE"]
        lines.extend("  " + line for line in columns([header] + rows))
    if view["watchdogs"]:
        lines.append("watchdogs:")
        rows = [["HOST", "UNIT", "STATE", "LAST VERDICT", "RESTARTS LEFT"]]
        for wd in view["watchdogs"]:
            verdict = "%s (%s)" % (wd["verdict"] or "none", when(wd["updated"], now) if wd["updated"] else "no status file")
            if wd["gave_up"]:
                verdict += ", GAVE UP: %s" % wd["gave_up"]
            left = "-" if wd["restarts_left"] is None else "%d of %s in %s s" % (
                wd["restarts_left"], wd["max_restarts"], wd["restart_window"])
            rows.append([wd["host"], wd["unit"], wd["unit_state"], verdict, left])
        lines.extend("  " + line for line in columns(rows))
    if view["memory"]:
        lines.append("memory:")
        rows = [["HOST", "SHARE RUNNING", "LARGEST SAFE", "MemAvailable", "FLOOR", "HEADROOM", "FROM"]]
        notes = []
        for m in view["memory"]:
            if not m.get("enabled"):
                rows.append([m["host"], "memory guard off (memory_guard_enabled: false)"])
                continue
            if m["share_error"]:
                notes.append("  %s: the largest safe share was not computed: %s" % (m["host"], m["share_error"]))
            rows.append([m["host"], m["share_running"] or "-",
                         m["share_largest_safe"] if m["share_largest_safe"] is not None else "- (below)",
                         _gib(m["mem_available_gib"]), _gib(m["floor_gib"]),
                         _gib(m["headroom_gib"]) + (" BELOW FLOOR" if m.get("below_floor") else ""), m["source"] or "-"])
        lines.extend("  " + line for line in columns(rows))
        lines.extend(notes)
    if view["locks"]:
        lines.append("maintenance locks:")
        lines.extend("  %s: %s" % (lock["host"], "free" if lock["state"] == "free" else "%s, %s" % (
            lock["state"], lock["holder"] or lock["error"])) for lock in view["locks"])
    if view["peers"]:
        lines.append("direct clients of the API port (peers):")
        for p in view["peers"]:
            counts = ", ".join("%s %d" % kv for kv in sorted(p["counts"].items())) or "no connections"
            note = ("; BYPASSING THE PROXY: " + ", ".join(p["bypassing"])) if p["bypassing"] else (
                " (%s)" % p["error"] if p["error"] else "")
            lines.append("  %s: %s%s" % (p["host"], counts, note))
    if view["proxies"]:
        lines.append("proxies:")
        for p in view["proxies"]:
            if not p["reachable"]:
                lines.append("  %s: could not be read (%s)" % (p["host"], p["error"] or "unreachable"))
                continue
            lines.append("  %s: nginx %s%s, checker %s, state %s; in rotation: %s; drained: %s" % (
                p["host"], p["nginx"], ", restarted %d times" % p["nginx_restarts"] if p.get("nginx_restarts") else "",
                p["checker"], when(p["updated"], now) if p["updated"] else "missing",
                ", ".join(p["in_rotation"]) or "none", ", ".join(p["drained"]) or "none"))
    lines.append("floating proxy address: " + (", ".join(
        "%s %s on %s (%s)" % (f.get("name", ""), f.get("address", "?"), f.get("holder") or "nobody", f.get("state") or "?")
        for f in view["floating_addresses"]) or "none configured"))
    lines.append("attention: " + ("none" if not view["attention"] else ""))
    lines.extend("  - " + item for item in view["attention"])
    return lines
