"""The release manager's and the customer's signing pages followed as written.

docs/how-to/sign-and-verify-releases.md: its `sh release` blocks run in order in a scratch
directory (the key made by Debian 13's skopeo as the page says, a signed promote of a
build into a test registry, verify, a mirror to a second registry and one through an
archive), with only the registries' names replaced by the test's and `--no-tls-verify`
added (they speak plain HTTP). docs/how-to/pull-only-signed-images.md: its policy.json and
registries.d, with the same names, let Debian 13's skopeo pull the released image, and,
the release registry gone, pull it by digest through the mirror `mirror` configured; without
the mirror's registries.d entry that pull is refused, as the page says."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.integration.test_docs_commands import shell
from tests.support.doc_blocks import runnable_blocks
from tests.support.project import REPO
from tests.support.publish import make_registry, push, run_cli
from tests.support.registry import Registry
from tests.support.sigstore import VerifyingSkopeo, sigstore_skopeo_image

pytestmark = pytest.mark.integration

RELEASE_PAGE = REPO / "docs" / "how-to" / "sign-and-verify-releases.md"
CUSTOMER_PAGE = REPO / "docs" / "how-to" / "pull-only-signed-images.md"
IMAGE = "base-images/cuda-12.9-ubi9"  # the image the pages name, at tag 3.0-42
KEY_PATH = "/etc/containers/keys/aipcc-release.pub"  # where the customer page puts the key


def as_tested(text: str, names: dict[str, str]) -> str:
    for real, test in names.items():
        text = text.replace(real, test)
    return re.sub(r"aipcc-build (promote|verify|mirror) ", r"aipcc-build \1 --no-tls-verify ",
                  text)


def fenced(page: Path, info: str) -> list[str]:
    return re.findall(rf"^```{info}\n(.*?)^```$", page.read_text(), re.M | re.S)


def test_the_signing_pages_run_as_written(registry: Registry, base_image: str,
                                          tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "scripts").symlink_to(REPO / "scripts")  # the page runs from a checkout
    digest = push(base_image, f"{registry.host}/aipcc/{IMAGE}:3.0-42")
    (work / "build-report.json").write_text(json.dumps({
        "schema": 1, "build_id": "42", "registry": f"{registry.host}/aipcc",
        "product": {"name": "aipcc", "version": "3.0", "moving_tags": []},
        "images": [{"name": "cuda-12.9-ubi9", "key": "base/cuda-12.9-ubi9", "kind": "base",
                    "reference": f"{registry.host}/aipcc/{IMAGE}:3.0-42", "status": "ok",
                    "digest": digest}]}))
    site = make_registry(tmp_path / "site")
    released = f"{registry.host}/aipcc/release/{IMAGE}"
    names = {"quay.io/aipcc/release": f"{registry.host}/aipcc/release",
             "mirror.site.example/aipcc": f"{site.host}/aipcc", KEY_PATH: "/w/release.pub"}
    skopeo = None
    try:
        blocks = runnable_blocks(RELEASE_PAGE, "release")
        assert len(blocks) >= 6
        for number, block in enumerate(blocks, start=1):
            done = shell(as_tested(block, names), work)
            assert done.returncode == 0, f"block {number} failed:\n{block}\n{done.stderr}"
        policy = yaml.safe_load((work / "site-config" / "clusterimagepolicy.yaml").read_text())
        assert policy["spec"]["scopes"] == [released]
        at_mirror = run_cli("verify", "--no-tls-verify", "--key", str(work / "release.pub"),
                            f"{site.host}/aipcc/aipcc/release/{IMAGE}:3.0-42", check=False)
        problems = [line for line in at_mirror.stdout.splitlines() if line.startswith("FAILED")]
        assert problems and all("was signed as" in line for line in problems), at_mirror.stdout
        # What was checked is the copy at the mirror; the signature names the released name.
        assert all(f"at {site.host}/aipcc/aipcc/release/{IMAGE} was signed as {released}:"
                   in line for line in problems), at_mirror.stdout

        # The customer: the page's policy.json and registries.d, and the key where it says.
        skopeo = VerifyingSkopeo(sigstore_skopeo_image(), work)
        [policy_json] = fenced(CUSTOMER_PAGE, "json")
        (work / "policy.json").write_text(as_tested(policy_json, names))
        release_only, with_mirror = fenced(CUSTOMER_PAGE, "yaml")
        conf = work / "registries.d"
        conf.mkdir()
        (conf / "aipcc.yaml").write_text(as_tested(release_only, names))
        args = ["--policy", "/w/policy.json", "--registries.d", "/w/registries.d", "copy"]
        pulled = skopeo.run(*args, "--src-tls-verify=false", f"docker://{released}:3.0-42",
                            "dir:/w/pulled")
        assert pulled.returncode == 0, pulled.stderr

        # Through the mirror, the release registry gone: the snippet mirror wrote (the
        # test's mirror speaks plain HTTP) and the page's registries.d.
        registry.stop()
        mirror = f'location = "{site.host}/'
        (work / "registries.conf").write_text("\n".join(
            line + ("\ninsecure = true" if line.strip().startswith(mirror) else "")
            for line in (work / "site-config" / "registries.conf").read_text().splitlines()))
        args = ["--registries-conf", "/w/registries.conf", *args]
        refused = skopeo.run(*args, f"docker://{released}@{digest}", "dir:/w/refused")
        assert refused.returncode != 0
        assert "A signature was required, but no signature exists" in refused.stderr
        (conf / "aipcc.yaml").write_text(as_tested(with_mirror, names))
        through = skopeo.run(*args, f"docker://{released}@{digest}", "dir:/w/through")
        assert through.returncode == 0, through.stderr
    finally:
        if skopeo is not None:
            skopeo.remove()
        site.stop()
        subprocess.run(["rm", "-rf", str(work / "pulled"), str(work / "refused"),
                        str(work / "through")], check=False)
