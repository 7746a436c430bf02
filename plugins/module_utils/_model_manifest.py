# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A model directory's manifest, and the differences between hosts' copies.

Pure logic behind ``factory_floor.llm.model_manifest`` (one host's copy) and the
``factory_floor.llm.model_manifest_diff`` filter (every host's, on the controller).
The split's two ranks each load half of every tensor from their own copy, and the
replicas behind one served name must answer alike: a shard copied half-way, an
index or a config from another revision, a chat template edited on one machine only,
all start fine and serve wrong answers. So before anything stops every copy is
listed - every file's name and size, the sha256 of every file that is not a weight
shard (``config.json``, ``model.safetensors.index.json``, the tokenizer, the chat
template), optionally of every shard too - and the copies are compared.

Reusable: the site check and the model distribution read and compare the same way.
"""

from __future__ import annotations

import hashlib
import os

#: Weight shards: hashed only with ``checksum: all`` (tens of GB).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt")
#: Beyond this a non-weight file is listed by size only (bytes).
METADATA_HASH_LIMIT = 256 * 1024 * 1024
CHECKSUMS = ("metadata", "all", "none")


class ManifestError(ValueError):
    """The directory cannot be read."""


def sha256_file(path, chunk=8 * 1024 * 1024):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(chunk)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def is_weight(name):
    return name.lower().endswith(WEIGHT_SUFFIXES)


def build(model_dir, checksum="metadata", walk=os.walk, getsize=os.path.getsize, hasher=sha256_file):
    """The manifest of ``model_dir``: ``{path, files: {name: bytes}, sha256: {name: hex}, weights_bytes, checksum}``.

    Names are relative paths; hidden files and directories (``.cache/`` of a hub
    download, ``.git``) are left out - they differ between copies of the same model.
    ``checksum``: ``metadata`` hashes every file that is not a weight shard (up to
    256 MiB each), ``all`` every file, ``none`` nothing.
    """
    if checksum not in CHECKSUMS:
        raise ManifestError("checksum must be one of %s, got %r" % (", ".join(CHECKSUMS), checksum))
    if not os.path.isdir(model_dir):
        raise ManifestError("%s is not a directory" % model_dir)
    files, digests = {}, {}
    for root, dirs, names in walk(model_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, model_dir)
            size = getsize(path)
            files[rel] = size
            weight = is_weight(name)
            if checksum == "all" or (checksum == "metadata" and not weight and size <= METADATA_HASH_LIMIT):
                digests[rel] = hasher(path)
    weights = sum(size for name, size in files.items() if is_weight(name))
    return {"path": model_dir, "files": files, "sha256": digests, "weights_bytes": weights,
            "weights_files": sum(1 for name in files if is_weight(name)), "checksum": checksum}


def _fmt(value):
    return "missing" if value is None else ("%s bytes" % "{:,}".format(value) if isinstance(value, int) else "sha256 %s" % value[:12])


def compare(manifests_by_host, limit=12):
    """Where the hosts' copies differ: ``[{host, what, fix}]`` (empty when every copy is the same).

    A host without a manifest (the directory is missing) is named; then every file
    that one host lacks or has with another size or hash, with each host's value. Only
    the hashes every host computed are compared.
    """
    problems = []
    hosts = sorted(manifests_by_host)
    present = {h: m for h, m in manifests_by_host.items() if m and m.get("files") is not None}
    for host in hosts:
        if host not in present:
            error = (manifests_by_host.get(host) or {}).get("error") or "no manifest"
            problems.append({"host": host, "what": "the model directory could not be read: %s" % error,
                             "fix": "copy the model to %s at the same path as on the other hosts" % host})
    if len(present) < 2:
        return problems
    names = sorted(set().union(*(set(m["files"]) for m in present.values())))
    differing = []
    for name in names:
        sizes = {h: m["files"].get(name) for h, m in present.items()}
        if len(set(sizes.values())) > 1:
            differing.append((name, sizes))
            continue
        hashed = [h for h, m in present.items() if name in (m.get("sha256") or {})]
        if len(hashed) == len(present):
            digests = {h: present[h]["sha256"][name] for h in hashed}
            if len(set(digests.values())) > 1:
                differing.append((name, digests))
    for name, values in differing[:limit]:
        by_value = {}
        for host in sorted(values):
            by_value.setdefault(values[host], []).append(host)
        each = ["%s %s" % (",".join(owners), _fmt(value)) for value, owners in by_value.items()]
        what = "%s differs: %s" % (name, "; ".join(each))
        problems.append({"host": " and ".join(sorted(values)), "what": what,
                         "fix": "copy the model again from one source to every host (rsync -a --checksum), or point "
                                "vllm_model at the same revision everywhere"})
    if len(differing) > limit:
        problems.append({"host": " and ".join(sorted(present)), "what": "%d more files differ" % (len(differing) - limit),
                         "fix": "copy the whole directory again"})
    return problems


def filesystem(path, exists=os.path.exists, statvfs=os.statvfs):
    """``{path, bytes_available}``: the free space (for an unprivileged writer, ``f_bavail``) of the filesystem that
    holds ``path``, read at its nearest existing directory - the path itself need not exist yet (a copy's target).

    Read with statvfs, not from Ansible's mount facts, which list only mounts whose device is a path (no overlay
    root of a container, no ZFS dataset)."""
    probe = os.path.abspath(str(path))
    while not exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    stats = statvfs(probe)
    return {"path": probe, "bytes_available": int(stats.f_bavail) * int(stats.f_frsize)}


def describe(manifest):
    """One line: how many files, weights in GiB, how much was hashed."""
    return "%d files, %d weight files of %.2f GiB, %d hashed (%s)" % (
        len(manifest.get("files") or {}), manifest.get("weights_files", 0), manifest.get("weights_bytes", 0) / 2 ** 30,
        len(manifest.get("sha256") or {}), manifest.get("checksum", ""))
