# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: site_limit_gathered
short_description: Whether the limit check reads the facts an earlier play gathered as final
version_added: 0.1.0
description:
  - Takes C(site_limit_gathered) (an earlier play of the run gathered the facts of the hosts outside the limit) and
    returns true when it is set and C(site_limit_gather) (this play gathers them itself) is not - then a host whose
    facts are still missing is one the earlier gather could not read. Both read as Ansible's C(bool) filter reads them.
  - Used by the C(limit) entry point of the C(factory_floor.llm.site) role, for C(factory_floor.llm.limit_check)'s
    C(gathered).
options:
  _input:
    description: C(site_limit_gathered).
    type: bool
    required: true
  gather:
    description: C(site_limit_gather).
    type: bool
    required: true
"""

EXAMPLES = r"""
- name: Check what --limit leaves out
  factory_floor.llm.limit_check:
    playbook: deploy
    gathered: "{{ site_limit_gathered | factory_floor.llm.site_limit_gathered(site_limit_gather) }}"
"""

RETURN = r"""
_value:
  description: Whether the earlier gather is final for this check.
  type: bool
"""

from ansible.plugins.filter.core import to_bool


def site_limit_gathered(gathered, gather):
    """Filter entry point."""
    return to_bool(gathered) and not to_bool(gather)


class FilterModule:
    """Whether an earlier gather is final."""

    def filters(self):
        return {"site_limit_gathered": site_limit_gathered}
