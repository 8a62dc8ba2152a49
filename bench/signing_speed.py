"""Benchmark signing and attesting: `promote` of a release of the demo's shape into an empty
registry, with `--sign-by-sigstore-private-key` against without (shortest of ROUNDS
alternated runs each, ratio, target <= 1.1; with the CPU time of promote and its skopeo
processes, and that plus the registries' own, which share this host's cores: the wall
ratio moves with the machine's load, the work does not; and the requests the destination
registry answered, by kind, in the last run of each, from its access log, with the CPU time
the destination registry spent: what signing adds is mostly the registry's work of each
request);
and `verify` of one image against `skopeo inspect` of it (shortest of several runs each,
ratio, target <= 2).

Each aipcc-build command runs as the installed command does: the `aipcc-build` script pip
writes (bench/common.py's plain venv has one of pip's form), not `python -m aipcc_build`,
whose runpy start-up no user pays.

The release is the demo's (matrix/demo.yaml): as many images as its matrix expands to,
each of its platforms, its product's name, version and moving tags (each tag promote moves
is one more identity each manifest is signed for; `--moving-tags` adds some, as a release
that moves `{version}` and `latest` does). Each platform is the demo's base image (Debian 12
from scripts/base-os, amd64 and arm64: one large layer every image of the release shares;
`--base busybox`: busybox, amd64 inside whatever the index says) plus a layer of PAYLOAD_MB
incompressible bytes of its own, as bench/mirror_speed.py makes them (the release's CUDA
runtime wheels are about that much); with two platforms an index of the two, each platform
with its own verdict in the report: three manifests to sign per image (the index and each
platform) and two to attest. The report records each image's verdict
as the build's gate writes it (the validator run on the pushed image), so the signed
promote attests that verdict and does not validate again; the bench also says how long
the validator alone takes on the same images (what a report without verdicts costs the
signed promote).

Usage: python bench/signing_speed.py [--payload-mb N] [--platforms 1|2]
    [--base busybox|debian] [--moving-tags TAG ...] [--verify-only] [--instructions]
    (needs buildah, skopeo, docker-registry; the defaults are the demo release's;
    --verify-only: one image promoted once, signed, and only the verify figures, in a
    minute rather than a few; --instructions: also the instructions one verify executes,
    valgrind's count, which a loaded machine does not move)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, as_installed, installed_script, instructions, payload_image, shortest  # noqa: E402
from tests.support.registry import Registry  # noqa: E402

ROUNDS = 3
PAYLOAD_MB = 8
DEMO = REPO / "matrix" / "demo.yaml"
BASE = "localhost/aipcc-demo/busybox:latest"
# The demo's base image of each platform (scripts/base-os [--arch arm64]).
DEBIAN = {"amd64": "localhost/aipcc/debian:bookworm",
          "arm64": "localhost/aipcc/debian:bookworm-arm64"}


def registry_cpu(registry: Registry) -> float:
    """CPU seconds (user + system) REGISTRY's process has used so far."""
    assert registry.proc is not None
    with open(f"/proc/{registry.proc.pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_registries(argv: list[str], env: dict[str, str], registries: list[Registry]
                    ) -> tuple[float, float, float, float]:
    """(wall, CPU, CPU with the registries', the destination's alone) of ARGV (`timed`):
    the third adds what REGISTRIES (the source, then the run's destination) spent
    meanwhile. On this host the registries share the two cores with promote, so the wall
    time of a signed promote counts the registry's work of each upload; this total is
    that work whatever else the machine runs."""
    before = [registry_cpu(r) for r in registries]
    wall, cpu = timed(argv, env)
    spent = [registry_cpu(r) - b for r, b in zip(registries, before)]
    return wall, cpu, cpu + sum(spent), spent[-1]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ARGV; CPU: user + system of it and its children (skopeo),
    what the run costs whatever else the machine runs."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {stderr.decode(errors='replace')}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload-mb", type=int, default=PAYLOAD_MB,
                        help="incompressible MB in each image's own layer")
    product, count, demo_platforms = _demo_release()
    parser.add_argument("--platforms", type=int, choices=(1, 2), default=demo_platforms,
                        help=f"platforms of each image (the demo release's: {demo_platforms})")
    parser.add_argument("--base", choices=("busybox", "debian"), default="debian",
                        help="what each image is built on (the demo's: debian)")
    parser.add_argument("--moving-tags", nargs="*", default=product["moving_tags"],
                        metavar="TAG", help="tags promote moves besides the immutable one "
                        f"(the demo release's: {product['moving_tags'] or 'none'})")
    parser.add_argument("--verify-only", action="store_true",
                        help="only the verify figures: one image, one signed promote")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions one verify executes (valgrind)")
    options = parser.parse_args()
    product["moving_tags"] = options.moving_tags
    count, rounds = (1, 1) if options.verify_only else (count, ROUNDS)
    payload_mb, platforms = options.payload_mb, options.platforms
    if options.base == "debian":
        bases = DEBIAN
        for arch in ("amd64", "arm64")[:platforms]:
            subprocess.run([str(REPO / "scripts" / "base-os"), "--arch", arch], check=True,
                           capture_output=True)
    else:
        bases = {"amd64": BASE, "arm64": BASE}
        subprocess.run([str(REPO / "scripts" / "base-image"), BASE], check=True,
                       capture_output=True)
    cli = installed_script()  # the `aipcc-build` pip writes
    env = as_installed()
    tag = uuid.uuid4().hex[:8]
    names: list[str] = []
    registries: list[Registry] = []
    with tempfile.TemporaryDirectory(prefix="aipcc-bench-signing-") as tmp:
        root = Path(tmp)
        try:
            def fresh(name: str) -> str:
                (root / name).mkdir()
                registries.append(Registry(root / name, access_log=root / f"{name}.log"))
                registries[-1].start()
                # The requests of the run from here on (not the start-up's look).
                started[name] = (root / f"{name}.log").stat().st_size
                return registries[-1].host

            started: dict[str, int] = {}

            src = fresh("src")
            entries = []
            for index in range(count):
                reference = f"{src}/aipcc/base-images/img{index}:{product['version']}-1"
                entries += _pushed(reference, f"{tag}-{index}", payload_mb, platforms,
                                   bases, names)
            cache = root / "cache"
            env["AIPCC_BUILD_CACHE"] = str(cache)
            # Each platform's manifest judged by its digest (the bench's busybox "arm64"
            # is amd64 inside: judged through the index, it would fail as one).
            verdicts = _gate_verdicts([f"{str(e['reference']).rsplit(':', 1)[0]}@"
                                       f"{e['digest']}" for e in entries], env)
            for entry, record in zip(entries, verdicts):
                # The platform the report names (the busybox "arm64" is amd64 inside).
                entry["verdict"] = {**record, "platform": entry.get("platform")
                                    or record["platform"]}
            report = root / "report.json"
            report.write_text(json.dumps({"schema": 1, "build_id": "1", "registry": src,
                                          "product": product, "images": entries}))
            (root / "pass").write_text("bench\n")
            subprocess.run([sys.executable, "-c",
                            "import sys; from aipcc_build.publish.signing import "
                            "write_private_key as w; w(sys.argv[1], b'bench')",
                            str(root / "release.key")], env=env, check=True)
            promote = [cli, "promote", "--no-tls-verify", "--report", str(report)]
            # Alternated, each into a registry of its own (empty: no blob there yet), the
            # shortest of ROUNDS each: one run of either is at the mercy of the machine.
            unsigned_runs, signed_runs = [], []
            load = _load()
            for n in range(rounds):
                if not options.verify_only:
                    plain = fresh(f"plain{n}")
                    unsigned_runs.append(with_registries(
                        [*promote, "--to", f"{plain}/rel"], env, registries[:1] +
                        registries[-1:]))
                signed_name = f"signed{n}"
                signed = fresh(signed_name)
                signed_runs.append(with_registries([
                    *promote, "--to", f"{signed}/rel", "--sign-by-sigstore-private-key",
                    str(root / "release.key"), "--sign-passphrase-file", str(root / "pass")],
                    env, registries[:1] + registries[-1:]))
            if not options.verify_only:
                figures = [(min(run[i] for run in unsigned_runs),
                            min(run[i] for run in signed_runs)) for i in range(4)]
                # Each signed run against the unsigned run just before it (the two a few
                # seconds apart, under much the same load): the shortest of each can pair
                # a lucky unsigned run with an unlucky signed one.
                load += f" to {_load()}; median of the {rounds} runs paired: " \
                    f"{_paired(unsigned_runs, signed_runs, 0):.2f}"
                # The CPU figures under load move too (a run's CPU time grows with the
                # cores' contention): the same pairing of the totals with the registries'.
                all_paired = _paired(unsigned_runs, signed_runs, 2)
                # The build validated these layers on this machine: its scans are cached.
                validate = [cli, "validate", "--no-tls-verify",
                            *[f"docker://{e['reference']}" for e in entries]]
                subprocess.run(validate, env=env, capture_output=True)
                validated = _timed_any(validate, env)
                requests = [_requests(root / f"{name}.log", started[name])
                            for name in (f"plain{rounds - 1}", f"signed{rounds - 1}")]
            one = f"{signed}/rel/aipcc/base-images/img0:{product['version']}-1"
            verify = [cli, "verify", "--no-tls-verify", "--key", str(root / "release.pub"), one]
            verified = subprocess.run(verify, env=env, capture_output=True, text=True)
            if verified.returncode != 0:
                sys.exit(f"verify failed: {verified.stdout}{verified.stderr}")
            repeat = 21 if options.verify_only else 7
            inspect = ["skopeo", "inspect", "--tls-verify=false", f"docker://{one}"]
            # What each asks of the registry (one run), and the registry's CPU time a run
            # (the mean over the runs timed): on this host the registry's work shares the
            # cores, and it is what the wall time of the check mostly counts.
            asked = [_asked(command, env, root / f"{signed_name}.log")
                     for command in (verify, inspect)]
            verify_wall, verify_cpu, verify_registry = _timed_with(
                verify, env, registries[-1], repeat)
            inspect_wall, inspect_cpu, inspect_registry = _timed_with(
                inspect, env, registries[-1], repeat)
            startup, _ = shortest([cli, "--version"], env, repeat=repeat)
            verify_count = instructions(verify, env) if options.instructions else None
        finally:
            for registry in registries:
                registry.stop()
            if names:
                subprocess.run(["buildah", "rmi", "-f", *names], capture_output=True)
    if not options.verify_only:
        _promote_figures(count, options.base, payload_mb, platforms, options.moving_tags,
                         figures, validated, load)
        print(f"CPU time with the registries', median of the {rounds} runs paired: "
              f"{all_paired:.2f}")
        _request_figures(*requests, figures[3])
    print(f"verify of one image: {verify_wall:.3f} s; skopeo inspect of it: "
          f"{inspect_wall:.3f} s; ratio {verify_wall / inspect_wall:.2f} (target <= 2)")
    print(f"in CPU time (user + system): verify {verify_cpu:.3f} s; skopeo inspect "
          f"{inspect_cpu:.3f} s; ratio {verify_cpu / inspect_cpu:.2f}")
    print(f"requests to the registry: verify {asked[0]}, skopeo inspect {asked[1]}; the "
          f"registry's CPU time a run: verify {verify_registry:.3f} s, skopeo inspect "
          f"{inspect_registry:.3f} s")
    # Python and the CLI starting is most of a verify against a registry on this host.
    print(f"of which aipcc-build --version: {startup:.3f} s; the rest, "
          f"{verify_wall - startup:.3f} s, is {(verify_wall - startup) / inspect_wall:.2f} "
          "of skopeo inspect")
    if verify_count is not None:
        print(f"instructions of one verify (valgrind): {verify_count / 1e6:.1f} M")
    return 0


