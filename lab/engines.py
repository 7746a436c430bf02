#!/usr/bin/env python3
"""The lab's platforms with more engine hosts than extensions/molecule/config.yml's two.

    python3 lab/engines.py 3 > build/lab/molecule-engines-3.yml

prints a molecule base config whose ``platforms`` are config.yml's with spark-c added after
spark-b (the Makefile passes it after config.yml: ``molecule -c config.yml -c THIS``; molecule
replaces the platforms list with this one, everything else stays config.yml's). The new host is
spark-b's entry with what must differ:

- its name, and the docker volume named after it (factory-floor-lab-docker-spark-c);
- its address on the lab network: the next after spark-b's (10.89.7.12);
- its core: ``--cpuset-cpus=2`` on a machine with three or more CPUs, as spark-a has core 0 and
  spark-b core 1; on a machine with two, core 0, shared with spark-a (lab/doctor.sh warns). Its
  vLLM worker is pinned to the same core by inventory/lab-groups/host_vars/spark-c.yml (the same
  rule; tests/unit/lab/test_lab_engines.py holds the two together).

Its address on the direct link is in its host_vars (lab/link.sh reads it there). Plain Python and
PyYAML (the controller's virtualenv).
"""

from __future__ import annotations

import ipaddress
import os
import string
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "extensions", "molecule", "config.yml")
ENGINE_GROUP = "gb10"
MAX_ENGINES = 3  # inventory/lab-groups names three; a fourth needs its host_vars and link address first


def cpus():
    """The CPUs this process may run on (what nproc prints)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def core_of(index, ncpu):
    """The core the engine host at ``index`` (0 = spark-a) is pinned to: its own when the machine has it, else 0."""
    return index if ncpu > index else 0


def _replace(value, old, new):
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: _replace(item, old, new) for key, item in value.items()}
    return value


def platforms(config, engines, ncpu):
    """config.yml's platforms with ``engines`` engine hosts: the extra ones are copies of the last, renamed."""
    base = list(config["platforms"])
    hosts = [p for p in base if ENGINE_GROUP in (p.get("groups") or [])]
    if not 2 <= engines <= MAX_ENGINES:
        raise ValueError("the lab runs 2 to %d engine hosts, not %d" % (MAX_ENGINES, engines))
    if len(hosts) != 2:
        raise ValueError("%s has %d platforms in group %s, not 2" % (CONFIG, len(hosts), ENGINE_GROUP))
    last = hosts[-1]
    added = []
    for index in range(len(hosts), engines):
        name = "spark-" + string.ascii_lowercase[index]
        entry = _replace(last, last["name"], name)
        entry["name"] = name
        entry["ip"] = str(ipaddress.IPv4Address(last["ip"]) + (index - len(hosts) + 1))
        entry["extra_opts"] = ["--cpuset-cpus=%d" % core_of(index, ncpu) if str(opt).startswith("--cpuset-cpus=")
                               else opt for opt in entry.get("extra_opts") or []]
        added.append(entry)
    at = base.index(last) + 1
    return base[:at] + added + base[at:]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].isdigit():
        sys.stderr.write("usage: lab/engines.py ENGINES (2-%d)\n" % MAX_ENGINES)
        return 2
    with open(CONFIG, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    try:
        result = platforms(config, int(argv[0]), cpus())
    except ValueError as exc:
        sys.stderr.write("lab/engines.py: %s\n" % exc)
        return 2
    sys.stdout.write("---\n# Made by lab/engines.py %s from extensions/molecule/config.yml: do not edit.\n" % argv[0])
    sys.stdout.write(yaml.safe_dump({"platforms": result}, sort_keys=False, default_flow_style=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
