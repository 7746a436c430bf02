#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


DOCUMENTATION = r"""
---
module: container_image_info
short_description: What docker or podman has of a vLLM image and of named containers, without pulling anything
version_added: 0.1.0
description:
  - Runs C(ENGINE image inspect IMAGE) and C(ENGINE container inspect NAME) (one per O(containers)) on the host and
    returns what they say - whether the image is there, its ID, repository digests and tags, the vLLM version it
    declares, its architecture and whether that is this host's, whether it matches an expected O(digest); and per container whether it exists and runs, its main
    process's PID (in the host's namespace) and the image it was created from.
  - It never pulls, and never starts, stops or removes anything. The C(factory_floor.llm.vllm) role's C(image_check)
    entry point refuses, before anything changes, an image that is missing or does not match its digest; its C(plan)
    entry point restarts an engine whose container runs another image than the one rendered; the tool-calling gate
    identifies a build by the image's ID (C(factory_floor.llm.tool_gate)'s C(build_id)).
  - The module only reads.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  engine:
    description:
      - The container engine's command, V(docker) or V(podman), or a path to it (the C(vllm) role passes
        C(/usr/bin/) plus C(vllm_container_engine)). Looked up on the host's C(PATH) when it is a bare name.
    type: str
    default: docker
  image:
    description:
      - The image reference to inspect, C(NAME[:TAG][@sha256:DIGEST]), or an image ID (C(sha256:...)).
      - Omitted, only O(containers) are read.
    type: str
  digest:
    description:
      - The digest the image must have, C(sha256:) and 64 hex digits - its ID (C(docker image inspect --format
        '{{.Id}}'), kept by C(docker save)/C(docker load)) or one of its repository digests (what C(docker pull)
        prints). A digest written in O(image) (C(@sha256:...)) is expected too.
      - Sets RV(image.digest_matches).
    type: str
  containers:
    description:
      - Names of containers to read (the C(vllm) role names each after its unit, C(vllm-replica), C(vllm-split)).
    type: list
    elements: str
    default: []
notes:
  - Both engines print a JSON array for C(inspect) without C(--format); that is what is read.
  - Podman prints image IDs without C(sha256:); they are returned with it, as docker prints them.
seealso:
  - name: docker image inspect
    description: The fields C(Id), C(RepoDigests), C(RepoTags), C(Config.Labels) and C(Config.Env).
    link: https://docs.docker.com/reference/cli/docker/image/inspect/
"""

EXAMPLES = r"""
- name: Look at the vLLM image and at the running engine's container
  factory_floor.llm.container_image_info:
    engine: /usr/bin/docker
    image: vllm/vllm-openai:v0.32.0
    digest: sha256:0f3c1b7a9e2d4c6b8a0f1e3d5c7b9a1f2e4d6c8b0a1f3e5d7c9b1a2f4e6d8c0b
    containers: [vllm-replica]
  register: vllm_image

- name: Refuse a missing image before anything changes
  ansible.builtin.assert:
    that: vllm_image.image.present
    fail_msg: "{{ vllm_image.image.ref }} is not on {{ inventory_hostname }}: docker load or docker pull it first."
"""

