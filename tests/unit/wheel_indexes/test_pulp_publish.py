"""The order of a Pulp publish, against an in-memory Pulp: every variant's version is made
and checked before any distribution switches, so a failing task in the second variant
leaves the first one's distribution as it was; a dry run changes nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

import pytest

from aipcc_build.matrix import load
from aipcc_build.wheel_indexes import pulp as core
from aipcc_build.wheel_indexes.pulp_api import Client, PulpError
from aipcc_build.wheel_indexes.pulp_config import PulpServer
from tests.support.wheels import make_wheel

API = "/pulp/api/v3/"
SERVER = PulpServer("https://pulp.example")
MATRIX = """\
schema: 1
product: {name: demo, version: "1.0"}
registry: localhost/unused
wheel_index: "https://pulp.example/pypi/{release}/{variant}/simple/"
os:
  debian: {from: localhost/unused}
accelerators:
  cuda: {variant: "cuda-{os}", versions: [{version: 12.8.1}]}
  cpu: {}
images:
  app: {template: app.Containerfile.j2, os: [debian]}
"""


class MemoryPulp(Client):
    """Repositories, versions, content and distributions in dicts; the calls recorded."""

    def __init__(self, fail_modify: Optional[str] = None) -> None:
        super().__init__(SERVER)
        self.fail_modify = fail_modify
        self.calls: list[tuple[str, str]] = []
        self.repos: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, list[set[str]]] = {}  # repo href -> content by number
        self.units: dict[str, dict[str, str]] = {}  # content href -> unit
        self.dists: dict[str, dict[str, Any]] = {}

    def login(self) -> None:
        pass

    def logout(self) -> None:
        pass

    def _repo(self, href: str) -> dict[str, Any]:
        number = len(self.versions[href]) - 1
        return {**self.repos[href], "latest_version_href": f"{href}versions/{number}/"}

    def get(self, path: str, **query: Any) -> Any:
        if path == "status/":
            return {"domain_enabled": False}
        if path == "distributions/python/pypi/":
            return {"results": [d for d in self.dists.values()
                                if d["base_path"] == query["base_path"]]}
        if path == "repositories/python/python/":
            return {"results": [self._repo(h) for h, r in self.repos.items()
                                if r["name"] == query["name"]]}
        raise AssertionError(path)

    def all(self, path: str, **query: Any) -> list[Any]:
        if path == "content/python/packages/":
            if "repository_version" in query:
                repo, _, number = query["repository_version"].rstrip("/").rpartition(
                    "versions/")
                return [self.units[h] for h in self.versions[repo][int(number)]]
            wanted = query["sha256__in"].split(",")
            return [u for u in self.units.values() if u["sha256"] in wanted]
        repo = path.rpartition("versions/")[0]
        return [{"number": n} for n in range(len(self.versions[repo]))]

    def request(self, method: str, path: str, *, query: Any = None, payload: Any = None,
                ok: tuple[int, ...] = (), raw: bool = False) -> Any:
        self.calls.append((method, path))
        if method == "GET" and path in self.dists:
            return dict(self.dists[path])
        if method == "GET":
            return self._repo(path)
        assert (method, path) == ("POST", "repositories/python/python/")
        href = f"{API}repositories/python/python/{len(self.repos)}/"
        self.repos[href] = {"pulp_href": href, "name": payload["name"],
                            "versions_href": f"{href}versions/"}
        self.versions[href] = [set()]
        return self._repo(href)

    def run(self, method: str, path: str, payload: Any = None) -> dict[str, Any]:
        self.calls.append((method, path))
        if path.endswith("modify/"):
            repo = path[:-len("modify/")]
            if self.fail_modify and self.repos[repo]["name"].endswith(self.fail_modify):
                raise PulpError("Pulp task add_and_remove failed: disk full")
            base = payload.get("base_version")
            content = set(self.versions[repo][int(base.rstrip("/").rsplit("/", 1)[1])]) \
                if base else set()
            content |= set(payload["add_content_units"])
            content -= set(payload["remove_content_units"])
            self.versions[repo].append(content)
            return {"created_resources": [f"{repo}versions/{len(self.versions[repo]) - 1}/"]}
        if path == "distributions/python/pypi/":
            href = f"{API}distributions/python/pypi/{len(self.dists)}/"
            self.dists[href] = {"pulp_href": href, **payload, "publication": None}
            return {}
        if method == "PATCH":
            self.dists[path].update(payload)
            return {}
        raise AssertionError((method, path))

    def upload(self, path: Path, filename: str) -> str:
        href = f"{API}content/python/packages/{len(self.units)}/"
        self.units[href] = {"pulp_href": href, "filename": filename,
                            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        self.calls.append(("UPLOAD", filename))
        return href


@pytest.fixture
def matrix(tmp_path: Path) -> Any:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "app.Containerfile.j2").write_text("FROM {{ os_from }}\n")
    (tmp_path / "matrix").mkdir()
    path = tmp_path / "matrix" / "m.yaml"
    path.write_text(MATRIX)
    return load(path)


def request(tmp_path: Path, dry_run: bool = False) -> core.PulpRequest:
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    if not cpu.exists():
        make_wheel(cpu, "lib", "1.0")
        make_wheel(cuda, "app", "1.0")
    return core.PulpRequest(server=SERVER, dry_run=dry_run,
                            wheels={"cpu-debian": (str(cpu),), "cuda12.8-debian": (str(cuda),)})


def test_a_failing_task_in_one_variant_switches_no_distribution(tmp_path: Path,
                                                                 matrix: Any) -> None:
    pulp = MemoryPulp(fail_modify="cuda12.8-debian")
    with pytest.raises(PulpError, match="disk full"):
        core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    assert pulp.dists == {}  # cpu-debian's version was made, its distribution not created
    assert [len(v) for v in pulp.versions.values()] == [2, 1]


def test_versions_first_then_switches_then_nothing_new(tmp_path: Path, matrix: Any) -> None:
    pulp = MemoryPulp()
    dry = core.publish(matrix, request(tmp_path, dry_run=True),
                       make_client=lambda server: pulp)
    assert [v.added for v in dry.variants] == [("lib-1.0-py3-none-any.whl",),
                                               ("app-1.0-py3-none-any.whl",)]
    assert pulp.repos == {} and pulp.units == {}
    result = core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    assert [v.generation for v in result.variants] == [1, 1]
    order = [p for _, p in pulp.calls]
    last_modify = max(i for i, p in enumerate(order) if p.endswith("modify/"))
    first_switch = min(i for i, p in enumerate(order) if "distributions" in p)
    assert last_modify < first_switch
    before = len(pulp.calls)
    again = core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    assert [v.changed for v in again.variants] == [False, False]
    # Only looked at (the repositories the distributions serve): nothing uploaded,
    # modified or switched.
    assert {method for method, _ in pulp.calls[before:]} == {"GET"}


def test_a_distribution_another_publisher_switched_is_left_alone(tmp_path: Path,
                                                                 matrix: Any) -> None:
    """Between this run's look and its switch another publisher pointed cpu-debian at its
    own version: this run leaves it (and the switches after it) alone and fails, naming
    the version served."""
    pulp = MemoryPulp()
    core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    make_wheel(tmp_path / "cpu", "lib", "2.0")
    make_wheel(tmp_path / "cuda", "app", "2.0")
    cpu = next(h for h, d in pulp.dists.items() if d["base_path"].endswith("cpu-debian"))
    cuda = next(h for h in pulp.dists if h != cpu)
    real = pulp.request

    def meanwhile(method: str, path: str, **kwargs: Any) -> Any:
        if (method, path) == ("GET", cpu):  # the switch's second look
            repo = pulp.dists[cpu]["repository_version"].split("versions/")[0]
            pulp.versions[repo].append(set())
            pulp.dists[cpu]["repository_version"] = \
                f"{repo}versions/{len(pulp.versions[repo]) - 1}/"
        return real(method, path, **kwargs)

    pulp.request = meanwhile  # type: ignore[method-assign]
    result = core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    assert result.failed
    found = {v.variant: v for v in result.variants}
    assert (found["cpu-debian"].switched, found["cpu-debian"].served) == (False, 3)
    assert "another publisher switched it meanwhile: it serves version 3, not version 2" \
        in (found["cpu-debian"].error or "")
    assert (found["cuda12.8-debian"].switched, found["cuda12.8-debian"].served) == (False, 1)
    assert pulp.dists[cuda]["repository_version"].endswith("versions/1/")
    assert (found["cuda12.8-debian"].error or "").startswith("not switched: cpu-debian")


def test_a_switch_records_what_was_served_before_and_rollback_takes_it_back(
        tmp_path: Path, matrix: Any) -> None:
    pulp = MemoryPulp()
    core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    make_wheel(tmp_path / "cpu", "lib", "2.0")
    core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    cpu = next(d for d in pulp.dists.values() if d["base_path"].endswith("cpu-debian"))
    assert core.history(cpu) == [1]
    assert cpu["repository_version"].endswith("versions/2/")


def test_a_signal_stops_the_queued_uploads_and_says_which_variants_were_switched(
        tmp_path: Path, matrix: Any) -> None:
    """Issue 38: the uploads not started when the signal comes never start; a signal
    between the switches names the variants switched and those not."""
    import signal
    import threading

    from aipcc_build.errors import Interrupted

    many = tmp_path / "many"
    for n in range(core.UPLOAD_JOBS * 3):
        make_wheel(many, f"lib{n}", "1.0")
    pulp = MemoryPulp()
    release = threading.Event()
    real_upload = pulp.upload

    def upload(path: Path, filename: str) -> str:
        if filename.startswith("lib0-"):
            raise Interrupted(signal.SIGTERM)  # as the main thread gets it
        release.wait(0.2)
        return real_upload(path, filename)

    pulp.upload = upload  # type: ignore[method-assign]
    with pytest.raises(Interrupted):
        core.publish(matrix, core.PulpRequest(server=SERVER, wheels={
            "cpu-debian": (str(many),)}), make_client=lambda server: pulp)
    uploaded = [f for kind, f in pulp.calls if kind == "UPLOAD"]
    # Those running end; of the 11 others queued, none starts (all did before).
    assert len(uploaded) <= core.UPLOAD_JOBS

    pulp = MemoryPulp()
    real_switch = core._switch
    seen: list[str] = []

    def switch(client: Any, variant: Any) -> None:
        seen.append(variant.target.variant)
        if len(seen) == 2:
            raise Interrupted(signal.SIGINT)
        real_switch(client, variant)

    import unittest.mock

    with unittest.mock.patch.object(core, "_switch", switch), \
            pytest.raises(Interrupted) as info:
        core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    assert info.value.done == [f"index switched {seen[0]}; not switched: {seen[1]}"]


def test_a_rebuilt_wheel_under_a_published_file_name_is_refused_in_one_line(
        tmp_path: Path, matrix: Any) -> None:
    """Issue 38: Pulp keeps allow_package_substitution off; a wheel rebuilt with other
    bytes under a file name the distribution serves is refused before anything changes."""
    pulp = MemoryPulp()
    core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    state = (dict(pulp.dists), {k: list(v) for k, v in pulp.versions.items()})
    rebuilt = make_wheel(tmp_path / "cpu", "lib", "1.0", files={"lib/new.py": b"x = 2\n"})
    result = core.publish(matrix, request(tmp_path), make_client=lambda server: pulp)
    assert result.failed and not result.variants
    [refusal] = result.refusals
    assert refusal.variant == "cpu-debian" and refusal.wheel == str(rebuilt)
    assert refusal.reason.startswith("lib-1.0-py3-none-any.whl is already published with "
                                     "other bytes (sha256 ")
    assert "\n" not in refusal.reason
    assert (dict(pulp.dists), {k: list(v) for k, v in pulp.versions.items()}) == state
