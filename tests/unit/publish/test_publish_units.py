"""Planning logic of promote and mirror with a recording runner: no program starts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.image_reference import below
from aipcc_build.matrix import load
from aipcc_build.matrix.model import Product
from aipcc_build.publish import mirror_config
from aipcc_build.publish.mirror import Image, MirrorRequest, destination, mirror
from aipcc_build.publish.promote import PromoteRequest, planned_copies, promote, release_tags
from aipcc_build.publish.transfer import Event, each
from aipcc_build.tools.registry_http import UNKNOWN
from aipcc_build.tools.retry import Retry
from tests.support.fakes import RecordingRunner

MANIFEST = {"a": b'{"schemaVersion":2,"a":1}', "b": b'{"schemaVersion":2,"b":1}'}
DIGEST = {k: "sha256:" + hashlib.sha256(v).hexdigest() for k, v in MANIFEST.items()}
PRODUCT = Product("aipcc", "3.0", ("{version}", "latest"))
CONFIG = b'{"os": "linux", "architecture": "arm64", "variant": "v8"}'


def fake_registry(store: dict[str, bytes], fail: dict[str, bytes] | None = None):  # type: ignore[no-untyped-def]
    """skopeo against STORE (docker ref -> manifest); FAIL: ref -> stderr of a failure."""
    def answer(argv: list[str]) -> tuple[int, bytes, bytes]:
        ref = argv[-1]
        for key, stderr in (fail or {}).items():
            if key in " ".join(argv):
                return 1, b"", stderr
        if argv[1] == "inspect":
            if ref in store:
                return 0, CONFIG if "--config" in argv else store[ref], b""
            return 1, b"", b"manifest unknown"
        if argv[1] == "copy":
            source = argv[-2]
            name = "a" if DIGEST["a"] in source else "b"
            # A registry keeps what it is sent under the tag and under its digest.
            store[ref] = store[f"{ref.rpartition(':')[0]}@{DIGEST[name]}"] = MANIFEST[name]
            return 0, b"", b""
        raise AssertionError(argv)
    return answer


def report(tmp_path: Path, **changes: object) -> str:
    images = [
        {"key": "base/a", "reference": "src.io/ns/base/a:3.0-7", "status": "ok",
         "digest": DIGEST["a"]},
        {"key": "base/b", "reference": "src.io/ns/base/b:3.0-7", "status": "ok",
         "digest": DIGEST["b"]},
    ]
    for index, (name, value) in enumerate(changes.items()):
        images[index][name] = value
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"schema": 1, "build_id": "7", "images": images}))
    return str(path)


def request(path: str, **kw: object) -> PromoteRequest:
    return PromoteRequest(reports=(path,), to="rel.io/release", source_registry="src.io/ns",
                          product=PRODUCT, retry=Retry(attempts=2, first=0, cap=0),
                          **kw)  # type: ignore[arg-type]


def source_store() -> dict[str, bytes]:
    return {"docker://src.io/ns/base/a:3.0-7": MANIFEST["a"],
            "docker://src.io/ns/base/b:3.0-7": MANIFEST["b"]}


def test_release_tags_immutable_first_no_repeats() -> None:
    assert release_tags(PRODUCT, "7") == ["3.0-7", "3.0", "latest"]
    assert release_tags(Product("p", "1", ("{version}-{build_id}",)), "9") == ["1-9"]


def test_plan_copies_by_digest_to_the_same_path_under_the_namespace(tmp_path: Path) -> None:
    build_id, copies = planned_copies(request(report(tmp_path)))
    assert build_id == "7"
    assert copies[0].source == f"src.io/ns/base/a@{DIGEST['a']}"
    assert [c.dest for c in copies[:3]] == ["rel.io/release/base/a:3.0-7",
                                            "rel.io/release/base/a:3.0",
                                            "rel.io/release/base/a:latest"]


def test_plan_refuses_naming_every_image_not_ok(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        planned_copies(request(report(tmp_path, status="failed", digest=None)))
    assert "base/a is failed" in str(info.value)
    with pytest.raises(InputError, match="not below src.io/ns"):
        planned_copies(request(report(tmp_path, reference="elsewhere.io/x/a:3.0-7")))


def test_promote_copies_then_skips_everything(tmp_path: Path) -> None:
    store = source_store()
    runner = RecordingRunner(fake_registry(store))
    result = promote(request(report(tmp_path)), runner)
    assert len(result.copied) == 6
    copies = [c for c in runner.calls if c[1] == "copy"]
    assert all("--all" in c and "--preserve-digests" in c for c in copies)
    runner.calls.clear()
    again = promote(request(report(tmp_path)), runner)
    assert not again.copied and len(again.skipped) == 6
    assert not [c for c in runner.calls if c[1] == "copy"]


def test_promote_copies_an_image_once_then_tags_it_from_the_destination(
        tmp_path: Path) -> None:
    store = source_store()
    # A's immutable tag is already there (an earlier, interrupted run): its other tags are
    # copied within the destination; B is copied from the source once.
    store["docker://rel.io/release/base/a:3.0-7"] = MANIFEST["a"]
    runner = RecordingRunner(fake_registry(store))
    result = promote(request(report(tmp_path)), runner)
    sources = sorted(c[-2] for c in runner.calls if c[1] == "copy")
    assert sources == sorted([f"docker://rel.io/release/base/a@{DIGEST['a']}"] * 2 +
                             [f"docker://src.io/ns/base/b@{DIGEST['b']}"] +
                             [f"docker://rel.io/release/base/b@{DIGEST['b']}"] * 2)
    assert len(result.copied) == 5 and len(result.skipped) == 1


def test_promote_asks_skopeo_only_what_the_quick_look_cannot_tell(tmp_path: Path) -> None:
    store = source_store()
    runner = RecordingRunner(fake_registry(store))
    promote(request(report(tmp_path)), runner)
    runner.calls.clear()
    looked: list[str] = []

    def probe(ref: str, tls_verify: bool) -> object:
        looked.append(ref)
        return UNKNOWN if ref.startswith("docker://rel.io/release/base/b") else \
            store.get(ref) and "sha256:" + hashlib.sha256(store[ref]).hexdigest()

    again = promote(request(report(tmp_path)), runner, probe=probe)
    assert len(again.skipped) == 6 and len(looked) == 8  # 2 sources, 6 tags
    # skopeo: B's tags, then each image read back by digest (manifest and platform).
    by_digest = [f"docker://rel.io/release/base/{n}@{DIGEST[n]}" for n in "ab"]
    assert sorted(c[-1] for c in runner.calls) == sorted(
        [f"docker://rel.io/release/base/b:{tag}" for tag in ("3.0-7", "3.0", "latest")]
        + by_digest * 2)
    assert {r.platforms for r in again.released} == {("linux/arm64/v8",)}


def test_promote_refuses_a_moved_source_and_copies_nothing(tmp_path: Path) -> None:
    store = source_store()
    store["docker://src.io/ns/base/b:3.0-7"] = b'{"moved":1}'
    runner = RecordingRunner(fake_registry(store))
    with pytest.raises(InputError, match="base/b") as info:
        promote(request(report(tmp_path)), runner)
    assert "base/a" not in str(info.value)
    assert not [c for c in runner.calls if c[1] == "copy"]


def test_dry_run_copies_nothing_and_authfile_reaches_skopeo(tmp_path: Path) -> None:
    runner = RecordingRunner(fake_registry(source_store()))
    events: list[Event] = []
    result = promote(request(report(tmp_path), dry_run=True, authfile="/a/auth.json",
                             tls_verify=False), runner, events.append)
    assert not result.copied and {e.kind for e in events} == {"planned"}
    assert not [c for c in runner.calls if c[1] == "copy"]
    assert all("--authfile" in c and "--tls-verify=false" in c for c in runner.calls)


def test_mirror_failed_image_then_rest_and_config(tmp_path: Path) -> None:
    store: dict[str, bytes] = {}
    answer = fake_registry(store, {"src.io/ns/base/a@": b"connect: connection refused"})
    images = (Image("base/a", "base/a", "3.0-7", DIGEST["a"],
                    f"docker://src.io/ns/base/a@{DIGEST['a']}"),
              Image("base/b", "base/b", "3.0-7", DIGEST["b"],
                    f"docker://src.io/ns/base/b@{DIGEST['b']}"))
    runner = RecordingRunner(answer)
    result = mirror(MirrorRequest(images, "docker://m.io/x", "src.io/ns", out=str(tmp_path),
                                  retry=Retry(3, 0, 0)), runner, sleep=lambda s: None)
    assert [o.status for o in result.outcomes] == ["failed", "copied"]
    assert sum(1 for c in runner.calls if c[1] == "copy" and "base/a@" in c[-2]) == 3
    assert store["docker://m.io/x/base/b:3.0-7"] == MANIFEST["b"]
    assert (tmp_path / "imagedigestmirrorset.yaml").is_file()
    runner.calls.clear()
    rerun = mirror(MirrorRequest(images[1:], "docker://m.io/x", "src.io/ns",
                                 out=str(tmp_path)), runner)
    assert [o.status for o in rerun.outcomes] == ["skipped"]


def test_destinations() -> None:
    assert destination("docker://h/ns") == ("docker", "h/ns")
    assert destination("oci-archive:/x/r.tar") == ("oci-archive", "/x/r.tar")
    assert destination("dir:/x/lay/") == ("dir", "/x/lay")
    with pytest.raises(InputError, match="docker://HOST/NAMESPACE"):
        destination("oci:/x")
    assert below("src.io/ns/base/a:3.0-7", "src.io/ns") == "base/a"
    assert below("src.io/other/a:1", "src.io/ns") is None


def test_mirror_config_formats() -> None:
    idms = mirror_config.idms_text("aipcc-m", {"quay.io/aipcc": "m.io/x"})
    assert idms.splitlines()[0].startswith("# Generated")
    assert "apiVersion: config.openshift.io/v1" in idms
    assert '  - source: "quay.io/aipcc"\n    mirrors:\n    - "m.io/x"' in idms
    conf = mirror_config.registries_text({"quay.io/aipcc": "m.io/x"})
    assert '[[registry]]\nprefix = "quay.io/aipcc"' in conf
    assert '[[registry.mirror]]\nlocation = "m.io/x"' in conf


def test_moving_tags_unknown_placeholder_is_located(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "b.j2").write_text("FROM x\n")
    path = tmp_path / "m.yaml"
    text = ("schema: 1\nproduct:\n  name: p\n  version: '1.0'\n  moving_tags:\n"
            "    - '{version}'\n    - '{product.version}'\nregistry: r.io/ns\n"
            "templates: templates\noutput: out\nos: {el9: {from: b:1}}\n"
            "accelerators: {cpu: {}}\nimages: {b: {template: b.j2, os: [el9]}}\n")
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}:7:7: product.moving_tags[1]: unknown "
                                      "placeholder '{product.version}'")
    path.write_text(text.replace("'{product.version}'", "latest"))
    assert load(path).product.moving_tags == ("{version}", "latest")


def test_each_keeps_order_and_runs_the_first_alone() -> None:
    import threading

    started: list[str] = []
    first_done = threading.Event()

    def look(item: str) -> str:
        started.append(item)
        if item != "a":
            assert first_done.is_set()  # nothing started before the first finished
        first_done.set()
        return item.upper()

    assert each(look, ["a", "b", "c", "d"], 3, first_alone=True) == ["A", "B", "C", "D"]
    assert started[0] == "a"
    assert each(str.upper, [], 4) == []
