"""`select`: which images run on a node, why the others do not, and the k8s fragment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.cli import message
from aipcc_build.compat.select import (
    ARCH_NOT_SUPPORTED,
    CPU_ONLY,
    DRIVER_TOO_OLD,
    FORWARD_COMPAT,
    MINOR_VERSION_COMPAT,
    NATIVE,
    NO_MATCHING_GPU,
    PAST_EOL,
    Selection,
    node_from_flags,
    node_from_k8s,
    scheduling_constraints,
    select_images,
)
from aipcc_build.errors import InputError
from aipcc_build.matrix import ImageSpec
from aipcc_build.toolkit.facts import ToolkitFacts
from tests.unit.compat.compat_images import TODAY, image

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[3]


def run(images: list[ImageSpec], facts: ToolkitFacts, **node: Any) -> Selection:
    return select_images(images, facts, node_from_flags(facts, **node), today=TODAY)


def runnable(selection: Selection) -> list[tuple[str | None, str]]:
    return [(c.image.version, c.mode) for c in selection.runnable]


def reasons(selection: Selection) -> dict[str | None, set[str]]:
    return {e.image.version: {r.code for r in e.reasons} for e in selection.excluded}


def test_h100_on_driver_550_needs_minor_version_compatibility(
        facts: ToolkitFacts, images: list[ImageSpec]) -> None:
    selection = run(images, facts, gpu="H100", driver="550.54.15")
    assert runnable(selection) == [("12.9.1", MINOR_VERSION_COMPAT),
                                   ("12.8.1", MINOR_VERSION_COMPAT), (None, CPU_ONLY)]
    why = reasons(selection)
    assert why["13.0.2"] == {DRIVER_TOO_OLD}
    assert why["12.6.3"] == {PAST_EOL}
    assert why["6.4"] == {NO_MATCHING_GPU}


def test_new_driver_runs_natively_newest_first(facts: ToolkitFacts,
                                               images: list[ImageSpec]) -> None:
    selection = run(images, facts, gpu="H100", driver="580.95.05")
    assert runnable(selection)[:3] == [("13.0.2", NATIVE), ("12.9.1", NATIVE),
                                       ("12.8.1", NATIVE)]


def test_native_ranks_before_minor_version_compatibility(facts: ToolkitFacts) -> None:
    # 575.51.03 is 12.9.0's driver: 12.9.1 only under compatibility, 12.8.1 natively.
    selection = run([image("cuda", "12.9.1"), image("cuda", "12.8.1")], facts,
                    gpu="H100", driver="575.51.03")
    assert runnable(selection) == [("12.8.1", NATIVE), ("12.9.1", MINOR_VERSION_COMPAT)]


def test_driver_520_rejects_every_cuda_12_8_and_later(facts: ToolkitFacts,
                                                     images: list[ImageSpec]) -> None:
    selection = run(images, facts, gpu="H100", driver="520.61.05")
    assert runnable(selection) == [(None, CPU_ONLY)]
    why = reasons(selection)
    for version in ("13.0.2", "12.9.1", "12.8.1"):
        assert DRIVER_TOO_OLD in why[version]
    detail = next(str(r) for e in selection.excluded if e.image.version == "12.8.1"
                  for r in e.reasons)
    assert "525.60.13" in detail and "520.61.05" in detail


def test_v100_excludes_cuda_13(facts: ToolkitFacts, images: list[ImageSpec]) -> None:
    selection = run(images, facts, gpu="V100", driver="580.95.05")
    assert reasons(selection)["13.0.2"] == {ARCH_NOT_SUPPORTED}
    assert ("12.9.1", NATIVE) in runnable(selection)


def test_compute_capability_instead_of_a_name(facts: ToolkitFacts,
                                              images: list[ImageSpec]) -> None:
    by_cc = run(images, facts, compute_capability="7.0", driver="580.95.05")
    by_name = run(images, facts, gpu="V100", driver="580.95.05")
    assert runnable(by_cc) == runnable(by_name) and reasons(by_cc) == reasons(by_name)


def test_blackwell_needs_cuda_12_8(facts: ToolkitFacts) -> None:
    selection = run([image("cuda", "12.6.3"), image("cuda", "12.8.1")], facts,
                    gpu="RTX PRO 6000 Blackwell", driver="575.57.08")
    assert runnable(selection) == [("12.8.1", NATIVE)]
    assert reasons(selection)["12.6.3"] == {ARCH_NOT_SUPPORTED}


def test_matrix_archs_use_binary_compatibility_within_a_major(facts: ToolkitFacts) -> None:
    sm80 = image("cuda", "12.8.1", gpu_archs=("sm_80",))
    hopper_only = image("cuda", "12.9.1", gpu_archs=("sm_90a",))
    a10 = run([sm80, hopper_only], facts, gpu="A10", driver="575.57.08")
    assert runnable(a10) == [("12.8.1", NATIVE)]  # sm_80 code runs on 8.6
    assert reasons(a10)["12.9.1"] == {ARCH_NOT_SUPPORTED}


def test_node_with_gfd_labels_answers_like_the_flags(facts: ToolkitFacts,
                                                     images: list[ImageSpec]) -> None:
    node = node_from_k8s(facts, DATA / "node-h100-gfd.json")
    assert (node.vendor, node.arch, str(node.driver)) == ("nvidia", "9.0", "550.54.15")
    from_node = select_images(images, facts, node, today=TODAY)
    from_flags = run(images, facts, gpu="H100", driver="550.54.15")
    assert runnable(from_node) == runnable(from_flags)
    assert reasons(from_node) == reasons(from_flags)


def test_node_with_newer_gfd_driver_labels(facts: ToolkitFacts, tmp_path: Path) -> None:
    node_file = tmp_path / "node.yaml"
    node_file.write_text(
        "metadata:\n  name: b200\n  labels:\n"
        "    nvidia.com/gpu.product: NVIDIA-B200\n"
        "    nvidia.com/cuda.driver-version.full: 580.82.07\n")
    node = node_from_k8s(facts, node_file)
    assert (node.gpu, node.arch, str(node.driver)) == ("B200", "10.0", "580.82.07")


def test_amd_node(facts: ToolkitFacts, images: list[ImageSpec]) -> None:
    node = node_from_k8s(facts, DATA / "node-mi300x.json")
    assert (node.vendor, node.gpu, node.arch) == ("amd", "MI300X", "gfx942")
    selection = select_images(images, facts, node, today=TODAY)
    assert runnable(selection) == [("6.4", NATIVE), ("6.3", NATIVE), (None, CPU_ONLY)]
    assert reasons(selection)["13.0.2"] == {NO_MATCHING_GPU}


def test_mi350x_needs_rocm_7(facts: ToolkitFacts) -> None:
    selection = select_images([image("rocm", "6.4.1"), image("rocm", "7.0.2")], facts,
                              node_from_flags(facts, gpu="MI350X"), today=TODAY)
    assert runnable(selection) == [("7.0.2", NATIVE)]
    assert reasons(selection)["6.4.1"] == {ARCH_NOT_SUPPORTED}


def test_unknown_gpu_lists_known_ones_and_suggests(facts: ToolkitFacts) -> None:
    with pytest.raises(InputError) as err:
        node_from_flags(facts, gpu="H1000", driver="550.54.15")
    message = str(err.value)
    assert "did you mean 'H100'?" in message and "A100" in message and "MI300X" in message


@pytest.mark.parametrize("driver", ["latest", "550", "550.54.15.1", "v550.54", ""])
def test_driver_that_is_not_a_driver_version(facts: ToolkitFacts, driver: str) -> None:
    with pytest.raises(InputError, match="not a driver version"):
        node_from_flags(facts, gpu="H100", driver=driver)


def test_nvidia_gpu_needs_a_driver(facts: ToolkitFacts) -> None:
    # The core names the field; the CLI names the option that sets it.
    with pytest.raises(InputError, match="needs a driver version") as failure:
        node_from_flags(facts, gpu="H100")
    assert message(failure.value).startswith("--driver: ")


@pytest.mark.parametrize("cc", ["9", "sm_90", "nine", "90", "9.0a", "10.0f", "9.10",
                                "100.0"])
def test_bad_compute_capability(facts: ToolkitFacts, cc: str) -> None:
    with pytest.raises(InputError, match="not a compute capability"):
        node_from_flags(facts, compute_capability=cc, driver="550.54.15")


@pytest.mark.parametrize("cc", ["0.5", "09.0", "00.0", "0.0"])
def test_a_compute_capability_of_major_0_or_a_leading_zero_is_refused(
        facts: ToolkitFacts, cc: str) -> None:
    """select's own pattern took these (any one or two digits before the dot), which no
    GPU has and toolkit.gpu_archs, the one reader of GPU architectures, refuses: select
    then judged every CUDA image "architecture not supported" instead of refusing the
    value."""
    with pytest.raises(InputError, match="not a compute capability") as refused:
        node_from_flags(facts, compute_capability=cc, driver="550.54.15")
    assert refused.value.field == "compute_capability"


@pytest.mark.parametrize("cc", ["7.0", " 9.0 ", "10.3", "12.1", "99.9"])
def test_a_compute_capability_is_read_as_gpu_archs_reads_it(facts: ToolkitFacts,
                                                           cc: str) -> None:
    from aipcc_build.toolkit.gpu_archs import declared_arch

    node = node_from_flags(facts, compute_capability=cc, driver="550.54.15")
    assert node.arch == cc.strip()
    assert declared_arch(node.arch) == "sm_" + cc.strip().replace(".", "")


@pytest.mark.parametrize(("major", "minor"), [("0", "5"), ("09", "0"), ("00", "0"),
                                              ("9", "10"), ("9", ""), ("nine", "0")])
def test_compute_capability_labels_are_read_as_the_option_is(
        cli, facts: ToolkitFacts, tmp_path: Path, major: str, minor: str) -> None:
    """The node's nvidia.com/gpu.compute.major/minor labels went into the node as they
    were, without the check --compute-capability gets: a major of 0 or with a leading zero
    was not refused, and select judged every CUDA image "architecture not supported"."""
    node_file = tmp_path / "node.json"
    node_file.write_text(json.dumps({"metadata": {"name": "gpu-1", "labels": {
        "nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor,
        "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "54",
        "nvidia.com/cuda.driver.rev": "15"}}}))
    with pytest.raises(InputError, match="not a compute capability") as refused:
        node_from_k8s(facts, node_file)
    assert refused.value.file == str(node_file)
    assert "nvidia.com/gpu.compute.major/minor" in refused.value.message
    answer = cli("--matrix", str(DATA / "matrix-13.yaml"), "select", "--node", str(node_file))
    assert answer.code == 2
    assert "nvidia.com/gpu.compute.major/minor" in answer.err
    assert "Traceback" not in answer.err


def test_node_without_gpu_labels(facts: ToolkitFacts) -> None:
    with pytest.raises(InputError, match="no GPU labels") as err:
        node_from_k8s(facts, DATA / "node-cpu.json")
    assert err.value.file == str(DATA / "node-cpu.json")


def test_nvidia_node_without_driver_labels(facts: ToolkitFacts, tmp_path: Path) -> None:
    node_file = tmp_path / "node.json"
    node_file.write_text('{"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-A100"}}}')
    with pytest.raises(InputError, match="no driver labels"):
        node_from_k8s(facts, node_file)


def _schedulable(fragment: dict[str, Any], labels: dict[str, str]) -> bool:
    """What the Kubernetes scheduler decides for nodeSelector + required node affinity."""
    if any(labels.get(k) != v for k, v in fragment.get("nodeSelector", {}).items()):
        return False
    affinity = fragment.get("affinity")
    if not affinity:
        return True
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]

    def holds(expr: dict[str, Any]) -> bool:
        value = labels.get(expr["key"])
        if value is None:
            return False
        if expr["operator"] == "In":
            return value in expr["values"]
        assert expr["operator"] == "Gt"
        return int(value) > int(expr["values"][0])

    return any(all(holds(e) for e in term["matchExpressions"]) for term in terms)


def _gfd_labels(cc: str, driver: str) -> dict[str, str]:
    major, minor, rev = driver.split(".")
    cc_major, cc_minor = cc.split(".")
    return {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.compute.major": cc_major,
            "nvidia.com/gpu.compute.minor": cc_minor, "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": minor, "nvidia.com/cuda.driver.rev": rev}


@pytest.mark.parametrize("version", ["12.8.1", "13.0.2"])
@pytest.mark.parametrize("cc", ["7.0", "7.5", "8.6", "9.0", "10.0", "10.3", "12.0"])
@pytest.mark.parametrize("driver", ["520.61.05", "525.60.12", "525.60.13", "525.61.01",
                                    "550.54.15", "579.99.99", "580.65.06"])
def test_k8s_fragment_schedules_exactly_where_select_says_it_runs(
        facts: ToolkitFacts, version: str, cc: str, driver: str) -> None:
    cuda = image("cuda", version)
    selection = select_images([cuda], facts,
                              node_from_flags(facts, compute_capability=cc, driver=driver),
                              today=TODAY)
    fragment = scheduling_constraints(cuda, facts)
    assert _schedulable(fragment, _gfd_labels(cc, driver)) == bool(selection.runnable)


def test_k8s_fragment_for_rocm_uses_device_ids(facts: ToolkitFacts) -> None:
    fragment = scheduling_constraints(image("rocm", "6.4.1"), facts)
    amd = {"feature.node.kubernetes.io/pci-1002.present": "true"}
    assert _schedulable(fragment, {**amd, "amd.com/gpu.device-id": "74a1"})  # MI300X
    assert not _schedulable(fragment, {**amd, "amd.com/gpu.device-id": "1234"})
    assert scheduling_constraints(image("cpu", None), facts) == {}


def test_shipped_matrix_native_driver_is_the_native_requirement(facts: ToolkitFacts) -> None:
    # matrix/aipcc.yaml sets native_driver to NVIDIA's minimum required driver of each
    # release; an older 5xx driver still runs it under minor-version compatibility.
    from aipcc_build.matrix import expand, load

    shipped = expand(load(REPO / "matrix" / "aipcc.yaml"))
    cuda = [i for i in shipped if i.accelerator == "cuda" and i.kind == "base"]
    selection = run(cuda, facts, gpu="H100", driver="550.54.15")
    assert runnable(selection) == [("12.9.1", MINOR_VERSION_COMPAT),
                                   ("12.8.1", MINOR_VERSION_COMPAT)]
    selection = run(cuda, facts, gpu="H100", driver="575.57.08")
    assert runnable(selection) == [("12.9.1", NATIVE), ("12.8.1", NATIVE)]


def test_an_arm64_node_is_not_offered_an_amd64_only_image(facts: ToolkitFacts,
                                                           tmp_path: Path) -> None:
    """`select --node` reads kubernetes.io/arch (a Grace Hopper node is arm64)."""
    import json
    from dataclasses import replace

    from aipcc_build.compat.select import PLATFORM_NOT_BUILT

    node_json = json.loads((DATA / "node-h100-gfd.json").read_text())
    node_json["metadata"]["labels"].update({"kubernetes.io/arch": "arm64",
                                            "kubernetes.io/os": "linux"})
    node_file = tmp_path / "gh200.json"
    node_file.write_text(json.dumps(node_json))
    node = node_from_k8s(facts, node_file)
    assert node.platform == "linux/arm64" and "linux/arm64" in node.describe()
    amd64_only = replace(image("cuda", "12.9.1", kind="base"), platforms=("linux/amd64",))
    both = replace(image("cuda", "12.9.1"), platforms=("linux/amd64", "linux/arm64"))
    selection = select_images([amd64_only, both], facts, node, today=TODAY)
    assert [c.image.key for c in selection.runnable] == [both.key]
    [excluded] = selection.excluded
    assert excluded.image.key == amd64_only.key
    assert excluded.reasons[0].code == PLATFORM_NOT_BUILT
    assert "linux/amd64" in excluded.reasons[0].detail
    # The pod fragment keeps a one-platform image on nodes of its platform.
    fragment = scheduling_constraints(amd64_only, facts)
    assert fragment["nodeSelector"]["kubernetes.io/arch"] == "amd64"
    assert "kubernetes.io/arch" not in scheduling_constraints(both, facts)["nodeSelector"]


def test_each_runnable_image_says_the_mode_that_makes_it_run(facts: ToolkitFacts) -> None:
    """The release manager's question (issue 32): on 560.28.03 a 12.9 image whose matrix
    says 575.57.08 is not native; it runs under minor-version compatibility. Below the
    12.x floor, only the forward-compat package the shipped images install (cuda-compat-12-9)
    runs it, and only on a data-center GPU."""
    from aipcc_build.matrix import expand, load

    shipped = expand(load(REPO / "matrix" / "aipcc.yaml"))
    cuda129 = [i for i in shipped if i.accelerator == "cuda" and i.version == "12.9.1"]
    assert runnable(run(cuda129, facts, gpu="H100", driver="560.28.03")) == \
        [("12.9.1", MINOR_VERSION_COMPAT)] * 3
    # 575.51.03 is 12.9.0's driver (the shipped matrix once gave it to 12.9.1): not native
    assert runnable(run(cuda129, facts, gpu="H100", driver="575.51.03")) == \
        [("12.9.1", MINOR_VERSION_COMPAT)] * 3
    assert runnable(run(cuda129, facts, gpu="H100", driver="575.57.08")) == \
        [("12.9.1", NATIVE)] * 3
    # Below the floor, the branch decides (data/driver-branches.yaml, from NVIDIA's images):
    # cuda-compat-12-8 supports R470, cuda-compat-12-9 does not (R535 to R570).
    cuda128 = [i for i in shipped if i.accelerator == "cuda" and i.version == "12.8.1"]
    assert runnable(run(cuda128, facts, gpu="H100", driver="470.57.02")) == \
        [("12.8.1", FORWARD_COMPAT)] * len(cuda128)
    old = run(cuda129, facts, gpu="H100", driver="470.57.02")
    assert runnable(old) == []
    assert all("driver branch R470 is not one cuda-compat-12-9 supports: R535, R550, R560, "
               "R565, R570" in str(exclusion.reasons[0]) for exclusion in old.excluded)
    workstation = run(cuda128, facts, gpu="RTX 4090", driver="470.57.02")
    assert runnable(workstation) == []
    assert all("needs a data-center GPU" in str(exclusion.reasons[0])
               for exclusion in workstation.excluded)


def test_no_forward_compat_mode_without_the_package(facts: ToolkitFacts) -> None:
    """The demo's images install pip wheels, not cuda-compat: too old a driver excludes them."""
    from aipcc_build.matrix import expand, load

    demo = [i for i in expand(load(REPO / "matrix" / "demo.yaml")) if i.accelerator == "cuda"]
    selection = run(demo, facts, gpu="H100", driver="470.57.02")
    assert runnable(selection) == []
    assert "carries no forward-compat package" in str(selection.excluded[0].reasons[0])


