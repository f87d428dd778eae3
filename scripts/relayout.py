"""Move the package's flat modules into layer packages and rewrite every reference to their old paths.

    python scripts/relayout.py            # move what is still at its old place, rewrite every old reference
    python scripts/relayout.py --check    # list what would change, change nothing (exit 1 when anything would)

The layers (issue 23): ``core/`` the model every stage shares, ``runtime/`` what a run stands on (configuration,
Spark session, locks, state), ``commands/`` what a user runs, ``sim/`` the demo data and encoders; the DDL parser
and its apply step together in ``merge/ddl/``.

Rerunnable: a module is moved (``git mv``) only while it is at its old place, and only old paths are rewritten, so
after merging a branch that still imports ``ticdc_lakehouse.config`` a second run rewrites just those references.
What is rewritten, in ``*.py *.toml *.cfg *.md *.yml *.yaml *.sh *.txt Makefile`` outside .git/.venv:

- dotted paths anywhere in the text: imports, ``mock.patch``/monkeypatch strings, ``python -m``, console-script
  entry points (``ticdc_lakehouse.cli:main``), registry strings (``"ticdc_lakehouse.encode.craft:..."``);
- ``from ticdc_lakehouse import config`` (and ``from ticdc_lakehouse.merge import ddl_apply``): the new parent,
  with ``as <old name>`` where the module's name changed, so the code below keeps its name for it;
- relative imports inside the package that reach a moved module (``from ..config import``): made absolute;
- file paths (``ticdc_lakehouse/jvm_archive.py``, ``ticdc_lakehouse/encode/``) in docs, comments and scripts.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "ticdc_lakehouse"

#: the layers: new package -> the modules (or packages) of the top level it takes, keeping their names
LAYERS: dict[str, tuple[str, ...]] = {
    "core": ("model", "values", "mysql_types", "events_arrow", "column_defaults", "sql_names", "redaction"),
    "runtime": ("config", "spark_session", "jvm_archive", "locks", "state", "faults", "local_frame", "job_runner",
                "object_storage", "permissions"),
    "commands": ("pipeline", "maintenance", "status", "timetravel", "seed_tables", "cli", "output", "summary",
                 "progress", "preflight"),
    "sim": ("demo", "workload", "archive_writer", "encode"),
}

#: what each layer package says it is (its ``__init__`` docstring)
LAYER_DOCS = {
    "core": "The model every stage shares: events, table schemas, MySQL types and values, SQL spelling, redaction.",
    "runtime": "What a run stands on: configuration, the Spark session, locks, the state tables, fault points.",
    "commands": "What a user runs: the CLI and the commands behind it (pipeline, status, maintenance, time travel).",
    "sim": "Demo and test data: the simulated upstream workload, the archive writer and the protocol encoders.",
    "merge.ddl": "DDL: parsing TiDB's statements (``parse``) and applying them to Iceberg tables (``apply``).",
}


def moves() -> dict[str, str]:
    """Old dotted module path -> new one (without the package prefix)."""
    mapping = {name: f"{layer}.{name}" for layer, names in LAYERS.items() for name in names}
    mapping["ddl_parse"] = "merge.ddl.parse"
    mapping["merge.ddl_apply"] = "merge.ddl.apply"
    return mapping


def _path_of(dotted: str) -> Path:
    return ROOT / PACKAGE / Path(*dotted.split("."))


def _source(dotted: str) -> Path | None:
    """The module file or package directory of a dotted path, None when there is neither."""
    base = _path_of(dotted)
    if base.is_dir():
        return base
    module = base.with_suffix(".py")
    return module if module.is_file() else None


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def move_modules(check: bool) -> list[str]:
    """``git mv`` each module still at its old place; the layer packages get an ``__init__`` saying what they hold."""
    done = []
    for package, doc in LAYER_DOCS.items():
        init = _path_of(package) / "__init__.py"
        if not init.exists():
            done.append(f"create {init.relative_to(ROOT)}")
            if not check:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text(f'"""{doc}"""\n', encoding="utf-8")
                _git("add", str(init.relative_to(ROOT)))
    for old, new in moves().items():
        source = _source(old)
        if source is None:
            continue
        target = _path_of(new)
        target = target if source.is_dir() else target.with_suffix(".py")
        if target.exists():
            sys.exit(f"relayout: both {source.relative_to(ROOT)} and {target.relative_to(ROOT)} exist: merge them "
                     "by hand (a branch added the old module back), then rerun")
        done.append(f"git mv {source.relative_to(ROOT)} {target.relative_to(ROOT)}")
        if not check:
            _git("mv", str(source.relative_to(ROOT)), str(target.relative_to(ROOT)))
    return done


def _dotted_pattern(mapping: dict[str, str]) -> re.Pattern[str]:
    names = "|".join(re.escape(old) for old in sorted(mapping, key=len, reverse=True))
    return re.compile(rf"(?<![\w.]){PACKAGE}\.({names})(?![\w])")


def _path_pattern(mapping: dict[str, str]) -> re.Pattern[str]:
    names = "|".join(re.escape(old.replace(".", "/")) for old in sorted(mapping, key=len, reverse=True))
    return re.compile(rf"(?<![\w/.]){PACKAGE}/({names})(?=\.py\b|/|[^\w/.]|$)")


def _from_package_imports(text: str, mapping: dict[str, str]) -> str:
    """``from ticdc_lakehouse[.merge] import a, b as c`` naming moved modules: one line per new parent."""
    parents: dict[str, dict[str, str]] = {}
    for old, new in mapping.items():
        parent, _, name = old.rpartition(".")
        parents.setdefault(parent, {})[name] = new
    statement = re.compile(rf"^([ \t]*)from {PACKAGE}(\.[\w.]+)? import ([\w ,]+?)[ \t]*(#.*)?$", re.MULTILINE)

    def rewrite(match: re.Match[str]) -> str:
        indent, parent, names, comment = match.group(1), (match.group(2) or ".")[1:], match.group(3), match.group(4)
        moved = parents.get(parent, {})
        items = [item.strip() for item in names.split(",") if item.strip()]
        if not any(item.split(" as ")[0].strip() in moved for item in items):
            return match.group(0)
        groups: dict[str, list[str]] = {}
        for item in items:
            name, _, alias = (part.strip() for part in item.partition(" as "))
            if name in moved:
                new_parent, _, new_name = moved[name].rpartition(".")
                alias = alias or (name if new_name != name else "")
                groups.setdefault(f"{PACKAGE}.{new_parent}", []).append(f"{new_name} as {alias}" if alias else new_name)
            else:
                groups.setdefault(f"{PACKAGE}{'.' + parent if parent else ''}", []).append(item)
        lines = [f"{indent}from {where} import {', '.join(what)}" for where, what in sorted(groups.items())]
        if comment:
            lines[0] += f"  {comment}"
        return "\n".join(lines)

    return statement.sub(rewrite, text)


def _relative_imports(path: Path, text: str, mapping: dict[str, str]) -> str:
    """Relative imports inside the package that reach a moved module become absolute (then rewritten)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1]  # a module's package; an __init__'s package is its directory, also parts[:-1]
    lines = text.split("\n")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package[: len(package) - (node.level - 1)]
        absolute = ".".join([*base, node.module] if node.module else base)
        inner = absolute[len(PACKAGE) + 1:] if absolute.startswith(PACKAGE + ".") else ""
        names = [alias.name for alias in node.names]
        if inner in mapping or any(f"{inner}.{name}".lstrip(".") in mapping for name in names):
            head = re.compile(rf"from\s+\.{{{node.level}}}{re.escape(node.module or '')}\s+import")
            line = lines[node.lineno - 1]
            lines[node.lineno - 1] = head.sub(f"from {absolute} import", line, count=1)
    return "\n".join(lines)


