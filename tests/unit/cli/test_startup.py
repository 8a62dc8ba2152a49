"""What a start-up loads (issue 37: `--version` within 1.2x of importing click, a warm
`validate` within 1.2x of `--version`; bench/startup.py and bench/warm_validate.py measure
them). Held here by the modules each run leaves in sys.modules, in a fresh interpreter."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

from tests.support.layers import member, oci_layout, tar_bytes

# Neither run needs these: the rich console, templates, YAML, the matrix, rendering.
HEAVY = ("rich", "jinja2", "yaml", "aipcc_build.matrix", "aipcc_build.render")
# Also records each pattern aipcc_build's code compiles (re's one entry point for them all;
# the standard library's own, json's or gettext's, are not the validator's).
RUN = ("import re, sys\n"
       "compiled, _compile = [], re._compile\n"
       "def spy(pattern, flags):\n"
       "    caller = sys._getframe(1)\n"
       "    while caller.f_code.co_filename == re.__file__:\n"
       "        caller = caller.f_back\n"
       "    if not isinstance(pattern, re.Pattern) and \\\n"
       "            '/aipcc_build/' in caller.f_code.co_filename:\n"
       "        compiled.append(repr(pattern))\n"
       "    return _compile(pattern, flags)\n"
       "re._compile = spy\n"
       "from aipcc_build.cli import main\n"
       "try:\n"
       "    main(sys.argv[2:])\n"
       "finally:\n"
       "    open(sys.argv[1], 'w').write(' '.join(sorted(sys.modules)))\n"
       "    open(sys.argv[1] + '.patterns', 'w').write('\\n'.join(compiled))\n")


REPO = Path(__file__).resolve().parents[3]


def loaded(tmp_path: Path, *args: str) -> set[str]:
    """The modules `aipcc-build ARGS` loads; it must succeed. Run as an installed copy
    starts: without `site`, whose processing of this venv's editable install loads
    setuptools' path finder (pathlib, re, fnmatch) into every start, which no installed
    wheel does (bench/common.py runs the benchmarks so too)."""
    modules = tmp_path / "modules.txt"
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO), *site.getsitepackages()])}
    subprocess.run([sys.executable, "-S", "-c", RUN, str(modules), *args], check=True,
                   stdout=subprocess.DEVNULL, timeout=60, env=env)
    return set(modules.read_text().split())


def compiled(tmp_path: Path) -> set[str]:
    """The patterns (their reprs) the last `loaded` run compiled."""
    return set(filter(None, (tmp_path / "modules.txt.patterns").read_text().split("\n")))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in HEAVY or m.startswith(tuple(f"{h}." for h in HEAVY)))


def test_version_loads_no_command_and_no_heavy_module(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "--version")
    assert heavy(modules) == []
    # No command's module, no outside-program runner, no signal handling (a command's): only
    # the group and its options; and no translation catalogs (click's version_option).
    assert sorted(m for m in modules if m.startswith("aipcc_build.")
                  and m.split(".")[1] in ("cli", "tools")) == \
        ["aipcc_build.cli", "aipcc_build.cli.options"]
    assert "signal" not in modules
    # Nor `locale`: no translation catalog is searched (gettext's look-ups load it).
    assert "locale" not in modules


def test_warm_validate_loads_no_scanner_pool_or_heavy_module(tmp_path: Path) -> None:
    ref = oci_layout(tmp_path / "image",
                     [tar_bytes([member("usr/lib/libfoo.so.1", b"\x7fELF not really")])])
    cache = tmp_path / "cache"
    cold = loaded(tmp_path, "validate", ref, "--cache-dir", str(cache), "--json")
    assert "aipcc_build.validate.layers" in cold  # the cold run scanned the layer
    warm = loaded(tmp_path, "validate", ref, "--cache-dir", str(cache), "--json")
    assert heavy(warm) == []
    # Every layer came from the cache: no scanner (nor its device-code reader), no second
    # read of the layers, no process pool, no other command.
    assert not {"aipcc_build.validate.layers", "aipcc_build.validate.device_code",
                "aipcc_build.imagefs.lookup"} & warm
    # The final-tree model of cached scans reads no tar (its kinds are `imagefs.kinds`).
    assert not {"aipcc_build.imagefs.tar", "zlib"} & warm
    # An image aipcc-build did not label has no constraints to judge: their module waits.
    assert "aipcc_build.toolkit.constraints" not in warm
    # Nor, without toolkit evidence, the CUDA component table's module; nor, without device
    # code or expected GPUs, the table of GPU architectures.
    assert not {"aipcc_build.toolkit.components", "aipcc_build.toolkit.gpu_archs"} & warm
    assert "concurrent.futures.process" not in warm
    # Nor any outside program: the answer is cached, so no runner and no subprocess; and
    # the handlers are set through `_signal`, without the `signal` module's enums.
    assert not {"aipcc_build.tools.runner", "subprocess", "signal"} & warm
    # Its records are `records.record`s, which load no dataclasses (nor copy, with it).
    assert not {"dataclasses", "copy"} & warm
    # Its options and help look nothing up in a translation catalog (`cli.options.LocalPath`).
    assert "locale" not in warm
    # Its paths are strings: no pathlib, with the urllib.parse and ipaddress it loads (about
    # a third of what a warm validation ran beyond `--version`); nor fnmatch, which only an
    # allow rule with a path needs.
    assert not {"pathlib", "urllib.parse", "ipaddress", "fnmatch"} & warm
    # Its command line is read without click (`cli.validate_args`): no click, no command
    # object, no other command.
    assert not {m for m in warm if m.split(".")[0] == "click"}
    assert sorted(m for m in warm if m.startswith("aipcc_build.cli.")) == \
        ["aipcc_build.cli.fast_lines", "aipcc_build.cli.signals", "aipcc_build.cli.validate_args"]


def test_each_command_is_loaded_from_the_module_that_defines_it() -> None:
    from aipcc_build.cli.options import COMMAND_MODULES, cli

    defined = {name: command.callback.__module__ for name, command in cli.commands.items()
               if command.callback is not None}
    assert defined == {name: f"aipcc_build.cli.{module}"
                       for name, module in COMMAND_MODULES.items()}


def test_warm_validate_compiles_no_pattern(tmp_path: Path) -> None:
    """A warm validation of an image without toolkit, config files or NVIDIA variables
    compiles no pattern (each costs about as much as loading a module): the cache key and
    image ID checks are string checks, the others wait for their literal, the credential
    masks of the JSON report among them (it holds none of theirs)."""
    ref = oci_layout(tmp_path / "image",
                     [tar_bytes([member("usr/lib/libfoo.so.1", b"\x7fELF not really")])])
    cache = tmp_path / "cache"
    loaded(tmp_path, "validate", ref, "--cache-dir", str(cache), "--json")
    loaded(tmp_path, "validate", ref, "--cache-dir", str(cache), "--json")
    assert compiled(tmp_path) == set()


def test_the_validation_report_loads_no_final_tree_model() -> None:
    """The report (and `--expect-gpu-archs`) read device code, not the overlay model: only
    the judge of an image loads `imagefs.overlay`."""
    code = ("import sys, aipcc_build.report.validation, aipcc_build.validate.gpu_code\n"
            "print(' '.join(sorted(sys.modules)))")
    modules = set(subprocess.run([sys.executable, "-c", code], check=True, text=True,
                                 capture_output=True, timeout=60).stdout.split())
    assert "aipcc_build.imagefs.overlay" not in modules
