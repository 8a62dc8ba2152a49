"""Fast unit tests on synthetic tars, databases and scans (no buildah, no skopeo)."""

from __future__ import annotations

import gzip
import hashlib
import json
import multiprocessing
from pathlib import Path

import pytest
import zstandard

from aipcc_build.errors import InputError
from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.imagefs.image import PlatformImage
from aipcc_build.imagefs.symlinks import resolve_link
from aipcc_build.matrix import AllowRule
from aipcc_build.toolkit.components import fits, resolve
from aipcc_build.tools.skopeo import Skopeo
from aipcc_build.validate.cache import LayerCache
from aipcc_build.validate.config_env import config_evidence
from aipcc_build.validate.layers import escapes_root, scan_layer
from aipcc_build.validate.packages import package_evidence, rocm_release
from aipcc_build.validate.results import (
    REFUSED_LAYER,
    Evidence,
    Expectation,
    ImageVerdict,
    LayerScan,
)
from aipcc_build.validate.rpmdb import read_packages
from aipcc_build.validate.verdict import judge
from tests.support.fakes import RecordingRunner
from tests.support.layers import member, oci_layout, rpmdb, tar_bytes


def scan(tmp_path: Path, data: bytes, name: str = "layer") -> LayerScan:
    blob = tmp_path / name
    blob.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return scan_layer(LayerJob(digest, "", BlobLocation(str(blob))))


def image(env: dict[str, str] | None = None, labels: dict[str, str] | None = None
          ) -> PlatformImage:
    config = {"os": "linux", "architecture": "amd64",
              "config": {"Env": [f"{k}={v}" for k, v in (env or {}).items()],
                         "Labels": labels or {}}}
    return PlatformImage("linux/amd64", None, config, ())


def test_symlinks_are_judged_lexically() -> None:
    assert escapes_root("/usr/lib/x", "../../../etc/shadow")
    assert not escapes_root("/usr/lib/x", "../../etc/shadow")
    assert not escapes_root("/usr/lib/x", "/etc/shadow")
    links = {"/usr/local/cuda": "/etc/alternatives/cuda",
             "/etc/alternatives/cuda": "/usr/local/cuda-12.9", "/a": "b", "/b": "a"}
    assert resolve_link("/usr/local/cuda", links) == "/usr/local/cuda-12.9"
    assert resolve_link("/a", links) is None


@pytest.mark.parametrize("compress", ["plain", "gzip-members", "zstd-frames"])
def test_layer_compressions_are_sniffed(tmp_path: Path, compress: str) -> None:
    whole = tar_bytes([member("usr/local/cuda-12.8/version.json",
                              b'{"cuda": {"version": "12.8.1"}}'),
                       member("opt/rocm-6.4.1/.info/version", b"6.4.1-83\n")])
    first, second = whole[:1024], whole[1024:]  # the second member starts a new frame
    if compress == "gzip-members":  # multi-member gzip, as eStargz writes
        data = gzip.compress(first) + gzip.compress(second)
    elif compress == "zstd-frames":  # several frames and a skippable one, as zstd:chunked
        skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"toc!"
        cctx = zstandard.ZstdCompressor()
        data = cctx.compress(first) + skippable + cctx.compress(second)
    else:
        data = first + second
    result = scan(tmp_path, data)
    assert result.error is None
    assert {(e.kind, e.toolkit, e.release) for e in result.evidence} == {
        ("cuda-tree", "cuda", "12.8"), ("version-file", "cuda", "12.8"),
        ("rocm-tree", "rocm", "6.4"), ("version-file", "rocm", "6.4")}


def test_truncated_and_garbage_layers_are_refused_not_crashes(tmp_path: Path) -> None:
    """The engine refuses both: a severe finding (exit 1), not an unreadable image."""
    data = tar_bytes([member("usr/bin/tool", b"x" * 5000)])
    for layer, why in ((data[:1500], "truncated"), (b"\x01" * 2048, "checksum")):
        result = scan(tmp_path, layer, why)
        assert result.error is None
        [refused] = [h for h in result.hazards if h.kind == REFUSED_LAYER]
        assert refused.severe and "refused by the container engine" in refused.detail
        assert why in refused.detail


