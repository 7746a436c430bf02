# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The vllm role's systemd units as systemd reads them: rendered with Ansible's own templating from the
role's defaults and vars, then read section by section (and checked with ``systemd-analyze verify``).

Issue 33 item 6: an engine of the docker runtime is tied to dockerd's lifetime and shutdown order, its
container stops with the role's timeout whoever stops it, and the engine leaves the proxies first when
dockerd restarts. Item 16: the engines' firewall follows nftables.service, whose ``flush ruleset``
would delete it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.engine_plan import ARGUMENT_SPEC
from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_plan as ep
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_check import MANAGED_RUN_ARGS
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import templar as role_templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The role's templates hold regex_replace('\.service$', ...); Jinja warns of that escape, as it does in Ansible.
pytestmark = pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def _role_vars(**overrides):
    """The site and vllm roles' defaults and vars (templates left for Ansible to resolve), then ``overrides``."""
    values = {}
    for where in ("site/defaults", "site/vars", "vllm/defaults", "vllm/vars"):
        with open(os.path.join(ROOT, "roles", where, "main.yml"), encoding="utf-8") as handle:
            values.update(_trusted(yaml.safe_load(handle)))
    values.update(ansible_managed="Ansible managed", inventory_hostname="spark-a", vllm_service_description="vLLM replica",
                  vllm_service_conflicts=["vllm-split.service"], vllm_service_name="vllm-replica.service",
                  __vllm_plan={"fingerprint": "0" * 64, "environment": {}}, __vllm_argv=["/usr/bin/docker", "run", "--name", "vllm-replica"],
                  _site_engine_units=["vllm-replica.service", "vllm-split.service"])
    values.update(overrides)
    return values


def _templar(**overrides):
    # The collection's own filters, as a play finds them by their FQCN (no collection loader in this process).
    return role_templar(_role_vars(**overrides))


def render(template, **overrides):
    """``roles/vllm/templates/<template>`` as the role writes it."""
    with open(os.path.join(ROOT, "roles", "vllm", "templates", template), encoding="utf-8") as handle:
        source = handle.read()
    return _templar(**overrides).template(trust_as_template(source))


def evaluate(expression, **overrides):
    """A Jinja expression (a role variable's value) as Ansible evaluates it with the role's variables."""
    return _templar(**overrides).template(trust_as_template(expression))


def directives(unit_text):
    """``{(section, key): [values...]}`` of a unit file, in order (comments and blank lines left out)."""
    found, section = {}, None
    for line in unit_text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, value = line.split("=", 1)
        found.setdefault((section, key), []).append(value)
    return found


def words(unit, section, key):
    """Every space-separated value of a (possibly repeated) directive."""
    return [word for value in unit.get((section, key), []) for word in value.split()]


def plan_args(templar):
    """engine_plan's options as the vllm role's plan entry point leaves them to the action plugin: each read from the
    role's variable it names (``_engine_plan.ROLE_VARIABLES``), an undefined one left to the option's default."""
    def read(name):
        if name not in templar.available_variables:
            raise KeyError(name)
        return templar.template(trust_as_template("{{ %s }}" % name))
    return ep.role_args(read, {})


def plan_container_argv(**overrides):
    """The container runtime's command line, as roles/vllm/tasks/plan.yml's engine_plan composes it."""
    values = {"vllm_model": "/models/m", "vllm_service_name": "vllm-replica.service", "vllm_service_settings": {},
              "vllm_service_env": {}}
    values.update(overrides)
    defaults = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    return ep.argv(dict(defaults, **plan_args(_templar(**values))))


# --------------------------------------------------------------------------- item 6: docker's lifetime


def test_a_docker_engine_starts_after_dockerd_and_stops_before_it():
    unit = directives(render("vllm.service.j2"))
    # After=: started once dockerd runs; at a shutdown (the inverse order) stopped, draining, before dockerd.
    assert "docker.service" in words(unit, "Unit", "After")
    # Requires=: `systemctl restart docker` (an upgrade) restarts the engine, stopped first, started after.
    assert words(unit, "Unit", "Requires") == ["docker.service"]
    # Not BindsTo=: a dockerd that dies and comes back must not leave the engine stopped for good.
    assert ("Unit", "BindsTo") not in unit
    # A start reopens the port a leave (at a shutdown, at a restart of docker) closed.
    assert "factory-floor-engine-leave.service" in words(unit, "Unit", "Wants")


