# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: proxy_members
short_description: The engine hosts the proxy balances over - each engine group's first host
version_added: 0.1.0
description:
  - Takes the engine hosts (C(groups[site_engine_group])) and the site's grouping (C(site_engine_groups)) and returns
    each group's first host (its rank 0, the host that serves the API), every host once.
  - With no grouping declared, or one of the two topologies' (every host its own group, or one group of two), the site
    switches between C(replicas) and C(split) without touching the proxy, so the members are both groupings' API hosts -
    every engine host, in inventory order (the split's other rank never answers the membership checker, so it never
    joins the upstream).
  - Computed by C(plugins/module_utils/_engine_groups.py) (C(proxy_members)); the default of the
    C(factory_floor.llm.nginx_proxy) role's C(nginx_proxy_backends).
options:
  _input:
    description: The engine hosts' names, in inventory order.
    type: list
    elements: str
    required: true
  grouping:
    description: The site's grouping, a list of groups, each a list of engine host names (C(site_engine_groups)).
      Empty or null, the two topologies'.
    type: list
    elements: list
    default: []
"""

EXAMPLES = r"""
- name: The proxy's members
  ansible.builtin.debug:
    msg: "{{ groups['gb10'] | factory_floor.llm.proxy_members(site_engine_groups) }}"
  # [] or [[spark-a], [spark-b]] or [[spark-a, spark-b]] -> [spark-a, spark-b]
  # [[spark-a, spark-b], [spark-c, spark-d]] -> [spark-a, spark-c]
"""

RETURN = r"""
_value:
  description: The host names, each group's first host.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import proxy_members as _members


def proxy_members(engines, grouping=None):
    """Filter entry point."""
    if not isinstance(engines, (list, tuple)):
        raise AnsibleFilterError("proxy_members expects the engine hosts (a list), got %r" % (engines,))
    if grouping and not (isinstance(grouping, (list, tuple))
                         and all(isinstance(group, (list, tuple)) and group for group in grouping)):
        raise AnsibleFilterError("site_engine_groups must be a list of non-empty host lists (e.g. [[spark-a, spark-b], "
                                 "[spark-c]]), not %r: the layout check says what to change" % (grouping,))
    return _members(list(engines), [list(group) for group in grouping or []])


class FilterModule:
    """The proxy's members."""

    def filters(self):
        return {"proxy_members": proxy_members}
