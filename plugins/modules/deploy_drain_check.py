#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: deploy_drain_check
short_description: Stop deploy.yml when an engine it waits for in a proxy's rotation is drained by another holder
version_added: 0.1.0
description:
  - C(deploy.yml)'s last play, on each proxy host, before it waits for the engines that serve the API in the proxy's
    rotation. An engine drained by another holder than C(deploy) would never rejoin; the task fails at once naming each
    one and its holder (an interrupted switch or model upgrade, or none - an operator's drain file), with the playbook
    to run again or the drain file to remove. In check mode the message says a real run would stop the same way.
  - Runs on the controller through its action plugin, with the proxy host's name and the run's C(playbook_dir) (to
    name the playbooks as the operator runs them); it connects to no host.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  drained:
    description:
      - The engines drained on this proxy host, inventory name to holder (empty for a drain file without one) - the
        C(nginx_proxy) role's C(nginx_proxy_drained), from its C(drained) entry point.
    type: dict
    required: true
  expected:
    description: The engines the run expects in rotation (every replica, or the split's rank-0 head), inventory names.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Stop when engines this run expects in rotation are drained by someone else
  factory_floor.llm.deploy_drain_check:
    drained: "{{ nginx_proxy_drained }}"
    expected: "{{ groups['gb10'] }}"
"""

RETURN = r"""
drained_other:
  description: The engines of O(expected) drained by another holder than C(deploy), inventory name to holder.
  returned: always
  type: dict
  sample: {spark-b: switch-to-split}
"""
