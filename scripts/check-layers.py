#!/usr/bin/env python3
"""Checks that trainerd's includes follow its layers (docs/architecture.md).

  scripts/check-layers.py [--root DIR]

Reads every .h and .cc of common/, store/, daemon/ and trainer/ under DIR (the repository by
default) and fails, naming the file, the line and the rule, on an include that:
  - goes from a trainer concept folder to a higher one, or to a sibling of the same layer
    (spec < device < data, distributed < semantics < models, evaluation < loop < plan, profile);
  - reaches into another concept folder's private headers (trainer/src/<concept>/...), or
    into any private header from a public one;
  - brings LibTorch, or a trainer header outside spec/ and the keys of model kinds and data
    formats (*_spec.h), into torch-free code: common/, store/, daemon/, trainer's spec/, the
    *_spec.{h,cc} files and trainer-launch;
  - brings SQLite, Boost.Asio, systemd, prometheus-cpp, the store or the daemon into trainer/;
  - brings the daemon into store/, or anything of trainerd but common/ into common/.
Tests and benchmarks are white-box and not checked. Exit 0 when clean, 1 with the violations,
2 on a usage error.
"""
import argparse
import pathlib
import re
import sys

# Layers of trainer/, lowest first; a concept may include its own and lower layers only.
LAYERS = [
    {"spec"},
    {"device"},
    {"data", "distributed"},
    {"semantics"},
    {"models", "evaluation"},
    {"loop"},
    {"plan", "profile"},
]
RANK = {concept: rank for rank, layer in enumerate(LAYERS) for concept in layer}

TORCH = re.compile(r"^(torch|ATen|c10|caffe2)/")
NOT_IN_TRAINER = re.compile(r"^(sqlite3\.h|boost/asio|systemd/|prometheus/)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
MODULES = ("common", "store", "daemon", "trainer")


def module_of(path):
    """(module, concept) of a file relative to the root: ("trainer", "loop"), ("daemon", None)."""
    parts = path.parts
    if parts[0] == "trainer":
        if parts[1] == "tools":
            return "trainer", "tools"
        if parts[1] == "src" and len(parts) > 3:
            return "trainer", parts[2]
        if parts[1] == "include" and len(parts) > 5:  # include/trainerd/trainer/<concept>/
            return "trainer", parts[4]
        return "trainer", None
    return parts[0], None


def is_torch_free(path):
    """common/, store/, daemon/, and of trainer/: spec/, the *_spec files, trainer-launch."""
    module, concept = module_of(path)
    if module != "trainer":
        return True
    return concept == "spec" or path.stem.endswith("_spec") or path.name == "trainer_launch_main.cc"


def target_of(include, root):
    """What a quoted include names: (module, concept, private), or None for a file beside it."""
    parts = pathlib.PurePosixPath(include).parts
    if parts[0] == "trainerd" and len(parts) > 2:
        if parts[1] == "trainer":
            return "trainer", parts[2] if len(parts) > 3 else None, False
        return parts[1], None, False
    if len(parts) > 1 and (root / "trainer" / "src" / include).exists():
        return "trainer", parts[0], True
    return None


def check_include(root, rel, include, quoted):
    """Why `rel` may not include `include`, or None."""
    module, concept = module_of(rel)
    torch_free = is_torch_free(rel)
    if not quoted:
        if torch_free and TORCH.match(include):
            return "LibTorch in torch-free code"
        if module == "trainer" and NOT_IN_TRAINER.match(include):
            return "the trainer runs without SQLite, Asio, systemd and prometheus-cpp"
        return None
    target = target_of(include, root)
    if target is None:
        return None
    t_module, t_concept, private = target
    if module == "common" and t_module != "common":
        return "common/ depends on nothing else of trainerd"
    if module == "store" and t_module == "daemon":
        return "the store sits below the daemon"
    if module == "trainer" and t_module in ("store", "daemon"):
        return "the trainer does not know the store or the daemon"
    if t_module != "trainer":
        return None
    spec_header = t_concept == "spec" or pathlib.PurePosixPath(include).stem.endswith("_spec")
    if torch_free and not spec_header:
        return f"torch-free code includes trainer/{t_concept}, which is LibTorch's"
    if private and (module != "trainer" or t_concept != concept):
        return f"a private header of trainer/src/{t_concept} outside it"
    if private and rel.parts[1] == "include":
        return "a public header includes a private one, which is not installed"
    if module != "trainer" or concept == "tools":
        return None
    for c in (concept, t_concept):
        if c not in RANK:
            return f"trainer/{c} is no concept folder of the layers"
    if t_concept != concept and RANK[t_concept] >= RANK[concept]:
        relation = "a sibling" if RANK[t_concept] == RANK[concept] else "a higher layer"
        return f"trainer/{concept} includes {relation}, trainer/{t_concept}"
    return None


def violations(root):
    found = []
    for module in MODULES:
        for path in sorted((root / module).rglob("*")):
            if path.suffix not in (".h", ".cc") or not path.is_file():
                continue
            rel = path.relative_to(root)
            lines = path.read_text(errors="replace").splitlines()
            for number, line in enumerate(lines, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                quoted = match.group(1) == '"'
                why = check_include(root, rel, match.group(2), quoted)
                if why:
                    found.append(f"{rel}:{number}: {line.strip()}: {why}")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent,
                        type=pathlib.Path, help="the tree to check (default: this repository)")
    args = parser.parse_args()
    if not all((args.root / m).is_dir() for m in MODULES):
        print(f"check-layers.py: {args.root}: expected the folders {', '.join(MODULES)}",
              file=sys.stderr)
        return 2
    found = violations(args.root)
    for line in found:
        print(line)
    if found:
        print(f"check-layers.py: {len(found)} include(s) against the layers "
              "(docs/architecture.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