def _promote_figures(count: int, base: str, payload_mb: int, platforms: int,
                     moving_tags: list[str], figures: list[tuple[float, float]],
                     validated: float, load: str) -> None:
    (unsigned, signed_run), (unsigned_cpu, signed_cpu), (unsigned_all, signed_all) = \
        figures[:3]
    print(f"promote of {count} images ({base} + {payload_mb} MB each, {platforms} "
          f"platform{'s' if platforms > 1 else ''}, moving tags: "
          f"{' '.join(moving_tags) or 'none'}) into an empty "
          f"registry, shortest of {ROUNDS}: {unsigned:.2f} s; signed and attested: "
          f"{signed_run:.2f} s; ratio {signed_run / unsigned:.2f} (target <= 1.1; "
          f"load average {load})")
    print(f"CPU time (promote and its skopeo processes): {unsigned_cpu:.2f} s; signed: "
          f"{signed_cpu:.2f} s; ratio {signed_cpu / unsigned_cpu:.2f}")
    print(f"CPU time with the registries' (the source and the destination, on this host "
          f"too): {unsigned_all:.2f} s; signed: {signed_all:.2f} s; ratio "
          f"{signed_all / unsigned_all:.2f}")
    print(f"the build's verdicts attested, not validated again; the validator alone on "
          f"the same images (layer scans cached) takes {validated:.2f} s, "
          f"{validated / unsigned:.2f} of the unsigned promote")