def test_evidence_from_names(tmp_path: Path) -> None:
    site = "usr/lib64/python3.9/site-packages"
    result = scan(tmp_path, tar_bytes([
        member(f"{site}/nvidia_cuda_runtime_cu12-12.8.90.dist-info/METADATA", b"x"),
        member(f"{site}/nvidia_cuda_runtime-13.0.96.dist-info/METADATA", b"x"),
        member(f"{site}/nvidia_ml_py-12.560.30.dist-info/METADATA", b"x"),
        member(f"{site}/torch-2.8.0+rocm6.4.dist-info/METADATA", b"x"),
        member("usr/local/cuda-12.8/lib64/libcublas.so.12.8.4.1", b"x"),
        member("usr/lib64/libcudart.so.12", b"x"),
        member("opt/conda/conda-meta/cuda-version-12.9-3.json", b"{}"),
        member("opt/conda/conda-meta/libcufft-11.3.3.83-h5888daf_0.json", b"{}"),
    ]))
    found = {(e.kind, e.component, e.version, e.release) for e in result.evidence}
    assert found == {
        ("dist-info", "cuda-runtime-cu12", "12.8.90", None),
        ("dist-info", "cuda-runtime", "13.0.96", None),
        ("dist-info", "torch", "2.8.0+rocm6.4", "6.4"),
        ("cuda-tree", "toolkit", "12.8", "12.8"),
        ("library", "cublas", "12.8.4.1", None),
        ("conda", "toolkit", "12.9", "12.9"),
        ("conda", "cufft", "11.3.3.83", None),
    }


def test_component_table_maps_own_numbering_and_leaves_unknowns_unplaced() -> None:
    def releases(component: str, version: str) -> tuple[str, ...] | None:
        return resolve(Evidence("dist-info", "/x", "cuda", component, version))

    assert releases("cusparse-cu12", "12.5.8.93") == ("12.8",)
    assert releases("cusparse-cu12", "12.5.10.65") == ("12.9",)
    assert releases("cufft", "12.0.0.61") == ("13.0",)
    assert releases("cublas", "13.1.0.3") == ("13.0",)  # exact entry beats the prefix rule
    assert releases("cuda-runtime-cu12", "12.9.79") == ("12.9",)
    assert releases("cudnn-cu12", "9.10.2.21") == ("12",)
    # cuDNN numbers itself: any version fits any minor of the major its name says.
    assert releases("cudnn-cu13", "9.10.2.21") == ("13",)
    assert releases("cudnn", "9.10.2.21") is None  # no major named: cannot tell
    assert releases("cusparse-cu12", "12.5.99.1") is None
    assert releases("cuda-runtime-cu12", "12.7.1") is None  # there is no CUDA 12.7
    assert fits(("12",), "12.8") and not fits(("12.9",), "12.8")


def test_package_names_and_rocm_release_codes() -> None:
    def release(name: str, version: str) -> str | None:
        found = package_evidence("rpm", "/db", name, version)
        return found.release if found else None

    assert release("cuda-cudart-12-9", "12.9.79-1") == "12.9"
    assert release("cuda-12-8", "12.8.1-1") == "12.8"
    assert release("libcudnn9-cuda-12", "9.10.2.21-1") == "12"
    assert release("libnccl", "2.27.3-1+cuda12.9") == "12.9"
    assert release("hip-runtime-amd", "6.2.41134.60204-1") == "6.2"
    assert release("rocm-core", "6.4.1.60401-83.el9") == "6.4"
    assert release("bash", "5.1") is None
    assert rocm_release("6.3.42134.60304") == "6.3"


def test_rpmdb_index_and_driver_requirement(tmp_path: Path) -> None:
    db = rpmdb(tmp_path / "rpmdb.sqlite", [("libcublas-12-9", "12.9.1.4", "1"),
                                            ("bash", "5.1.8", "9.el9")])
    assert read_packages(db, lambda n: n.startswith("lib")) == [
        ("libcublas-12-9", "12.9.1.4", "1")]
    config = config_evidence({"NVIDIA_REQUIRE_CUDA": "cuda>=12.9 brand=tesla,driver>=535"})
    assert [(e.component, e.release) for e in config] == [("driver-requirement", "12.9")]


