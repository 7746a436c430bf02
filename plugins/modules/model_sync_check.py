#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_sync_check
short_description: Plan a model's copy to the engine hosts and refuse one that cannot go right, on the controller
version_added: 0.1.0
description:
  - "The decisions of the C(factory_floor.llm.vllm) role's C(model_sync) entry point (C(playbooks/model_sync.yml)),
    from what every engine host has and holds, read from C(hostvars) on the controller. The role's tasks read the
    targets (M(factory_floor.llm.model_manifest)) and copy (rsync); V(source), V(reach) and V(copies) read the source
    themselves where the task does not pass what it saw, on the host the task runs on (its C(delegate_to), the plan's
    RV(source_host)); V(plan), V(space) connect to no host."
  - "O(check=plan): who sends (O(source) - an engine host of O(engine_group), by default the first, or C(controller)),
    who receives (every other engine host, the source too when O(source_path) differs from O(path)), over which
    address (a target's C(vllm_link_address) when the source is an engine host and both ends have one, else its
    C(ansible_host)) and with which rsync (C(--checksum), C(--partial-dir), C(--copy-links); C(--delete) with
    O(delete), C(--dry-run) with O(dry_run)). Reads each engine host's C(vllm_link_address), C(ansible_host),
    C(ansible_port), C(ansible_user), C(ansible_ssh_private_key_file) and C(ansible_ssh_common_args). Fails, with
    nothing copied, when the copy cannot be planned (RV(ok), RV(errors): the P(factory_floor.llm.model_sync_plan#filter)
    filter's plan; the message lists RV(errors)) or the run leaves out a target (RV(left_out)). Each plan option the
    task leaves out is read from the role's variable, as the task sees it - O(source) from C(model_sync_source), O(path)
    from C(model_sync_path) (empty, the model of C(topology) - C(vllm_model), for the split C(vllm_split_model) where it
    is defined - as the C(vllm) role's C(_vllm_topologies) has it), O(source_path),
    O(delete), O(checksum), O(ssh_user), O(ssh_key_file), O(ssh_args), O(rsync_path) from C(model_sync_<option>),
    O(dry_run) from C(ansible_check_mode), O(play_hosts) from C(ansible_play_hosts)."
  - "O(check=space): fails, naming each target, when a target of O(targets) lacks the room - every file it lacks,
    plus its largest file it has (rsync writes a changed file beside the old one), plus O(margin_bytes), in bytes,
    against the free bytes of the filesystem that holds O(path) (each target's O(listing) C(filesystem)); the
    P(factory_floor.llm.model_sync_space#filter) filter's verdict."
  - "O(check=copies): fails, naming the files and the hosts, when a target's copy (its O(listing)) differs from the
    source's (O(source_manifest); without it the module lists the source's copy, hashed with O(manifest_checksum), and
    fails with that listing's message when it cannot); the P(factory_floor.llm.model_manifest_diff#filter) filter's
    verdict. Returns RV(source_manifest)."
  - "O(check=source): fails when the source's listing (O(source_manifest), unhashed; without it the module lists
    O(source_path) with M(factory_floor.llm.model_manifest)) holds no file at O(source_path), saying where to point
    O(source) instead; with O(source=controller), first fails with the command's message when C(rsync --version) does
    not run there (O(rsync_version); without it the module runs it); returns RV(source_manifest). O(check=reach): fails,
    naming each target and what to set up, when the source could not log in to a target over SSH without a password
    (O(results), the probes' command results, C(item) the plan's target; without them the module runs each target's
    C(probe) of the plan with M(ansible.builtin.command))."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  check:
    description: Which decision (see the description).
    type: str
    required: true
    choices: [plan, space, copies, source, reach]
  engine_group:
    description: The engine hosts' group. Read by V(plan). Default, C(site_engine_group), else C(gb10).
    type: str
  source:
    description:
      - The host that holds the model (C(model_sync_source)) - an engine host, or C(controller); empty for the first
        engine host (V(plan)). For V(copies), the plan's RV(source), to label the source's copy.
    type: str
  path:
    description: The model directory on every target, an absolute path (C(model_sync_path)). V(plan), V(space).
    type: str
  source_path:
    description:
      - Where the model is on the source, an absolute path (C(model_sync_source_path)); empty for O(path) (V(plan)).
        For V(copies) and V(source), the plan's RV(source_path).
    type: str
  delete:
    description: Delete on the targets what the source lacks (C(model_sync_delete), rsync's C(--delete)). V(plan).
    type: bool
  checksum:
    description: Compare files by content (C(model_sync_checksum), rsync's C(--checksum)). V(plan).
    type: bool
  dry_run:
    description: Plan rsync's C(--dry-run) (the run's check mode). V(plan).
    type: bool
  ssh_user:
    description: The user rsync's ssh logs in as on the targets (C(model_sync_ssh_user)); empty for C(ansible_user).
    type: str
  ssh_key_file:
    description: The key file on the source for rsync's ssh (C(model_sync_ssh_key_file)).
    type: str
  ssh_args:
    description: Further ssh options for rsync, a list of words (C(model_sync_ssh_args)). V(plan).
    type: raw
  rsync_path:
    description: rsync's C(--rsync-path) on the targets (C(model_sync_rsync_path)), such as C(sudo -n rsync). V(plan).
    type: str
  targets:
    description: The plan's targets, inventory names. V(space), V(copies).
    type: list
    elements: str
    default: []
  listing:
    description:
      - The name each target's M(factory_floor.llm.model_manifest) result was registered under (read from
        C(hostvars); a target without one holds nothing there, or could not be read). V(space), V(copies).
    type: str
  source_files:
    description: The source's file sizes in bytes by name (its M(factory_floor.llm.model_manifest) C(files)). V(space).
    type: dict
  source_manifest:
    description:
      - The source's M(factory_floor.llm.model_manifest) result - unhashed for V(source), hashed for V(copies). Omitted,
        the module lists the source itself.
    type: dict
  rsync_version:
    description:
      - V(source) with O(source=controller) - the M(ansible.builtin.command) result of C(rsync --version) on the
        controller. Omitted, the module runs it.
    type: dict
  manifest_checksum:
    description:
      - V(copies) - the hash of the source's listing the module makes (M(factory_floor.llm.model_manifest)'s
        C(checksum)). Default, C(model_sync_manifest_checksum), else C(all).
    type: str
  play_hosts:
    description:
      - V(plan) - the hosts of this run (C(ansible_play_hosts)); RV(left_out) then names the plan's targets that are not
        among them (C(--limit), or not answering). Omitted, not checked.
    type: list
    elements: str
  plan:
    description:
      - V(source), V(space), V(reach), V(copies) - what V(plan) returned; O(source), O(source_path), O(path) and
        O(targets) the task leaves out are the plan's.
    type: dict
  results:
    description: V(reach) - the SSH probes' results, a loop's C(results) over the plan's targets. Omitted, the module
      runs the probes itself.
    type: list
    elements: dict
  margin_bytes:
    description: Bytes to keep free on a target beyond the copy (C(model_sync_free_margin_bytes)). V(space).
    type: int
    default: 0
notes:
  - The module runs on the controller through its action plugin; the module file holds its documentation only.
seealso:
  - module: factory_floor.llm.model_manifest
"""

EXAMPLES = r"""
- name: Plan the copy
  factory_floor.llm.model_sync_check:
    check: plan
    engine_group: gb10
    path: /models/Qwen3-8B
  run_once: true
  register: plan

- name: Refuse targets without the room for the copy
  factory_floor.llm.model_sync_check:
    check: space
    targets: "{{ plan.targets | map(attribute='host') | list }}"
    listing: before   # each target's model_manifest result, registered as "before"
    source_files: "{{ source.files }}"
    path: /models/Qwen3-8B
    margin_bytes: 1073741824
  run_once: true
"""

RETURN = r"""
ok:
  description: Whether the copy can be planned (V(plan)), the targets have the room (V(space)), the copies are equal.
  returned: always
  type: bool
  sample: true
errors:
  description: V(plan) - what to change, one line each; empty when the copy can be planned.
  returned: when O(check=plan)
  type: list
  elements: str
  sample: []
source:
  description: V(plan) - the source, an engine host or C(controller).
  returned: when O(check=plan)
  type: str
  sample: spark-1
source_host:
  description: V(plan) - where rsync runs - the source's inventory name, or C(localhost).
  returned: when O(check=plan)
  type: str
  sample: spark-1
source_path:
  description: V(plan) - the model directory on the source.
  returned: when O(check=plan)
  type: str
  sample: /models/Qwen3-8B
path:
  description: V(plan) - the model directory on the targets.
  returned: when O(check=plan)
  type: str
  sample: /models/Qwen3-8B
targets:
  description:
    - V(plan) - each target - C(host), C(address) (null for a local copy), C(via) (in words), C(argv) (rsync's), and with
      an address C(probe) (the argv that logs in the way rsync will, with its C(--rsh), and runs C(true)).
  returned: when O(check=plan)
  type: list
  elements: dict
  sample: [{host: spark-2, address: 10.10.0.2, via: "the direct link (vllm_link_address)", argv: [rsync, "..."]}]
target_hosts:
  description: V(plan) - the targets' inventory names.
  returned: when O(check=plan)
  type: list
  elements: str
  sample: [spark-2]
source_manifest:
  description: V(source), V(copies) - the source's M(factory_floor.llm.model_manifest) result the check read (C(files),
    sizes in bytes by name; C(summary)).
  returned: when O(check=source) or O(check=copies) and the check passes
  type: dict
  sample: {files: {config.json: 1000}, summary: "2 files, 16.0 GiB"}
copy_hosts:
  description: V(plan) - the inventory hosts rsync runs on or writes to - the source (an engine host) and the targets.
  returned: when O(check=plan)
  type: list
  elements: str
  sample: [spark-1, spark-2]
left_out:
  description: V(plan) with O(play_hosts) - the refusal of a run that leaves out a target, the message the module fails with; empty
    when every target is in the run.
  returned: when O(check=plan) and O(play_hosts) is given
  type: str
  sample: ""
problems:
  description: V(space), V(copies) - what is wrong, per host (empty when RV(ok)).
  returned: when O(check=space) or O(check=copies) and the check passes
  type: list
  elements: dict
  sample: []
hosts:
  description: V(space) - per target, the bytes C(needed), the bytes C(available) and the C(mount) that holds O(path).
  returned: when O(check=space) and the check passes
  type: dict
  sample: {spark-2: {needed: 17179869184, available: 107374182400, mount: /}}
message:
  description: V(space), V(copies), V(source), V(reach) - a title and one line per problem; on a refusal the task's C(msg).
  returned: when O(check=space) or O(check=copies) and the check passes
  type: str
  sample: ""
"""
