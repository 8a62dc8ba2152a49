"""Shared set-up of the `aipcc-build matrix` benchmarks: a generated matrix in a temp dir,
the CLI from this checkout, and removal of every image a benchmark tagged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("BUILDAH_ISOLATION", "chroot")  # RUN steps need it on these hosts
_PLAIN_VENV = "AIPCC_BENCH_PLAIN_VENV"


def _without_editable_finder() -> None:
    """Run the benchmark again under a Python that starts as an installed copy does.

    A `pip install -e .` of this flat-layout project puts a setuptools path finder into
    site-packages, which every start-up of that venv's Python imports (pathlib, re, fnmatch:
    about 19 M instructions, 14 ms here). An installed wheel has no such finder, and the
    start-up ratios the benchmarks print would count it on both sides. The plain venv sees
    this checkout and the dev venv's site-packages through a .pth of paths only, and has its
    own `aipcc-build` entry point."""
    if not any(name.startswith("__editable__") for name in sys.modules):
        return
    import atexit
    import shutil
    import site
    import tempfile

    plain = Path(tempfile.mkdtemp(prefix="aipcc-bench-venv-"))
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(plain)], check=True)
    lib = next(plain.glob("lib/python3*/site-packages"))
    (lib / "aipcc-bench.pth").write_text(
        "\n".join([str(REPO), *site.getsitepackages()]) + "\n")
    entry = plain / "bin" / "aipcc-build"
    # pip's own console-script wrapper (26.x), word for word: what users run.
    entry.write_text(f"#!{plain / 'bin' / 'python'}\nimport sys\n"
                     "from aipcc_build.cli import main\n"
                     "if __name__ == '__main__':\n"
                     "    sys.argv[0] = sys.argv[0].removesuffix('.exe')\n"
                     "    sys.exit(main())\n")
    entry.chmod(0o755)
    os.environ[_PLAIN_VENV] = str(plain)
    python = str(plain / "bin" / "python")
    try:
        os.execv(python, [python, *sys.orig_argv[1:]])
    finally:
        atexit.register(shutil.rmtree, plain, True)


_without_editable_finder()
if os.environ.get(_PLAIN_VENV) and sys.prefix == os.environ[_PLAIN_VENV]:
    import atexit
    import shutil

    atexit.register(shutil.rmtree, os.environ[_PLAIN_VENV], True)


def as_installed() -> dict[str, str]:
    """The environment of an installed aipcc-build: its bytecode compiled, as pip does when
    it installs a package. Machines that set PYTHONDONTWRITEBYTECODE would otherwise compile
    every module from source on every run, which no installed copy does."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "aipcc_build")],
                   check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    return env


def shortest(command: list[str], env: dict[str, str], repeat: int = 21) -> tuple[float, float]:
    """(wall, CPU) seconds of COMMAND: the shortest of REPEAT runs each. The minimum filters
    out other processes' share of the machine (the median moved by 2x on a loaded two-core
    host); CPU time (user + system, the process and its children) is what the run costs
    whatever else runs beside it."""
    walls, cpus = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(command)} failed")
    return min(walls), min(cpus)


def instructions(command: list[str], env: dict[str, str]) -> int:
    """The instructions COMMAND executes, counted by valgrind's callgrind: the same on a
    loaded machine as on an idle one, where the shortest wall (and CPU) time of a 50 ms
    start-up still swung by 2x (shared two-core host, load 6-8). Exits when valgrind is
    missing."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind")
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *command], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    counted = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or counted is None:
        sys.exit(f"{' '.join(command)} failed under valgrind:\n{done.stderr[-2000:]}")
    return int(counted.group(1))


def installed_script() -> str:
    """The `aipcc-build` next to this python (or on PATH); exits when there is none."""
    import shutil

    script = shutil.which("aipcc-build", path=os.path.dirname(sys.executable)) or \
        shutil.which("aipcc-build")
    if script is None:
        sys.exit("aipcc-build is not installed")
    return script


def script(name: str) -> str:
    """Run scripts/NAME (they print what they made or fetched last); its last line."""
    out = subprocess.run([str(REPO / "scripts" / name)], check=True, capture_output=True,
                         text=True, timeout=3600).stdout
    return out.strip().splitlines()[-1]


def write_matrix(root: Path, text: str, templates: dict[str, str]) -> Path:
    """Write the matrix and its templates under ROOT and render it."""
    sys.path.insert(0, str(REPO))
    from aipcc_build.matrix import load
    from aipcc_build.render import apply, render_all

    (root / "templates").mkdir(parents=True)
    for name, body in templates.items():
        (root / "templates" / name).write_text(body)
    (root / "matrix").mkdir()
    path = root / "matrix" / "bench.yaml"
    path.write_text(text)
    matrix = load(path)
    apply(matrix, render_all(matrix), check=False, remove_stale=False)
    return path


def aipcc_build(cwd: Path, *args: str) -> float:
    """Wall time of one `aipcc-build` run (which must succeed)."""
    env = {**as_installed(), "CI": "1"}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "aipcc_build", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"aipcc-build failed:\n{done.stderr}")
    return elapsed


def payload_image(name: str, base: str, stamp: str, payload_mb: int,
                  platform: str = "linux/amd64") -> None:
    """Image NAME of PLATFORM built from BASE with a layer of its own: STAMP and PAYLOAD_MB
    incompressible bytes (what the publish benchmarks copy). Copied in, not made by a RUN
    step: a base of another architecture needs no emulation."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="aipcc-bench-payload-") as context:
        (Path(context) / "stamp").write_text(stamp + "\n")
        (Path(context) / "payload").write_bytes(os.urandom(payload_mb << 20))
        subprocess.run(["buildah", "build", "-q", "--platform", platform, "-t", name,
                        "-f", "-", context],
                       input=f"FROM {base}\nCOPY stamp payload /\n",
                       text=True, check=True, capture_output=True)


def remove_images(prefix: str) -> None:
    listed = json.loads(subprocess.run(["buildah", "images", "--json"], check=True,
                                       capture_output=True, text=True).stdout or "[]") or []
    names = [name for image in listed for name in image.get("names") or []
             if name.startswith(prefix)]
    # Manifest lists first: `rmi` of a list removes its instances, not the list.
    for name in names:
        subprocess.run(["buildah", "manifest", "rm", name], capture_output=True)
    listed = json.loads(subprocess.run(["buildah", "images", "--json"], check=True,
                                       capture_output=True, text=True).stdout or "[]") or []
    ours = [image["id"] for image in listed
            if any(name.startswith(prefix) for name in image.get("names") or [])]
    if ours:
        subprocess.run(["buildah", "rmi", "-f", *ours], capture_output=True, check=True)


def when(text: str) -> float:
    """Epoch seconds of a build report's ISO time."""
    import datetime as dt

    return dt.datetime.fromisoformat(text).timestamp()


def makespan(images: list[dict]) -> float:
    """First start to last end over a build report's images."""
    return max(when(i["end"]) for i in images) - min(when(i["start"]) for i in images)


def lower_bound(durations: dict[str, float], chains: list[list[str]], jobs: int
                ) -> tuple[float, float]:
    """(critical path, total work / jobs) of builds with DURATIONS, dependent along CHAINS."""
    critical = max(sum(durations[key] for key in chain) for chain in chains)
    return critical, sum(durations.values()) / jobs
