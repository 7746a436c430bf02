# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The site check's verdict: what each host showed, judged, one line per host, and the lines to paste.

Pure logic for the ``site_check_report`` filter (playbooks/site-check.yml). Each host's record
is what the playbook read there, read-only (``site_check`` fact):

- ``groups``: the inventory groups it is in (``engine``, ``proxy``);
- ``reach``: ``{ok, msg}`` - SSH and sudo (a ping with become);
- ``facts``: ``{distribution, distribution_version, architecture, virtualization}``;
- ``info``: ``site_host_info``'s result (time sync, units, ports);
- ``runtime``: ``{runtime, engine, gpus}`` - vllm_runtime, vllm_container_engine, vllm_container_gpus;
- ``gpu``: the GPU probe (``{rc, stdout, stderr}``), absent when it does not apply;
- ``image``: ``{ok, msg, image}`` - the vllm role's image check (its refusal message, and what it read);
- ``memory``: ``{ok, msg, enabled, model, plan, share}`` - the memory guard's share entry point;
- ``groupings`` (the first engine host that answers only): ``kv_cache_plan``'s result for the site - the table of
  engine groupings the report prints (:func:`groupings_lines`);
- ``topology``: ``{seen, topology, model}`` - ``topology_record``'s result there (the record, the engine
  unit that runs, the record's model compared), with the inventory's ``topology`` and that topology's
  model directory: what ``deploy.yml``'s preflight compares (:func:`topology_verdict`).

The model manifests and the link are judged across hosts by their own code
(``_model_manifest.compare``, ``_link_check.assess``), the hosts' records and engine units by
``_topology_record.compare`` (:func:`topology_conflicts`); their problems come in as
``{host, what, fix}`` and are filed under each host they name.

