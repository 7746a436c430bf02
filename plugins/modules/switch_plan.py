#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: switch_plan
short_description: What a topology switch or a rolling upgrade decides, from what the engine and proxy hosts say
version_added: 0.1.0
description:
  - The decisions of C(playbooks/switch.yml) (C(switch-to-replicas.yml), C(switch-to-split.yml)) as one read-only
    computation, so the playbook only acts on them. Run it on the controller once (C(run_once), C(delegate_to) C(localhost))
    with what the play read from the hosts; call it again as the run learns more (O(incumbent_score) after the incumbent
    is scored, O(failed) after the new engines started and after the gate).
  - Whether there is anything to do (RV(on_target)), whether a re-run finishes a switch an interruption left with engines
    drained (RV(heal), RV(heal_hosts)) or owes the gate of a switch killed after it admitted its engines (RV(owed_gate)),
    which topology serves now (RV(incumbent)), whether the new topology is gated on its
    tool calling (RV(gated)), the announcement, which engines the gate tests (RV(gate_hosts)), whether to roll back
    (RV(rollback)), which engines rejoin the proxy (RV(undrain)) and which the proxy must have in rotation
    (RV(expected_in_rotation)).
  - An engine host no longer in the run (not in O(play_hosts) - unreachable, or dropped after a failure) is lost
    (RV(lost_hosts)) - it counts as failed, is never taken off the proxy's drain list, and the old topology comes back
    only where it can without it (each replica on its own host; the split needs every engine host). In a gated switch an
    engine rejoins the proxy only with a passing verdict of its own in O(notes) (the split - rank 0's), so no verdict is
    a failure.
  - A gated run whose gate has no bar - O(min_score) at 0 and no incumbent score - is refused (RV(refusal)); not when the
    incumbent's score is one a run would measure first (C(would_measure) in O(incumbent_score), check mode).
  - For a dry run (C(switch_dry_run), C(--check)), RV(dry_run) says what a run would do, one line each.
  - With O(procedure=record), at the end of a switch once every host's outcome is known, what each engine host's
    topology record is to say (RV(write), RV(unrecorded)), one decision for every host from what each one runs now.
  - With O(procedure=move), the decisions of C(playbooks/move-groups.yml) - one group move (issue 37) from the grouping
    the engine units and records say runs (C(_group_move.current_grouping)) toward O(move_to) (else O(engine_groups)) -
    C(_group_move.move_plan)'s keys, the keys of a switch that the C(topology_switch) role's steps read (RV(on_target),
    RV(gated), RV(gate_hosts), RV(api_engines), RV(rollback), RV(undrain), RV(proxy_drain), RV(expected_in_rotation),
    ...), RV(views) (each engine host's own part of the move) and RV(refusal) (a target that is not a grouping of the
    engine hosts, a host running both units, an API host of the target the proxy does not balance to, a gate with no bar).
    With O(procedure=record) and a move's O(plan), every engine host's record of the grouping that runs (RV(write)).
  - With O(procedure=upgrade), the decisions of C(playbooks/switch-model.yml) - which replicas to upgrade (RV(todo)),
    whether the upgrade stops (RV(stop)), which upgraded replicas go back to the old build (RV(roll_back)), and the
    announcement.
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  procedure:
    description:
      - V(switch) for a topology switch, V(upgrade) for a rolling model or image upgrade, V(record) for the topology
        records at the end of a switch or a group move, V(move) for a group move.
      - Left out, with O(read_hosts), the action plugin reads C(switch_procedure) (C(move-groups.yml) sets it to V(move)),
        else V(switch). (A replica's turn in the rolling restart is
        M(factory_floor.llm.rolling_restart_plan)'s.)
    type: str
    choices: [switch, upgrade, record, move]
    default: switch
  topology:
    description: The topology the switch goes to (required with O(procedure=switch)).
    type: str
    choices: [replicas, split]
  engines:
    description: The engine hosts (inventory names, in inventory order).
    type: list
    elements: str
    required: true
  head:
    description: The split's rank 0, which serves its API (C(vllm_split_head); required with O(procedure=switch)).
    type: str
  units:
    description:
      - Per engine host, the states C(systemctl is-active vllm-replica.service vllm-split.service) printed, in that order
        (its C(stdout_lines)). A host missing here runs neither.
    type: dict
    default: {}
  drains:
    description:
      - What each proxy host's drain files say (the C(nginx_proxy) role's C(drained) entry point, C(nginx_proxy_drained)),
        one dict of engine host to holder per proxy host. A holder C(switch-to-*) is a switch's own drain.
    type: list
    elements: dict
    default: []
  gated:
    description: Whether the target topology is gated on its tool calling (the C(tool_gate) role's C(tool_gate_gated)).
    type: bool
    default: false
  startup:
    description:
      - The last measured start-ups, seconds by name (C(replicas), C(split), C(replicas_gate), C(split_gate)), for the
        announcement (the C(maintenance_window) role's C(maintenance_window_startup)).
    type: dict
    default: {}
  incumbent_score:
    description:
      - The incumbent build's stored score (the C(tool_gate) role's C(tool_gate_incumbent) on the host of RV(incumbent)), for the
        announcement. Empty when nothing serves or it is not known yet.
    type: dict
    default: {}
  known_build:
    description:
      - (switch) Whether the new topology's build has a passing tool-calling score stored on this site's engine hosts (the
        C(tool_gate) role's C(tool_gate_known) on the host of RV(incumbent) - C(known), C(score) in percent of the suite's
        cases, C(measured_at), C(why) in words), for RV(gate_mode). Empty when it was not looked up.
    type: dict
    default: {}
  failed:
    description: The engine hosts whose start or gate failed in this run so far.
    type: list
    elements: str
    default: []
  replicas:
    description:
      - (upgrade) Per engine host, C(running) (the model directory its vLLM lists as root), C(running_image) (its
        container's image ID, empty with the venv runtime), and the candidate's C(model), C(image) and C(image_id).
      - Or the candidate's under C(candidate), next to C(old) (the build a failed replica gets back), as the
        C(model_upgrade) role's C(check) entry point notes them in C(model_upgrade_replica).
    type: dict
    default: {}
  target:
    description: (upgrade) What the replicas are upgraded to, in words. Empty, worded from O(model) and O(image).
    type: str
    default: ""
  model:
    description: (upgrade) The new model directory the operator asked for (C(switch_model)); empty for none.
    type: str
    default: ""
  image:
    description: (upgrade) The new vLLM image the operator asked for (C(switch_image)); empty for none.
    type: str
    default: ""
  incumbents:
    description: (upgrade) Per engine host, the stored score of the build it serves (the C(tool_gate) role's C(tool_gate_incumbent)).
    type: dict
    default: {}
  notes:
    description:
      - (upgrade) Per engine host, what it noted so far (the C(maintenance_window) role's C(maintenance_window_host) -
        C(failed), C(upgraded), C(restore_failed)).
      - (switch) The same, per engine host - a host whose notes say C(failed) counts as in O(failed); its C(events)
        (epoch seconds C(old_stopped), C(serving), C(gate_done)) give RV(startup_records).
    type: dict
    default: {}
  play_hosts:
    description:
      - (switch) The hosts still in the run (the magic variable C(ansible_play_hosts)); an engine host of O(engines) that
        is not among them is lost (RV(lost_hosts)). Not given, every engine host is in the run.
    type: list
    elements: str
  min_score:
    description:
      - (switch, upgrade) C(tool_gate_min_score), points (percent of the suite's cases), as the C(tool_gate) role
        holds it (its fact C(tool_gate_bar)). With 0 and no incumbent score the gate has no bar and the run is refused
        (RV(refusal)). Not given, not checked.
    type: float
  playbook_dir:
    description:
      - (switch, upgrade) The directory of the playbook that runs (the magic variable C(playbook_dir)), to name a playbook
        in RV(refusal) the way the operator runs it - C(factory_floor.llm.tool_gate_spread) from an installed collection
        (and when empty), C(playbooks/tool-gate-spread.yml) from a checkout (the P(factory_floor.llm.playbook_name#filter)
        filter's rule).
    type: str
    default: ""
  records:
    description:
      - (switch) Per engine host, the M(factory_floor.llm.topology_record) result there (read with its C(units)), for
        RV(records) - their disagreements, named in the announcement - and, on the target, RV(records_behind) and
        RV(owed_gate).
      - (record) The same, read once every host's outcome is known.
    type: dict
    default: {}
  plan:
    description: (record) The switch's final decision (this module's result with O(procedure=switch)).
    type: dict
    default: {}
  models:
    description:
      - The model directory each topology's engines serve, by topology - C(replicas) the inventory's C(vllm_model),
        C(split) its C(vllm_split_model) (C(vllm_model) when not set); the C(vllm) role's C(_vllm_topologies) holds both.
      - (switch) For RV(dry_run) - its C(Starts:) line names the model directory the new topology serves, and says so
        plainly when it is not the one the topology that serves now (RV(incumbent)) serves. Without the target's, the
        line names none.
      - (record) The model each host's topology record names (RV(write)).
    type: dict
    default: {}
  served_model_name:
    description:
      - (switch) The name clients ask for (C(vllm_served_model_name)), the same for both topologies; RV(dry_run) names it
        next to the model directory. Empty, not named.
    type: str
    default: ""
  move_to:
    description:
      - (move) The target grouping, a list of groups, each a list of inventory names of engine hosts (rank 0 first), every
        engine host in exactly one (the playbook's C(move_to)). Empty, O(engine_groups).
    type: list
    elements: list
    default: []
  engine_groups:
    description: (move) The declared grouping, C(site_engine_groups) - the target without O(move_to), and what the proxy's
      members default to (C(nginx_proxy_backends)).
    type: list
    elements: list
    default: []
  members:
    description:
      - (move) The hosts the proxy balances over (C(nginx_proxy_backends)). Not given, each group's first host of
        O(engine_groups), or every engine host when that is empty or a two-topology grouping (C(proxy_members)).
    type: list
    elements: str
  kv_tokens:
    description: (move) KV tokens a group holds, by group size (tokens; C(kv_cache_plan)'s C(plan_groupings)), for the capacity.
    type: dict
    default: {}
  read_hosts:
    description:
      - Read by the module's action plugin, on the controller - for every option the task does not give, what the hosts
        said so far, from C(hostvars) (C(plugins/module_utils/_host_inputs.py)).
      - (switch) O(units) (each engine host's registered C(__vllm_switch_units)), O(records) (C(__vllm_switch_records_seen)),
        O(notes) (C(maintenance_window_host)), O(gated) and O(min_score) (the first engine host's C(tool_gate_gated) and
        C(tool_gate_bar)), O(incumbent_score) and O(known_build) (C(tool_gate_incumbent) and C(tool_gate_known) on
        O(incumbent_host)) and O(drains) (each host of
        O(proxies)' C(nginx_proxy_drained)).
      - (upgrade) O(incumbents) (each engine host's C(tool_gate_incumbent)), O(notes) (C(maintenance_window_host)) and
        O(min_score) (the C(min_score) of the first engine host's C(tool_gate_bar) that is set).
      - (record) O(records) (each engine host's registered C(__vllm_switch_record_seen)).
      - (move) As for a switch, and O(move_to) (C(move_to)), O(engine_groups) (C(site_engine_groups)), O(members)
        (C(nginx_proxy_backends)) where defined.
      - (switch, record) Also the variables the switch runs with, as the task sees them, for every option the task does
        not give - O(topology) (C(switch_to)), O(engines) and O(proxies) (C(groups[site_engine_group]),
        C(groups[site_proxy_group])), O(head) (C(vllm_split_head), else the first engine host), O(incumbent_host) (the
        previous C(vllm_switch_plan)'s), O(startup) (C(maintenance_window_startup)), O(play_hosts)
        (C(ansible_play_hosts)), O(playbook_dir), O(models) (C(_vllm_topologies)), O(served_model_name)
        (C(vllm_served_model_name)); for the records O(plan) (C(vllm_switch_plan)). An undefined variable leaves the
        option's default, except for O(topology), O(engines), O(proxies) and O(plan), where it is an error.
    type: bool
    default: false
  proxies:
    description: With O(read_hosts), the proxy hosts (inventory names) whose drains the plugin reads.
    type: list
    elements: str
    default: []
  incumbent_host:
    description:
      - (switch) With O(read_hosts), the host of the incumbent the previous decision named (its RV(incumbent)'s C(host));
        empty before the first one. Its stored tool-calling score is O(incumbent_score).
    type: str
    default: ""
author:
  - Factory Floor maintainers (@factory-floor)
"""

EXAMPLES = r"""
- name: Decide which replicas an upgrade changes
  factory_floor.llm.switch_plan:
    procedure: upgrade
    engines: "{{ groups['gb10'] }}"
    replicas:
      spark-1: {running: /models/Old, running_image: "", model: /models/New, image: "", image_id: ""}
    target: /models/New
  delegate_to: localhost
  run_once: true
  register: upgrade

- name: Decide the switch
  factory_floor.llm.switch_plan:
    topology: replicas
    engines: "{{ groups['gb10'] }}"
    head: "{{ vllm_split_head | default(groups['gb10'][0]) }}"
    units: "{{ dict(groups['gb10'] | zip(groups['gb10'] | map('extract', hostvars, ['__units', 'stdout_lines']))) }}"
    drains: "{{ groups['proxy'] | map('extract', hostvars, 'nginx_proxy_drained') | list }}"
  delegate_to: localhost
  run_once: true
  register: plan

- name: Say what will happen
  ansible.builtin.debug:
    msg: "{{ plan.announcement }}"
"""

RETURN = r"""
topology:
  description: The target topology.
  returned: with O(procedure=switch)
  type: str
  sample: replicas
other:
  description: The other topology (the one a rollback goes back to).
  returned: with O(procedure=switch)
  type: str
  sample: split
role:
  description: The target topology's engine role (C(vllm_replica), C(vllm_split)).
  returned: with O(procedure=switch)
  type: str
  sample: vllm_replica
unit:
  description: The target topology's unit.
  returned: with O(procedure=switch)
  type: str
  sample: vllm-replica.service
other_unit:
  description: The other topology's unit.
  returned: with O(procedure=switch)
  type: str
  sample: vllm-split.service
roles:
  description: Each topology's engine role, by topology.
  returned: with O(procedure=switch)
  type: dict
  sample: {"replicas": "vllm_replica", "split": "vllm_split"}
units:
  description: Each topology's unit, by topology.
  returned: with O(procedure=switch)
  type: dict
  sample: {"replicas": "vllm-replica.service", "split": "vllm-split.service"}
incumbent_score:
  description: O(incumbent_score), for the report.
  returned: with O(procedure=switch)
  type: dict
on_target:
  description: Every engine host runs the target topology's unit and not the other's.
  returned: with O(procedure=switch)
  type: bool
heal:
  description: On the target with engines an interrupted switch left drained; the run finishes that switch.
  returned: with O(procedure=switch)
  type: bool
heal_hosts:
  description: The engines an interrupted switch left drained (empty unless on the target).
  returned: with O(procedure=switch)
  type: list
  elements: str
records_behind:
  description:
    - (switch) On the target (RV(on_target)) with no engine drained by a switch (not RV(heal)), every engine host's
      topology record (O(records)) names the other topology or none - the records a switch writes at its end were never
      written. False without O(records).
  returned: with O(procedure=switch)
  type: bool
owed_gate:
  description:
    - (switch) RV(records_behind) and the target is gated (O(gated)) - a switch that admitted its engines at the
      cut-over (RV(gate_mode) C(after_admission)) was killed before its gate's verdict, so they serve ungated. The re-run
      owes that gate - RV(gated) true, RV(gate_mode) C(after_admission), RV(gate_hosts) every engine that serves the API
      - and runs it while they serve, stopping nothing first, against the build's own last passing score (the
      C(tool_gate) role's C(tool_gate_compare_own_build)); a failure drains them again and rolls back
      (RV(proxy_drain), RV(rollback)), a pass lets the run write the records. The announcement and RV(dry_run) say so.
  returned: with O(procedure=switch)
  type: bool
  sample: true
heal_holders:
  description: The drain holders (C(switch-to-*)) the interrupted runs wrote.
  returned: with O(procedure=switch)
  type: list
  elements: str
drained_other:
  description: Engines drained by anyone else (engine host to holder, C("") for none); left alone.
  returned: with O(procedure=switch)
  type: dict
incumbent:
  description: The topology serving now and the host of its API engine (C(topology) and C(host) empty when on the target or when nothing serves).
  returned: with O(procedure=switch)
  type: dict
  sample: {"topology": "split", "host": "spark-1"}
gated:
  description: The new (or healed, or owed-gate, RV(owed_gate)) engines are gated on their tool calling.
  returned: with O(procedure=switch)
  type: bool
api_engines:
  description: The target's engines that serve the API (every replica, or the split's rank 0).
  returned: with O(procedure=switch)
  type: list
  elements: str
announcement:
  description:
    - The sentence the switch or the upgrade prints before anything changes.
  returned: with O(procedure=switch) or O(procedure=upgrade)
  type: str
dry_run:
  description:
    - What a run would do, one line each, for a dry run to print (C(-e switch_dry_run=true) or C(--check)) -
      (switch) what stops, what starts and with which model directory (O(models), said plainly when it is not the one
      that serves now), how long the model is away (from O(startup), the start-ups measured on these
      hosts), whether and against what the new engines are gated, what a failure does; (upgrade) which replicas restart
      and in what order, how long each is away, each candidate's bar.
  returned: with O(procedure=switch) or O(procedure=upgrade)
  type: list
  elements: str
  sample:
    - "Dry run of the switch to split: this is what a run would do. Nothing was changed, no tool-calling test was sent,
      no lock was taken."
    - "Stops: vllm-replica.service on spark-a, spark-b (...)."
    - "Starts: vllm-split.service on spark-a (rank 0, serves the API) and spark-b (rank 1) with /opt/models/tiny-random
      as lab-chat, rendered and checked before anything stops; its watchdog after it serves. Another model: the split
      serves /opt/models/tiny-random (vllm_split_model), not /opt/models/SmolLM2-135M-Instruct which the replicas serve
      now, under the same name lab-chat: clients that ask for lab-chat get its answers."
    - "The model is away: about 7.6 min - the split start-up last measured on these hosts (7.0 min) plus its
      tool-calling gate (35 s last time)."
    - "Gated: no - split is not in tool_gate_topologies: the new engines take traffic untested."
gate_hosts:
  description: The engines the tool-calling gate tests, given O(failed).
  returned: with O(procedure=switch)
  type: list
  elements: str
failed_hosts:
  description: O(failed), in inventory order, engine hosts only (not named C(failed), which Ansible reads as the task failing).
  returned: with O(procedure=switch)
  type: list
  elements: str
rollback:
  description:
    - A new engine failed (RV(failed_hosts)) and the run is a switch (or its owed gate, RV(owed_gate)), not the finishing
      of an interrupted one (RV(heal)); the old topology is put back.
  returned: with O(procedure=switch)
  type: bool
serving_topology:
  description: The topology that serves after the run (the other one on a rollback).
  returned: with O(procedure=switch)
  type: str
joined:
  description: A gated switch that went through; every new engine rejoins the proxy after the gate.
  returned: with O(procedure=switch)
  type: bool
undrain:
  description: The engines to take off the proxy's drain list after the gate.
  returned: with O(procedure=switch)
  type: list
  elements: str
gate_mode:
  description:
    - When the tool-calling gate runs - C(before_admission) (the new engines join the proxy once they passed; the model
      is away meanwhile) or C(after_admission) (the new build passed the gate on this site's engine hosts before, see
      O(known_build), and C(tool_gate_admit_known_builds) is true - the engines join as soon as they serve and are gated
      while they serve); empty when the switch is not gated.
  returned: with O(procedure=switch)
  type: str
  sample: after_admission
gate_split:
  description:
    - The engines the gate's suite is split over (RV(gate_hosts) when it tests two or more before they join the proxy -
      the replicas of a build not gated here, RV(gate_mode) C(before_admission)); each runs its share one case at a time,
      all at once, and the verdict is over every case (the C(tool_gate) role's C(tool_gate_share_hosts)). Empty - each
      engine runs the whole suite (one engine, after admission, or finishing an interrupted switch).
  returned: with O(procedure=switch)
  type: list
  elements: str
gate_mode_why:
  description: Why RV(gate_mode), in words (the announcement and the dry run say it).
  returned: with O(procedure=switch)
  type: str
  sample: the build 3f1c0a9e2b7d4c55 passed the gate here on 2026-12-01T10:02:11Z (spark-a) with score 94.4
known_build:
  description: O(known_build), for the report.
  returned: with O(procedure=switch)
  type: dict
admit_at_cut_over:
  description: The cut-over takes the engines off the drain list, so each new one joins the proxy as soon as it serves
    (an ungated switch, or RV(gate_mode) C(after_admission)).
  returned: with O(procedure=switch)
  type: bool
proxy_drain:
  description:
    - The drain list's change after the gate, on every proxy host - C(hosts) (inventory names) and C(state) C(absent)
      (RV(undrain), which passed) or C(present) (after admission, the engines taken out again because one failed; on a
      rollback every engine host, before the old topology comes back).
  returned: with O(procedure=switch)
  type: dict
  sample: {hosts: [spark-a, spark-b], state: present}
heal_ready:
  description: Finishing an interrupted switch, the drained engines that serve and passed the gate (they rejoin).
  returned: with O(procedure=switch)
  type: list
  elements: str
heal_left:
  description: Finishing an interrupted switch, the drained engines that stay drained (they did not serve or failed the gate).
  returned: with O(procedure=switch)
  type: list
  elements: str
expected_in_rotation:
  description: The engines of RV(serving_topology) the proxy must have in rotation (not those in RV(heal_left)).
  returned: with O(procedure=switch)
  type: list
  elements: str
lost_hosts:
  description:
    - (switch) The engine hosts no longer in the run (not in O(play_hosts)), in inventory order; they are in
      RV(failed_hosts) too, never in RV(undrain) nor in RV(expected_in_rotation).
  returned: with O(procedure=switch)
  type: list
  elements: str
  sample: [spark-b]
refusal:
  description:
    - Why the run stops before anything changes - a gated run whose gate has no bar (O(min_score) at 0 and no incumbent
      score; any candidate that passes one case would pass). Empty otherwise.
  returned: with O(procedure=switch) or O(procedure=upgrade)
  type: str
records:
  description:
    - (switch) The engine hosts' topology records next to what their units run (C(hosts), C(running), C(recorded),
      C(agrees), C(disagreements)), from O(records); null without it.
  returned: with O(procedure=switch)
  type: dict
write:
  description:
    - (record) Per engine host whose record is written, C(topology) (what its engine unit runs), C(model) (that
      topology's, O(models)) and C(note) (a rolled-back switch says so); after a move also C(grouping), C(group) and
      C(rank) (its place in the grouping that runs).
  returned: with O(procedure=record)
  type: dict
  sample: {"spark-a": {"topology": "replicas", "model": "/models/New", "note": ""}}
unrecorded:
  description: (record) Per engine host whose record is not written, why (lost, could not be read, runs no engine or both).
  returned: with O(procedure=record)
  type: dict
  sample: {"spark-b": "lost from the run (unreachable or failed)"}
startup_records:
  description:
    - After a switch that went through (not RV(on_target), not RV(rollback)), per engine host whose engine served, the
      start-up this run measured, seconds by name, for the next announcement - C(<topology>) from its old engine's stop to
      its new one serving, C(<topology>_gate) from serving to the gate's verdict when the gate ran. Empty otherwise.
  returned: with O(procedure=switch)
  type: dict
  sample: {"spark-a": {"replicas": 312.4, "replicas_gate": 41.0}}
move:
  description:
    - The switch as a group move (issue 37; C(plugins/module_utils/_group_move.py)), from the grouping the engine units
      (and records) say runs to the target topology's - the two-topology switch is its two-host case. Its keys -
      C(touched) (hosts), C(hosts) (per host C(stops) and C(starts), each C({topology, unit, group, rank}) or null),
      C(serving) (the groups that keep serving), C(drain) and C(admit) (proxy members), C(capacity) (groups, hosts and
      KV tokens serving during the move, C(before) and C(after) it), C(away), C(gate_hosts), C(rollback) (C(needed),
      the new groups C(stop)ped again, the old groups C(start)ed again, C(hosts), C(lost_groups)), C(after) (the grouping
      once done), C(moves) (every move left, with its capacity), C(announcement), C(dry_run) - are read by no task of a
      switch, whose own keys above decide and keep their words; with O(procedure=move) they are the result's own.
  returned: with O(procedure=switch)
  type: dict
  sample: {"todo": true, "touched": ["spark-a", "spark-b"], "away": true, "drain": ["spark-a"],
           "admit": ["spark-a", "spark-b"], "rollback": {"needed": false}}
current:
  description: (move) The grouping that runs now, as the units and records say (groups in rank order).
  returned: with O(procedure=move)
  type: list
  elements: list
current_grouping:
  description:
    - (move) C(_group_record.running_grouping)'s result - C(grouping), C(idle) (hosts in no group, and why),
      C(recorded), C(agrees), C(disagreements).
  returned: with O(procedure=move)
  type: dict
number:
  description: (move) This move's number in the change, for the words (1; one move per run).
  returned: with O(procedure=move)
  type: int
moves:
  description: (move) Every move left from RV(current) to the target, each with its C(stop), C(start), C(serving), C(away) and C(capacity).
  returned: with O(procedure=move)
  type: list
  elements: dict
remaining:
  description: (move) How many moves are left, this one included (a count).
  returned: with O(procedure=move)
  type: int
touched:
  description: (move) The engine hosts this move stops or starts, in inventory order.
  returned: with O(procedure=move)
  type: list
  elements: str
hosts:
  description: (move) Per touched host, C(stops) and C(starts), each C({topology, unit, group, rank}) or null.
  returned: with O(procedure=move)
  type: dict
serving:
  description: (move) The groups that keep serving during the move.
  returned: with O(procedure=move)
  type: list
  elements: list
drain:
  description: (move) The proxy members drained before the move stops their groups (the stopped groups' API hosts).
  returned: with O(procedure=move)
  type: list
  elements: str
admit:
  description: (move) The proxy members of the new groups that are kept (they join once they serve, or pass the gate).
  returned: with O(procedure=move)
  type: list
  elements: str
capacity:
  description:
    - (move) What serves during the move - C(groups_serving) of C(groups_total), C(hosts_serving) of C(hosts_total),
      C(kv_tokens_serving) (tokens, from O(kv_tokens); null without) - with C(before) and C(after) it.
  returned: with O(procedure=move)
  type: dict
away:
  description: (move) No group serves during the move (the model is away; two hosts, or a model that needs every host).
  returned: with O(procedure=move)
  type: bool
after:
  description: (move) The grouping once the move is done, rolled back where it failed.
  returned: with O(procedure=move)
  type: list
  elements: list
procedure:
  description: (move) V(move), so the steps a move shares with the switch know whose decision it is.
  returned: with O(procedure=move)
  type: str
views:
  description:
    - (move) Per engine host, its own part of the move, in a switch's words - C(in_move) (the move touches it),
      C(topology), C(unit) and C(role) (the unit kind it runs once the move is done), C(other) and C(other_unit) (what it
      ran, which a rollback starts again), C(group) and C(rank) (its place in its new group), C(old_group), C(rollback)
      (its old group comes back on it), C(serving_topology) (what it runs after this decision), C(split_hosts) and
      C(split_head) (the group its split rank rendezvous with, the old one on a rollback; empty for a replica).
      The C(topology_switch) role's C(switch_plan) step sets each host's view over its C(vllm_switch_plan).
  returned: with O(procedure=move)
  type: dict
  sample: {"spark-a": {"in_move": true, "topology": "split", "unit": "vllm-split.service", "group": ["spark-a", "spark-b"],
           "rank": 0, "rollback": false, "split_hosts": ["spark-a", "spark-b"], "split_head": "spark-a"}}
holder:
  description: (move) The holder a move's drain files name (C(move-groups)); a re-run on the target finishes its drains.
  returned: with O(procedure=move)
  type: str
gate_topology:
  description: (move) The unit kind of the first group the move starts, whose C(tool_gate_topologies) entry gates the move.
  returned: with O(procedure=move)
  type: str
move_rollback:
  description: (move) C(_group_move.move_plan)'s rollback - C(needed), C(stop), C(start), C(hosts), C(lost_groups).
  returned: with O(procedure=move)
  type: dict
grouping:
  description: (record, after a move) The grouping that runs now, written on every engine host.
  returned: with a group move's O(plan), for its records
  type: list
  elements: list
todo:
  description: (upgrade) The replicas that do not serve the candidate yet, in inventory order.
  returned: with O(procedure=upgrade)
  type: list
  elements: str
stop:
  description: (upgrade) A replica failed; the ones after it keep the old build.
  returned: with O(procedure=upgrade)
  type: bool
roll_back:
  description: (upgrade) The replicas upgraded in this run that go back to the old build (none when the failed one could not get its old build back).
  returned: with O(procedure=upgrade)
  type: list
  elements: str
target:
  description: (upgrade) What the replicas are upgraded to, in words (O(target), else worded from O(model) and O(image)).
  returned: with O(procedure=upgrade)
  type: str
  sample: /models/New-Build on image vllm/vllm-openai:v0.33.0
report:
  description:
    - (upgrade) What the report needs of the plan (C(factory_floor.llm.switch_report)'s C(plan)) - C(target), C(todo),
      C(old) (the first engine host's old build from O(replicas) - C(model), C(tool_call_parser), C(chat_template),
      C(image), C(image_id); empty when not given), C(switch_model) (O(model)) and C(switch_image) (O(image)).
  returned: with O(procedure=upgrade)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._switch_plan import (move_record_writes, move_switch_plan, move_target,
                                                                                     record_writes, switch_plan, upgrade_plan)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            procedure=dict(type="str", default="switch", choices=["switch", "upgrade", "record", "move"]),
            topology=dict(type="str", choices=["replicas", "split"]),
            engines=dict(type="list", elements="str", required=True),
            head=dict(type="str"),
            units=dict(type="dict", default={}),
            drains=dict(type="list", elements="dict", default=[]),
            gated=dict(type="bool", default=False),
            startup=dict(type="dict", default={}),
            incumbent_score=dict(type="dict", default={}),
            known_build=dict(type="dict", default={}),
            failed=dict(type="list", elements="str", default=[]),
            replicas=dict(type="dict", default={}),
            target=dict(type="str", default=""),
            model=dict(type="str", default=""),
            image=dict(type="str", default=""),
            incumbents=dict(type="dict", default={}),
            notes=dict(type="dict", default={}),
            play_hosts=dict(type="list", elements="str"),
            min_score=dict(type="float"),
            playbook_dir=dict(type="str", default=""),
            records=dict(type="dict", default={}),
            plan=dict(type="dict", default={}),
            models=dict(type="dict", default={}),
            served_model_name=dict(type="str", default=""),
            move_to=dict(type="list", elements="list", default=[]),
            engine_groups=dict(type="list", elements="list", default=[]),
            members=dict(type="list", elements="str"),
            kv_tokens=dict(type="dict", default={}, no_log=False),
            # Read by the action plugin (plugins/action/switch_plan.py), which passes what it reads instead.
            read_hosts=dict(type="bool", default=False),
            proxies=dict(type="list", elements="str", default=[]),
            incumbent_host=dict(type="str", default=""),
        ),
        required_if=[("procedure", "switch", ("topology", "head")), ("procedure", "record", ("plan",)),
                     ("procedure", "move", ("head",))],
        supports_check_mode=True,
    )
    params = module.params
    if params["procedure"] == "upgrade":
        module.exit_json(changed=False, **upgrade_plan(params["engines"], params["replicas"], params["target"],
                                                       params["startup"], params["incumbents"], params["notes"],
                                                       params["model"], params["image"], params["min_score"],
                                                       params["playbook_dir"]))
    if params["procedure"] == "record" and params["plan"].get("procedure") == "move":
        module.exit_json(changed=False, **move_record_writes(params["plan"], params["engines"], params["records"],
                                                             params["head"], params["models"]))
    if params["procedure"] == "record":
        plan = params["plan"]
        missing = [key for key in ("topology", "on_target", "rollback") if key not in plan]
        if missing:
            module.fail_json(msg="plan must be this module's result with procedure switch; it lacks %s" % ", ".join(missing))
        module.exit_json(changed=False, **record_writes(plan, params["engines"], params["records"], params["models"]))
    if params["head"] not in params["engines"]:
        module.fail_json(msg="head %s is not one of the engine hosts %s" % (params["head"], ", ".join(params["engines"])))
    try:
        startup = {name: float(seconds) for name, seconds in params["startup"].items()}
    except (TypeError, ValueError) as exc:
        module.fail_json(msg="startup must map names to seconds: %s" % exc)
    if params["procedure"] == "move":
        target, errors = move_target(params["engines"], params["move_to"], params["engine_groups"])
        try:
            kv_tokens = {int(size): int(tokens) for size, tokens in params["kv_tokens"].items()}
        except (TypeError, ValueError) as exc:
            module.fail_json(msg="kv_tokens must map group sizes to KV tokens: %s" % exc)
        module.exit_json(changed=False, **move_switch_plan(
            params["engines"], params["head"], params["units"], target, params["drains"], params["gated"],
            params["incumbent_score"], params["failed"], params["notes"], params["play_hosts"], params["min_score"],
            params["records"], params["playbook_dir"], kv_tokens, params["members"], params["known_build"],
            errors=errors, declared=params["engine_groups"]))
    try:
        plan = switch_plan(params["topology"], params["engines"], params["head"], params["units"], params["drains"],
                           params["gated"], startup, params["incumbent_score"], params["failed"], params["notes"],
                           params["play_hosts"], params["min_score"], params["records"], params["playbook_dir"],
                           params["models"], params["served_model_name"], params["known_build"])
    except (TypeError, ValueError) as exc:
        module.fail_json(msg="notes' events must be epoch seconds: %s" % exc)
    module.exit_json(changed=False, **plan)


if __name__ == "__main__":
    main()
