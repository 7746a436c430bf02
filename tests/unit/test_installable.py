# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The built collection installs, and every playbook runs from it by its collection name.

``ansible-playbook factory_floor.llm.NAME`` finds ``playbooks/NAME.yml`` of the installed
collection, and NAME must be an identifier (ansible-core's AnsibleCollectionRef: no hyphens).
So the playbook is ``playbooks/a_b.yml``; the hyphenated ``playbooks/a-b.yml``, the name the
checkout's commands use (README, Makefile, docs, the lab scenarios), is one import of it -
one file per playbook, never a second chain.

The collection is built with ``ansible-galaxy collection build`` as ``make build`` does,
installed into a temporary directory, and every playbook is checked by its collection name
(``--syntax-check`` and ``--list-tasks``) with only that directory in
ANSIBLE_COLLECTIONS_PATH and outside the checkout, so the checkout's own link
(build/collections) cannot stand in for the installed copy.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = sorted(os.path.basename(path)[:-len(".yml")] for path in glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
# The collection name of each playbook file: the hyphenated ones import the underscore file of that name.
FQCNS = sorted({"factory_floor.llm." + name.replace("-", "_") for name in PLAYBOOKS})
# Where the checkout's commands name playbook files.
REFERENCES = ["README.md", "Makefile", "docs", "roles", "extensions", "benchmarks", "plugins"]
# Lab and CI files the built collection must not carry.
NOT_SHIPPED = re.compile(r"^(tests|extensions|lab|benchmarks|\.ci|build|inventory/lab[^/]*)(/|$)")


def _tool(name):
    """The Ansible command next to the Python running the tests (the virtualenv's), else the PATH's."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    return path if os.access(path, os.X_OK) else shutil.which(name)


def _run(argv, cwd, collections, timeout=120):
    env = dict(os.environ)
    # The checkout's ansible.cfg and collections must play no part.
    env.pop("ANSIBLE_CONFIG", None)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": str(collections),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_HOME": os.path.join(str(cwd), "ansible-home"),
        "ANSIBLE_NOCOLOR": "1",
    })
    done = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, "{0} failed ({1}):\n{2}\n{3}".format(" ".join(argv), done.returncode, done.stdout, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball, collections path, work directory): built and installed as a user would."""
    work = tmp_path_factory.mktemp("installable")
    _run([_tool("ansible-galaxy"), "collection", "build", "--output-path", str(work / "dist"), ROOT], work, work / "none")
    tarballs = glob.glob(str(work / "dist" / "factory_floor-llm-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    collections = work / "collections"
    _run([_tool("ansible-galaxy"), "collection", "install", "--offline", "--force", "-p", str(collections), tarballs[0]],
         work, collections)
    return tarballs[0], collections, work


def _plays(name):
    with open(os.path.join(ROOT, "playbooks", name + ".yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_each_hyphenated_playbook_is_one_import_of_its_underscore_file():
    for name in PLAYBOOKS:
        if "-" not in name:
            continue
        twin = name.replace("-", "_")
        assert twin in PLAYBOOKS, "playbooks/{0}.yml has no playbooks/{1}.yml: factory_floor.llm.{1} cannot run it".format(name, twin)
        # One play, an import with nothing else (no vars, no when, no tags): the two names run the same plays.
        plays = _plays(name)
        assert len(plays) == 1 and set(plays[0]) == {"name", "ansible.builtin.import_playbook"}, name
        assert plays[0]["ansible.builtin.import_playbook"] == twin + ".yml", name


def test_no_underscore_playbook_imports_a_hyphenated_one():
    # The underscore files are the playbooks: none goes back through a checkout's name (no second chain).
    found = {}
    for name in PLAYBOOKS:
        if "-" in name:
            continue
        hyphenated = [play["ansible.builtin.import_playbook"] for play in _plays(name)
                      if "-" in play.get("ansible.builtin.import_playbook", "")]
        if hyphenated:
            found[name] = hyphenated
    assert found == {}


def test_playbooks_the_checkout_names_exist():
    named = set()
    for top in REFERENCES:
        path = os.path.join(ROOT, top)
        files = [path] if os.path.isfile(path) else glob.glob(os.path.join(path, "**", "*"), recursive=True)
        for file_name in files:
            if os.path.isfile(file_name):
                with open(file_name, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
                named.update(re.findall(r"playbooks/([A-Za-z0-9_-]+)\.ya?ml", text))
                # extensions/molecule/single/vars/layouts.yml: "playbook: NAME.yml" under playbooks/.
                named.update(re.findall(r"^\s*playbook:\s*([A-Za-z0-9_-]+)\.yml\s*$", text, re.MULTILINE))
    assert {"deploy", "switch-to-replicas", "switch-to-split", "switch-model", "tune-concurrency"} <= named
    assert named - set(PLAYBOOKS) == set()


def test_the_artifact_ships_the_playbooks_and_not_the_lab(installed):
    with tarfile.open(installed[0]) as tarball:
        names = set(tarball.getnames())
    assert {"playbooks/{0}.yml".format(name) for name in PLAYBOOKS} <= names
    assert {"roles/site_view/templates/prometheus-vllm.yml.j2", "meta/runtime.yml", "inventory/example/hosts.yml"} <= names
    assert sorted(name for name in names if NOT_SHIPPED.match(name)) == []


@pytest.mark.parametrize("mode", ["--syntax-check", "--list-tasks"])
def test_every_playbook_runs_by_its_collection_name(installed, mode):
    collections, work = installed[1], installed[2]
    out = _run([_tool("ansible-playbook"), "-i", os.path.join(ROOT, "inventory", "lab"), mode] + FQCNS, work, collections)
    playbooks_dir = os.path.join(str(collections), "ansible_collections", "factory_floor", "llm", "playbooks")
    found = re.findall(r"^playbook: (.+)$", out, re.MULTILINE)
    assert found == [os.path.join(playbooks_dir, fqcn.rsplit(".", 1)[1] + ".yml") for fqcn in FQCNS]


def test_every_playbook_file_runs_from_the_checkout(tmp_path):
    # conftest.py links the checkout under build/collections, as `make collection` does.
    paths = [os.path.join(ROOT, "playbooks", name + ".yml") for name in PLAYBOOKS]
    out = _run([_tool("ansible-playbook"), "-i", os.path.join(ROOT, "inventory", "lab"), "--syntax-check"] + paths,
               tmp_path, os.path.join(ROOT, "build", "collections"))
    assert re.findall(r"^playbook: (.+)$", out, re.MULTILINE) == paths


def _pinned_core(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        return Version(re.search(r"^ansible-core==(\S+)$", handle.read(), re.MULTILINE).group(1))


def _requires_ansible():
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as handle:
        return SpecifierSet(yaml.safe_load(handle)["requires_ansible"])


def test_requires_ansible_admits_every_tested_ansible_core_and_the_next_ones():
    requires = _requires_ansible()
    oldest, newest = _pinned_core("requirements.txt"), _pinned_core("requirements-newest.txt")
    assert oldest < newest
    assert oldest in requires and newest in requires
    # The lower bound is the oldest series tested, not an older one nobody runs.
    lower = [Version(spec.version) for spec in requires if spec.operator == ">="]
    assert [version.release[:2] for version in lower] == [oldest.release[:2]]
    # No upper bound: pip on a Spark (Python 3.12) installs whatever ansible-core is newest, and a bound below
    # it makes every command warn that the collection does not support it.
    assert Version("{0}.{1}.0".format(newest.major, newest.minor + 1)) in requires
    assert Version("{0}.0.0".format(newest.major + 1)) in requires


def test_roles_declare_the_collections_minimum_ansible():
    lower = [spec.version for spec in _requires_ansible() if spec.operator == ">="][0]
    declared = {}
    for meta in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "main.yml"))):
        with open(meta, encoding="utf-8") as handle:
            declared[meta.split(os.sep)[-3]] = str(yaml.safe_load(handle)["galaxy_info"]["min_ansible_version"])
    assert declared and {role: version for role, version in declared.items()
                         if Version(version).release[:2] != Version(lower).release[:2]} == {}


def test_galaxy_names_no_placeholder_home():
    """Real repository/documentation/issues addresses or none: a placeholder sends Galaxy's readers nowhere."""
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        galaxy = yaml.safe_load(handle)
    for key in ("repository", "documentation", "homepage", "issues"):
        assert not re.search(r"example\.(com|org|net|invalid)|localhost", galaxy.get(key) or ""), (key, galaxy[key])


def test_the_readme_names_every_collection_playbook():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    assert [fqcn for fqcn in FQCNS if "`{0}`".format(fqcn) not in readme] == []


def test_every_document_a_shipped_file_names_is_shipped(installed):
    """A reader of the installed collection can open every .md file it names (no checkout, no shared/)."""
    missing = []
    with tarfile.open(installed[0]) as tarball:
        names = {name[2:] if name.startswith("./") else name for name in tarball.getnames()}
        for member in tarball.getmembers():
            if not member.isfile() or member.name.endswith((".tar.gz", ".png")):
                continue
            text = tarball.extractfile(member).read().decode("utf-8", errors="replace")
            here = os.path.dirname(member.name)
            for ref in re.findall(r"(?<![\w/.:-])((?:\.\.?/|[\w.-]+/)*[\w.-]+\.md)\b", text):
                if ref in ("README.md",) and here:
                    candidates = [os.path.normpath(os.path.join(here, ref)), ref]
                else:
                    candidates = [os.path.normpath(os.path.join(here, ref)), os.path.normpath(ref)]
                if not any(candidate in names for candidate in candidates):
                    missing.append("{0}: {1}".format(member.name, ref))
    assert missing == []
