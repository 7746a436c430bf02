# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The split's direct link as the vllm_split role reads and judges it, behind ``factory_floor.llm.split_link``.

``read`` (each host): ``factory_floor.llm.link_check``'s arguments from the role's variables - the link itself
(``link``), or what NCCL chose in the running engine (``engine``). ``judge`` (once): every split host's registered
result (``link_check`` or ``link_collective``) put together by ``_link_check``, with the refusal and what to show.
Pure logic, standard library only; the tasks' Jinja (``link_report(hostvars, ...)``, the arguments) before.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc

KINDS = ("link", "collective", "engine")
# What each kind judges: the result every host registered under this name (the role's tasks register them).
REGISTERED = {"link": "__vllm_split_link_seen", "collective": "__vllm_split_collective",
              "engine": "__vllm_split_transport"}
# The variables each step reads, as the task sees them (the action plugin reads them).
VARIABLES = {
    ("read", "link"): ("vllm_link_interface", "vllm_link_address", "_vllm_split_peer_address", "_vllm_split_link_ports",
                       "_vllm_split_unit", "vllm_split_rdma", "vllm_split_nccl_ib_hca", "vllm_split_rdma_devices",
                       "vllm_split_nccl_library"),
    ("read", "engine"): ("vllm_link_interface", "_vllm_split_unit"),
    ("judge", "link"): ("_vllm_split_hosts", "vllm_link_mtu", "vllm_runtime"),
    ("judge", "collective"): ("_vllm_split_hosts", "vllm_split_rdma", "vllm_link_interface", "vllm_split_head",
                              "_vllm_split_head_address", "vllm_split_link_collective_port",
                              "vllm_split_link_min_bandwidth"),
    ("judge", "engine"): ("_vllm_split_hosts", "ansible_play_batch", "vllm_split_rdma"),
}


def read_args(kind, v):
    """``link_check``'s arguments: the link on this host, or (``engine``) only the running engine's log."""
    if kind == "engine":
        return {"interface": v["vllm_link_interface"], "rdma": "disabled", "nccl_library": "",
                "engine_unit": v["_vllm_split_unit"]}
    return {"interface": v["vllm_link_interface"], "address": v["vllm_link_address"],
            "peer_address": v["_vllm_split_peer_address"], "ports": v["_vllm_split_link_ports"],
            "port_owner_units": [v["_vllm_split_unit"]], "rdma": v["vllm_split_rdma"],
            "nccl_ib_hca": v["vllm_split_nccl_ib_hca"], "rdma_devices": v["vllm_split_rdma_devices"],
            "nccl_library": v["vllm_split_nccl_library"]}


def link_fact(seen):
    """``vllm_split_link``: what the link check found on this host - the RDMA devices NCCL_IB_HCA names, their device
    nodes, the host's NCCL library, the interface and the ping of the other rank - which the rank's unit renders."""
    seen = seen or {}
    return {"hca": (seen.get("rdma") or {}).get("hca"), "device_nodes": (seen.get("rdma") or {}).get("device_nodes"),
            "nccl_library": (seen.get("nccl_library") or {}).get("path"), "interface": seen.get("interface"),
            "peer": seen.get("peer")}


def hosts(kind, v):
    """The hosts whose results are judged: the split's, and for ``engine`` only those of this batch (one that did not
    read its log is left out)."""
    split = list(v.get("_vllm_split_hosts") or [])
    if kind == "engine":
        batch = list(v.get("ansible_play_batch") or [])
        return [host for host in split if host in batch]
    return split


def settings(kind, v):
    """``report``'s keyword arguments for ``kind`` from the variables."""
    if kind == "link":
        return {"mtu": v.get("vllm_link_mtu"), "runtime": v.get("vllm_runtime") or "container"}
    if kind == "collective":
        return {"rdma": v.get("vllm_split_rdma"), "interface": v.get("vllm_link_interface"),
                "head": v.get("vllm_split_head"),
                "master": "%s:%s" % (v.get("_vllm_split_head_address"), v.get("vllm_split_link_collective_port")),
                "min_busbw_gb_s": v.get("vllm_split_link_min_bandwidth")}
    return {"rdma": v.get("vllm_split_rdma")}


def report(kind, results, mtu=None, runtime="container", rdma="auto", interface="", head="", master="",
           min_busbw_gb_s=0):
    """The verdict over ``results`` (each host's registered result): ``ok``, ``problems`` (each ``host``, ``what``,
    ``fix``), ``message`` (a title and one line per problem), ``summary`` (one line per host); ``busbw_gb_s`` and
    ``transport`` for ``collective``; ``level`` and ``text`` for ``engine``."""
    results = {str(host): dict(value or {}) for host, value in results.items()}
    if kind == "link":
        unread = sorted(host for host, value in results.items() if "interface" not in value and "interfaces" not in value)
        if unread:
            # A host with no reading (its read skipped or failed) is not judged: its link is unknown, not broken.
            problems = [{"host": host, "what": "it did not read its link in this run (no link_check result)",
                         "fix": "run the play on both split hosts (no --limit leaving one out) so each reads its link"}
                        for host in unread]
            return {"ok": False, "problems": problems, "summary": [],
                    "message": lc.message(problems, "The direct link cannot carry the split. Nothing was changed.")}
        verdict = lc.assess(results, mtu=mtu, runtime=runtime)
        verdict["message"] = lc.message(
            verdict["problems"], "The direct link cannot carry the split. Nothing was changed.") \
            if verdict["problems"] else ""
        return verdict
    if kind == "collective":
        problems = lc.collective_problems(results, {"rdma": rdma, "interface": interface, "head": head,
                                                    "master": master, "min_busbw_gb_s": min_busbw_gb_s})
        done = [r for r in results.values() if r.get("ok")]
        summary = ["%s (rank %s): %s" % (host, results[host].get("rank", "?"), lc.collective_summary(results[host]))
                   for host in sorted(results) if not results[host].get("skipped")]
        return {"ok": not problems, "problems": problems, "summary": summary,
                "message": lc.message(problems, "The all-reduce between the ranks over the link failed. Nothing was "
                                                "changed.") if problems else "",
                "busbw_gb_s": min((float(r.get("busbw_gb_s") or 0) for r in done), default=0.0),
                "transport": (done[0].get("transport") or {}).get("transport", "") if done else ""}
    if kind == "engine":
        levels = {}
        for host in sorted(results):
            if "engine_transport" not in results[host]:
                continue  # a host that did not read (switch_serving reads the head only)
            levels[host] = lc.engine_transport_verdict(results[host]["engine_transport"] or {}, rdma)
        order = ["refuse", "warn", "info", "ok"]
        level = min((lvl for lvl, _text in levels.values()), key=order.index, default="info")
        text = "; ".join("%s: %s" % (host, text) for host, (_lvl, text) in sorted(levels.items()))
        return {"ok": level != "refuse", "level": level, "text": text, "problems": [], "summary": [text],
                "message": text}
    raise ValueError("kind must be link, collective or engine, got %r" % (kind,))


def refusal(kind, verdict):
    """The task's failure message, or "" when the verdict lets the split go."""
    if kind == "engine":
        return verdict["text"] if verdict["level"] == "refuse" else ""
    return "" if verdict["ok"] else verdict["message"]


def say(kind, verdict):
    """What the role shows after the verdict: each host's summary line, or which transport NCCL chose (a warning when
    it fell back to sockets)."""
    if kind == "engine":
        return ("WARNING: " if verdict["level"] == "warn" else "") + verdict["text"]
    return verdict["summary"]
