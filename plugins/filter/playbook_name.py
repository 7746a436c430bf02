# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: playbook_name
short_description: Name one of the collection's playbooks the way the operator runs it
version_added: 0.1.0
description:
  - For the roles' messages ("run deploy.yml again"). Returns the collection name, for example
    C(factory_floor.llm.switch_to_replicas), when the playbook that runs now comes from an installed collection
    (O(playbook_dir) is C(.../ansible_collections/factory_floor/llm/playbooks)); the file,
    C(playbooks/switch-to-replicas.yml), when it runs from another directory named C(playbooks) (a checkout, run
    from its root); the collection name again otherwise (a playbook of the operator's own that includes the roles).
  - The same rule as the modules' and action plugins' messages (C(plugins/module_utils/_playbook_name.py)).
options:
  _input:
    description:
      - The playbook's file name in a checkout, for example C(deploy.yml) or C(switch-to-split.yml). A name that is
        not one of the collection's playbooks is an error.
    type: str
    required: true
  playbook_dir:
    description: The directory of the playbook that runs now - pass Ansible's magic variable C(playbook_dir).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Say how to run the deploy again
  ansible.builtin.debug:
    msg: "Fix it, then run {{ 'deploy.yml' | factory_floor.llm.playbook_name(playbook_dir) }} again."
  # ansible-playbook factory_floor.llm.deploy: "... run factory_floor.llm.deploy again."
  # ansible-playbook playbooks/deploy.yml (a checkout): "... run playbooks/deploy.yml again."
"""

RETURN = r"""
_value:
  description: What to give C(ansible-playbook), for example C(factory_floor.llm.deploy) or C(playbooks/deploy.yml).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name as _name


def playbook_name(name, playbook_dir):
    """Filter entry point."""
    try:
        return _name(name, playbook_dir)
    except ValueError as exc:
        raise AnsibleFilterError("playbook_name: %s" % exc) from exc


class FilterModule:
    """How a message names one of the collection's playbooks."""

    def filters(self):
        return {"playbook_name": playbook_name}
