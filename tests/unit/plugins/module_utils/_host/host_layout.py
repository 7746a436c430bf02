# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host programs as a host has them: the package copied whole, one program run with ``python3 -m``.

``install(lib)`` copies what the ``site`` role's entry point ``host_programs`` copies (every
``*.py`` of ``plugins/module_utils/_host``) to ``lib/_host``; ``run(lib, program, ...)`` runs
``python3 -m _host.<program>`` with ``PYTHONPATH=lib``, as the units do. Ahead of ``lib`` on
that path stand an ``ansible`` and an ``ansible_collections`` that raise when imported: a
program that imported anything of Ansible (present in the test's virtualenv, absent on a host)
fails here as it would on the host.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))
PACKAGE = os.path.join(ROOT, "plugins", "module_utils", "_host")
# The files a host gets (the site role copies the same glob).
FILES = sorted(os.path.basename(path) for path in glob.glob(os.path.join(PACKAGE, "*.py")))
POISON = "raise ImportError('a host program imported %s, which a host does not have')\n"


def install(lib):
    """Copy the package to ``lib/_host`` as the role does, and the import traps next to it; return ``lib``."""
    lib = str(lib)
    os.makedirs(os.path.join(lib, "_host"), exist_ok=True)
    for name in FILES:
        shutil.copy(os.path.join(PACKAGE, name), os.path.join(lib, "_host", name))
    for name in ("ansible", "ansible_collections"):
        trap = os.path.join(lib + "-traps", name)
        os.makedirs(trap, exist_ok=True)
        with open(os.path.join(trap, "__init__.py"), "w", encoding="utf-8") as handle:
            handle.write(POISON % name)
    return lib


def env(lib, **extra):
    """The environment of a unit: ``PYTHONPATH`` the install directory (the traps first), nothing of the tests."""
    return dict({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": "%s-traps:%s" % (lib, lib)}, **extra)


def argv(program, *args, python=None):
    """``python3 -s -m _host.<program> args...`` (``-s``: no user site directory, as root's units have none)."""
    return [python or sys.executable, "-s", "-m", "_host." + program] + [str(arg) for arg in args]


def run(lib, program, *args, python=None, timeout=60, extra_env=None, **kwargs):
    """Run one program from ``lib`` as its unit does, from ``/``; the ``subprocess.run`` result."""
    return subprocess.run(argv(program, *args, python=python), env=env(str(lib), **(extra_env or {})), cwd="/",
                          capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
