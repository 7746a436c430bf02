#!/usr/bin/python3
"""Lab only: derive a vLLM image from the lab's own one and load it into this host's docker.

The lab's image (lab/build-image.sh) sits on every GB10 lab host as the pieces of a
`docker save` archive; this writes a new image config from it (more labels, and
optionally one more layer made from a directory) and streams a small archive into
`docker load`: the base layer is already in docker, so only the new config and layer
travel. The same inputs give the same bytes, so every host gets the same image ID,
which the vllm role's image check requires of one name.

  derive_image.py --tag NAME:TAG --label KEY=VALUE [--layer-root DIR]
"""
import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

TOP = "/var/lib/factory-floor-lab/docker-images"


def read_env(path):
    with open(path, encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def layer_tar(root):
    """A tar of `root`'s tree, byte-identical for the same tree: sorted names, mtime 0, root:root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in [None] + sorted(filenames):
                path = dirpath if name is None else os.path.join(dirpath, name)
                arcname = os.path.relpath(path, root)
                if arcname == ".":
                    continue
                info = tar.gettarinfo(path, arcname)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True)
    parser.add_argument("--label", action="append", default=[], help="KEY=VALUE, added to the base's labels")
    parser.add_argument("--layer-root", help="a directory whose tree becomes one more layer")
    args = parser.parse_args()

    env = read_env(os.path.join(TOP, "vllm-cpu.env"))
    base_dir = os.path.join(TOP, "vllm-cpu")
    with open(os.path.join(base_dir, "manifest.json"), encoding="utf-8") as f:
        base_manifest = json.load(f)[0]
    with open(os.path.join(base_dir, base_manifest["Config"]), encoding="utf-8") as f:
        config = json.load(f)

    config["config"].setdefault("Labels", {}).update(dict(label.split("=", 1) for label in args.label))
    layers = list(base_manifest["Layers"])
    pieces = []
    if args.layer_root:
        data = layer_tar(args.layer_root)
        diff_id = hashlib.sha256(data).hexdigest()
        config["rootfs"]["diff_ids"].append("sha256:" + diff_id)
        config["history"].append({"created": config["created"], "created_by": "derive_image.py: " + args.tag})
        layers.append(diff_id + "/layer.tar")
        pieces.append((diff_id + "/layer.tar", data))
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    image_id = hashlib.sha256(config_bytes).hexdigest()
    manifest = [{"Config": image_id + ".json", "RepoTags": [args.tag], "Layers": layers}]
    pieces += [(image_id + ".json", config_bytes), ("manifest.json", json.dumps(manifest).encode())]

    # docker load skips a layer it holds (the base) without opening its file.
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in pieces:
            add(tar, name, data)
    load = subprocess.run(["docker", "load"], input=archive.getvalue(), capture_output=True, check=False)
    if load.returncode != 0:
        sys.exit("docker load failed: " + load.stderr.decode(errors="replace"))
    print(json.dumps({"tag": args.tag, "id": "sha256:" + image_id, "base": env.get("ID", "")}))


if __name__ == "__main__":
    main()
