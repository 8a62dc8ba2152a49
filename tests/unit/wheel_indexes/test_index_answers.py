"""Issue 30, what `index` meets at its edges: a Pulp URL answering web pages, a mirror
source answering a page without links, a source URL with a password that answers 404, a
malformed VARIANT=DIR, a static switch that fails midway. One line each, nothing written,
no secret shown."""

from __future__ import annotations

import base64
import errno
import http.server
import json
import os
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.matrix import load
from aipcc_build.wheel_indexes import static_tree
from aipcc_build.wheel_indexes.static_tree import TreeRequest, publish
from tests.support.http_server import serving
from tests.support.project import REPO
from tests.support.wheels import make_wheel

DEMO = str(REPO / "matrix" / "demo.yaml")
PASSWORD = "s3cret-Pw"


class Page(http.server.BaseHTTPRequestHandler):
    """200 and an HTML page without a link to every GET and POST; the Authorization
    headers it saw."""

    body = b"<!DOCTYPE html><html><body><h1>Sign in</h1></body></html>"
    status = 200
    seen: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization") or "")
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_POST = do_GET


def test_a_pulp_url_answering_html_is_one_line(cli, tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    make_wheel(wheels, "lib", "1.0")
    with serving(Page) as origin:
        done = cli("--matrix", DEMO, "index", f"pulp+{origin}", f"cpu-debian={wheels}")
    assert done.code == 2, done
    assert "Traceback" not in done.err and "JSONDecodeError" not in done.err
    assert len(done.err.strip().splitlines()) == 1
    assert "text/html that is not JSON: not a Pulp API server" in done.err


def test_a_mirror_source_answering_a_page_without_links_is_refused(cli, tmp_path: Path
                                                                   ) -> None:
    root = tmp_path / "index"
    with serving(Page) as origin:
        done = cli("--matrix", DEMO, "index", str(root), f"cpu-debian={origin}/simple/",
                   "--dry-run")
    assert done.code == 1, done
    assert "lists no project: not an index" in done.err
    assert "would-publish" not in done.out and not root.exists()


def test_a_source_url_with_a_password_is_never_shown(cli, tmp_path: Path) -> None:
    class Missing(Page):
        status = 404
        seen: list[str] = []

    with serving(Missing) as origin:
        url = origin.replace("http://", f"http://reader:{PASSWORD}@") + "/simple/"
        done = cli("--matrix", DEMO, "index", str(tmp_path / "index"), f"cpu-debian={url}")
    assert done.code == 1, done
    assert PASSWORD not in done.out + done.err and "reader" not in done.err
    assert "answered 404" in done.err and "***@" not in done.err
    # The user information became basic authentication, sent to that host.
    assert Missing.seen == ["Basic " + base64.b64encode(f"reader:{PASSWORD}".encode())
                            .decode()]


@pytest.mark.parametrize("value", ["cpu-debian", "=dir", "cpu-debian=", "cpu debian=dir"])
def test_a_malformed_variant_source_is_refused_at_parse_time(cli, tmp_path: Path,
                                                             value: str) -> None:
    done = cli("--matrix", DEMO, "index", str(tmp_path / "index"), value)
    assert done.code == 2, done
    assert done.err.strip().splitlines() == [
        f"aipcc-build: error: VARIANT=DIR: '{value}' is not VARIANT=DIR or "
        "VARIANT=https://.../simple/"]
    assert not (tmp_path / "index").exists()


def test_a_static_switch_failing_midway_reports_every_variant(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """Every variant's generation is written before the first switch; the second switch
    fails (a full disk): the first variant is switched, the second and third are not, and
    serve what they served before."""
    root = tmp_path / "index"
    variants = ("cpu-debian", "cuda12.8-debian", "cuda12.9-debian")
    sources = {v: tmp_path / v for v in variants}
    for source in sources.values():
        make_wheel(source, "lib", "1.0")
    args = [f"{v}={d}" for v, d in sources.items()]
    assert cli("--matrix", DEMO, "index", str(root), *args).code == 0
    for source in sources.values():
        make_wheel(source, "lib", "2.0")
    written: list[str] = []
    real_switch, real_write = static_tree._switch, static_tree._write

    def write(root: Path, plan: Any) -> None:
        real_write(root, plan)
        written.append(plan.target.variant)

    def switch(link: Path, target: str) -> None:
        assert len(written) == 3, "a switch before every generation was written"
        if "cuda12.8" in str(link):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_switch(link, target)

    monkeypatch.setattr(static_tree, "_write", write)
    monkeypatch.setattr(static_tree, "_switch", switch)
    done = cli("--matrix", DEMO, "index", str(root), *args, "--json")
    assert done.code == 1, done
    found = {v["variant"]: v for v in json.loads(done.out)["variants"]}
    assert [(found[v]["switched"], found[v]["served"], found[v]["state"]) for v in variants] \
        == [(True, 2, "published"), (False, 1, "not-switched"), (False, 1, "not-switched")]
    assert "switching cuda12.8-debian failed: No space left on device" in \
        found["cuda12.8-debian"]["error"]
    assert "index: cuda12.9-debian: not switched to g000002: not switched: switching " \
        "cuda12.8-debian failed" in done.err
    # What was not switched is not left behind.
    for variant in variants[1:]:
        generations = root / "1.0" / ".generations" / variant
        assert sorted(p.name for p in generations.iterdir()) == [
            "files", "g000001", "g000001.json"]


def test_the_tree_reports_what_it_serves_after_the_switch(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    make_wheel(wheels, "lib", "1.0")
    request = TreeRequest(root=str(tmp_path / "index"), wheels={"cpu-debian": (str(wheels),)})
    result = publish(load(DEMO), request)
    assert (result.variants[0].served, result.variants[0].switched) == (1, True)
    unchanged = publish(load(DEMO), request)
    assert (unchanged.variants[0].served, unchanged.variants[0].switched) == (1, False)


def test_a_source_that_is_no_directory_nor_index_is_shown_without_its_password(
        cli, tmp_path: Path) -> None:
    done = cli("--matrix", DEMO, "index", str(tmp_path / "index"),
               f"cpu-debian=ftp://reader:{PASSWORD}@mirror.example/simple/")
    assert done.code == 2, done
    assert PASSWORD not in done.err and "ftp://***@mirror.example/simple/: not a directory" \
        in done.err


def test_a_signal_between_static_switches_says_which_variants_were_switched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    import signal

    from aipcc_build.errors import Interrupted

    root = tmp_path / "index"
    variants = ("cpu-debian", "cuda12.8-debian")
    args = []
    for variant in variants:
        make_wheel(tmp_path / variant, "lib", "1.0")
        args.append(f"{variant}={tmp_path / variant}")
    real_switch = static_tree._switch

    def switch(link: Path, target: str) -> None:
        if "cuda12.8" in str(link):
            raise Interrupted(signal.SIGTERM)
        real_switch(link, target)

    monkeypatch.setattr(static_tree, "_switch", switch)
    done = cli("--matrix", DEMO, "index", str(root), *args)
    assert done.code == 128 + signal.SIGTERM
    assert "stopped by SIGTERM; index switched cpu-debian; not switched: cuda12.8-debian" \
        in done.err, done.err
