# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the controller installs, apart from the lab and the tests, and what the collection says it needs.

``make venv`` (and ``make build``, which needs only it) installs the controller's requirements.txt and nothing
from apt: no podman, runc or debootstrap on an operator's controller. The tests' targets install only the
tests' Debian packages; the lab's targets the whole list. The Makefile is asked with ``make -n`` (nothing runs)
and with stamps that do not exist, as on a fresh machine.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_ONLY = ("podman", "runc", "debootstrap", "netavark", "iptables")
TEST_TOOLS = ("molecule", "pytest", "ansible-lint", "antsibull")

needs_make = pytest.mark.skipif(not shutil.which("make"), reason="make not installed")


def _dry_run(target, tmp_path):
    """What `make -n TARGET` would run on a machine with nothing installed yet."""
    absent = str(tmp_path / "absent")
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", ROOT, target, "VENV=" + str(tmp_path / "venv"),
         "APT_STAMP=" + absent + "/apt.done", "TEST_APT_STAMP=" + absent + "/apt-test.done",
         "SANITY_VENV=" + str(tmp_path / "sanity"), "COLL_LINK=" + absent + "/link", "PROMTOOL=" + absent + "/promtool"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _reqs(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        return {re.split(r"[=<>!~\[ ]", line.strip(), maxsplit=1)[0].lower(): line.strip()
                for line in handle if line.strip() and not line.startswith(("#", "-"))}


@needs_make
@pytest.mark.parametrize("target", ["venv", "build"])
def test_the_controller_install_takes_nothing_from_apt_and_no_lab_or_test_tool(target, tmp_path):
    commands = _dry_run(target, tmp_path)
    assert "pip install" in commands and "requirements.txt" in commands
    assert re.findall(r"apt-get (?:update|install -y|download)[^\n]*", commands) == []
    assert not [tool for tool in ("requirements-test.txt", "requirements-lab.txt") if tool in commands]


@needs_make
@pytest.mark.parametrize("target", ["units", "lint", "sanity", "docs"])
def test_the_tests_install_only_the_tests_debian_packages(target, tmp_path):
    commands = _dry_run(target, tmp_path)
    installs = re.findall(r"apt-get install .*--no-install-recommends ([^;\n]*)", commands)
    assert installs and all(not set(LAB_ONLY) & set(packages.split()) for packages in installs), installs
    assert "requirements-test.txt" in commands and "requirements-lab.txt" not in commands


@needs_make
def test_the_lab_installs_the_whole_list_before_the_virtualenv(tmp_path):
    commands = _dry_run("lab-image", tmp_path)
    apt = commands.index("apt-get install -y -qq --no-install-recommends podman")
    assert apt < commands.index(" -m venv ") < commands.index("requirements-lab.txt")


def test_the_controllers_requirements_hold_no_lab_or_test_tool():
    controller = _reqs("requirements.txt")
    assert "ansible-core" in controller and "cryptography" in controller
    assert [name for name in controller if name.startswith(TEST_TOOLS) or name == "ansible"] == []
    # Every pin is exact: `make venv` installs what `make test` ran.
    assert [line for line in controller.values() if "==" not in line] == []


def test_cryptography_is_held_below_the_release_that_makes_every_command_warn():
    pinned = _reqs("requirements.txt")["cryptography"].split("==")[1]
    assert int(pinned.split(".")[0]) < 51
    assert _reqs("meta/ee-requirements.txt")["cryptography"] == "cryptography<51"


def test_the_execution_environment_lists_what_the_controller_needs():
    with open(os.path.join(ROOT, "meta", "execution-environment.yml"), encoding="utf-8") as handle:
        ee = yaml.safe_load(handle)
    for kind in ("python", "system"):
        assert os.path.isfile(os.path.join(ROOT, ee["dependencies"][kind])), kind
    ee_python = _reqs(ee["dependencies"]["python"])
    # ansible-core comes with the execution environment, and jinja2 and PyYAML with it; the rest of the
    # controller's list is there.
    assert set(_reqs("requirements.txt")) - {"ansible-core", "jinja2", "pyyaml"} <= set(ee_python)


def test_the_readme_names_every_package_the_roles_install_on_the_hosts():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    packages = set()
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "vars", "main.yml")):
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
        for key, value in data.items():
            if key.endswith("_packages") and isinstance(value, list):
                packages.update(value)
    assert packages
    # Packages every Ubuntu host already has need no mention.
    assert sorted(name for name in packages - {"curl", "iproute2"} if name not in readme) == []
