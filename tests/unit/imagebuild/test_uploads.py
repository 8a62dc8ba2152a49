"""A layer that several pushes share is sent by one of them, while the others wait."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from aipcc_build.imagebuild.uploads import first_upload, uploads_dir
from aipcc_build.tools.buildah import Storage

OS_LAYER, CUDA_LAYER, CPU_LAYER = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64


def never() -> bool:
    return False


def test_a_push_waits_for_the_one_sending_a_shared_layer(tmp_path: Path) -> None:
    events: list[str] = []
    first_holds = threading.Event()

    def first() -> None:
        with first_upload(tmp_path, [OS_LAYER, CUDA_LAYER], never) as mark:
            first_holds.set()
            time.sleep(0.3)
            events.append("first pushed")
            mark()

    thread = threading.Thread(target=first)
    thread.start()
    first_holds.wait(5)
    with first_upload(tmp_path, [OS_LAYER, CPU_LAYER], never) as mark:
        events.append("second pushes")
        mark()
    thread.join()
    assert events == ["first pushed", "second pushes"]
    assert sorted(p.name for p in tmp_path.glob("*.pushed")) == sorted(
        f"{layer.replace(':', '-')}.pushed" for layer in (OS_LAYER, CUDA_LAYER, CPU_LAYER))


def test_marked_layers_take_no_lock(tmp_path: Path) -> None:
    with first_upload(tmp_path, [OS_LAYER], never) as mark:
        mark()
    entered = threading.Event()

    def another_push() -> None:
        with first_upload(tmp_path, [OS_LAYER], never):
            entered.set()

    with first_upload(tmp_path, [OS_LAYER, CUDA_LAYER], never):
        # Another push of the same (now marked) OS layer does not wait for this one.
        thread = threading.Thread(target=another_push)
        thread.start()
        thread.join(5)
        assert entered.is_set()


def test_a_failed_push_marks_nothing_and_the_next_one_takes_the_lock(tmp_path: Path) -> None:
    with first_upload(tmp_path, [OS_LAYER], never):
        pass  # the push failed: the block never calls mark
    assert not list(tmp_path.glob("*.pushed"))
    with first_upload(tmp_path, [OS_LAYER], never) as mark:
        mark()
    assert len(list(tmp_path.glob("*.pushed"))) == 1


def test_waiting_ends_when_told_to_give_up(tmp_path: Path) -> None:
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with first_upload(tmp_path, [OS_LAYER], never):
            holding.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait(5)
    asked = []

    def give_up() -> bool:
        asked.append(1)
        return len(asked) > 2

    start = time.monotonic()
    with first_upload(tmp_path, [OS_LAYER], give_up):
        waited = time.monotonic() - start
    release.set()
    thread.join()
    assert len(asked) == 3 and waited < 2


def test_each_registry_has_its_own_markers(tmp_path: Path) -> None:
    store = Storage(tmp_path / "graph", tmp_path / "run", "overlay")
    one, other = uploads_dir(store, "127.0.0.1:5000"), uploads_dir(store, "quay.io")
    assert one != other and one.parent == other.parent == tmp_path / "run" / "aipcc-build-uploads"