REWRITTEN_SUFFIXES = {".py", ".toml", ".cfg", ".md", ".yml", ".yaml", ".sh", ".txt", ".ini", ".json"}
SKIPPED_PARTS = {".git", ".venv", "node_modules", "__pycache__", ".lakehouse", "jvm", "build", "dist"}


def candidate_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\n")
    files = []
    for name in listed:
        path = ROOT / name
        if not name or not path.is_file() or SKIPPED_PARTS & set(Path(name).parts):
            continue
        if path.resolve() == Path(__file__).resolve() or name.endswith(".egg-info/SOURCES.txt"):
            continue
        if path.suffix in REWRITTEN_SUFFIXES or path.name in ("Makefile", "Dockerfile"):
            files.append(path)
    return files


def rewrite(text: str, path: Path, mapping: dict[str, str]) -> str:
    if path.suffix == ".py" and path.is_relative_to(ROOT / PACKAGE):
        text = _relative_imports(path, text, mapping)
    if path.suffix == ".py":
        text = _from_package_imports(text, mapping)
    dotted = _dotted_pattern(mapping)
    text = dotted.sub(lambda m: f"{PACKAGE}.{mapping[m.group(1)]}", text)
    slashed = {old.replace(".", "/"): new.replace(".", "/") for old, new in mapping.items()}
    return _path_pattern(mapping).sub(lambda m: f"{PACKAGE}/{slashed[m.group(1)]}", text)


def rewrite_references(check: bool) -> list[str]:
    mapping = moves()
    changed = []
    for path in candidate_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text, path, mapping)
        if new != text:
            changed.append(f"rewrite {path.relative_to(ROOT)}")
            if not check:
                path.write_text(new, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="list what would change; change nothing")
    args = parser.parse_args(argv)
    actions = move_modules(args.check)
    # a check run has moved nothing, so the relative imports it reports are computed at the old places
    actions += rewrite_references(args.check)
    for action in actions:
        print(action)
    if not actions:
        print("relayout: nothing to do (every module is in its layer, no reference names an old path)")
    return 1 if args.check and actions else 0


if __name__ == "__main__":
    sys.exit(main())