def _asked(command: list[str], env: dict[str, str], log: Path) -> int:
    """The requests one run of COMMAND makes to the registry whose access LOG is LOG."""
    offset = log.stat().st_size
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
    return sum(_requests(log, offset).values())


def _timed_with(command: list[str], env: dict[str, str], registry: Registry, repeat: int
                ) -> tuple[float, float, float]:
    """(wall, CPU) of COMMAND as `shortest` takes them, and REGISTRY's CPU time a run
    meanwhile (the mean of the REPEAT runs)."""
    before = registry_cpu(registry)
    wall, cpu = shortest(command, env, repeat=repeat)
    return wall, cpu, (registry_cpu(registry) - before) / repeat


def _demo_release() -> tuple[dict[str, Any], int, int]:
    """The demo release's product (name, version, moving tags), how many images its matrix
    expands to, and how many platforms each has."""
    from aipcc_build.matrix.expand import expand_all
    from aipcc_build.matrix.loader import load

    matrix = load(DEMO)
    images = expand_all(matrix, build_id="1", registry=None)
    product = {"name": matrix.product.name, "version": matrix.product.version,
               "moving_tags": list(matrix.product.moving_tags)}
    return product, len(images), max(len(image.platforms) for image in images)


def _paired(unsigned: list[tuple[float, float, float]],
            signed: list[tuple[float, float, float]], figure: int) -> float:
    """The median ratio of FIGURE of each signed run to the unsigned run just before it."""
    ratios = sorted(s[figure] / u[figure] for u, s in zip(unsigned, signed))
    return ratios[len(ratios) // 2]


def _requests(log: Path, offset: int) -> collections.Counter[str]:
    """The requests of the registry's access LOG from OFFSET on, by kind: method and what
    it asks for (a blob upload's start and end apart, a tag and a digest apart)."""
    kinds: collections.Counter[str] = collections.Counter()
    with open(log, "rb") as stream:
        stream.seek(offset)
        for line in stream:
            parts = line.split(b'"', 2)[1].decode(errors="replace").split()
            if len(parts) < 2 or not parts[1].startswith("/v2/"):
                continue
            method, path = parts[0], parts[1].split("?", 1)[0]
            if "/blobs/uploads/" in path:
                what = "upload start" if path.endswith("/uploads/") else "upload"
            elif "/blobs/" in path:
                what = "blob"
            elif "/manifests/" in path:
                reference = path.rsplit("/", 1)[1]
                what = ("manifest by digest" if reference.startswith("sha256:") else
                        "signature tag" if reference.endswith(".sig") else
                        "referrers tag" if reference.startswith("sha256-") else "tag")
            elif "/referrers/" in path:
                what = "referrers API"
            else:
                what = "other"
            kinds[f"{method} {what}"] += 1
    return kinds


def _request_figures(unsigned: collections.Counter[str],
                     signed: collections.Counter[str],
                     destination_cpu: tuple[float, float]) -> None:
    """The destination's requests of the last unsigned and signed runs, and what signing
    added, by kind (each costs the registry CPU on this host's cores); and the CPU the
    destination registry spent (the shortest of each): what the added requests cost it,
    which no client can save once the requests are at their least."""
    added = {kind: signed[kind] - unsigned[kind] for kind in sorted(signed | unsigned)
             if signed[kind] != unsigned[kind]}
    print(f"requests to the destination registry: {sum(unsigned.values())}; signed: "
          f"{sum(signed.values())} (" + ", ".join(f"{n:+d} {kind}" for kind, n in
                                                  added.items()) + ")")
    extra = destination_cpu[1] - destination_cpu[0]
    more = sum(signed.values()) - sum(unsigned.values())
    print(f"the destination registry's own CPU time: {destination_cpu[0]:.2f} s; signed: "
          f"{destination_cpu[1]:.2f} s ({extra:+.2f} s, "
          f"{1000 * extra / max(more, 1):.1f} ms a request signing adds)")


def _pushed(reference: str, stamp: str, payload_mb: int, platforms: int,
            bases: dict[str, str], names: list[str]) -> list[dict[str, object]]:
    """One image pushed to REFERENCE (an index of PLATFORMS when more than one), each
    platform on its base of BASES: its report entries, one per platform as the build
    writes them (the verdicts to come)."""
    built = []
    for arch in ("amd64", "arm64")[:platforms]:
        local = f"localhost/aipcc-test-release/sign-{stamp}-{arch}"
        # busybox is amd64 alone: its arm64 is one by the index's word only.
        payload_image(local, bases[arch], f"{stamp}-{arch}", payload_mb,
                      "linux/amd64" if bases[arch] == BASE else f"linux/{arch}")
        names.append(local)
        built.append((local, arch))
    if platforms == 1:
        digest = subprocess.run(
            ["buildah", "push", "--tls-verify=false", "--quiet", "--digestfile",
             "/dev/stdout", built[0][0], f"docker://{reference}"],
            check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        return [{"key": f"base/{_name(reference)}", "reference": reference, "status": "ok",
                 "digest": digest}]
    index = f"localhost/aipcc-test-release/sign-{stamp}-index"
    subprocess.run(["buildah", "manifest", "create", index], check=True,
                   capture_output=True)
    try:
        for local, arch in built:
            subprocess.run(["buildah", "manifest", "add", "--arch", arch, index,
                            f"containers-storage:{local}"], check=True, capture_output=True)
        subprocess.run(["buildah", "manifest", "push", "--all", "--tls-verify=false", index,
                        f"docker://{reference}"], check=True, capture_output=True)
    finally:  # `buildah rmi` leaves a manifest list
        subprocess.run(["buildah", "manifest", "rm", index], capture_output=True)
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                          f"docker://{reference}"], check=True, capture_output=True).stdout
    import hashlib

    instances = [m["digest"] for m in json.loads(raw)["manifests"]]
    return [{"key": f"base/{_name(reference)}", "reference": reference,
             "platform": f"linux/{arch}", "status": "ok", "digest": instance,
             "list_digest": "sha256:" + hashlib.sha256(raw).hexdigest()}
            for (_, arch), instance in zip(built, instances)]