@pytest.mark.parametrize("overrides", [dict(vllm_container_engine="podman"), dict(vllm_runtime="venv")])
def test_engines_without_dockerd_are_not_tied_to_it(overrides):
    unit = directives(render("vllm.service.j2", **overrides))
    assert "docker.service" not in words(unit, "Unit", "After") + words(unit, "Unit", "Requires")
    assert ("Unit", "Requires") not in unit


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_the_container_stops_with_the_roles_timeout_whoever_stops_it(engine):
    # dockerd stopping the container itself (its own shutdown or restart, a `docker stop` by hand)
    # waited docker's default 10 s, then SIGKILL: in-flight requests were cut after 10 s.
    argv = plan_container_argv(vllm_container_engine=engine, vllm_shutdown_timeout=120)
    assert "--stop-timeout=130" in argv
    assert argv.index("--stop-timeout=130") < argv.index("--entrypoint")
    unit = directives(render("vllm.service.j2", vllm_container_engine=engine, vllm_shutdown_timeout=120))
    assert unit[("Service", "ExecStop")] == ["-/usr/bin/%s stop -t 130 vllm-replica" % engine]
    # systemd never cuts the drain short: room for SIGKILL and the memory's release after it.
    assert int(unit[("Service", "TimeoutStopSec")][0]) >= 130 + 30


def test_stop_timeout_is_a_flag_the_role_sets():
    assert "--stop-timeout" in MANAGED_RUN_ARGS


def test_the_engine_leaves_the_proxies_before_a_docker_restart_stops_it():
    leave = directives(render("factory-floor-engine-leave.service.j2"))
    # Restarted with dockerd (PartOf=), stopped before it and before the engines (ordered after both).
    assert words(leave, "Unit", "PartOf") == ["docker.service"]
    assert {"docker.service", "vllm-replica.service", "vllm-split.service"} <= set(words(leave, "Unit", "After"))
    for overrides in (dict(vllm_container_engine="podman"), dict(vllm_runtime="venv")):
        leave = directives(render("factory-floor-engine-leave.service.j2", **overrides))
        assert ("Unit", "PartOf") not in leave and "docker.service" not in words(leave, "Unit", "After")


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_systemd_accepts_the_engine_unit(tmp_path):
    # What the role's validate= runs on the host, with a docker.service there (Requires= needs it).
    (tmp_path / "docker.service").write_text("[Service]\nExecStart=/bin/true\n")
    (tmp_path / "vllm-replica.service").write_text(render(
        "vllm.service.j2", _vllm_container_engine_path="/bin/true", __vllm_argv=["/bin/true", "run"]))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "vllm-replica.service")],
                          capture_output=True, text=True, check=False, cwd=tmp_path,
                          env=dict(os.environ, SYSTEMD_UNIT_PATH="%s:" % tmp_path))
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------- item 16: nftables.service


def test_the_firewall_is_loaded_after_nftables_and_again_whenever_it_flushes():
    unit = directives(render("factory-floor-firewall.service.j2"))
    # nftables.service's "flush ruleset" at boot would delete the table loaded before it.
    assert "nftables.service" in words(unit, "Unit", "After")
    # Its restart (stop, flush, load) restarts this unit after it; its reload reloads this unit after it.
    assert words(unit, "Unit", "PartOf") == ["nftables.service"]
    assert words(unit, "Unit", "ReloadPropagatedFrom") == ["nftables.service"]
    # A reload loads the same file, which deletes and recreates its own table.
    assert unit[("Service", "ExecReload")] == unit[("Service", "ExecStart")]


def test_the_firewall_stops_cleanly_when_nftables_has_flushed_its_table():
    # Seen in the lab: nftables' restart flushed the table, this unit's stop ran
    # "nft delete table" on a table that was gone, and every restart of nftables left
    # "Failed with result 'exit-code'" on the unit. Its stop must not depend on the table:
    # run its ExecStop= lines in a network namespace of their own, with and without it.
    if shutil.which("nft") is None or shutil.which("unshare") is None:
        pytest.skip("nft or unshare not found")
    stops = directives(render("factory-floor-firewall.service.j2"))[("Service", "ExecStop")]
    assert all(not line.startswith("-") for line in stops), "a stop that hides its errors: %s" % stops
    for table_there in (True, False):
        script = "set -e\n%s%s\nnft list tables\n" % (
            "nft add table inet factory_floor\n" if table_there else "", "\n".join(stops))
        done = subprocess.run(["unshare", "-rn", "sh", "-c", script], capture_output=True, text=True,
                              timeout=30, check=False)
        if done.returncode != 0 and "Operation not permitted" in done.stderr:
            pytest.skip("no network namespace here: %s" % done.stderr.strip())
        assert done.returncode == 0, (table_there, done.stderr)
        assert "factory_floor" not in done.stdout
