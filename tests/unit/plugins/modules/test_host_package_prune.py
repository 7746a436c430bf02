# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.host_package_prune on a host layout in a temporary directory."""

from __future__ import annotations

import os

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import host_package_prune as module


@pytest.fixture(name="host")
def _host(tmp_path):
    lib, units, keepalived = tmp_path / "lib", tmp_path / "systemd", tmp_path / "keepalived"
    (lib / "_host").mkdir(parents=True)
    (lib / "__pycache__").mkdir()
    units.mkdir()
    for name in ("daemon.py", "watchdog.py", "gone.py", ".hidden.py"):
        (lib / "_host" / name).write_text("#\n")
    for name in ("_watchdog.py", "_daemon.py"):
        (lib / name).write_text("# the flat layout\n")
    (lib / "nginx-check").write_text("#!/bin/sh\n")
    return {"lib": lib, "units": units, "keepalived": keepalived}


def _args(host, **more):
    args = {"package_dir": str(host["lib"] / "_host"), "keep": ["daemon.py", "watchdog.py"], "lib_dir": str(host["lib"]),
            "config_dirs": [str(host["units"]), str(host["keepalived"])]}
    args.update(more)
    return args


def test_a_flat_file_a_unit_still_runs_is_kept_and_the_packages_lost_file_goes(run_module, host):
    unit = host["units"] / "drop-in.d" / "x.conf"
    unit.parent.mkdir()
    unit.write_text("[Service]\nExecStart=/usr/bin/python3 %s/_watchdog.py --config /etc/x.json\n" % host["lib"])
    code, result = run_module(module, _args(host))
    assert code == 0, result
    assert (result["changed"], result["removed"], result["flat_users"]) == (
        True, [str(host["lib"] / "_host" / "gone.py")], [str(unit)])
    assert sorted(os.listdir(host["lib"] / "_host")) == [".hidden.py", "daemon.py", "watchdog.py"]
    assert (host["lib"] / "_watchdog.py").exists()


@pytest.mark.parametrize("check_mode", [True, False])
def test_nothing_runs_the_flat_layout_it_goes_with_its_cache(run_module, host, check_mode):
    (host["units"] / "w.service").write_text("[Service]\nExecStart=/usr/bin/python3 -m _host.watchdog\n")
    code, result = run_module(module, _args(host, _ansible_check_mode=check_mode))
    assert code == 0, result
    lib = host["lib"]
    assert result["removed"] == sorted(str(path) for path in (
        lib / "_host" / "gone.py", lib / "_daemon.py", lib / "_watchdog.py", lib / "__pycache__"))
    assert result["changed"] is True and result["flat_users"] == []
    left = sorted(os.listdir(lib))
    assert left == (["__pycache__", "_daemon.py", "_host", "_watchdog.py", "nginx-check"] if check_mode
                    else ["_host", "nginx-check"])


def test_again_changes_nothing(run_module, host):
    run_module(module, _args(host))
    code, result = run_module(module, _args(host))
    assert (code, result["changed"], result["removed"]) == (0, False, [])


def test_a_failed_removal_names_the_path(run_module, host, monkeypatch):
    def refuse(path):
        raise PermissionError("denied")
    monkeypatch.setattr(module.os, "unlink", refuse)
    code, result = run_module(module, _args(host))
    assert code == 1
    assert result["msg"] == "Removing %s failed: denied" % (host["lib"] / "_host" / "gone.py")