def _load() -> str:
    """The one-minute load average now."""
    with open("/proc/loadavg") as stream:
        return stream.read().split()[0]


def _name(reference: str) -> str:
    return reference.rsplit("/", 1)[-1].split(":", 1)[0]


def _gate_verdicts(references: list[str], env: dict[str, str]) -> list[dict[str, object]]:
    """The verdict record the build's gate writes into its report for each of
    REFERENCES (the validator on the pushed image: each a single manifest)."""
    script = ("import json, sys\n"
              "from aipcc_build.imagebuild.build_report import verdict_record\n"
              "from aipcc_build.tools.skopeo import Skopeo\n"
              "from aipcc_build.validate.pipeline import validate_image\n"
              "skopeo = Skopeo(None, tls_verify=False)\n"
              "print(json.dumps([verdict_record(validate_image('docker://' + ref, "
              "skopeo=skopeo)[0]) for ref in sys.argv[1:]]))\n")
    done = subprocess.run([sys.executable, "-c", script, *references], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the validator failed: {done.stderr}")
    records: list[dict[str, object]] = json.loads(done.stdout)
    return records


def _timed_any(argv: list[str], env: dict[str, str]) -> float:
    """ARGV's wall time whatever its exit code (validate exits 1 on a verdict it dislikes)."""
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    raise SystemExit(main())
