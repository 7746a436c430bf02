# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Copying a model directory from one host (or the controller) to the other engine hosts.

Pure logic behind ``playbooks/model-sync.yml`` and its filters (``model_sync_plan``,
``model_sync_space``, ``model_sync_result``); standard library only, nothing here
connects anywhere.

* **The plan** (:func:`plan`): which host sends (``model_sync_source``: an engine host, by
  default the first, or ``controller``), which hosts receive (every other engine host; the
  source too when the copy goes to another path there), at which address (the target's
  ``vllm_link_address``, the direct link, when both ends have one and the source is an
  engine host; else where Ansible reaches it), and the exact ``rsync`` argv for each.
* **Free space** (:func:`space`): before anything is copied, each target's free bytes
  (the filesystem that holds the path, read with statvfs by model_manifest) against what the copy
  can need at its peak.
* **The result** (:func:`rsync_result`): what one rsync run changed, from its
  ``--itemize-changes`` and ``--stats`` output.

rsync runs with ``--checksum`` (every file compared by content, so a corrupted byte is
found even with the same size and time), ``--partial-dir`` (an interrupted copy resumes:
the part already sent is kept in a hidden directory of the target and reused),
``--copy-links`` (a Hugging Face snapshot's symlinks into ``../../blobs`` arrive as the
files they point to: the engine's container mounts the model directory alone, where such
links would dangle) and never ``--delete`` unless asked.
"""

from __future__ import annotations

import ipaddress
import re

CONTROLLER = "controller"
#: Where rsync keeps a file cut short by an interruption, inside the target directory
#: (hidden: the model manifest leaves it out), to resume from.
PARTIAL_DIR = ".rsync-partial"
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new")
_UNSAFE = re.compile(r"[\s'\"\\$`;&|<>*?!{}\[\]()#~]")


class ModelSyncError(ValueError):
    """The inputs cannot make a plan."""


def path_problem(path, name="model_sync_path"):
    """What is wrong with ``path`` as a model directory to copy, or None."""
    if not isinstance(path, str) or not path:
        return "%s is not set: give the model directory's absolute path (default: vllm_model)" % name
    if not path.startswith("/"):
        return "%s is %r, not an absolute path: give the model directory's full path, such as /models/NAME" % (name, path)
    parts = [p for p in path.split("/") if p]
    if not parts:
        return "%s is /: give the model's own directory, never the root" % name
    if ".." in parts or "." in parts:
        return "%s is %r: write it without . or .. components" % (name, path)
    if _UNSAFE.search(path):
        return ("%s is %r: use a path of letters, digits and - _ . / only (no spaces, quotes or shell characters; "
                "rsync hands it to a shell on the target)" % (name, path))
    return None


def _address(value):
    """An address from the inventory without a prefix length (``10.0.0.1/24`` -> ``10.0.0.1``), or None."""
    text = str(value or "").strip()
    if not text:
        return None
    return text.split("/", 1)[0]


def _rsync_host(address):
    try:
        if ipaddress.ip_address(address).version == 6:
            return "[%s]" % address
    except ValueError:
        pass
    return address


def _words(value, name):
    if value in (None, ""):
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ModelSyncError("%s must be a list of ssh arguments, one item each, not %r" % (name, type(value).__name__))
    return [str(v) for v in value]


def ssh_command(user=None, port=None, key_file=None, extra=(), common_args=""):
    """The ``--rsh`` command rsync runs: ssh that never asks (``BatchMode``) and takes a new host key once."""
    argv = ["ssh"] + list(SSH_OPTIONS)
    if common_args:
        argv += str(common_args).split()
    if key_file:
        argv += ["-i", str(key_file)]
    if port not in (None, "", 22, "22"):
        argv += ["-p", str(int(port))]
    if user:
        argv += ["-l", str(user)]
    return " ".join(argv + list(extra))


def rsync_argv(source_path, dest_path, address=None, ssh=None, delete=False, checksum=True, dry_run=False,
               rsync_path="rsync"):
    """rsync's argv: ``source_path``'s content into ``dest_path`` (on ``address`` over ``ssh``, or locally)."""
    argv = ["rsync", "--recursive", "--copy-links", "--times", "--perms", "--protect-args", "--partial",
            "--partial-dir=%s" % PARTIAL_DIR, "--itemize-changes", "--stats"]
    if checksum:
        argv.append("--checksum")
    if delete:
        # Files the source no longer has; the partial directory is protected (rsync's own rule).
        argv.append("--delete")
    if dry_run:
        argv.append("--dry-run")
    if address:
        argv.append("--rsh=%s" % (ssh or ssh_command()))
        if rsync_path and rsync_path != "rsync":
            argv.append("--rsync-path=%s" % rsync_path)
        dest = "%s:%s/" % (_rsync_host(address), dest_path.rstrip("/"))
    else:
        dest = dest_path.rstrip("/") + "/"
    return argv + [source_path.rstrip("/") + "/", dest]


def plan(engines, hostvars, source="", path="", source_path="", delete=False, checksum=True, dry_run=False,
         ssh_user="", ssh_key_file="", ssh_args=(), rsync_path="rsync"):
    """Who sends, who receives, where, and each rsync's argv.

    ``engines``: the engine group's hosts in inventory order; ``hostvars``: each host's
    variables (``ansible_host``, ``ansible_port``, ``ansible_user``,
    ``ansible_ssh_private_key_file``, ``ansible_ssh_common_args``, ``vllm_link_address``).
    ``source``: an engine host, ``controller``, or empty for the first engine host.
    ``path``: the directory on every target; ``source_path``: where it is on the source
    (empty: ``path``). Returns ``{ok, errors, source, source_host, source_path, path,
    targets: [{host, address, via, argv}]}``; ``source_host`` is where rsync runs (the
    source's inventory name, or ``localhost``).
    """
    engines = [str(h) for h in engines or ()]
    hostvars = hostvars or {}
    errors = []
    checked = [("model_sync_path", path)] + ([("model_sync_source_path", source_path)] if source_path else [])
    errors += [problem for problem in (path_problem(value, name) for name, value in checked) if problem]
    if not engines:
        errors.append("the inventory has no engine host (group gb10): nothing to copy to")
    source = str(source or "").strip() or (engines[0] if engines else "")
    if source not in engines and source != CONTROLLER:
        errors.append("model_sync_source is %r, neither an engine host (%s) nor %s: name the host that holds the "
                      "model" % (source, ", ".join(engines) or "none", CONTROLLER))
    try:
        extra = _words(ssh_args, "model_sync_ssh_args")
    except ModelSyncError as exc:
        errors.append(str(exc))
        extra = []
    out = {"ok": False, "errors": errors, "source": source, "path": path, "source_path": source_path or path,
           "source_host": "localhost" if source == CONTROLLER else source, "targets": []}
    if errors:
        return out
    from_path = source_path or path
    src_vars = hostvars.get(source, {}) if source != CONTROLLER else {}
    src_link = _address(src_vars.get("vllm_link_address"))
    targets = []
    for host in engines:
        if host == source:
            if from_path.rstrip("/") != path.rstrip("/"):
                targets.append({"host": host, "address": None, "via": "a local copy on the source",
                                "argv": rsync_argv(from_path, path, delete=delete, checksum=checksum,
                                                   dry_run=dry_run)})
            continue
        hv = hostvars.get(host, {})
        link = _address(hv.get("vllm_link_address"))
        if source != CONTROLLER and src_link and link:
            address, via = link, "the direct link (vllm_link_address %s)" % link
            ssh = ssh_command(ssh_user or hv.get("ansible_user"), None, ssh_key_file or None, extra)
        elif source == CONTROLLER:
            # Ansible's own way in: the controller's key and options for this host.
            address = _address(hv.get("ansible_host")) or host
            via = "the controller's SSH to %s (ansible_host)" % address
            ssh = ssh_command(ssh_user or hv.get("ansible_user"), hv.get("ansible_port"),
                              ssh_key_file or hv.get("ansible_ssh_private_key_file"), extra,
                              hv.get("ansible_ssh_common_args") or "")
        else:
            address = _address(hv.get("ansible_host")) or host
            via = "%s (ansible_host; no vllm_link_address on both ends)" % address
            ssh = ssh_command(ssh_user or hv.get("ansible_user"), hv.get("ansible_port"), ssh_key_file or None, extra)
        targets.append({"host": host, "address": address, "via": via,
                        "argv": rsync_argv(from_path, path, address, ssh, delete, checksum, dry_run, rsync_path)})
    if not targets:
        errors.append("nothing to copy: %s is the only engine host and model_sync_source_path is model_sync_path"
                      % source)
    out.update(ok=not errors, targets=targets)
    return out


# ------------------------------------------------------------------ free space


def mount_of(path, mounts):
    """The mount (Ansible's ``ansible_mounts`` item) whose mount point holds ``path``, the longest that does."""
    best = None
    for mount in mounts or ():
        point = str(mount.get("mount") or "")
        if not point.startswith("/"):
            continue
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(str(best.get("mount")))):
            best = mount
    return best


def needed_bytes(source_files, target_files):
    """Bytes a copy may need on the target at its peak: every file the target lacks, plus the largest one it has
    (rsync writes a changed file beside the old one and renames it over: one such file at a time)."""
    target_files = target_files or {}
    new = sum(int(size) for name, size in source_files.items() if name not in target_files)
    rewrite = max((int(size) for name, size in source_files.items() if name in target_files), default=0)
    return new + rewrite


def _gib(value):
    return "%.2f GiB" % (value / 2 ** 30)


def space(source_files, targets, path, margin_bytes=0):
    """Each target's verdict: ``{ok, problems: [{host, what, fix}], hosts: {host: {needed, available, mount}}}``.

    ``targets``: ``{host: {"files": {name: bytes} or None (no copy yet), "filesystem": {path, bytes_available}}}``
    (``model_manifest``'s ``filesystem``: statvfs at the path's nearest existing directory), or, without it,
    ``"mounts"``: ``ansible_mounts`` (which leave out a root whose device is not a path, a container's overlay).
    """
    problems, hosts = [], {}
    for host in sorted(targets or {}):
        facts = targets[host] or {}
        found = facts.get("filesystem") or {}
        if found.get("bytes_available") is not None:
            mount = {"mount": found.get("path"), "size_available": found["bytes_available"]}
        else:
            mount = mount_of(path, facts.get("mounts"))
        needed = needed_bytes(source_files or {}, facts.get("files")) + int(margin_bytes or 0)
        if mount is None or mount.get("size_available") is None:
            problems.append({"host": host, "what": "the free space of the filesystem that holds %s could not be read"
                                                   % path,
                             "fix": "check the path (model_sync_path) and that a directory above it can be read"})
            hosts[host] = {"needed": needed, "available": None, "mount": None}
            continue
        available = int(mount["size_available"])
        hosts[host] = {"needed": needed, "available": available, "mount": mount.get("mount")}
        if available < needed:
            problems.append({
                "host": host,
                "what": "%s free on %s, the copy needs up to %s (%d bytes: the files it lacks, the largest it may "
                        "rewrite and model_sync_free_margin_bytes)"
                        % (_gib(available), mount.get("mount"), _gib(needed), needed),
                "fix": "free %s on %s there, or copy to another filesystem (model_sync_path)"
                       % (_gib(needed - available), mount.get("mount"))})
    return {"ok": not problems, "problems": problems, "hosts": hosts}


# ------------------------------------------------------------------ the result

_ITEM = re.compile(r"^(?:\*deleting|[<>ch.*][fdLDSp][^ ]{7,}) +(.+)$")
_STATS = {
    "files_transferred": re.compile(r"^Number of regular files transferred: ([\d,]+)", re.M),
    "deleted": re.compile(r"^Number of deleted files: ([\d,]+)", re.M),
    "bytes_transferred": re.compile(r"^Total transferred file size: ([\d,]+) bytes", re.M),
    "total_bytes": re.compile(r"^Total file size: ([\d,]+) bytes", re.M),
}


def rsync_result(stdout, limit=20):
    """What one rsync run did: ``{changed, items, files_transferred, deleted, bytes_transferred, total_bytes,
    summary}``. ``changed``: rsync itemized a change (a file sent, created, deleted or its permissions or time
    set); with ``--dry-run``, what it would change."""
    text = stdout or ""
    items = [line for line in text.splitlines() if _ITEM.match(line)]
    out = {"changed": bool(items), "items": items[:limit], "more_items": max(0, len(items) - limit)}
    for key, pattern in _STATS.items():
        match = pattern.search(text)
        out[key] = int(match.group(1).replace(",", "")) if match else None
    out["summary"] = "%s files sent (%s), %s deleted, %d changes itemized" % (
        out["files_transferred"] if out["files_transferred"] is not None else "?",
        _gib(out["bytes_transferred"] or 0), out["deleted"] if out["deleted"] is not None else 0, len(items))
    return out


# ------------------------------------------------------------------ what the copy's checks read from the hosts

# The variables of an engine host the plan reads (how the source reaches it over SSH, its direct link).
PLAN_VARS = ("vllm_link_address", "ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file",
             "ansible_ssh_common_args")


def topology_model(topology, vllm_model="", vllm_split_model=None):
    """The model directory ``topology`` serves, as the vllm role's ``_vllm_topologies`` has it: ``vllm_model``, and for
    the split ``vllm_split_model`` where it is defined (None: not defined). An empty or unknown topology is replicas."""
    if topology == "split" and vllm_split_model is not None:
        return vllm_split_model or ""
    return vllm_model or ""


def plan_hostvars(engines, hostvars):
    """Per engine host, the ``PLAN_VARS`` set for it (``hostvars`` as Ansible has them, or any mappings)."""
    found = {}
    for host in engines or []:
        one = hostvars[host] if host in hostvars else {}
        found[host] = {name: one[name] for name in PLAN_VARS if name in one}
    return found


def registered(hosts, hostvars, name):
    """Per host of ``hosts``, its result registered as ``name`` (None where it has none)."""
    return {host: (hostvars[host].get(name) if host in hostvars else None) for host in hosts or []}


def space_targets(listings):
    """``space``'s ``targets`` from each target's ``model_manifest`` result (``listings``: host -> result or None):
    what it holds (``files``) and its filesystem's free space (``filesystem``), None where it has none."""
    return {host: {"files": (result or {}).get("files"), "filesystem": (result or {}).get("filesystem")}
            for host, result in listings.items()}


def copies(source, source_path, source_manifest, listings):
    """The copies to compare: the source's ``model_manifest`` result, labelled ``source <host>:<path>``, then each
    target's (``listings``; an empty one where it has none)."""
    found = {"source %s:%s" % (source, source_path): source_manifest}
    found.update((host, result or {}) for host, result in listings.items())
    return found


# ------------------------------------------------------------------ refusals before the copy


def ssh_probe(target):
    """The command that logs in to ``target`` (a plan's target with an address) the way its rsync will - the same
    ``--rsh`` - and runs ``true``: whether the source reaches it without a password."""
    rsh = next(arg for arg in target["argv"] if arg.startswith("--rsh="))[len("--rsh="):]
    return rsh.split(" ") + [target["address"], "true"]


def left_out(targets, play_hosts):
    """The refusal of a run whose hosts (``play_hosts``) leave out a target of the plan (``targets``: its target
    dicts): "" when every target is in the run."""
    hosts = [target["host"] for target in targets or []]
    missing = [host for host in hosts if host not in (play_hosts or [])]
    if not missing:
        return ""
    return ("%s would receive the model but %s not in this run (--limit, or not answering). Nothing was copied."
            % (", ".join(missing), "is" if len(hosts) == 1 else "are"))


def plan_refusal(planned):
    """The refusal of a plan (``planned``, the plan check's result): one that cannot be made (its ``errors``), else
    one that leaves out a target (its ``left_out``); "" when the copy can go on."""
    if not planned.get("ok", True):
        return "The model cannot be copied as asked. Nothing was copied:\n- " + "\n- ".join(planned.get("errors") or [])
    return planned.get("left_out") or ""


def source_refusal(source, source_path, manifest):
    """The refusal of a source whose listing (``manifest``, model_manifest's result) holds no file: "" otherwise."""
    manifest = manifest or {}
    if manifest.get("files"):
        return ""
    return ("The source %s has no model directory at %s (%s). Nothing was copied: set model_sync_source to the host "
            "that holds the model (or controller), or model_sync_source_path to where it is there."
            % (source, source_path, manifest.get("msg", "no manifest")))


def reach_refusal(source, results):
    """The refusal of targets the source cannot log in to over SSH without a password: ``results`` are the SSH
    probes' command results (a loop's, ``item`` the plan's target); "" when each answered."""
    unreached = [result for result in results or [] if "skipped" not in result and result.get("rc") != 0]
    if not unreached:
        return ""
    return ("%s cannot log in to %s over SSH without a password (%s: %s). Nothing was copied. rsync runs on the "
            "source as %s: put that user's public key (ssh-keygen -t ed25519 on %s) in the target user's "
            "~/.ssh/authorized_keys, or forward your SSH agent (ansible_ssh_common_args: -o ForwardAgent=yes), or copy "
            "from the controller (-e model_sync_source=controller). model_sync_ssh_user, model_sync_ssh_key_file and "
            "model_sync_ssh_args choose the user, the key and further ssh options."
            % (source, ", ".join(str(r["item"]["host"]) for r in unreached),
               "; ".join(str(r["item"]["via"]) for r in unreached),
               "; ".join(str(r.get("stderr") or "").strip() for r in unreached),
               "you, with your own SSH key" if source == CONTROLLER else "the user Ansible connects as there", source))
