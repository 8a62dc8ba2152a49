"""aipcc-build index on real files: PEP 503/658 pages, refusals that publish nothing,
generations switched by one rename, bounded and pruned, unchanged wheels not read again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from aipcc_build.matrix import load
from aipcc_build.wheel_indexes import simple_index, static_tree, variants
from aipcc_build.wheel_indexes.static_tree import TreeRequest, publish
from tests.support.elf import EM_AARCH64, EM_X86_64, runtime_elf
from tests.support.project import REPO
from tests.support.wheels import make_wheel

DEMO = REPO / "matrix" / "demo.yaml"
CUDA128 = "1.0/cuda12.8-debian"


def snapshot(root: Path) -> dict[str, object]:
    """Every path below ROOT: a file's bytes, a link's target, a directory."""
    found: dict[str, object] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = ("link", os.readlink(path))
            elif path.is_file():
                found[key] = path.read_bytes()
            else:
                found[key] = "dir"
    return found


def run(cli, root: Path, *pairs: str, options: tuple[str, ...] = ()):
    return cli("--matrix", str(DEMO), "index", *options, str(root), *pairs)


def page(root: Path, project: str) -> list[simple_index.FileLink]:
    return simple_index.read_project_page(
        (root / CUDA128 / "simple" / project / "index.html").read_text())


def test_pages_hashes_metadata_and_versions_side_by_side(tmp_path: Path, cli) -> None:
    wheels = tmp_path / "w"
    old = make_wheel(wheels, "demo-app", "1.0", requires_python=">=3.9")
    new = make_wheel(wheels, "demo-app", "1.1", requires=["nvidia-cuda-runtime-cu12==12.8.90"])
    make_wheel(wheels, "Other_Lib", "2.0")
    root = tmp_path / "index"
    done = run(cli, root, f"cuda12.8-debian={wheels}")
    assert done.code == 0, done.err
    assert done.out == ("cuda12.8-debian\tpublished\tg000001\t"
                        "http://127.0.0.1:8580/1.0/cuda12.8-debian/simple/\n")
    assert os.readlink(root / CUDA128) == ".generations/cuda12.8-debian/g000001"
    projects, generation = simple_index.read_root_page(
        (root / CUDA128 / "simple" / "index.html").read_text())
    assert projects == ["demo-app", "other-lib"] and generation == 1
    links = page(root, "demo-app")
    assert [link.filename for link in links] == [old.name, new.name]
    assert links[0].requires_python == ">=3.9" and links[1].requires_python is None
    for link, wheel in zip(links, (old, new)):
        served = (root / CUDA128 / "simple" / "demo-app" / link.url).resolve()
        assert served.read_bytes() == wheel.read_bytes()
        assert link.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
        metadata = Path(f"{served}.metadata").read_bytes()
        assert metadata.startswith(b"Metadata-Version: 2.1\nName: demo-app\n")
        assert link.metadata_sha256 == hashlib.sha256(metadata).hexdigest()
    text = (root / CUDA128 / "simple" / "demo-app" / "index.html").read_text()
    assert 'data-requires-python="&gt;=3.9"' in text and "data-dist-info-metadata=" in text


REFUSED = [
    ("local version of another toolkit", "cuda12.8-debian",
     dict(name="torch", version="2.8.0+cu129"), ("torch 2.8.0+cu129", "cuda 12.9 in a cuda 12.8")),
    ("pins another release's component", "cuda12.8-debian",
     dict(name="vllm", version="0.10", requires=["nvidia-cublas-cu12==12.9.1.4"]),
     ("cublas-cu12 12.9.1.4 (requires-dist Requires-Dist)", "cuda 12.9 in a cuda 12.8")),
    ("requires another major's component, unpinned", "cuda12.8-debian",
     dict(name="jaxlike", version="0.7", requires=["nvidia-cuda-runtime>=13"]),
     ("cuda-runtime (requires-dist Requires-Dist)", "cuda 13 in a cuda 12.8")),
    ("another CUDA major by name", "cuda12.9-debian",
     dict(name="cupy-cuda11x", version="13.0"), ("cupy-cuda11x", "cuda 11 in a cuda 12.9")),
    ("CUDA libraries into cpu", "cpu-debian",
     dict(name="fastlib", version="1.0",
          files={"fastlib/libs/libcudart.so.12.8.90": b"\x7fELF"}),
     ("libs/libcudart.so.12.8.90", "in a cpu image")),
    ("a CPU build into a CUDA index", "cuda12.9-debian",
     dict(name="torch", version="2.8.0+cpu"), ("+cpu says it is built for CPU", "cuda 12.9")),
    ("a vendored runtime into cpu", "cpu-debian",
     dict(name="fastlib", version="1.0", files={
         "fastlib.libs/libcudart.45e7f3ed.so.12": runtime_elf(EM_X86_64, 12080)}),
     ("fastlib.libs/libcudart.45e7f3ed.so.12", "in a cpu image")),
    ("another release's vendored runtime", "cuda12.8-debian",
     dict(name="fastlib", version="1.0", files={
         "fastlib.libs/libcudart-53d54daa.so.12.6.68": b"\x7fELF"}),
     ("cuda-runtime 12.6.68", "cuda 12.6 in a cuda 12.8")),
    ("a vendored runtime named by its major, of another release", "cuda12.8-debian",
     dict(name="fastlib", version="1.0", files={
         "fastlib.libs/libcudart.45e7f3ed.so.12": runtime_elf(EM_AARCH64, 12060)}),
     ("cuda 12.6 in a cuda 12.8", "cudaRuntimeGetVersion")),
]


@pytest.mark.parametrize("why, variant, wheel, fragments", REFUSED,
                         ids=[r[0] for r in REFUSED])
def test_a_refusal_names_the_wheel_and_leaves_the_tree_byte_identical(
        tmp_path: Path, cli, why: str, variant: str, wheel: dict,
        fragments: tuple[str, ...]) -> None:
    good = tmp_path / "good"
    make_wheel(good, "packaging", "24.2")
    root = tmp_path / "index"
    pairs = [f"{v}={good}" for v in ("cuda12.8-debian", "cuda12.9-debian", "cpu-debian")]
    assert run(cli, root, *pairs).code == 0
    before = snapshot(root)
    bad = tmp_path / "bad"
    bad.mkdir()
    for item in good.iterdir():
        os.link(item, bad / item.name)
    path = make_wheel(bad, **wheel)
    pairs = [f"{v}={bad if v == variant else good}" for v in
             ("cuda12.8-debian", "cuda12.9-debian", "cpu-debian")]
    done = run(cli, root, *pairs)
    assert done.code == 1
    assert done.err.startswith(f"refused: {variant}: {path}: ")
    for fragment in fragments:
        assert fragment in done.err
    assert done.err.endswith("index: 1 wheel(s) refused: nothing was published\n")
    assert snapshot(root) == before


def test_republishing_reads_only_what_changed_and_prunes_to_the_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    matrix = load(DEMO)
    wheels = tmp_path / "w"
    for number in range(5):
        make_wheel(wheels, f"lib{number}", "1.0")
    root = tmp_path / "index"
    request = TreeRequest(root=str(root), wheels={"cuda12.8-debian": (str(wheels),)}, keep=2)
    first = publish(matrix, request).variants[0]
    assert (first.generation, first.wheels, first.reused) == (1, 5, 0)
    unchanged = publish(matrix, request).variants[0]
    assert not unchanged.changed and unchanged.generation == 1 and unchanged.reused == 5
    read = []
    real_read = variants.read
    monkeypatch.setattr(variants, "read", lambda path: read.append(path.name) or
                        real_read(path))
    for number in range(5, 9):
        make_wheel(wheels, f"lib{number}", "1.0")
        result = publish(matrix, request).variants[0]
        assert read[-1] == f"lib{number}-1.0-py3-none-any.whl" and len(read) == number - 4
        assert result.added == (f"lib{number}-1.0-py3-none-any.whl",)
        assert result.reused == number
    generations = root / "1.0" / ".generations" / "cuda12.8-debian"
    assert sorted(p.name for p in generations.iterdir()) == [
        "files", "g000003", "g000003.json", "g000004", "g000004.json", "g000005",
        "g000005.json"]
    # An unchanged project's page is the current generation's file, linked.
    assert (generations / "g000005/simple/lib0/index.html").stat().st_ino == \
        (generations / "g000004/simple/lib0/index.html").stat().st_ino
    # A wheel no kept generation holds leaves the pool.
    (wheels / "lib0-1.0-py3-none-any.whl").unlink()
    for _ in range(3):
        make_wheel(wheels, f"extra{_}", "1.0")
        publish(matrix, request)
    assert len(list((generations / "files").glob("*/*"))) == 9 + 3 - 1  # lib0 is gone


def test_a_dry_run_writes_nothing(tmp_path: Path, cli) -> None:
    wheels = tmp_path / "w"
    make_wheel(wheels, "lib", "1.0")
    root = tmp_path / "index"
    done = run(cli, root, f"cpu-debian={wheels}", options=("--dry-run",))
    assert done.code == 0 and not root.exists()
    assert done.out.splitlines() == [
        "cpu-debian\twould-publish\tg000001\thttp://127.0.0.1:8580/1.0/cpu-debian/simple/",
        "+\tcpu-debian\tlib-1.0-py3-none-any.whl"]


def test_an_interrupted_publish_leaves_the_previous_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    matrix = load(DEMO)
    wheels = tmp_path / "w"
    make_wheel(wheels, "lib", "1.0")
    root = tmp_path / "index"
    request = TreeRequest(root=str(root), wheels={"cpu-debian": (str(wheels),)})

    def interrupted(link: Path, target: str) -> None:
        raise KeyboardInterrupt

    switch = static_tree._switch
    monkeypatch.setattr(static_tree, "_switch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        publish(matrix, request)
    assert not root.exists()  # the first publish: nothing left at all
    monkeypatch.setattr(static_tree, "_switch", switch)
    publish(matrix, request)
    before = snapshot(root)
    make_wheel(wheels, "lib", "2.0")
    monkeypatch.setattr(static_tree, "_switch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        publish(matrix, request)
    assert snapshot(root) == before


def test_bad_requests_name_what_is_wrong(tmp_path: Path, cli) -> None:
    (tmp_path / "w").mkdir()
    done = run(cli, tmp_path / "i", f"cuda12.8-debin={tmp_path / 'w'}")
    assert done.code == 2
    assert "VARIANT=DIR: 'cuda12.8-debin' is not a variant of the matrix (did you mean " \
        "'cuda12.8-debian'?)" in done.err
    done = run(cli, tmp_path / "i", f"cpu-debian={tmp_path / 'missing'}")
    assert done.code == 2 and "missing: not a directory of wheels" in done.err
    (tmp_path / "i" / "1.0" / "cpu-debian").mkdir(parents=True)
    done = run(cli, tmp_path / "i", f"cpu-debian={tmp_path / 'w'}")
    assert done.code == 2 and "not an index published by aipcc-build index" in done.err
