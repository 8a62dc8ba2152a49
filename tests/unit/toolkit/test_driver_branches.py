"""The driver-branch table: NVIDIA_REQUIRE_CUDA as NVIDIA's own images carry it, and the
table's file refused naming the field when it is malformed."""

from __future__ import annotations

import pytest

from aipcc_build.errors import InputError
from aipcc_build.toolkit.driver_branches import load_driver_branches, parse

BRANDS = ("unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps",
          "vpc", "vcs", "vws", "cloudgaming")
# The head of the value in the config of NVIDIA's nvidia/cuda:12.9.1 images (all of it is
# one clause per brand for each branch: 535, 550, 560, 565, 570).
NVIDIA_129_HEAD = ("cuda>=12.9 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,"
                   "driver<536 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,"
                   "driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,"
                   "driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536")


def test_require_cuda_is_the_value_nvidias_images_carry() -> None:
    table = load_driver_branches()
    value = table.require_cuda("12.9")
    assert value.startswith(NVIDIA_129_HEAD)
    assert value.endswith("brand=cloudgaming,driver>=570,driver<571")
    assert len(value.split()) == 1 + len(BRANDS) * 5
    assert table.require_cuda("13.0").split()[-1] == "brand=cloudgaming,driver>=575,driver<576"
    assert table.require_cuda("11.2") == "cuda>=11.2"  # not in the table: no clause invented


def test_which_branches_the_forward_compat_package_supports() -> None:
    table = load_driver_branches()
    assert table.supports("12.8", 470) and not table.supports("12.9", 470)
    assert table.supports("13.0", 575) and not table.supports("13.0", 560)
    assert table.branch(535).long_term and table.branch(535).eol == "2026-06"
    assert table.branch(575).eol is None  # NVIDIA has not dated it here


@pytest.mark.parametrize("data, field", [
    ({"schema": 2}, "schema"),
    ({"schema": 1, "brands": ["tesla,driver>=1"]}, "brands"),
    ({"schema": 1, "brands": ["tesla"], "releases": {"12": [535]}}, "releases.12"),
    ({"schema": 1, "brands": ["tesla"], "releases": {"12.9": ["x"]}}, "releases.12.9"),
    ({"schema": 1, "brands": ["tesla"], "branches": {535: {"eol": "June"}}}, "branches.535"),
])
def test_a_malformed_table_is_refused_naming_the_field(data: object, field: str) -> None:
    with pytest.raises(InputError) as raised:
        parse(data, "driver-branches.yaml")
    assert raised.value.field == field
