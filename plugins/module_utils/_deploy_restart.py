# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""deploy.yml's preflight of the replicas that would restart: which engine it asks whether it serves, how, and which
answers go on. Pure logic, no I/O; the refusals are ``_vllm_check``'s ``restart`` check.

A new ``vllm_api_key`` in one step would leave clients, the proxy's checker and the watchdogs with a key half the
engines refuse; with one replica nobody carries the load. Both need the engine's own answer, asked once.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

# vllm_health's arguments for the one probe: a 1-token generation (it queues behind the requests the replica runs;
# the lab's CPU engines take seconds per step under load), asked once (timeout 0, no wait).
PROBE = {"probe": "generate", "generate_timeout": 60, "timeout": 0}
# The endpoint options vllm_health takes from the site's endpoint (the site role's _site_vllm_endpoint).
ENDPOINT = ("url", "api_key", "model")
# What goes on: an engine that serves or does not serve yet (reached, probed), and one that rejects the key (refused by
# the restart check, naming the key rotation). Anything else is a probe that could not be asked.
GOES_ON = ("reached", "probed", "rejected")


def probes(v):
    """Whether this host's engine is asked: an engine host of the replicas whose configuration changed (``v``: the
    variables by name - ``inventory_hostname``, ``groups``, ``site_engine_group``, ``topology``,
    ``vllm_service_plan``)."""
    engines = (v.get("groups") or {}).get(v.get("site_engine_group")) or []
    plan = v.get("vllm_service_plan") or {}
    return (v.get("inventory_hostname") in engines and v.get("topology") == "replicas"
            and boolean(plan.get("restart_pending", False), strict=False))


def probe_args(endpoint):
    """vllm_health's arguments: :data:`PROBE` at ``endpoint``'s url, key and served name (those set, non-empty)."""
    endpoint = endpoint or {}
    args = {key: endpoint[key] for key in ENDPOINT if isinstance(endpoint.get(key), str) and endpoint[key]}
    args.update(PROBE)
    return args


def probe_failure(result):
    """The message the preflight stops with when the probe could not be asked (a configuration error on this side);
    ``None`` when its answer goes on."""
    result = result or {}
    if result.get("reason", "error") in GOES_ON:
        return None
    return result.get("msg") or "vllm_health could not ask the engine: %s" % (result.get("error") or result)
