#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_upgrade_check
short_description: Refuse a model upgrade that cannot go right, and note each replica's builds, on the controller
version_added: 0.1.0
description:
  - "The checks of the C(factory_floor.llm.model_upgrade) role (C(playbooks/switch_model.yml)). The role's tasks pass
    the images the C(factory_floor.llm.vllm) role's image check saw; the module reads the variables a check needs
    itself, as the task sees them, on the controller, runs M(factory_floor.llm.vllm_health) (C(probe=models)) and
    M(factory_floor.llm.container_image_info) on the host where a check needs what the replica runs and the task
    does not pass it, and fails with the message that says what to change."
  - "O(check=request) (the role's C(check) entry point, on the engine and the proxy hosts) refuses a request without
    C(model_upgrade_model) or C(model_upgrade_image), a C(topology) other than C(replicas), fewer than two hosts in the
    engine group (C(site_engine_group)) without C(model_upgrade_allow_outage), or no host in the proxy group
    (C(site_proxy_group)); then, on an engine host, C(model_upgrade_image) with a C(vllm_runtime) other than
    C(container). Returns the candidate's settings (RV(candidate)) (C(model_upgrade_model), else C(vllm_model);
    C(model_upgrade_tool_call_parser), C(model_upgrade_chat_template)) and the old build's (C(vllm_model),
    C(vllm_tool_call_parser), C(vllm_chat_template); RV(old))."
  - "O(check=replica) (C(check), each engine host) reads C(model_upgrade_replica) (V(request)'s result, registered),
    C(vllm_model), C(vllm_served_model_name) and the endpoint (C(_site_vllm_endpoint): C(url), C(api_key), C(model)),
    asks the replica which model directory it serves (M(factory_floor.llm.vllm_health), C(probe=models), no wait; a
    replica that does not answer is refused as one that serves nothing), and refuses a replica that serves neither
    C(vllm_model) nor the candidate's model (O(models)), or whose container runs neither the inventory's image nor the
    candidate's (O(old_image), O(new_image)). Returns the builds with their images and what it runs (RV(running),
    RV(running_image))."
  - "O(check=served) (C(upgrade), C(restore), the replica just restarted) refuses a replica that does not serve
    O(model) (O(models)), or whose container (O(container)) does not run O(image_id), or, without it, the ID O(image)
    has on the host now. Without O(models) it asks the replica (M(factory_floor.llm.vllm_health), C(probe=models),
    10 seconds, at C(_site_vllm_endpoint)'s C(url) with its C(api_key)) and reads its container (its C(vllm-replica),
    C(_model_upgrade_container), with M(factory_floor.llm.container_image_info) and C(/usr/bin/) plus
    C(vllm_container_engine)) and O(image) when O(image_id) is empty; a read that fails fails the check with its
    own message. Returns RV(container)."
  - "O(check=serving) (C(done)) asks the replica which model directory it serves as C(vllm_served_model_name) (as
    V(replica) does, or reads O(models)) and returns it (RV(model)), empty when it does not serve. Never fails."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  check:
    description: Which check (see the description).
    type: str
    required: true
    choices: [request, replica, served, serving]
  old_image:
    description: V(replica) - the C(vllm_image_check) fact of the inventory's image (C(image), C(running) by unit); empty
      with the C(venv) runtime.
    type: dict
    default: {}
  new_image:
    description: V(replica) - the C(vllm_image_check) fact of the candidate's image (the inventory's when the request
      names no image).
    type: dict
    default: {}
  models:
    description: V(replica), V(served), V(serving) - the replica's M(factory_floor.llm.vllm_health) result with C(probe=models)
      (C(status), C(model_roots), C(error)); empty, the module asks the replica itself (tests pass it).
    type: dict
    default: {}
  container:
    description: V(served) - the replica's M(factory_floor.llm.container_image_info) result (its C(vllm-replica)
      container, and O(image)'s ID); read only with O(models) (without it the module reads the container itself);
      empty with the C(venv) runtime.
    type: dict
    default: {}
  model:
    description: V(served) - the model directory the replica must serve now.
    type: str
    default: ""
  image:
    description: V(served) - the image reference it must run now; empty, not checked (the C(venv) runtime).
    type: str
    default: ""
  image_id:
    description: V(served) - the image ID its container must run (the restore's, noted before the upgrade); empty, the
      ID O(image) has on the host now.
    type: str
    default: ""
  after:
    description: V(served) - what the message says the replica was checked after.
    type: str
    default: the restart
notes:
  - The module runs on the controller through its action plugin; the module file holds its documentation only.
seealso:
  - module: factory_floor.llm.vllm_check
"""

EXAMPLES = r"""
- name: Check the request and the layout, and name the candidate's settings and the old build's
  factory_floor.llm.model_upgrade_check:
    check: request
  register: request

- name: Check that it serves the new model in the new image
  factory_floor.llm.model_upgrade_check:
    check: served
    model: /models/Qwen3-8B
    image: vllm/vllm-openai:v0.11.0
    after: the restart
  register: served                  # served.container.image.id: the candidate's image ID
"""

RETURN = r"""
errors:
  description: The refusals, the first that applies (empty when the check passes); the task's C(msg) says the same.
  returned: always
  type: list
  elements: str
  sample: []
candidate:
  description:
    - V(request), V(replica) - the build this replica is upgraded to - C(model), C(tool_call_parser), C(chat_template);
      V(replica) adds C(image), the reference, and C(image_id), empty with the C(venv) runtime or an image not on the host
      yet. The role registers the result as C(model_upgrade_replica).
  returned: when O(check=request) or O(check=replica)
  type: dict
  sample: {model: /models/Qwen3-8B-new, tool_call_parser: hermes, chat_template: "", image: "", image_id: ""}
old:
  description: V(request), V(replica) - the build a failed replica gets back, as RV(candidate) (the inventory's).
  returned: when O(check=request) or O(check=replica)
  type: dict
  sample: {model: /models/Qwen3-8B, tool_call_parser: hermes, chat_template: "", image: "", image_id: ""}
running:
  description: V(replica) - the model directory the replica's vLLM lists as root, empty when it does not serve.
  returned: when O(check=replica)
  type: str
  sample: /models/Qwen3-8B
running_image:
  description: V(replica) - the image ID its container runs, empty with the C(venv) runtime.
  returned: when O(check=replica)
  type: str
  sample: ""
model:
  description: V(serving) - the model directory the replica serves (vLLM's root of C(vllm_served_model_name)); empty
    when it does not serve.
  returned: when O(check=serving)
  type: str
  sample: /models/Qwen3-8B
container:
  description:
    - V(served) - the M(factory_floor.llm.container_image_info) result the check read (C(image) - O(image)'s C(id) on
      the host; C(containers) by name - C(image), C(image_id)); O(container) when the task passes O(models); empty with
      the C(venv) runtime.
  returned: when O(check=served)
  type: dict
  sample:
    image: {id: "sha256:0f3c1b7a9e2d"}
    containers: {vllm-replica: {image: "vllm/vllm-openai:v0.11.0", image_id: "sha256:0f3c1b7a9e2d"}}
"""
