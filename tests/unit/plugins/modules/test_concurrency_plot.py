# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.concurrency_plot (needs matplotlib, as on the controller)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("matplotlib")

from ansible_collections.factory_floor.llm.plugins.modules import concurrency_plot  # noqa: E402

LEVELS = [
    {"profile": "short", "concurrency": c, "tokens_per_s": t, "e2e_p95": e, "ttft_p95": 0.5}
    for c, t, e in [(1, 36, 3.6), (4, 82, 6.3), (8, 109, 9.5), (12, 130, 11.9), (16, 150, 17.2)]
] + [
    {"profile": "long", "concurrency": c, "tokens_per_s": t, "e2e_p95": e, "ttft_p95": 2.0}
    for c, t, e in [(1, None, None), (4, 81, 20.0), (8, 113, 28.0), (12, 110, 40.0), (16, 87, 55.0)]
]


def test_writes_a_png_once_then_changes_nothing(tmp_path, run_module):
    dest = str(tmp_path / "spark-a.png")
    args = {"levels": LEVELS, "dest": dest, "recommended": 12, "target_seconds": 30, "title": "spark-a", "mode": "0644"}
    code, result = run_module(concurrency_plot, dict(args, _ansible_check_mode=True))
    assert (code, result["changed"]) == (0, True)
    assert not os.path.exists(dest)
    code, result = run_module(concurrency_plot, args)
    assert (code, result["changed"], result["profiles"]) == (0, True, ["short", "long"])
    with open(dest, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    assert oct(os.stat(dest).st_mode & 0o777) == "0o644"
    code, result = run_module(concurrency_plot, args)
    assert (code, result["changed"]) == (0, False)
    code, result = run_module(concurrency_plot, dict(args, recommended=8, _ansible_check_mode=True))
    assert (code, result["changed"]) == (0, True)


def test_missing_directory(tmp_path, run_module):
    code, result = run_module(concurrency_plot, {"levels": LEVELS, "dest": str(tmp_path / "no" / "x.png")})
    assert code == 1
    assert "does not exist" in result["msg"]


def test_check_only_needs_no_levels_and_writes_nothing(tmp_path, run_module):
    code, result = run_module(concurrency_plot, {"check_only": True, "_ansible_check_mode": True})
    assert (code, result["changed"]) == (0, False)
    assert result["matplotlib_version"] == __import__("matplotlib").__version__
    assert os.listdir(str(tmp_path)) == []


def test_without_matplotlib_it_says_how_to_install_it(run_module, monkeypatch):
    monkeypatch.setattr(concurrency_plot, "MATPLOTLIB_IMPORT_ERROR", "ModuleNotFoundError: No module named 'matplotlib'")
    code, result = run_module(concurrency_plot, {"check_only": True})
    assert code == 1
    assert "Failed to import the required Python library (matplotlib)" in result["msg"]
    assert "to draw the concurrency sweep's PNG" in result["msg"]
    assert "-m pip install matplotlib" in result["msg"] and "apt-get install python3-matplotlib" in result["msg"]


def test_levels_and_dest_required_without_check_only(run_module):
    code, result = run_module(concurrency_plot, {})
    assert code == 1 and "check_only is False but all of the following are missing: levels, dest" in result["msg"]


def test_tpot_panel(tmp_path, run_module):
    levels = [dict(row, tpot_p95=0.02 * row["concurrency"]) for row in LEVELS]
    code, result = run_module(concurrency_plot, {"levels": levels, "dest": str(tmp_path / "t.png"), "metric": "tpot"})
    assert code == 0 and result["size"] > 0
