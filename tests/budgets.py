"""Issue 36's budgets for the house, measured as docs/REDESIGN states them (python tests/budgets.py)."""
import glob
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# An import written twice (a module's path, then a flat file's): an optional library's
# `except ImportError: X = None` is not one.
DOUBLED = re.compile(r"except ImportError[^\n]*\n(?:[ \t]*#[^\n]*\n)*[ \t]+(?:from \S+ )?import ")
TEXT_KEYS = {"msg", "fail_msg", "success_msg", "name", "description"}


def _files(*patterns):
    return sorted(p for pattern in patterns for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _lines(node):
    """The lines of the file a scalar spans (a block scalar's end mark is the next line's start)."""
    end = node.end_mark.line + (1 if node.end_mark.column else 0)
    return max(end - node.start_mark.line, 1)


def multi_line_logic(paths):
    """(path, line) of every Jinja scalar spanning >= 3 lines, outside the text keys (msg, name, ...)."""
    found = []

    def walk(node, key=None):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                walk(v, getattr(k, "value", None))
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                walk(v, key)
        elif isinstance(node, yaml.ScalarNode) and key not in TEXT_KEYS:
            if ("{{" in node.value or "{%" in node.value) and _lines(node) >= 3:
                found.append((os.path.relpath(path, ROOT), node.start_mark.line + 1))

    for path in paths:
        for document in yaml.compose_all(_read(path)) if _read(path).strip() else ():
            walk(document)
    return found


def measure():
    tasks = _files("roles/*/tasks/*.yml")
    text = "".join(_read(p) for p in tasks)
    return {
        "role task lines": (sum(t.count("\n") for t in (_read(p) for p in tasks)), 3500),
        "namespace( in role tasks": (text.count("namespace("), 0),
        "{% for in role tasks": (len(re.findall(r"\{%-? *for", text)), 0),
        "hostvars in role tasks": (text.count("hostvars"), 15),
        "doubled imports (except ImportError: import)": (
            sum(len(DOUBLED.findall(_read(p))) for p in _files("plugins/**/*.py")), 0),
        "multi-line logic in playbooks and roles": (
            len(multi_line_logic(_files("playbooks/**/*.yml", "roles/*/*/*.yml"))), 25),
        "most entry points of a role": (max(len(yaml.safe_load(_read(p))["argument_specs"])
                                            for p in _files("roles/*/meta/argument_specs.yml")), 10),
    }


if __name__ == "__main__":
    worst = 0
    for name, (value, budget) in measure().items():
        print("%-42s %6d  (budget %d)%s" % (name, value, budget, "" if value <= budget else "  OVER"))
        worst |= value > budget
    if "-v" in sys.argv:
        for path, line in multi_line_logic(_files("playbooks/**/*.yml", "roles/*/*/*.yml")):
            print("multi-line logic: %s:%d" % (path, line))
    sys.exit(1 if worst else 0)
