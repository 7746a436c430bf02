# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What deploy.yml's rolling restart decides for one replica whose configuration changed. Pure logic, no I/O.

The rolling_restart role asks this (through the rolling_restart_plan action) once per replica,
in a play with ``serial: 1``, after it probed the replica itself, the other replicas (each on its own host) and
read every proxy host's rotation. A replica that serves is restarted only while another replica both serves and
is in the rotation of every proxy host (a *carrier*); otherwise the restart is refused with the sentence the
operator reads, unless forced (``vllm_restart_force``). A replica that does not serve is restarted at once:
nobody loses anything.

Kept apart from ``_switch_plan`` (already the topology switch's and the upgrade's) so that each file stays one
procedure's decisions; the switch_plan module holds all three behind its ``procedure`` option.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

# The replicas' unit (the site role's _site_topologies.replicas.unit; _switch_plan.UNITS holds it too).
UNIT = "vllm-replica.service"
# Where the proxy host's membership checker writes what it sees (nginx_proxy's state file).
PROXY_VIEW = "/run/factory-floor/upstream.json"


def truncate(text, length, end="..."):
    """Jinja's ``truncate(length)``: whole words, ``end`` appended, 5 characters of leeway."""
    text = str(text)
    if len(text) <= length + 5:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def _seconds(value):
    """Jinja's ``float`` filter: a number, else 0.0."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def startup_words(startup=None):
    """How long one replica start-up takes, in words: the one last measured on this host (its startup.json's
    ``replicas``, seconds), else GB10's range."""
    startup = startup or {}
    if "replicas" not in startup:
        return "5 to 13 min on GB10"
    return "about %s min, last measured here" % round(_seconds(startup["replicas"]) / 60, 1)


def serving_peers(peers=()):
    """The other replicas that answered a 1-token generation (the probe's loop results, ``item`` the host)."""
    return [result.get("item") for result in peers or [] if result.get("status") == "serving"]


def carriers(peers=(), rotations=()):
    """The serving peers that every proxy host has in its rotation (``rotations``: each proxy host's
    ``nginx_proxy_rotation``; a proxy host that read nothing has nobody in rotation)."""
    return [peer for peer in serving_peers(peers)
            if all(peer in ((rotation or {}).get("in_rotation") or []) for rotation in rotations or [])]


def peer_state(result):
    """One other replica as the refusal names it: "spark-b: loading", "spark-b: serving, not in rotation"."""
    if "status" in result:
        status = result["status"]
    elif result.get("unreachable"):
        status = "host unreachable"
    else:
        status = "not probed: " + truncate(result.get("msg", ""), 120)
    if result.get("status", "") == "serving":
        tail = ", not in rotation"
    elif result.get("error"):
        tail = " (%s)" % truncate(result["error"], 160)
    else:
        tail = ""
    return "%s: %s%s" % (result.get("item"), status, tail)


def restart_plan(host, engines, status, peers=(), rotations=(), startup=None, change="", force=False,
                 check_mode=False, playbook_dir=None, unit=UNIT):
    """Whether ``host`` restarts now for its new configuration, who carries the load meanwhile, and the words.

    ``status``: this replica's own probe (``serving`` or not); ``peers``: the other replicas' probe results
    (``item``, ``status``, or ``unreachable``/``msg``/``error``); ``rotations``: every proxy host's rotation;
    ``startup``: this host's last measured start-ups (seconds by name); ``change``: what changed, in words (the
    engine plan's); ``force``: ``vllm_restart_force``; ``check_mode``: a ``--check`` run, which wrote nothing.

    ``serving``: it serves now. ``carriers``: the other replicas that serve and are in every proxy host's rotation
    (only asked while it serves). ``refusal``: the sentence the run fails with, "" when it goes. ``forced``: what a
    forced restart says first, "" otherwise. ``announcement``: what the restart says before it starts.
    """
    serving = status == "serving"
    others = [engine for engine in engines if engine != host]
    carry = carriers(peers, rotations) if serving else []
    alone = serving and not carry
    minutes = startup_words(startup)
    deploy = playbook_name("deploy.yml", playbook_dir)
    refusal = forced = ""
    if alone and not force:
        if not others:
            why = ("it is the only replica and it serves, so restarting it is an outage by nature: clients get 503 "
                   "with Retry-After from the proxy for one start-up (%s)." % minutes)
        else:
            why = ("it serves, and no other replica both serves and is in the proxy's rotation to carry the load "
                   "meanwhile (%s). Restarting it now would leave clients without a model (503) for one start-up "
                   "(%s). Bring the other replica back first (journalctl -u %s on it; the proxy's view is in %s on "
                   "the proxy host), then run %s again." % (
                       "; ".join(peer_state(result) for result in peers or []), minutes, unit, PROXY_VIEW, deploy))
        # Under --check nothing was written: the sentence says what a real run would leave.
        keeps = ("%s keeps its old configuration and serves; --check wrote nothing: a real run would write its new "
                 "unit, leave it serving on the old one and stop here." % host if check_mode else
                 "%s keeps its old configuration and serves (its new unit is in place)." % host)
        refusal = ("Not restarting %s for its new configuration (%s): %s %s To restart it now anyway, accepting the "
                   "outage: %s -e vllm_restart_force=true." % (host, change, why, keeps, deploy))
    elif alone:
        forced = ("Restarting %s although no other replica serves and is in the proxy's rotation (vllm_restart_force): "
                  "clients get 503 with Retry-After from the proxy for one start-up (%s)." % (host, minutes))
    if carry:
        who = "%s serve%s meanwhile; it leaves the proxy first and its in-flight requests finish" % (
            ", ".join(carry), "s" if len(carry) == 1 else "")
    elif not serving:
        who = "it does not serve now (%s), so nobody loses anything" % status
    else:
        who = "forced, see above"
    announcement = "%s%s for its new configuration (%s): %s." % (
        "Would restart " if check_mode else "Restarting ", host, change, who)
    return {"serving": serving, "carriers": carry, "refusal": refusal, "forced": forced,
            "announcement": announcement}


def deploy_announcement(engines, changed, force=False):
    """deploy.yml's announcement of the rolling restart, before it starts: ``changed`` the ``(host, change)`` of every
    replica whose configuration changed and that runs (its engine plan's ``restart_pending``), in inventory order;
    ``engines`` every engine host. Empty when no replica restarts."""
    if not changed:
        return ""
    names = [host for host, _change in changed]
    others = [host for host in engines or () if host not in names]
    return ("Configuration changed on %s. Restarted after the other engines are in place, one host at a time; one that "
            "serves only while another replica serves and is in the proxy's rotation%s, after leaving the proxy and "
            "finishing its requests. Not restarted (unchanged, or not running yet): %s."
            % (", ".join("%s (%s)" % (host, change) for host, change in changed),
               " (or forced: vllm_restart_force)" if force else "", ", ".join(others) or "none"))
