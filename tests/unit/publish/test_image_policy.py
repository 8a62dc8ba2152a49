"""The ClusterImagePolicy mirror --key writes (its CRD check: tests/integration/
test_signing.py), and the key it names read before anything is copied."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from aipcc_build.errors import InputError
from aipcc_build.publish.image_policy import policy_text, trust
from aipcc_build.publish.signing import write_private_key


def test_the_policy_names_the_key_for_each_released_repository(tmp_path: Path) -> None:
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    settings = trust(True, str(tmp_path / "k.pub"))
    assert settings.carry and settings.policy_key is not None
    text = policy_text("aipcc-mirror", settings.policy_key,
                       {"quay.io/aipcc/b": "m.site/b", "quay.io/aipcc/a": "m.site/a"})
    document = yaml.safe_load(text)
    assert document["kind"] == "ClusterImagePolicy"
    assert document["spec"]["scopes"] == ["quay.io/aipcc/a", "quay.io/aipcc/b"]
    key = document["spec"]["policy"]["rootOfTrust"]["publicKey"]["keyData"]
    assert base64.b64decode(key) == (tmp_path / "k.pub").read_bytes()


def test_a_key_that_is_no_public_key_is_refused_first(tmp_path: Path) -> None:
    (tmp_path / "k.pub").write_text("not a key\n")
    with pytest.raises(InputError, match="not a PEM public key"):
        trust(True, str(tmp_path / "k.pub"))
    with pytest.raises(InputError, match="cannot read the public key"):
        trust(True, str(tmp_path / "absent.pub"))
