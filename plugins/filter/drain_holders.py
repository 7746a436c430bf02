# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: drain_holders
short_description: Who drained each engine, from the proxy host's drain files
version_added: 0.1.0
description:
  - Takes the C(results) of a C(slurp) loop over the drain files of a proxy host (each with its C(item.path)) and
    returns, by file name (the engine's inventory name), who drained it - the C(holder) of the JSON the C(drain)
    entry point of the C(factory_floor.llm.nginx_proxy) role writes, or the file's text (empty for an operator's
    C(touch)).
  - Used by that role's C(drained) entry point.
options:
  _input:
    description: The C(slurp) loop's C(results), one per drain file (the C(find) result's C(files) as the loop items).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Note the drained engines and their holders
  ansible.builtin.set_fact:
    drained: "{{ __drain_holders.results | factory_floor.llm.drain_holders }}"
"""

RETURN = r"""
_value:
  description: The holder by engine; empty when no engine is drained.
  type: dict
  sample: {spark-b: switch-model, spark-a: ""}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._proxy_view import drain_holders as _holders


def drain_holders(results):
    """Filter entry point."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("drain_holders expects a loop's results (a list), got %s" % type(results).__name__)
    try:
        return _holders(results)
    except ValueError as exc:  # a file that starts with "{" but is no JSON
        raise AnsibleFilterError("drain_holders: a drain file is not the JSON it starts as: %s" % exc) from exc


class FilterModule:
    """The proxy's drained engines."""

    def filters(self):
        return {"drain_holders": drain_holders}
