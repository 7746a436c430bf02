# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A role variable's value as Jinja's ``int`` and ``float`` filters read it, for the checks that judge the variables
in Python the way the roles' templates and ``when:`` conditions did (``_vllm_check``, ``_proxy_check``,
``_memory_guard_check``, ``_split_settings``, ...): one reading, so a check and the template it guards cannot
disagree about a number."""

from __future__ import annotations


def jinja_int(value):
    """Jinja's ``int`` filter: a whole number, the integer part of a decimal, else 0."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def jinja_float(value):
    """Jinja's ``float`` filter: a number, else 0.0."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
