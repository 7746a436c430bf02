# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether the inventory has the hosts a playbook runs on. Pure logic.

``ansible-playbook -i PATH`` with a PATH that does not exist, that Ansible cannot parse,
or whose hosts are under other group names than the playbooks' (``gb10``, ``proxy``)
only warns ("Unable to parse ... as an inventory source", "Could not match supplied
host pattern"); every play then matches no host, is skipped, and the run exits 0
having done nothing. The playbooks run this first and refuse instead, naming what to
check: the ``-i`` path, the group names, the example inventory.

The group names are the ones the playbooks' ``hosts:`` lines use (a play's hosts are
read before any role's variables). Standard library only; nothing here connects anywhere.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._layout import (
    ENGINE_GROUP, PROXY_GROUP, no_engines_message, no_proxy_message)

EXAMPLE = "inventory/example/hosts.yml"
# The layout check's own title: an inventory without these groups is a layout that cannot work.
LAYOUT_TITLE = "The inventory describes a layout that cannot work"


def _sources_text(sources):
    return ", ".join(sources) if sources else "(none given)"


def check_inventory(groups, sources, existing=(), proxy=True, engine_group=ENGINE_GROUP, proxy_group=PROXY_GROUP):
    """Does the inventory have the engine hosts (and, with ``proxy``, the proxy hosts) the playbook runs on?

    ``groups``: Ansible's ``groups`` (group name -> inventory host names; ``all`` lists
    every host, the implicit localhost is in none). ``sources``: the inventory sources
    Ansible was given (``ansible_inventory_sources``: each ``-i``, made absolute, or the
    default). ``existing``: those of ``sources`` that exist on the controller.

    Returns ``{"ok", "missing", "message"}``: ``missing``, the groups without a host;
    ``message``, one line saying what was found and what to check ("" when ``ok``).
    """
    groups = {str(name): list(hosts or []) for name, hosts in (groups or {}).items()}
    sources = [str(source) for source in sources or []]
    existing = {str(source) for source in existing or []}
    needed = [engine_group] + ([proxy_group] if proxy else [])
    missing = [group for group in needed if not groups.get(group)]
    if not missing:
        return {"ok": True, "missing": [], "message": ""}

    shown = _sources_text(sources)
    if not groups.get("all"):
        runs_on = "the GB10 machines listed under group '%s'" % engine_group
        if proxy:
            runs_on += " and the proxy host(s) listed under group '%s'" % proxy_group
        # A source with a comma that is no file is a host list ("a,b,"), not a mistyped path.
        absent = [s for s in sources if s not in existing and "," not in s]
        if sources and len(absent) == len(sources):
            said = "that path does not exist" if len(absent) == 1 else "none of those paths exists"
            found = "No inventory at %s: %s." % (shown, said)
        else:
            found = ("The inventory %s lists no host (Ansible's warnings above say whether it could parse it)."
                     % shown)
        message = ("%s Check the -i path (ansible-playbook -i inventory/<site> ...): the playbook runs on %s, as in %s. "
                   "Nothing has changed." % (found, runs_on, EXAMPLE))
    else:
        said = []
        if engine_group in missing:
            said.append(no_engines_message(groups, engine_group, proxy_group))
        if proxy_group in missing:
            said.append(no_proxy_message(groups, proxy_group))
        names = " and ".join(missing)
        message = ("%s (-i %s): %s Check the -i path and the group name%s %s, as in %s. Nothing has changed."
                   % (LAYOUT_TITLE, shown, " ".join(said), "s" if len(missing) > 1 else "", names, EXAMPLE))
    return {"ok": False, "missing": missing, "message": message}
