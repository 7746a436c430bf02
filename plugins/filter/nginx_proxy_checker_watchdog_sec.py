# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: nginx_proxy_checker_watchdog_sec
short_description: The membership checker's systemd WatchdogSec=, in seconds
version_added: 0.1.0
description:
  - Takes the checker's interval (C(nginx_proxy_check_interval), seconds) and returns four of its slowest looks, at
    least 120 seconds - a look being the interval, a probe that waits out its timeout (C(nginx_proxy_probe_timeout),
    seconds) up to three times per engine (C(nginx_proxy_backends)), and a reload's wait of up to 10 seconds, twice.
  - A value that is no number counts as 0, as Jinja's C(float) filter reads it.
  - Used by the C(factory_floor.llm.nginx_proxy) role.
options:
  _input:
    description: C(nginx_proxy_check_interval), seconds.
    type: float
    required: true
  probe_timeout:
    description: C(nginx_proxy_probe_timeout), seconds.
    type: float
    required: true
  backends:
    description: C(nginx_proxy_backends), the engines the checker probes (only their number counts).
    type: list
    required: true
"""

EXAMPLES = r"""
- name: The checker's watchdog
  ansible.builtin.debug:
    msg: "{{ 5 | factory_floor.llm.nginx_proxy_checker_watchdog_sec(10, ['a', 'b']) }}"
  # 4 * (5 + 3 * 10 * 2 + 20) = 340
"""

RETURN = r"""
_value:
  description: Seconds (whole), at least 120.
  type: int
  sample: 340
"""

from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float


def nginx_proxy_checker_watchdog_sec(interval, probe_timeout, backends):
    """Filter entry point."""
    return int(max(120, 4 * (jinja_float(interval) + 3 * jinja_float(probe_timeout) * len(backends) + 20)))


class FilterModule:
    """The membership checker's watchdog."""

    def filters(self):
        return {"nginx_proxy_checker_watchdog_sec": nginx_proxy_checker_watchdog_sec}
