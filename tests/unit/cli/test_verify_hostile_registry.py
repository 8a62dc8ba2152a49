"""`aipcc-build verify`, the program, against a registry on 127.0.0.1 that answers every
request with the same hostile bytes: a status line of other digits, a Content-Length of
"²", an upgrade, a manifest nested past the recursion limit, a redirect to a path of its
own. The first, second and fourth ended in a Python traceback; each is exit 1 with the
registry named in the report, and no traceback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.same_answer import SameAnswer

DEEP = b"[" * 100000 + b"]" * 100000


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> str:
    from aipcc_build.publish.signing import write_private_key

    where = tmp_path_factory.mktemp("key")
    write_private_key(str(where / "release.key"), b"p", n=2)
    return str(where / "release.pub")


@pytest.fixture(params=[
    b"HTTP/1.1 \xb9\xb2\xb3 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n{}",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.index.v1+json\r\n"
    b"Content-Length: %d\r\n\r\n" % len(DEEP) + DEEP,
    b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
], ids=["status-digits", "length-digits", "upgrade", "deep-json", "redirect-here"])
def registry(request: pytest.FixtureRequest) -> Iterator[SameAnswer]:
    server = SameAnswer(request.param)
    yield server
    server.stop()


def test_a_hostile_registry_is_exit_1_naming_it(registry: SameAnswer, key: str,
                                               tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aipcc_build", "verify", "--key", key, "--no-tls-verify",
         f"{registry.host}/rel/img:1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "CI": "1", "HOME": str(tmp_path),
             "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert registry.host in done.stdout + done.stderr
