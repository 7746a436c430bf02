# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: tune_run_timeout
short_description: How long a concurrency sweep may run, seconds
version_added: 0.1.0
description:
  - Takes the sweep's concurrencies (C(tune_concurrency)) and returns the longest the sweep may take - per concurrency
    and profile (C(tune_profiles)), a step's duration (C(tune_duration)) and one request's timeout
    (C(tune_request_timeout)), seconds, then 1800 seconds for the engine's restarts and warm-ups.
  - Durations read as Jinja's C(int) filter reads them (a value that is no number counts as 0).
  - The default of C(tune_run_timeout) in the C(factory_floor.llm.tune_concurrency) role.
options:
  _input:
    description: The concurrencies (only their number counts).
    type: list
    required: true
  profiles:
    description: The request profiles (only their number counts).
    type: list
    required: true
  duration:
    description: A step's duration, seconds.
    type: int
    required: true
  request_timeout:
    description: One request's timeout, seconds.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: The sweep's timeout
  ansible.builtin.debug:
    msg: "{{ [1, 4, 8] | factory_floor.llm.tune_run_timeout(['short', 'long'], 120, 600) }}"
  # 3 * 2 * (120 + 600) + 1800 = 6120
"""

RETURN = r"""
_value:
  description: Seconds.
  type: int
  sample: 6120
"""

from jinja2.filters import do_int


def tune_run_timeout(concurrency, profiles, duration, request_timeout):
    """Filter entry point."""
    return len(concurrency) * len(profiles) * (do_int(duration) + do_int(request_timeout)) + 1800


class FilterModule:
    """The sweep's timeout."""

    def filters(self):
        return {"tune_run_timeout": tune_run_timeout}
