"""What a start-up loads (issue 37: `--version` within 1.2x of importing click, a warm
`validate` within 1.2x of `--version`; bench/startup.py and bench/warm_validate.py measure
them). Held here by the modules each run leaves in sys.modules, in a fresh interpreter."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path
from typing import Optional

from tests.support.layers import member, oci_layout, tar_bytes

# Neither run needs these: the rich console, templates, YAML, the matrix, rendering.
HEAVY = ("rich", "jinja2", "yaml", "aipcc_build.matrix", "aipcc_build.render")
# Also records each pattern aipcc_build's code compiles (re's one entry point for them all;
# the standard library's own, json's or gettext's, are not the validator's).
START = "import sys\ncompiled = []\n"
SPY = ("import re\n"
       "_compile = re._compile\n"
       "def spy(pattern, flags):\n"
       "    caller = sys._getframe(1)\n"
       "    while caller.f_code.co_filename == re.__file__:\n"
       "        caller = caller.f_back\n"
       "    if not isinstance(pattern, re.Pattern) and \\\n"
       "            '/aipcc_build/' in caller.f_code.co_filename:\n"
       "        compiled.append(repr(pattern))\n"
       "    return _compile(pattern, flags)\n"
       "re._compile = spy\n")
RUN = ("from aipcc_build.cli import main\n"
       "try:\n"
       "    main(sys.argv[2:])\n"
       "finally:\n"
       "    open(sys.argv[1], 'w').write(' '.join(sorted(sys.modules)))\n"
       "    open(sys.argv[1] + '.patterns', 'w').write('\\n'.join(compiled))\n")


REPO = Path(__file__).resolve().parents[3]


def loaded(tmp_path: Path, *args: str, spy: bool = True) -> set[str]:
    """The modules `aipcc-build ARGS` loads; it must succeed. Run as an installed copy
    starts: without `site`, whose processing of this venv's editable install loads
    setuptools' path finder (pathlib, re, fnmatch) into every start, which no installed
    wheel does (bench/common.py runs the benchmarks so too). SPY: the patterns it compiles
    recorded too (`compiled`), `re` loaded before it starts to record them."""
    modules = tmp_path / "modules.txt"
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO), *site.getsitepackages()])}
    subprocess.run([sys.executable, "-S", "-c", START + (SPY if spy else "") + RUN, str(modules),
                    *args], check=True,
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


def test_verify_of_one_image_loads_no_click_dataclasses_ssl_or_socket(tmp_path: Path) -> None:
    """`verify` of one signed and attested image, on a registry reached in plain HTTP
    (issue 40: within 2x of a `skopeo inspect`): no click (its command line is read
    without), no dataclasses (nor inspect, ast, dis: records and plain classes), no ssl
    (the registry answered the API's base in plain HTTP: no TLS attempt), no socket
    module (plain HTTP on the C socket), no hashlib (the built-in sha256), no pathlib nor
    urllib.parse (no file written, no URL parsed), no idna codec (the host looked up as
    bytes), no http.client (nor email), no concurrent.futures."""
    import http.server
    import json

    from aipcc_build.publish.release_signing import Released, sign_release
    from aipcc_build.publish.signing import load_signer, write_private_key
    from aipcc_build.validate.results import Expectation, ImageVerdict
    from tests.support.http_server import serving
    from tests.unit.publish.test_verify import OCI_MANIFEST, MemoryRegistry, Registries, digest

    memory = MemoryRegistry()

    class Served(http.server.BaseHTTPRequestHandler):
        """The distribution API's reads of MEMORY (no referrers API, as distribution 2.8)."""

        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            kind, reference = self.path.rsplit("/", 2)[-2:]
            found: Optional[tuple[bytes, str]] = None
            if self.path == "/v2/":
                found = (b"{}", "application/json")
            elif kind == "manifests":
                found = memory.manifests.get(reference)
            elif kind == "blobs" and reference in memory.blobs:
                found = (memory.blobs[reference], "application/octet-stream")
            body, media_type = found or (b"{}", "application/json")
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", media_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    (tmp_path / "pass").write_text("p\n")
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    image = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}).encode()
    memory.put_manifest("rel/img", "1", image, OCI_MANIFEST)
    with serving(Served) as origin:
        host = origin[len("http://"):]
        sign_release([Released("base/img", f"{host}/rel/img@{digest(image)}", digest(image),
                               (f"{host}/rel/img:1",))],
                     load_signer(str(tmp_path / "k.key"), str(tmp_path / "pass")), "42",
                     lambda ref: [ImageVerdict(ref, "linux/amd64", expected=Expectation("cpu"))],
                     Registries(memory))  # type: ignore[arg-type]
        modules = loaded(tmp_path, "verify", "--no-tls-verify", "--key",
                         str(tmp_path / "k.pub"), f"{host}/rel/img:1", spy=False)
    assert "aipcc_build.publish.verify" in modules  # it ran, and passed (exit 0)
    # What the interpreter's start loads is not the command's (a `pip install -e`'s path
    # finder loads pathlib and urllib.parse: bench/common.py measures without it).
    started = set(subprocess.run([sys.executable, "-c", "import sys; print(*sys.modules)"],
                                 check=True, capture_output=True, text=True,
                                 timeout=60).stdout.split())
    assert not {"click", "dataclasses", "inspect", "ast", "dis", "ssl", "socket", "hashlib",
                "pathlib", "urllib.parse", "encodings.idna", "http.client", "email",
                "concurrent.futures"} & (modules - started)
    assert heavy(modules) == []
    # Nor typing (its names are the type checker's: `TYPE_CHECKING = False` in each module
    # on the path; 11 M of a check's 133 M instructions), nor importlib with the warnings it
    # loads (the built-in hashes found with __import__). Not in the interpreter's start
    # either (without site, as `loaded` runs: the editable finder loads both).
    assert not {"typing", "importlib", "warnings"} & modules
    # No pattern compiled, nor `re` loaded at all, nor the `enum` it loads (13.6 M of a
    # check's 124.6 M instructions): the reference is read with str methods
    # (`image_reference.is_reference`), and patterns are compiled, and `re` imported, on
    # first use (`patterns.lazy`, `errors._compiled`). Nor `json` (5.5 M more: its package
    # compiles patterns as it loads): documents are read by CPython's own scanner
    # (`oci.load_json`); nor `base64` (2.8 M: binascii decodes, `oci.b64decode`).
    assert not {"re", "enum", "json", "base64"} & modules
    # Nor `threading` (3% of a check: its classes and start-up state): the requests side by
    # side run on `_thread`'s threads, the locks are `_thread`'s, and the signal handlers
    # are set only from the main thread without asking `threading` which that is.
    assert "threading" not in modules
    # Nor functools, contextlib or collections (with keyword, operator and reprlib): 13 M
    # of a check's 89.5 M instructions, functools' namedtuple compiling its constructor.
    # `functional` gives the path cache, partial, contextmanager and suppress.
    assert not {"functools", "contextlib", "collections", "keyword", "operator",
                "reprlib"} & modules
    # The signatures checked through the system's libcrypto (publish.libcrypto), without
    # cryptography's Python layer (typing, enums, its OIDs and hashes: more than the rest
    # of the check imports), where the system has libcrypto.so.3.
    from aipcc_build.publish import libcrypto

    if libcrypto.load() is not None:
        assert "aipcc_build.publish.libcrypto" in modules
        assert not {m for m in modules if m.split(".")[0] == "cryptography"}
    # Only the verify path of the command line: no click group, no other command.
    assert sorted(m for m in modules if m.startswith("aipcc_build.cli")) == \
        ["aipcc_build.cli", "aipcc_build.cli.fast_lines", "aipcc_build.cli.signals",
         "aipcc_build.cli.verify_args"]


def test_the_verify_path_compiles_no_source_at_import() -> None:
    """No module `verify` loads compiles source text as it is imported (a quoted type in a
    runtime alias, `Callable[[str], "list[X]"]`, did: the first compile of a process
    starts the parser, a fifteenth of a `verify` of one image)."""
    # Source text, not a module's file (compiled from source where no bytecode is cached).
    # functools is loaded first: its cache-info namedtuple compiles its constructor, the
    # standard library's own compile, which any module using functools (cryptography too)
    # makes in an installed copy (in the dev venv, the editable install's finder had).
    code = ("import sys, functools\n"
            "compiled = []\n"
            "sys.addaudithook(lambda event, args: compiled.append(args[0])\n"
            "                 if event == 'compile' and args[1] == '<string>' else None)\n"
            "import aipcc_build.cli.verify_args, aipcc_build.publish.verify\n"
            "import aipcc_build.report.verification, aipcc_build.cli.signals\n"
            "print(compiled)")
    done = subprocess.run([sys.executable, "-c", code], check=True, text=True,
                          capture_output=True, timeout=60)
    assert done.stdout.strip() == "[]"