def test_whiteouts_decide_the_final_filesystem(tmp_path: Path) -> None:
    lower = scan(tmp_path, tar_bytes([
        member("usr/local/cuda-12.9/lib64/libcudart.so.12.9.79", b"x"),
        member("usr/local/cuda-12.8/lib64/libcudart.so.12.8.90", b"x"),
        member("var/lib/dpkg/status",
               b"Package: cuda-cudart-12-9\nStatus: install ok installed\nVersion: 12.9.79-1\n"),
    ]), "lower")
    upper = scan(tmp_path, tar_bytes([
        member("usr/local/.wh.cuda-12.9"),
        member("var/lib/dpkg/status", b"Package: bash\nStatus: install ok installed\n"),
    ]), "upper")
    expect = Expectation("cuda", "12.8")
    verdict = judge(ref="ref", image=image(), scans=[lower, upper], expect=expect)
    assert verdict.verdict == "ok"
    assert {f.path for f in verdict.findings if f.status == "warning"} == {
        "/usr/local/cuda-12.9", "/usr/local/cuda-12.9/lib64/libcudart.so.12.9.79",
        "/var/lib/dpkg/status"}
    strict = judge(ref="ref", image=image(), scans=[lower, upper], expect=expect,
                   strict_layers=True)
    assert strict.count("violation") == 3
    opaque = scan(tmp_path, tar_bytes([member("usr/local/.wh..wh..opq")]), "opaque")
    hidden = judge(ref="ref", image=image(), scans=[lower, opaque], expect=expect)
    assert hidden.toolkits == {"cuda": ("12.9",)}  # only the dpkg record outside /usr/local


def test_expectation_sources_and_config_checks(tmp_path: Path) -> None:
    layer = scan(tmp_path, tar_bytes([member("usr/local/cuda-12.8/x", b"x")]))
    env = {"CUDA_VERSION": "12.8.1", "FROMAGER_VARIANT": "cuda-ubi9"}
    labels = {"ai.aipcc.accelerator": "cuda", "ai.aipcc.accelerator.version": "12.9"}
    inferred = judge(ref="oci:x", image=image(env), scans=[layer])
    assert inferred.expected == Expectation("cuda", "12.8", source="inferred")
    assert inferred.verdict == "ok"
    from_labels = judge(ref="oci:x", image=image(env, labels), scans=[layer])
    assert from_labels.expected is not None and from_labels.expected.source == "labels"
    assert from_labels.verdict == "failed"
    named = judge(ref="containers-storage:quay.io/aipcc/builder/cuda-12.8-ubi9:1",
                  image=image(env, labels), scans=[layer], expect=Expectation("cuda", "12.8",
                  variant="cuda-rhel9"))
    assert {f.component for f in named.findings if f.status == "violation"} == {
        "FROMAGER_VARIANT", "labels"}


def test_allow_rules_match_every_given_field(tmp_path: Path) -> None:
    layer = scan(tmp_path, tar_bytes([
        member("usr/local/cuda-12.9/compat/libcuda.so.575.57.08", b"x"),
        member("usr/local/cuda-12.8/x", b"x")]))
    compat = AllowRule("forward compatibility", toolkit="cuda", versions=("12.9",),
                       path="/usr/local/cuda-*")
    wrong_path = AllowRule("never", path="/opt/*")
    verdict = judge(ref="r", image=image(), scans=[layer], expect=Expectation("cuda", "12.8"),
                    allow=[wrong_path, compat])
    assert verdict.verdict == "ok"
    assert [f.reason.split(" (")[0] for f in verdict.findings if f.status == "allowed"] == [
        "forward compatibility"]
    assert verdict.stale_rules == (wrong_path,)


def _cache_writer(root: str, digest: str) -> None:
    scan_result = LayerScan(digest, 7, (Evidence("cuda-tree", "/usr/local/cuda-12.8", "cuda",
                                                  "toolkit", "12.8", "12.8"),))
    for _ in range(50):
        LayerCache(Path(root)).put(scan_result)


def test_cache_round_trip_and_concurrent_writers(tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    workers = [multiprocessing.Process(target=_cache_writer, args=(str(tmp_path), digest))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    cached = LayerCache(tmp_path).get(digest)
    assert cached is not None and cached.entries == 7 and cached.evidence[0].release == "12.8"
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".json")]
    assert leftovers == []
    (Path(LayerCache(tmp_path).dir) / "sha256" / f"{'ab' * 32}.json").write_text("{broken")
    assert LayerCache(tmp_path).get(digest) is None


def test_a_cache_entry_is_bound_to_the_exact_digest(tmp_path: Path) -> None:
    """A digest with anything around it has no entry: the `$` of the pattern this check
    replaced let `sha256:HEX\n` read (and write) the entry of `sha256:HEX`."""
    digest = "sha256:" + "ab" * 32
    cache = LayerCache(tmp_path)
    cache.put(LayerScan(digest, 7, ()))
    assert cache.get(digest) is not None
    for near in (digest + "\n", digest.upper(), " " + digest, "sha256:" + "ab" * 15,
                 "sha256:" + "a" * 129, "SHA256:" + "ab" * 32, "sha-256:" + "ab" * 32,
                 "sha256" + "ab" * 32, ":" + "ab" * 32, "sha256:" + "ag" * 32,
                 "sha256:" + "ab" * 32 + ":", "sha256:" + "\u0661" * 64):
        assert cache.get(near) is None, near
        cache.put(LayerScan(near, 1, ()))  # written nowhere
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == [f"{'ab' * 32}.json"]


