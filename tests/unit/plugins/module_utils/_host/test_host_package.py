# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The host programs as one package (issue 36, item 3).

- every program starts from the package as the site role installs it, run as its unit runs it
  (``python3 -m _host.<program>``), with the host's Python and the tests' one, importing nothing of Ansible;
- the package imports itself relatively: no ``try: ansible_collections... except ImportError: _x`` doubles;
- the roles copy it whole through one step (the site role's ``host_programs``), never a list of files;
- that step, run for real, installs the package, removes what the package no longer has, and removes the flat
  layout of older collections only once no unit or keepalived configuration names it.
"""

from __future__ import annotations

import ast
import glob
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import host_layout
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import render

ROOT = host_layout.ROOT
# Each program and the look that proves it starts: its --help.
PROGRAMS = ["watchdog", "upstream", "keepalived", "keepalived_watch", "memory_guard", "memory_guard_watch", "probe_client"]
# The files' names in the flat layout (before the package).
FLAT = ["_" + name[:-3] for name in host_layout.FILES if name != "__init__.py"]
PYTHONS = [sys.executable] + [path for path in ("/usr/bin/python3",) if os.path.exists(path)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return host_layout.install(tmp_path_factory.mktemp("host") / "lib")


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("program", PROGRAMS)
def test_every_program_starts_from_the_installed_package(lib, program, python):
    done = host_layout.run(lib, program, "--help", python=python)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout


def test_every_program_has_a_main():
    for program in PROGRAMS:
        tree = ast.parse(open(os.path.join(host_layout.PACKAGE, program + ".py"), encoding="utf-8").read())
        assert any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body), program


def test_the_package_imports_itself_relatively_and_nothing_of_ansible():
    for path in glob.glob(os.path.join(host_layout.PACKAGE, "*.py")):
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                assert name == "__future__" or not name.startswith(("ansible", "_")), (path, name)


def test_no_import_is_written_twice():
    """An ``except ImportError`` guards an optional library (requests, jsonschema, ...), never a second path."""
    for path in glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(isinstance(h.type, ast.Name) and h.type.id == "ImportError"
                                                 for h in node.handlers):
                tried = [n for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))
                         if isinstance(n, (ast.Import, ast.ImportFrom))]
                for imported in tried:
                    module = imported.module if isinstance(imported, ast.ImportFrom) else imported.names[0].name
                    assert not (module or "").startswith(("ansible_collections", "_")), (path, imported.lineno)


def _yaml_files():
    for pattern in ("roles/*/tasks/*.yml", "roles/*/vars/*.yml", "extensions/molecule/**/*.yml", "benchmarks/*.yml"):
        yield from glob.glob(os.path.join(ROOT, pattern), recursive=True)


def test_no_role_or_scenario_keeps_a_list_of_the_programs_files():
    for path in _yaml_files():
        text = open(path, encoding="utf-8").read()
        assert not re.search(r"\b(%s)\.py\b" % "|".join(FLAT), text), path
        assert "module_utils/{{" not in text, path
    # One step copies the package, by a glob of it: the site role's (and the benchmarks' own copy next to them).
    copies = [path for path in _yaml_files() if "plugins/module_utils/_host/*.py" in open(path, encoding="utf-8").read()]
    assert sorted(os.path.relpath(path, ROOT) for path in copies) == [
        "benchmarks/affinity.yml", "benchmarks/balance.yml", "roles/site/vars/main.yml"]


@pytest.mark.parametrize("role, template, program", [
    ("vllm_watchdog", "vllm-watchdog.service.j2", "watchdog"),
    ("nginx_proxy", "factory-floor-upstream.service.j2", "upstream"),
    ("memory_guard", "factory-floor-memory-guard.service.j2", "memory_guard_watch"),
    ("keepalived", "keepalived-watch.service.j2", "keepalived_watch"),
])
def test_each_unit_runs_its_program_from_the_package(role, template, program):
    with open(os.path.join(ROOT, "roles", role, "templates", template), encoding="utf-8") as handle:
        text = handle.read()
    assert "\nEnvironment=PYTHONPATH={{ _site_host_lib_dir }}\n" in text
    (start,) = re.findall(r"^ExecStart=(.*)$", text, re.M)
    assert start.startswith("/usr/bin/python3 -m _host.%s --config " % program), start
    assert os.path.exists(os.path.join(host_layout.PACKAGE, program + ".py"))


def test_the_site_variables_name_the_same_python_everywhere():
    text = render("keepalived", "keepalived.conf.j2", inventory_hostname="spark-a", groups={"proxy": ["spark-a", "spark-b"]},
                  ansible_facts={"default_ipv4": {"interface": "eth0", "address": "10.89.7.10"}},
                  __keepalived_peers={"unicast_src_ip": "10.89.7.10", "unicast_peer": ["10.89.7.11"]},
                  __keepalived_address="10.89.7.100/24")
    assert 'script "/usr/bin/env PYTHONPATH=/usr/local/lib/factory-floor /usr/bin/python3 -m _host.keepalived ' in text


PLAY = """
- name: The host programs
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Install them
      ansible.builtin.include_role:
        name: factory_floor.llm.site
        tasks_from: host_programs
"""


def _run_entry_point(tmp_path, lib, config_dirs):
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0")
    extra = yaml.safe_dump({"_site_host_lib_dir": str(lib), "_site_host_config_dirs": [str(d) for d in config_dirs]},
                           default_flow_style=True)
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c",
                           "local", "-e", "ansible_python_interpreter=" + sys.executable, "-e", extra,
                           str(tmp_path / "play.yml")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.skipif(os.geteuid() != 0, reason="the step installs files root's")
def test_the_site_step_installs_the_package_and_retires_the_flat_layout_once_nothing_runs_it(tmp_path):
    lib, units = tmp_path / "lib", tmp_path / "systemd"
    (lib / "_host").mkdir(parents=True)
    units.mkdir()
    # A host deployed by an older collection: the flat files, a unit that runs one, a file the package lost.
    for name in ("_watchdog.py", "_daemon.py"):
        (lib / name).write_text("# the flat layout\n")
    (lib / "nginx-check").write_text("#!/bin/sh\n")
    (lib / "_host" / "gone.py").write_text("# a file an older package had\n")
    unit = units / "vllm-replica-watchdog.service"
    unit.write_text("[Service]\nExecStart=/usr/bin/python3 %s/_watchdog.py --config /etc/x.json\n" % lib)
    _run_entry_point(tmp_path, lib, [units, tmp_path / "keepalived-absent"])
    assert sorted(os.listdir(lib / "_host")) == host_layout.FILES
    assert (lib / "_watchdog.py").exists() and (lib / "_daemon.py").exists()   # a unit still runs one
    # The run that rewrites the unit comes first; the next install removes the flat files, and nothing else.
    unit.write_text("[Service]\nEnvironment=PYTHONPATH=%s\nExecStart=/usr/bin/python3 -m _host.watchdog\n" % lib)
    _run_entry_point(tmp_path, lib, [units])
    assert sorted(os.listdir(lib)) == ["_host", "nginx-check"]
    done = host_layout.run(lib, "watchdog", "--help")
    assert done.returncode == 0, done.stderr