The inventory itself - deploy.yml's layout check and its check of every inventory variable (a
name no role declares, a value of the wrong type) - is judged on the controller; its errors
(``layout_check``'s, each ``{check, hosts, variables, message}``) come in as ``inventory``
(:func:`inventory_verdict`) and are listed before the hosts.
"""

from __future__ import annotations

import time

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr
from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

#: What a GB10 host runs: NVIDIA DGX OS, Ubuntu 24.04 on aarch64.
GB10_OS = ("Ubuntu", "24.04", "aarch64")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def _problem(what, fix):
    return {"what": what, "fix": fix}


def _own(message):
    """A role's refusal as a problem of its host: one line, without its host's name and "Nothing was changed"."""
    text = " ".join(str(message).split())
    head, sep, rest = text.partition(": ")
    if sep and " " not in head:
        text = rest
    return text.replace(" Nothing was changed.", "").strip().rstrip(".")


def collection_ports(engine, proxy, vllm_port=None, watchdog_status_port=None, engine_units=(), watchdog_units=(),
                     proxy_port=None):
    """The TCP ports the collection uses on a host, as the site check reads them (``site_host_info``'s ``ports``):
    on an engine host vLLM's API (``vllm_port``, held by one of ``engine_units``) and the watchdog's state
    (``vllm_watchdog_status_port``, by one of ``watchdog_units``); on a proxy host the proxy (``site_proxy_port``,
    by ``nginx.service``)."""
    ports = []
    if engine:
        ports += [{"port": int(vllm_port), "purpose": "vLLM's API", "variable": "vllm_port",
                   "owner_units": list(engine_units or ())},
                  {"port": int(watchdog_status_port), "purpose": "the watchdog's state (GET /state)",
                   "variable": "vllm_watchdog_status_port", "owner_units": list(watchdog_units or ())}]
    if proxy:
        ports.append({"port": int(proxy_port), "purpose": "the proxy (nginx)", "variable": "site_proxy_port",
                      "owner_units": ["nginx.service"]})
    return ports


def os_line(facts, gpu_expected):
    """What the host runs, said as found (a note, never a problem: the image check refuses a wrong architecture)."""
    dist = "%s %s" % (facts.get("distribution") or "?", facts.get("distribution_version") or "")
    arch = facts.get("architecture") or "?"
    found = "%s %s" % (dist.strip(), arch)
    if (facts.get("distribution"), str(facts.get("distribution_version")), arch) == GB10_OS:
        return "OS %s (DGX OS's base, as on GB10)" % found
    if gpu_expected:
        return "OS %s (GB10 hosts run DGX OS: Ubuntu 24.04 aarch64; the image must match this architecture)" % found
    return "OS %s (no GPU in the inventory: any OS the vLLM image runs on)" % found


def time_verdict(facts, info):
    """``(problems, notes)`` of the host's clock."""
    virt = facts.get("virtualization") or ""
    time = (info or {}).get("time") or {}
    if virt and virt != "none":
        return [], ["time: a container (%s) keeps its host's clock: synchronise the machine it runs on" % virt]
    if time.get("ntp_synchronized"):
        services = ", " + ", ".join(time["services"]) if time.get("services") else ""
        return [], ["time synchronised (NTPSynchronized=yes%s)" % services]
    services = time.get("services") or []
    what = "the clock is not synchronised (timedatectl: NTPSynchronized=%s; %s)" % (
        "no" if time.get("ntp_synchronized") is False else "unknown: %s" % (time.get("error") or "no answer"),
        "running: " + ", ".join(services) if services else "neither systemd-timesyncd nor chrony runs")
    return [_problem(what, "enable time synchronisation (timedatectl set-ntp true for systemd-timesyncd, or start chrony) "
                           "and wait until timedatectl says 'System clock synchronized: yes': the split's ranks, the "
                           "logs and the switch's timeline need one time")], []


def runtime_verdict(runtime, info):
    """The container engine the inventory runs vLLM under, active."""
    if (runtime or {}).get("runtime") != "container":
        return [], ["vllm_runtime %s: no container engine needed" % ((runtime or {}).get("runtime") or "?")]
    engine = runtime.get("engine") or "docker"
    if engine == "podman":
        return [], ["podman (no daemon to run)"]
    unit = ((info or {}).get("units") or {}).get("docker.service") or {}
    if unit.get("active_state") == "active":
        return [], ["docker running"]
    state = unit.get("active_state") or unit.get("load_state") or "not found"
    return [_problem("docker is not running (docker.service %s)" % state,
                     "install docker and the NVIDIA Container Toolkit (DGX OS has both), then systemctl enable --now "
                     "docker")], []


def gpu_verdict(runtime, gpu, image_ok):
    """Whether a container sees the GPU, where the inventory gives the engine's containers one."""
    runtime = runtime or {}
    if runtime.get("runtime") != "container":
        return [], ["GPU in a container: not applicable (vllm_runtime %s)" % (runtime.get("runtime") or "?")]
    if not runtime.get("gpus"):
        return [], ["GPU in a container: not applicable by inventory (vllm_container_gpus is empty: no GPU)"]
    if not gpu:
        reason = "the image is not usable here" if not image_ok else "not probed"
        return [], ["GPU in a container: not probed (%s)" % reason]
    lines = [line for line in (gpu.get("stdout") or "").splitlines() if line.startswith("GPU ")]
    if gpu.get("rc") == 0 and lines:
        return [], ["a container sees the GPU (%s)" % lines[0].strip()]
    error = (gpu.get("stderr") or gpu.get("stdout") or gpu.get("msg") or "").strip().splitlines()
    return [_problem("a container with vllm_container_gpus %r sees no GPU (nvidia-smi -L: rc %s%s)"
                     % (runtime.get("gpus"), gpu.get("rc"), ", " + error[-1][:200] if error else ""),
                     "install the NVIDIA Container Toolkit and configure docker for it (nvidia-ctk runtime configure "
                     "--runtime=docker, then systemctl restart docker); DGX OS ships both")], []


def ports_verdict(info):
    """Each port the collection uses: free, or held while the collection's own unit is active."""
    problems, notes = [], []
    for port in (info or {}).get("ports") or []:
        if port.get("free"):
            continue
        if port.get("ours"):
            notes.append("port %s held by %s" % (port["port"], ", ".join(port.get("owner_units") or []) or "ours"))
            continue
        holders = ", ".join("%s (pid %s)" % (h.get("process") or "?", h.get("pid") or "?")
                            for h in port.get("holders") or []) or "another program"
        problems.append(_problem("port %s (%s) is taken by %s" % (port["port"], port.get("purpose") or "", holders),
                                 "stop that program, or set %s to a free port" % (port.get("variable") or "the port")))
    return problems, notes


def image_verdict(image):
    """The vllm role's image check: its refusal, or what it found."""
    image = image or {}
    if not image.get("ok", True):
        # The vllm role's refusal says what to do itself.
        return [_problem(_own(image.get("msg") or "the image check failed"), "")], []
    seen = image.get("image") or {}
    if seen.get("present"):
        return [], ["image %s %s (%s)" % (seen.get("ref"), (seen.get("id") or "")[:19], seen.get("architecture") or "?")]
    return [], ["image check: %s" % (image.get("note") or "passed")]


def image_conflicts(records):
    """``{host, what, fix}`` for one image name that is different builds on different hosts."""
    by_ref = {}
    for host in sorted(records):
        seen = ((records[host] or {}).get("image") or {}).get("image") or {}
        if seen.get("present") and seen.get("ref"):
            by_ref.setdefault(seen["ref"], {}).setdefault(seen.get("id"), []).append(host)
    problems = []
    for ref, ids in sorted(by_ref.items()):
        if len(ids) > 1:
            hosts = sorted(h for owners in ids.values() for h in owners)
            problems.append({"host": " and ".join(hosts),
                             "what": "vllm_container_image %s is different builds: %s" % (
                                 ref, "; ".join("%s %s" % (",".join(owners), (i or "")[:19]) for i, owners in ids.items())),
                             "fix": "load the same build on every engine host (the split's ranks run one vLLM)"})
    return problems


def memory_verdict(memory):
    """The memory plan: the share, the model's two figures and where they came from, or why there is none."""
    memory = memory or {}
    if not memory.get("enabled", True):
        return [], ["memory guard off (memory_guard_enabled: false)"], []
    if not memory.get("ok", True):
        # The memory guard's refusal names the variable to change itself; the plan it refused, when
        # there was one, is printed with it (a device total the host does not have).
        reasons = [str(line) for line in (memory.get("plan") or {}).get("reasoning") or []]
        return ([_problem(_own(memory.get("msg") or "the memory plan failed"), "")],
                ["memory plan: refused (the problem below)"] if reasons else [], reasons)
    model = memory.get("model") or {}
    plan = memory.get("plan") or {}
    share = plan.get("gpu_memory_utilization")
    notes = ["memory plan: gpu_memory_utilization %s; weights %s GiB (%s), minimum KV cache %s GiB (%s)" % (
        share, model.get("weights_gib"), model.get("weights_source") or "?", model.get("min_kv_gib"),
        model.get("min_kv_source") or "?")]
    reasons = [str(line) for line in plan.get("reasoning") or []]
    return [], notes, reasons


def paste(records):
    """The inventory lines to paste: the figures read from the model (group_vars when every host agrees)."""
    figures = {}
    for host, record in sorted(records.items()):
        memory = (record or {}).get("memory") or {}
        model = memory.get("model") or {}
        if not memory.get("ok", True) or not model:
            continue
        for key, source in (("weights_gib", "weights_source"), ("min_kv_gib", "min_kv_source")):
            if model.get(key) is not None and not str(model.get(source) or "").startswith("memory_guard_"):
                figures.setdefault("memory_guard_" + key, {})[host] = model[key]
    group, per_host = [], {}
    for name in ("memory_guard_weights_gib", "memory_guard_min_kv_gib"):
        values = figures.get(name) or {}
        if not values:
            continue
        if len(set(values.values())) == 1:
            group.append("%s: %s" % (name, list(values.values())[0]))
        else:
            for host, value in values.items():
                per_host.setdefault(host, []).append("%s: %s" % (name, value))
    shares = []
    for host, record in sorted(records.items()):
        plan = (((record or {}).get("memory") or {}).get("plan") or {})
        if plan.get("gpu_memory_utilization") is not None:
            shares.append("#   %s: %s" % (host, plan["gpu_memory_utilization"]))
    lines = []
    if group:
        lines += ["# group_vars/gb10.yml (read from the model's files; vLLM logs its own figures after a start)"] + group
    for host in sorted(per_host):
        lines += ["# host_vars/%s.yml" % host] + per_host[host]
    if shares:
        lines += ["# The memory guard computes each host's vllm_gpu_memory_utilization at every run; pin it only to "
                  "hold it (then it is checked, not computed):"] + shares
    return "\n".join(lines)


def _stop(text):
    return str(text).strip().rstrip(".")


def inventory_verdict(found):
    """Problems of the inventory - deploy.yml's layout check and inventory variable check - from ``found``.

    ``found``: ``{ok, errors, msg}`` (``layout_check``'s errors: each message names the variable or host
    and what to change), or None when the check did not run. An error without a list (another task of
    the layout entry point refused) is its message.
    """
    if not found or found.get("ok", True):
        return []
    errors = [error for error in found.get("errors") or [] if isinstance(error, dict) and error.get("message")]
    if errors:
        return [_problem(_stop(" ".join(str(error["message"]).split())), "") for error in errors]
    return [_problem(_own(found.get("msg") or "the inventory check failed"), "")]


def _unit_words(topology):
    return "%s is active" % tr.UNITS.get(topology, topology)


def topology_verdict(topology, sources=(), now=None, playbook_dir=None):
    """``(problems, notes)`` of what an engine host is on, next to the topology (and model) the inventory asks for.

    ``topology``: ``{seen, topology, model}`` - ``seen`` the ``topology_record`` module's result on the host
    (read with the engine units), ``topology`` the inventory's, ``model`` that topology's model directory.
    The judgement is deploy.yml's (``_topology_record.state_of``, ``model_state``): the host is on the
    topology whose engine unit runs, else the one its record names; nothing deployed yet (no record,
    nothing runs) is a first deploy, not a problem. Each problem names the switch playbook or the
    inventory line that ends it; ``playbook_dir`` (the run's) names playbooks as the operator runs them.
    """
    deploy = playbook_name("deploy.yml", playbook_dir)
    topology = topology or {}
    seen = topology.get("seen") or {}
    wanted = topology.get("topology")
    if not seen or seen.get("skipped") or wanted not in tr.TOPOLOGIES:
        return [], []
    if seen.get("failed") or seen.get("unreachable"):
        return [_problem("what this host runs could not be read (%s)" % _stop(seen.get("msg") or "topology_record failed"),
                         "check that systemctl answers and that %s is readable" % tr.PATH)], []
    now = time.time() if now is None else now
    record = seen.get("record")
    running = seen.get("runs") if seen.get("runs") in tr.TOPOLOGIES else None
    where = tr.inventory_file(sources)
    asks = "the inventory asks for %s (`topology: %s`)" % (wanted, wanted)
    state = tr.state_of(record, wanted, running)
    problems, notes = [], []
    if state == tr.ABSENT:
        notes.append("topology: nothing deployed yet (no record, no engine runs): %s brings it to %s" % (deploy, wanted))
    elif state == tr.AGREES:
        notes.append("topology %s as the inventory says (%s)" % (
            wanted, "%s, recorded %s" % (_unit_words(running), (record or {}).get("topology") or "nowhere")
            if running else "recorded; no engine runs now"))
    elif state == tr.DIFFERS:
        on = running or record["topology"]
        if running:
            if record is None:
                said = "; it has no topology record"
            elif record.get("topology") != running:
                said = "; its record says %s" % (record.get("topology") or "nothing readable")
            else:
                said = ""
            what = "runs %s (%s%s), but %s: %s would refuse it" % (on, _unit_words(on), said, asks, deploy)
        else:
            what = "is on %s by its record (%s; no engine runs now), but %s: %s would refuse it" % (
                on, tr.describe(record, now), asks, deploy)
        problems.append(_problem(what, "to keep %s, change the line to `topology: %s` in %s; to go to %s, run %s "
                                       "(drained, gated, rolled back on failure)"
                                 % (on, on, where, wanted, tr.switch_command(wanted, sources, playbook_dir))))
    else:
        path = (record or {}).get("path") or tr.PATH
        problems.append(_problem(
            "its topology record %s cannot be read (%s) and no engine runs: %s cannot tell which topology it "
            "is on and would refuse it" % (path, (record or {}).get("error") or "?", deploy),
            "if it is on %s, remove %s; if it is on %s, change the line to `topology: %s` in %s"
            % (wanted, path, tr.other(wanted), tr.other(wanted), where)))
    model = topology.get("model")
    if tr.model_state(record, wanted, model) == tr.DIFFERS:
        recorded, variable = record["model"], tr.MODEL_VARIABLES.get(wanted, "vllm_model")
        args = " ".join("-i " + source for source in [s for s in sources or [] if s] or ["inventory/<site>"])
        way = ("run ansible-playbook %s %s -e switch_model=%s (one replica at a time, gated)"
               % (args, playbook_name("switch-model.yml", playbook_dir), model) if wanted == "replicas" else
               "run %s with -e %s=true (the split stops to change its model whichever way)" % (deploy, tr.MODEL_OVERRIDE))
        problems.append(_problem(
            "its engine was brought to %s (by %s), but the inventory's %s is %s: %s would refuse it"
            % (recorded, record.get("playbook") or "a playbook", variable, model, deploy),
            "to keep it, set `%s: %s` in %s; to go to %s, %s" % (variable, recorded, tr.model_file(sources), model, way)))
    return problems, notes


def topology_conflicts(records, sources=(), playbook_dir=None):
    """``{host, what, fix}`` for engine hosts whose records and engine units disagree, with each other or with
    themselves (``_topology_record.compare``'s words), among the hosts whose topology was read."""
    seen, wanted = {}, None
    for host in sorted(records):
        topology = (records[host] or {}).get("topology") or {}
        result = topology.get("seen") or {}
        if result and not (result.get("skipped") or result.get("failed") or result.get("unreachable")):
            seen[host] = result
            wanted = wanted or topology.get("topology")
    if not seen:
        return []
    view = tr.compare(list(seen), seen)
    if view["agrees"]:
        return []
    running = view.get("running")
    if running in tr.TOPOLOGIES and running == wanted:
        fix = ("the hosts run %s, as the inventory says: %s writes that record again on every engine host"
               % (running, playbook_name("deploy.yml", playbook_dir)))
    else:
        fix = ("bring every engine host to one topology (a host on another one than the inventory's is named with its "
               "own fix); %s then records it on every engine host (%s shows each host's "
               "record and units)" % (playbook_name("deploy.yml", playbook_dir), playbook_name("status.yml", playbook_dir)))
    problems = []
    for sentence in view["disagreements"]:
        words = set(sentence.replace(",", " ").replace("'s ", " ").replace(":", " ").split())
        named = [host for host in seen if host in words]
        problems.append({"host": " ".join(named), "what": "the engine hosts disagree: %s" % sentence, "fix": fix})
    return problems


def groupings_lines(plan):
    """The site's engine groupings as ``kv_cache_plan`` planned them for the site check (its action plugin's result:
    the model an engine group serves, the engine hosts' count, the sweeps saved on the controller): a title, the table
    (one row per grouping), the sweeps it matched, or why there is no table. Never a problem: the plan advises what to
    run, the switch playbooks check what they run."""
    if not plan:
        return []
    read = plan.get("site_read") or {}
    if plan.get("failed") or not plan.get("groupings_table"):
        why = _own(plan.get("msg") or "no model directory to read (vllm_split_model or vllm_model is a hub name)")
        return ["engine groupings: not planned (%s)" % why]
    groupings = plan.get("groupings") or []
    hosts = sum(groupings[0]["sizes"]) if groupings else read.get("engine_hosts")
    lines = ["engine groupings of %s engine host(s) for %s (max_model_len %s; kv_cache_plan, one row per grouping):"
             % (hosts, read.get("model_dir") or "the model", "{:,}".format(plan.get("max_model_len") or 0))]
    lines += list(plan["groupings_table"])
    sweeps = read.get("sweeps")
    if sweeps is not None:
        lines.append("sweeps read: %s" % (", ".join(sweeps) if sweeps else "none (the concurrency tuning saves one per "
                                                                           "engine group it sweeps)"))
    return lines


def report(records, shared_problems=(), engine_group="engine", inventory=None, sources=(), now=None, playbook_dir=None):
    """``{ok, inventory: {ok, problems}, hosts: {host: {ok, problems, notes, reasons}}, message, paste}``.

    ``records``: every host's record. ``shared_problems``: ``{host, what, fix}`` judged across hosts (the
    model copies, the link, an image name of several builds, the hosts' topologies); each is filed under
    every host it names. ``inventory``: deploy.yml's inventory checks' findings (:func:`inventory_verdict`),
    None when they did not run. ``sources``: the run's inventory sources, to name the file and the
    commands in a fix; ``now``: epoch seconds, for the age of a record; ``playbook_dir``: the run's, to name
    the playbooks as the operator runs them (``_playbook_name``).
    """
    deploy = playbook_name("deploy.yml", playbook_dir)
    hosts = {}
    for host in sorted(records):
        record = records[host] or {}
        problems, notes, reasons = [], [], []
        reach = record.get("reach") or {}
        if not reach.get("ok"):
            problems.append(_problem("not reachable with sudo: %s" % ((reach.get("msg") or "no answer").strip()),
                                     "check ansible_host, ansible_user and the SSH key, and that the user may sudo "
                                     "(without a password, or pass --ask-become-pass)"))
            hosts[host] = {"ok": False, "problems": problems, "notes": notes, "reasons": reasons}
            continue
        notes.append("reachable, sudo works")
        groups = record.get("groups") or []
        runtime = record.get("runtime") or {}
        engine = engine_group in groups
        facts = record.get("facts") or {}
        if engine:
            notes.append(os_line(facts, bool(runtime.get("gpus")) and runtime.get("runtime") == "container"))
        else:
            notes.append("OS %s %s %s" % (facts.get("distribution") or "?", facts.get("distribution_version") or "",
                                          facts.get("architecture") or "?"))
        for verdict in (time_verdict(facts, record.get("info")), ports_verdict(record.get("info"))):
            problems += verdict[0]
            notes += verdict[1]
        if engine:
            image = record.get("image") or {}
            for verdict in (runtime_verdict(runtime, record.get("info")), image_verdict(image),
                            gpu_verdict(runtime, record.get("gpu"), image.get("ok", True))):
                problems += verdict[0]
                notes += verdict[1]
            found, more, reasons = memory_verdict(record.get("memory"))
            problems += found
            notes += more
            found, more = topology_verdict(record.get("topology"), sources, now, playbook_dir)
            problems += found
            notes += more
        hosts[host] = {"ok": not problems, "problems": problems, "notes": notes, "reasons": reasons}
    for problem in shared_problems or []:
        named = [h for h in hosts if h in str(problem.get("host") or "").replace(",", " ").replace(" and ", " ").split()]
        for host in named or list(hosts):
            hosts[host]["problems"].append(_problem(problem["what"], problem["fix"]))
            hosts[host]["ok"] = False
    unready = sum(1 for h in hosts.values() if not h["ok"])
    said = "every host is ready" if not unready else "%d of %d hosts have problems" % (unready, len(hosts))
    found = inventory_verdict(inventory)
    lines = ["Site check: %s" % said]
    if found:
        # A deploy refuses these before it contacts a host: first, and the check is not passed.
        hosts_said = "every host is ready otherwise" if not unready else said
        lines = ["Site check: the inventory has %d problem%s (%s refuses it); %s"
                 % (len(found), "" if len(found) == 1 else "s", deploy, hosts_said), "inventory: problem"]
        lines += ["  - %s.%s" % (problem["what"], " Fix: %s." % problem["fix"] if problem["fix"] else "")
                  for problem in found]
    elif inventory is not None:
        lines.append("inventory: ok (%s's layout and inventory variable checks pass)" % deploy)
    for host, verdict in hosts.items():
        if verdict["ok"]:
            lines.append("%s: ok (%s)" % (host, "; ".join(verdict["notes"])))
        else:
            lines.append("%s: problem" % host)
            for problem in verdict["problems"]:
                lines.append("  - %s.%s" % (problem["what"], " Fix: %s." % problem["fix"] if problem["fix"] else ""))
    planned = next(((records[host] or {}).get("groupings") for host in sorted(records)
                    if (records[host] or {}).get("groupings")), None)
    return {"ok": not found and all(h["ok"] for h in hosts.values()), "inventory": {"ok": not found, "problems": found},
            "hosts": hosts, "message": "\n".join(lines), "paste": paste(records), "groupings": groupings_lines(planned)}
