# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A variable's value as Jinja's ``int`` and ``float`` filters read it: the one reading the checks share."""

from __future__ import annotations

import jinja2
import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float, jinja_int

RENDER = jinja2.Environment().from_string


@pytest.mark.parametrize("value", [8000, "8000", "8000.9", 8000.9, "x", None, True, [], "  42 ", "29501", "7.9"])
def test_int_is_jinjas(value):
    assert str(jinja_int(value)) == RENDER("{{ v | int }}").render(v=value)


@pytest.mark.parametrize("value,expected", [(5, 5), ("29501", 29501), ("7.9", 7), ("port", 0), (None, 0)])
def test_jinja_int(value, expected):
    assert jinja_int(value) == expected


@pytest.mark.parametrize("value", [5, "0.75", "lots", None, "  2.5 ", True])
def test_float_is_jinjas(value):
    assert str(jinja_float(value)) == RENDER("{{ v | float }}").render(v=value)
