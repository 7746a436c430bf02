# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The collection's own filters for a bare Templar (which does not load a collection's plugins).

``with_filters(templar, "memory_guard_figures", ...)`` registers the named filters of
plugins/filter (all of them when none is named) under their FQCN, the way a role's variables
call them.
"""

from __future__ import annotations

import importlib
import os

FILTERS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                       "plugins", "filter")


def with_filters(templar, *names):
    """``templar`` with the named filters of this collection (else all) added; returns it."""
    for name in names or sorted(f[:-3] for f in os.listdir(FILTERS) if f.endswith(".py") and f != "__init__.py"):
        module = importlib.import_module("ansible_collections.factory_floor.llm.plugins.filter." + name)
        templar.environment.filters["factory_floor.llm." + name] = module.FilterModule().filters()[name]
    return templar
