# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a container engine (docker or podman) has of an image and of named containers.

Private to the collection; pure logic behind ``factory_floor.llm.container_image_info``,
unit-tested without Ansible. It reads the JSON ``IMAGE inspect`` and ``container inspect``
print (both engines print a JSON array of objects by default), so no Go template is
passed through Ansible's Jinja.

Identity. An image is identified by its ID (``docker image inspect``'s ``Id``, the
digest of its configuration; podman prints it without ``sha256:``, normalised here),
which a ``docker save``/``docker load`` keeps, and, when it came from a registry, by its
repository digests (``RepoDigests``, ``NAME@sha256:...``, what ``docker pull`` prints).
An expected digest matches when it is either. A tag is a name that can move: the same
``vllm/vllm-openai:v0.32.0`` can be two images on two hosts, which is why the vLLM
role compares IDs across hosts and refuses an unpinned ``:latest``.
"""

from __future__ import annotations

import json
import re

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# What docker and podman print when the object is not there (docker: "No such image: X",
# "No such container: X", older "No such object"; podman: "X: image not known",
# "no such container X", "failed to find image X").
_ABSENT = re.compile(r"no such (image|container|object)|image not known|failed to find image", re.IGNORECASE)


def normalize_digest(value: str) -> str:
    """``sha256:<64 hex>`` from ``sha256:<hex>`` or 64 bare hex digits (podman's IDs); ValueError otherwise."""
    text = (value or "").strip().lower()
    if text.startswith("sha256:"):
        text = text[len("sha256:"):]
    if not _HEX64.match(text):
        raise ValueError("%r is not a sha256 digest (sha256: and 64 hex digits)" % (value,))
    return "sha256:" + text


def parse_reference(ref: str) -> dict:
    """Split an image reference into ``name``, ``tag`` and ``digest`` ("" when absent).

    ``[registry[:port]/]path[:tag][@sha256:...]``: the tag is what follows the last
    ``:`` of the last path component (``localhost:5000/vllm`` has none).
    """
    text = (ref or "").strip()
    if not text or any(c.isspace() for c in text):
        raise ValueError("%r is not an image reference (NAME[:TAG][@sha256:DIGEST], no spaces)" % (ref,))
    name, _sep, digest = text.partition("@")
    if digest:
        digest = normalize_digest(digest)
    tag = ""
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        tag = last.rsplit(":", 1)[1]
        name = name[:-(len(tag) + 1)]
    if not name:
        raise ValueError("%r has no image name" % (ref,))
    return {"name": name, "tag": tag, "digest": digest}


def is_pinned(ref: str, expected_digest: str = "") -> bool:
    """A reference names one build: it carries a digest, an expected digest is given, or a tag other than latest."""
    parts = parse_reference(ref)
    return bool(parts["digest"] or expected_digest or parts["tag"] not in ("", "latest"))


def is_absent(stderr: str) -> bool:
    """The engine's error says the image or container is not there (as opposed to the engine failing)."""
    return bool(_ABSENT.search(stderr or ""))


def _first_object(text: str):
    data = json.loads(text or "[]")
    if isinstance(data, list):
        data = data[0] if data else None
    if data is not None and not isinstance(data, dict):
        raise ValueError("inspect printed %s, not a JSON object" % type(data).__name__)
    return data


def vllm_version(inspected: dict) -> str:
    """vLLM's version as the image declares it, "" when it does not.

    A label or an environment variable whose name holds both "vllm" and "version"
    (``VLLM_VERSION``, ``NVIDIA_VLLM_VERSION``, a ``...vllm.version`` label), labels
    first. Not ``org.opencontainers.image.version``: images built on Ubuntu inherit
    Ubuntu's (``22.04``).
    """
    config = inspected.get("Config") or {}
    labels = dict(inspected.get("Labels") or {})
    labels.update(config.get("Labels") or {})
    candidates = sorted(labels.items())
    for item in config.get("Env") or []:
        key, sep, value = str(item).partition("=")
        if sep:
            candidates.append((key, value))
    for key, value in candidates:
        lowered = key.lower()
        if "vllm" in lowered and "version" in lowered and re.search(r"\d", str(value or "")):
            return str(value).strip()
    return ""


#: ``uname -m`` -> the OCI/Go name an image's config gives its architecture (``docker image inspect``'s ``Architecture``).
OCI_ARCHITECTURES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm",
                     "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64", "i686": "386", "i386": "386"}


def oci_architecture(machine: str) -> str:
    """A host's ``uname -m`` as an image names its architecture (``aarch64`` -> ``arm64``; GB10 is aarch64)."""
    return OCI_ARCHITECTURES.get(str(machine or "").lower(), str(machine or "").lower())


def architecture_matches(image_architecture: str, host_machine: str):
    """Whether an image of ``image_architecture`` runs natively on a host whose ``uname -m`` is ``host_machine``.

    None when the image declares none (nothing to compare). An image of another
    architecture passes every other check and dies with ``exec format error`` at start.
    """
    if not image_architecture:
        return None
    return oci_architecture(image_architecture) == oci_architecture(host_machine)


def image_facts(ref: str, inspect_stdout: str) -> dict:
    """The facts of ``ref`` from ``IMAGE inspect`` output (rc 0): id, repo digests and tags, created, vLLM version,
    architecture."""
    inspected = _first_object(inspect_stdout)
    if inspected is None:
        return absent_image(ref)
    return {
        "ref": ref,
        "present": True,
        "id": normalize_digest(str(inspected.get("Id") or "")),
        "repo_digests": sorted(str(d) for d in inspected.get("RepoDigests") or []),
        "repo_tags": sorted(str(t) for t in inspected.get("RepoTags") or []),
        "created": str(inspected.get("Created") or ""),
        "vllm_version": vllm_version(inspected),
        "architecture": str(inspected.get("Architecture") or ""),
        "variant": str(inspected.get("Variant") or ""),
        "os": str(inspected.get("Os") or ""),
    }


def absent_image(ref: str) -> dict:
    return {"ref": ref, "present": False, "id": "", "repo_digests": [], "repo_tags": [], "created": "", "vllm_version": "",
            "architecture": "", "variant": "", "os": ""}


def digest_matches(expected: str, facts: dict):
    """Whether the image is the one ``expected`` names: its ID, or one of its repository digests.

    None when nothing is expected or the image is not there (nothing to compare).
    """
    if not expected or not facts.get("present"):
        return None
    want = normalize_digest(expected)
    if facts.get("id") == want:
        return True
    return any(str(d).rpartition("@")[2].lower() == want for d in facts.get("repo_digests") or [])


def container_facts(inspect_stdout: str) -> dict:
    """One container from ``container inspect`` output (rc 0): running, host PID of its main process, image id and name."""
    inspected = _first_object(inspect_stdout)
    if inspected is None:
        return absent_container()
    state = inspected.get("State") or {}
    config = inspected.get("Config") or {}
    image_id = str(inspected.get("Image") or "")
    try:
        image_id = normalize_digest(image_id)
    except ValueError:
        pass
    try:
        pid = int(state.get("Pid") or 0)
    except (TypeError, ValueError):
        pid = 0
    return {
        "exists": True,
        "running": bool(state.get("Running")),
        "pid": pid,
        "image_id": image_id,
        # docker: Config.Image is the reference as given to run; podman also has ImageName.
        "image": str(inspected.get("ImageName") or config.get("Image") or ""),
    }


def absent_container() -> dict:
    return {"exists": False, "running": False, "pid": 0, "image_id": "", "image": ""}
