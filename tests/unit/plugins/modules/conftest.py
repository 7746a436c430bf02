# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Shared fixtures for whole-module runs (``tests/unit/plugins/modules``)."""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from ansible.module_utils import _internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.testing import patch_module_args

from ansible_collections.factory_floor.llm.plugins.modules import gpu_memory_utilization


class ModuleRun(NamedTuple):
    """What one run of a module's ``main()`` produced."""

    code: int
    """Exit status: 0 after ``exit_json``, 1 after ``fail_json``."""
    result: dict
    """The JSON the module printed (``failed``/``msg`` on failure)."""


@pytest.fixture
def run_module(capsys, monkeypatch):
    """Run ``module.main()`` with ``args`` as its module arguments.

    ``run_module(module, args)`` returns a :class:`ModuleRun`; unpack it as
    ``code, result = run_module(...)`` or use ``.result``. ``args`` may carry
    Ansible's internal options (``_ansible_check_mode``, ``_ansible_diff``).
    """

    # A module runs on a target. Once a test imports Ansible's controller side (an action
    # plugin's test), ansible-core believes it is the controller and sends a module's
    # warnings to its display instead of the result: say it is not, for the run.
    monkeypatch.setattr(_internal, "is_controller", False)
    # A module process starts with no warnings; in one test process they would pile up.
    monkeypatch.setattr(ansible_warnings, "_global_warnings", {})
    monkeypatch.setattr(ansible_warnings, "_global_deprecations", {})

    def run(module, args):
        with patch_module_args(args):
            with pytest.raises(SystemExit) as exited:
                module.main()
        return ModuleRun(exited.value.code, json.loads(capsys.readouterr().out))

    return run


@pytest.fixture
def memory_host(monkeypatch):
    """The target ``gpu_memory_utilization`` reads: ``(files, properties)``, two dicts a test fills - file texts by
    path (a missing path is ENOENT) and systemd properties by ``(unit, name)`` (a missing one is unset)."""
    files, properties = {}, {}

    def read_text(path):
        if path not in files:
            raise OSError(2, "No such file", path)
        return files[path]

    monkeypatch.setattr(gpu_memory_utilization, "read_text", read_text)
    monkeypatch.setattr(gpu_memory_utilization, "systemctl_show",
                        lambda m: lambda unit, name: properties.get((unit, name)))
    return files, properties