def test_skopeo_commands_are_argument_lists_and_failures_typed() -> None:
    def answer(argv: list[str]) -> tuple[int, bytes, bytes]:
        if "missing" in argv[-1]:
            return 1, b"", b"manifest unknown"
        if "broken" in argv[-1]:
            return 1, b"", b"boom\nx509: certificate"
        return 0, json.dumps({"schemaVersion": 2}).encode(), b""

    fake = RecordingRunner(answer)
    calls = fake.calls
    tool = Skopeo(runner=fake, registries_conf="/etc/r.conf")
    assert tool.inspect_raw("docker://q/x:1") == {"schemaVersion": 2}
    assert calls[0] == ["skopeo", "--registries-conf", "/etc/r.conf", "inspect", "--raw",
                        "docker://q/x:1"]
    assert not tool.exists("docker://q/missing:1")
    from aipcc_build.errors import ToolError
    with pytest.raises(ToolError) as failure:
        tool.inspect_raw("docker://q/broken:1")
    assert failure.value.command[-1] == "docker://q/broken:1" and "x509" in str(failure.value)
    with pytest.raises(InputError):
        tool.inspect_raw("docker://q/missing:1")


def test_cli_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from aipcc_build.cli import main

    layer = tar_bytes([member("usr/local/cuda-12.9/x", b"x"), member("usr/local/cuda-12.8/y")])
    layout = oci_layout(tmp_path / "layout", [layer])

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as code:
            main(["validate", *args, "--cache-dir", str(tmp_path / "cache")])
        out, err = capsys.readouterr()
        return int(code.value.code or 0), out, err

    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, _ = run(layout, "--expect", "cuda=12.8")
    assert code == 1 and "violation: cuda 12.9" in out
    code, out, _ = run(layout, "--expect", "cuda=12.8", "--json")
    payload = json.loads(out)
    assert payload["schema"] == 1 and payload["images"][0]["verdict"] == "failed"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, _ = run(layout, "--expect", "cuda=12.8")
    assert "::error title=aipcc-build validate::" in out
    code, _, err = run(f"oci:{tmp_path}/nope")
    assert code == 2 and "no such file or directory" in err and "Traceback" not in err
    code, _, err = run(layout, "--expect", "cuda")
    assert code == 2 and "--expect" in err


def test_small_layers_are_scanned_without_a_process_pool(tmp_path: Path, monkeypatch) -> None:
    import concurrent.futures

    from aipcc_build.validate.cache import LayerCache
    from aipcc_build.validate.pipeline import scan_layers

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pool was started for a few small layers")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    jobs = []
    for number in range(3):
        blob = tmp_path / f"layer{number}"
        data = tar_bytes([member(f"etc/file{number}", b"x")])
        blob.write_bytes(data)
        jobs.append(LayerJob("sha256:" + hashlib.sha256(data).hexdigest(), "",
                             BlobLocation(str(blob))))
    scans, cached = scan_layers(jobs, LayerCache(tmp_path / "cache"))
    assert len(scans) == 3 and not cached


def test_an_expected_major_only_means_any_release_of_it_but_not_a_mix(tmp_path: Path) -> None:
    """--expect cuda=13 reads as any 13.x: the release the evidence holds; a 12.x in the
    image still fails, and so does a mix of two 13.x releases."""
    def verdict(*paths: str) -> ImageVerdict:
        layer = scan(tmp_path, tar_bytes([member(p, b"x") for p in paths]), "major")
        return judge(ref="ref", image=image(), scans=[layer],
                     expect=Expectation("cuda", "13", source="argument"))

    ok = verdict("usr/local/cuda-13.0/lib64/libcudart.so.13.0.48")
    assert ok.verdict == "ok", [f.reason for f in ok.findings]
    assert str(ok.expected) == "cuda 13.0"
    older = verdict("usr/local/cuda-12.9/lib64/libcudart.so.12.9.79")
    assert older.verdict == "failed"
    mixed = verdict("usr/local/cuda-13.0/lib64/libcudart.so.13.0.48",
                    "usr/local/cuda-13.1/lib64/libcublas.so.13.1.0.3")
    assert mixed.verdict == "failed"
