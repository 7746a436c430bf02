# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: site_check_report
short_description: The site check's verdict - one line per host, ok or each problem with its fix, and the lines to paste
version_added: 0.1.0
description:
  - Runs on the controller (C(playbooks/site-check.yml)). Judges what the site check read on every host - SSH and sudo,
    the OS, time synchronisation, docker, a container seeing the GPU, the ports the collection uses, the vLLM image check,
    the memory plan, what the host is on (its topology record and the engine unit that runs, read by
    C(factory_floor.llm.topology_record)) next to the inventory's C(topology) and model - together with what is judged
    across hosts - the model copies (C(factory_floor.llm.model_manifest) results, compared as
    C(factory_floor.llm.model_manifest_diff) compares them), the split's direct link (C(factory_floor.llm.link_check)
    results, as C(factory_floor.llm.link_report) judges them), one image name of several builds, engine hosts whose
    records and engine units disagree.
  - A host on another topology (or model) than the inventory asks for is a problem - C(deploy.yml) would refuse it -
    whose fix names the switch playbook or the inventory line; a host with no record that runs nothing (a first
    deploy) is not.
  - O(inventory) - C(deploy.yml)'s layout check and its check of every inventory variable (a name with the collection's
    prefix that no role declares, with the closest declared one; a value of the wrong type, one line each) - is listed
    first, as C(inventory), and fails the verdict as a host's problem does.
  - Every problem is filed under each host it names, with its fix. The OS is reported as found, never refused (the
    image check refuses an image of another architecture).
options:
  _input:
    description:
      - Per host, the C(site_check) record the playbook assembled (see C(plugins/module_utils/_site_check.py)).
      - With O(engines), Ansible's C(hostvars) instead - the filter reads each host's C(site_check) record and, on the
        engine hosts, O(manifests), O(link), O(mtu) and O(runtime) from it itself.
    type: dict
    required: true
  engines:
    description:
      - The engine hosts (C(groups['gb10'])), with C(hostvars) as the input. Each engine host, then each of O(proxies),
        that noted a C(site_check) record is judged; on the engine hosts among them their C(__site_check_manifest)
        (O(manifests)) and C(__vllm_split_link_seen) (O(link)) are read, and the first one's C(vllm_link_mtu) (O(mtu))
        and C(vllm_runtime) (O(runtime)).
      - Null (the default) takes the records as the input and O(manifests), O(link), O(mtu), O(runtime) as given.
    type: list
    elements: str
  proxies:
    description: With O(engines), the proxy hosts (C(groups['proxy'])).
    type: list
    elements: str
    default: []
  manifests:
    description: Per engine host, C(factory_floor.llm.model_manifest)'s result (a skipped one is left out).
    type: dict
    default: {}
  link:
    description: Per engine host of the split, C(factory_floor.llm.link_check)'s result; empty when no link is configured.
    type: dict
    default: {}
  mtu:
    description: C(vllm_link_mtu) (the link's MTU on both ends); null only asks that they be equal.
    type: int
  runtime:
    description: C(vllm_runtime), for the link's verdict.
    type: str
    default: container
  inventory:
    description:
      - What C(deploy.yml)'s inventory checks found (the C(factory_floor.llm.vllm) role's C(layout) entry point) -
        C(ok), C(errors) (C(factory_floor.llm.layout_check)'s, each C(message) naming the variable or host and what to
        change) and C(msg) (the refusal, when it has no C(errors)). Null when the check did not run.
    type: dict
  sources:
    description: The run's inventory sources (C(ansible_inventory_sources)), to name the file and the commands in a fix.
    type: list
    elements: str
    default: []
  playbook_dir:
    description:
      - The running playbook's directory (Ansible's magic variable C(playbook_dir)), to name the playbooks a fix runs as
        the operator runs them - C(factory_floor.llm.deploy) from an installed collection, C(playbooks/deploy.yml) from a
        checkout (the P(factory_floor.llm.playbook_name#filter) filter's rule).
      - Null names them as the installed collection's.
    type: str
"""

EXAMPLES = r"""
- name: Judge every host
  ansible.builtin.set_fact:
    site_check_verdict: "{{ records | factory_floor.llm.site_check_report(manifests=manifests, link=link) }}"

- name: Judge every host, reading their records from hostvars
  ansible.builtin.set_fact:
    site_check_verdict: "{{ hostvars | factory_floor.llm.site_check_report(engines=groups['gb10'], proxies=groups['proxy']) }}"
"""

RETURN = r"""
_value:
  description:
    - C(ok) (neither the inventory nor any host has a problem), C(inventory) (C(ok), C(problems), each C(what) and
      C(fix)), C(hosts) (per host C(ok), C(problems) - each C(what) and C(fix) - C(notes), what was
      found, and C(reasons), the memory plan's computation), C(message) (one line per host), C(paste) (the memory
      guard's figures read from the model as inventory lines, and each host's computed share as a comment),
      C(groupings) (the site's engine groupings as M(factory_floor.llm.kv_cache_plan) planned them on the first engine
      host - a title, one row per grouping, the sweeps read - or why not; empty when it did not run).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.model_manifest_diff import model_manifest_diff
from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_check as sc
from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import site_check_inputs


def site_check_report(records, manifests=None, link=None, mtu=None, runtime="container", inventory=None, sources=None,
                      playbook_dir=None, engines=None, proxies=None):
    """Filter entry point."""
    if engines is not None:
        if not isinstance(records, Mapping):
            raise AnsibleFilterError("site_check_report with engines expects hostvars, got %s" % type(records).__name__)
        if manifests is not None or link is not None or mtu is not None or runtime != "container":
            raise AnsibleFilterError("site_check_report reads manifests, link, mtu and runtime from hostvars with engines")
        read = site_check_inputs(records, engines, proxies)
        records, manifests, link, mtu, runtime = (read["records"], read["manifests"], read["link"], read["mtu"],
                                                  read["runtime"])
    elif proxies is not None:
        raise AnsibleFilterError("site_check_report takes proxies with engines only")
    if not isinstance(records, Mapping):
        raise AnsibleFilterError("site_check_report expects a dict of each host's site_check record, got %s"
                                 % type(records).__name__)
    records = {str(host): dict(value or {}) for host, value in records.items()}
    reachable = {h for h, r in records.items() if (r.get("reach") or {}).get("ok")}
    shared = []
    manifests = {h: m for h, m in dict(manifests or {}).items() if h in reachable}
    if manifests:
        shared += model_manifest_diff(manifests)["problems"]
    link = {h: r for h, r in dict(link or {}).items() if h in reachable and r and not r.get("skipped")}
    if link:
        failed = {h: r for h, r in link.items() if r.get("failed")}
        for host, result in sorted(failed.items()):
            shared.append({"host": host, "what": "the link check could not read the link: %s" % result.get("msg", "?"),
                           "fix": "correct vllm_link_interface / vllm_link_address for %s" % host})
        if not failed:
            shared += lc.assess(link, mtu, runtime)["problems"]
    shared += sc.image_conflicts(records)
    if inventory is not None and not isinstance(inventory, Mapping):
        raise AnsibleFilterError("site_check_report: inventory must be the inventory check's findings (a dict), got %s"
                                 % type(inventory).__name__)
    sources = [str(source) for source in sources or []]
    shared += sc.topology_conflicts({h: r for h, r in records.items() if h in reachable}, sources, playbook_dir)
    return sc.report(records, shared, inventory=dict(inventory) if inventory is not None else None, sources=sources,
                     playbook_dir=playbook_dir)


class FilterModule:
    """The site check's verdict."""

    def filters(self):
        return {"site_check_report": site_check_report}
