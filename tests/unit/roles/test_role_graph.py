# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The roles' include graph: which role includes which (issue 36 wants a tree).

An edge is a static ``include_role``/``import_role`` in a role's tasks or handlers (its
``name`` and ``tasks_from``), or a role dependency in ``meta/main.yml``. A name built by
a template is listed apart: which role it names is known only at run time.
"""

from __future__ import annotations

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = os.path.join(ROOT, "roles")
PREFIX = "factory_floor.llm."
INCLUDES = ("include_role", "import_role")


def _role(name):
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


def _tasks(items):
    """Every task of a task list, blocks opened."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def includes():
    """[(role, file, included role, tasks_from)] of every role's tasks, handlers and meta dependencies."""
    found = []
    for role in sorted(os.listdir(ROLES)):
        for sub in ("tasks", "handlers"):
            folder = os.path.join(ROLES, role, sub)
            names = os.listdir(folder) if os.path.isdir(folder) else []
            for name in sorted(n for n in names if n.endswith((".yml", ".yaml"))):
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    document = yaml.safe_load(handle)
                for task in _tasks(document):
                    for key, args in task.items():
                        if key.rsplit(".", 1)[-1] in INCLUDES and isinstance(args, dict):
                            found.append((role, "%s/%s" % (sub, name), _role(str(args.get("name", ""))),
                                          args.get("tasks_from", "main")))
        meta = os.path.join(ROLES, role, "meta", "main.yml")
        if os.path.exists(meta):
            with open(meta, encoding="utf-8") as handle:
                for dependency in (yaml.safe_load(handle) or {}).get("dependencies") or []:
                    name = dependency.get("role", dependency.get("name")) if isinstance(dependency, dict) else dependency
                    found.append((role, "meta/main.yml", _role(str(name)), "main"))
    return found


def graph():
    """({role: {included roles}}, [(role, file, templated name)]): static edges, and the names only a run knows."""
    edges, dynamic = {}, []
    for role, where, target, _tasks_from in includes():
        if "{{" in target:
            dynamic.append((role, where, target))
        elif target != role:
            edges.setdefault(role, set()).add(target)
    return edges, dynamic


def cycles(edges):
    """Every elementary cycle of ``edges``, each once, starting at its smallest role name."""
    found = set()

    def walk(start, node, path):
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                found.add(tuple(path))
            elif nxt > start and nxt not in path:
                walk(start, nxt, path + [nxt])

    for start in sorted(edges):
        walk(start, start, [start])
    return sorted(found)


def test_the_graph_is_read():
    edges, _dynamic = graph()
    # What no reshuffle is expected to change: the engine roles include the engine base, which needs the site.
    assert "vllm" in edges["vllm_replica"] and "vllm" in edges["vllm_split"]
    assert "site" in edges["tool_gate"]
    assert cycles({"a": {"b"}, "b": {"c", "a"}, "c": {"a"}}) == [("a", "b"), ("a", "b", "c")]


def _words(found):
    return "; ".join(" -> ".join(cycle + (cycle[0],)) for cycle in found)


def test_the_role_graph_is_a_tree():
    # Issue 36 measured 5 cycles on main, all through vllm (the engine base that was also the
    # orchestrator of switch, deploy and the views) and 4 role names built from a template.
    edges, dynamic = graph()
    found = cycles(edges)
    assert not found and not dynamic, "role include cycles: %s; names known only at run time: %s" % (
        _words(found), "; ".join("%s (%s): %s" % d for d in dynamic))


# The tiers (issue 36, docs: REDESIGN "The rule"). Procedure roles order the steps of a
# procedure and may include any role below them, and the maintenance frame; service roles
# (one service each) include only the base; the base includes only the site's settings.
# A procedure may use another's steps (model_upgrade takes a replica out and back in with
# rolling_restart's leave and rejoin): sideways between procedures is allowed, a cycle is not
# (test_the_role_graph_is_a_tree).
BASE = {"site", "vllm"}
PROCEDURES = {"topology_switch", "group_move", "site_deploy", "site_view", "maintenance_window", "model_upgrade", "rolling_restart",
              "tune_concurrency", "model_sync"}
ROLE_NAMES = sorted(name for name in os.listdir(ROLES) if os.path.isdir(os.path.join(ROLES, name)))


def tier(role):
    return "base" if role in BASE else ("procedure" if role in PROCEDURES else "service")


def allowed(role, target):
    """Whether ``role`` may include ``target``: never upward."""
    if tier(role) == "base":
        return target == "site"
    if tier(role) == "procedure":
        return True
    return tier(target) == "base"


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_each_role_includes_only_the_tiers_below(role):
    edges, _dynamic = graph()
    against = sorted(target for target in edges.get(role, ()) if not allowed(role, target))
    assert not against, "%s (%s role) includes %s" % (role, tier(role), ", ".join(
        "%s (%s role)" % (target, tier(target)) for target in against))


def test_the_tier_rule():
    assert allowed("topology_switch", "vllm_replica") and allowed("topology_switch", "maintenance_window")
    assert allowed("vllm_split", "vllm") and allowed("vllm", "site")
    assert allowed("model_upgrade", "rolling_restart") and not allowed("vllm_split", "nginx_proxy")
    assert not allowed("vllm", "vllm_replica") and not allowed("nginx_proxy", "topology_switch")
    # Every procedure role that exists keeps site as a dependency (its defaults are seen only that way).
    for role in sorted(PROCEDURES & set(ROLE_NAMES)):
        assert "site" in graph()[0].get(role, ()), role