RETURN = r"""
engine:
  description: The engine's command as run.
  returned: always
  type: str
  sample: /usr/bin/docker
image:
  description: What the engine has of O(image); null when O(image) is not given.
  returned: always
  type: dict
  contains:
    ref:
      description: O(image), as given.
      type: str
      sample: vllm/vllm-openai:v0.32.0
    name:
      description: The reference's name (registry and path), without tag or digest.
      type: str
      sample: vllm/vllm-openai
    tag:
      description: The reference's tag; empty when it has none (the engine then means C(latest)).
      type: str
      sample: v0.32.0
    pinned:
      description: The reference names one build - it carries a digest, O(digest) is given, or its tag is not C(latest) (nor missing).
      type: bool
      sample: true
    present:
      description: The image is on the host.
      type: bool
      sample: true
    id:
      description: Its ID, C(sha256:...); empty when absent.
      type: str
      sample: sha256:5d1e0c2b3a4f69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0
    repo_digests:
      description: Its repository digests (C(NAME@sha256:...)); empty for an image that was loaded or built here.
      type: list
      elements: str
      sample: ["vllm/vllm-openai@sha256:0f3c1b7a9e2d4c6b8a0f1e3d5c7b9a1f2e4d6c8b0a1f3e5d7c9b1a2f4e6d8c0b"]
    repo_tags:
      description: The names it is tagged with here.
      type: list
      elements: str
      sample: ["vllm/vllm-openai:v0.32.0"]
    created:
      description: When it was built, as the engine prints it (RFC 3339).
      type: str
      sample: "2026-11-20T08:12:44.123456789Z"
    vllm_version:
      description:
        - vLLM's version as the image declares it, in a label or environment variable whose name holds C(vllm) and
          C(version) (C(VLLM_VERSION), C(NVIDIA_VLLM_VERSION)); empty when it declares none. Informational - the ID
          identifies the build.
      type: str
      sample: 0.32.0
    architecture:
      description: The architecture the image's config declares (C(Architecture) - C(amd64), C(arm64)); empty when absent.
      type: str
      sample: arm64
    variant:
      description: Its architecture variant (C(Variant), for example C(v8)); often empty.
      type: str
    os:
      description: Its operating system (C(Os)).
      type: str
      sample: linux
    host_architecture:
      description: This host's architecture under the same name (C(uname -m) - C(aarch64) is C(arm64), C(x86_64) C(amd64)).
      type: str
      sample: arm64
    architecture_matches:
      description:
        - The image is of this host's architecture; false for an image that would die with C(exec format error) at start;
          null when the image is absent or declares none.
      type: bool
      sample: true
    expected_digest:
      description: The digest expected (O(digest), else the one in O(image)), normalised; empty when none.
      type: str
      sample: sha256:0f3c1b7a9e2d4c6b8a0f1e3d5c7b9a1f2e4d6c8b0a1f3e5d7c9b1a2f4e6d8c0b
    digest_matches:
      description: The image's ID or one of its repository digests is RV(image.expected_digest); null when nothing is expected or the image is absent.
      type: bool
      sample: true
containers:
  description: Per name in O(containers), what the engine has of it.
  returned: always
  type: dict
  sample:
    vllm-replica: {exists: true, running: true, pid: 41235, image_id: "sha256:5d1e0c2b...", image: "vllm/vllm-openai:v0.32.0"}
    vllm-split: {exists: false, running: false, pid: 0, image_id: "", image: ""}
  contains:
    exists:
      description: A container of that name exists (running or not).
      type: bool
    running:
      description: It runs.
      type: bool
    pid:
      description: Its main process's PID in the host's namespace (C(State.Pid), vLLM's API server for the engines); 0 when not running.
      type: int
    image_id:
      description: The ID of the image it was created from.
      type: str
    image:
      description: The image reference it was created with (C(Config.Image); podman's C(ImageName)).
      type: str
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _container_image as ci


def _inspect(module, argv, what):
    rc, out, err = module.run_command(argv)
    if rc == 0:
        return out
    if ci.is_absent(err) or ci.is_absent(out):
        return None
    module.fail_json(msg="Could not inspect %s: %s failed (rc %s): %s. Is the %s daemon running?" % (
        what, " ".join(argv), rc, (err or out).strip()[:500], argv[0].rsplit("/", 1)[-1]))
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type="str", default="docker"),
            image=dict(type="str"),
            digest=dict(type="str"),
            containers=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    engine = params["engine"]
    if "/" not in engine:
        engine = module.get_bin_path(engine) or engine
    result = dict(changed=False, engine=engine, image=None, containers={})
    if not os.access(engine, os.X_OK):
        module.fail_json(msg="The container engine %s is not on this host (or not executable): install it, or name the engine "
                             "that runs the vLLM image (vllm_container_engine: docker or podman)." % engine, **result)

    image = params["image"]
    if image:
        try:
            parts = ci.parse_reference(image)
            expected = ci.normalize_digest(params["digest"]) if params["digest"] else parts["digest"]
        except ValueError as exc:
            module.fail_json(msg="image %r / digest %r: %s" % (image, params["digest"], exc), **result)
        try:
            out = _inspect(module, [engine, "image", "inspect", image], "image " + image)
            facts = ci.image_facts(image, out) if out is not None else ci.absent_image(image)
        except ValueError as exc:
            module.fail_json(msg="%s image inspect %s printed something else than JSON: %s" % (engine, image, exc), **result)
        # A bare ID names no repository: it has neither name nor tag, but it is one build.
        by_id = image.startswith("sha256:")
        facts.update(host_architecture=ci.oci_architecture(platform.machine()),
                     architecture_matches=ci.architecture_matches(facts.get("architecture", ""), platform.machine()))
        facts.update(name="" if by_id else parts["name"], tag="" if by_id else parts["tag"],
                     pinned=by_id or ci.is_pinned(image, expected), expected_digest=expected,
                     digest_matches=ci.digest_matches(expected, facts))
        result["image"] = facts

    for name in params["containers"]:
        try:
            out = _inspect(module, [engine, "container", "inspect", name], "container " + name)
            result["containers"][name] = ci.container_facts(out) if out is not None else ci.absent_container()
        except ValueError as exc:
            module.fail_json(msg="%s container inspect %s printed something else than JSON: %s" % (engine, name, exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
