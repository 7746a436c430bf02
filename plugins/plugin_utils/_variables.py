# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Variables an action plugin reads from the task's (or another host's) variables, as plain data."""

from __future__ import annotations


def plain(value):
    """``value`` with every list and dict item read (templated) now: Ansible hands containers over lazily, and a
    template in an item is rendered only when the item is read."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value
