"""Validate Tekton PipelineRun documents against tests/data/tekton/pipelinerun-v1.schema.json.

As a module (tests):   from tests.support.tekton_schema import errors
                       assert errors(yaml_text) == []
As a script:           python tests/support/tekton_schema.py [FILE.yaml ...]
  with no FILE, checks the schema's own fixtures: tests/data/tekton/valid/*.yaml must pass and
  tests/data/tekton/invalid/*.yaml must each fail. Exit 0 when all is as expected, 1 otherwise.
Needs `jsonschema` (>= 4.0, for draft 2020-12) and PyYAML.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent.parent / "data" / "tekton"
SCHEMA = DATA / "pipelinerun-v1.schema.json"


# libyaml's loader where PyYAML has it: the emitted documents are many and large, and the
# schema is what is tested here, not the YAML reader.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    """The YAML (or JSON) document TEXT, as yaml.safe_load reads it."""
    return yaml.load(text, Loader=_LOADER)


@lru_cache(maxsize=1)
def validator():
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(text: str) -> list[str]:
    """Every schema violation of the YAML (or JSON) document TEXT, as 'path: message'."""
    document = load(text)
    found = sorted(validator().iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {_short(e)}" for e in found]


def _short(error) -> str:
    # oneOf/anyOf failures say little on their own: name the deepest sub-error too.
    if error.context:
        deepest = max(error.context, key=lambda e: len(e.absolute_path))
        where = "/".join(map(str, deepest.absolute_path))
        return f"{error.message[:120]} ({where}: {deepest.message[:160]})"
    return error.message[:240]


def main(argv: list[str]) -> int:
    status = 0
    if argv:
        for name in argv:
            problems = errors(Path(name).read_text())
            print(f"{name}: {'ok' if not problems else f'{len(problems)} error(s)'}")
            for problem in problems:
                print(f"  {problem}")
            status |= bool(problems)
        return status
    for path in sorted((DATA / "valid").glob("*.yaml")):
        problems = errors(path.read_text())
        print(f"valid/{path.name}: {'ok' if not problems else 'UNEXPECTED FAILURE'}")
        for problem in problems:
            print(f"  {problem}")
        status |= bool(problems)
    for path in sorted((DATA / "invalid").glob("*.yaml")):
        problems = errors(path.read_text())
        print(f"invalid/{path.name}: {'rejected' if problems else 'UNEXPECTEDLY VALID'}")
        for problem in problems[:3]:
            print(f"  {problem}")
        status |= not problems
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
