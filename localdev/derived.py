"""Write what the pipeline declarations imply into the files that list it.

    .venv/bin/python -m localdev.derived          # rewrite what is stale, name each file
    .venv/bin/python -m localdev.derived --check  # exit 1 naming the stale files, write nothing

The declarations in ``shared/domain/pipelines/`` (without ``PIPELINE_MODULES``: the pipelines
the app ships) are the one source. ``shared/bootstrap/pipeline_list.py`` is the app's list of
them, each wired to its tasks module (``shared/service_layer/<name>_tasks.py``) and to the
Table adapters its builders ask for that the container has not
(``shared/adapters/table_<parameter>.py``). ``infra/app-resources.json`` is written whole and
read by Bicep (``loadJsonContent``: the Service Bus queues, the queue app settings, the tables
and the worker's thread count). The other files keep everything but their pipeline lines,
which are rewritten in the list's order: the emulator's ``infra/local/config.json``,
``local.settings.json.example`` (queues and thread count), the postprovision scripts, and the
settings and table lists of README.md and docs/deploy.md. ``tests/infra/test_derived_files.py``
fails naming the file when one of them disagrees.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from localdev.derived_files import DERIVED, Derived, Facts
from localdev.pipeline_list import pipeline_list_source, shipped_modules

REPO_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["DERIVED", "Derived", "main", "stale"]


def stale(root: Path = REPO_ROOT) -> dict[str, str]:
    """Each derived file that disagrees with the declarations: path -> what it should be."""
    modules = shipped_modules(root)
    facts = Facts.of(modules, root)
    found = {}
    for derived in DERIVED:
        path = root / derived.path
        text = path.read_text() if path.exists() else ""
        wanted = derived.write(text, facts)
        if wanted != text:
            found[derived.path] = wanted
    listed = root / "shared" / "bootstrap" / "pipeline_list.py"
    wanted = pipeline_list_source(modules)
    if not listed.exists() or listed.read_text() != wanted:
        found[str(listed.relative_to(root))] = wanted
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localdev.derived", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    found = stale()
    for path, text in found.items():
        if args.check:
            print(f"{path} is stale: run python -m localdev.derived")
        else:
            (REPO_ROOT / path).write_text(text)
            print(f"wrote {path}")
    if not found:
        print("every file agrees with the pipeline declarations")
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