def test_a_grace_node_is_arm64_unless_platform_says_otherwise(cli, tmp_path: Path) -> None:
    """Issue 38.6: GB200 and GH200 pair the GPU with an Arm CPU; amd64-only images were
    listed as native for them. The demo's images are built for both platforms, the shipped
    matrix's for amd64 only."""
    from tests.support.project import shipped_project

    root = shipped_project(tmp_path)
    grace = cli("--matrix", str(root / "matrix/aipcc.yaml"), "select", "--gpu", "GB200",
                "--driver", "580.65.06")
    assert grace.code == 1
    assert "linux/arm64 [flags]" in grace.out
    assert "built for linux/amd64, the node is linux/arm64" in grace.out
    assert "[flags]: the node as the options describe it" in grace.out  # [flags] explained
    hopper = cli("--matrix", str(root / "matrix/aipcc.yaml"), "select", "--gpu", "GH200",
                 "--driver", "580.65.06", "--platform", "linux/amd64")
    assert hopper.code == 0 and "linux/amd64 [flags]" in hopper.out
    demo = cli("--matrix", str(root / "matrix/demo.yaml"), "select", "--gpu", "GB200",
               "--driver", "580.65.06")
    assert demo.code == 0 and "1. localhost/aipcc-demo/base/cuda-12.9-debian" in demo.out
    h100 = cli("--matrix", str(root / "matrix/aipcc.yaml"), "select", "--gpu", "H100",
               "--driver", "580.65.06")
    assert h100.code == 0 and "linux/" not in h100.out.splitlines()[0]
    for answer in (grace, hopper, demo, h100):
        head = answer.out.split("runnable")[0]
        assert max(len(line) for line in head.splitlines()) <= 80, head
