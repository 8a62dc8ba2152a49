"""Every kind of bad matrix names file, line and field, exits 2 and writes nothing."""

from __future__ import annotations

import pytest

from tests.support.project import Project


def line_of(project: Project, text: str) -> int:
    """The line of the matrix file on which TEXT first appears."""
    for number, line in enumerate(project.matrix.read_text().splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} is not in the matrix")


def assert_input_error(project: Project, cli, *fragments: str, at: str | None = None) -> str:
    line = line_of(project, at) if at is not None else None
    result = cli("--matrix", str(project.matrix), "render")
    assert result.code == 2, result
    assert "Traceback" not in result.err
    message = result.err.strip()
    assert message.startswith("aipcc-build: error: ")
    assert str(project.root) in message, "the message names the file"
    if line is not None:
        assert f"{project.matrix}:{line}:" in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert not project.output.exists(), "nothing may be written on bad input"
    return message


def test_yaml_syntax_error(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc", "registry: [quay.io/aipcc")
    assert_input_error(project, cli, "YAML syntax error")


def test_unknown_key_suggests_the_closest(project: Project, cli) -> None:
    project.edit("    resources: {cpu: 2", "    resource: {cpu: 2")
    assert_input_error(project, cli, "images.devel.resource", "did you mean 'resources'",
                       at="resource:")


def test_unknown_top_level_key(project: Project, cli) -> None:
    project.edit("registry:", "registy:")
    assert_input_error(project, cli, "did you mean 'registry'", at="registy:")


@pytest.mark.parametrize("bad", ["12", "12.8.1.4", "12.x", "v12.8", "12.8.1 ; rm -rf /"])
def test_version_must_be_x_y_or_x_y_z(project: Project, cli, bad: str) -> None:
    project.edit("{version: 12.9.1,", f"{{version: '{bad}',")
    assert_input_error(project, cli, "accelerators.cuda.versions[0].version",
                       "is not a version of the form X.Y or X.Y.Z", at=bad)


def test_version_with_a_newline_is_refused(project: Project, cli) -> None:
    project.edit("{version: 12.9.1,", '{version: "12.9.1\\n",')
    message = assert_input_error(project, cli, "accelerators.cuda.versions[0].version",
                                 "is not a version of the form X.Y or X.Y.Z", at="12.9.1")
    assert "\n" not in message and "'12.9.1\\n'" in message


@pytest.mark.parametrize("bad, canonical", [("12.08.1", "12.8.1"), ("012.9", "12.9")])
def test_version_with_leading_zeros_names_the_canonical_form(project: Project, cli, bad: str,
                                                             canonical: str) -> None:
    project.edit("{version: 12.9.1,", f"{{version: '{bad}',")
    assert_input_error(project, cli, "accelerators.cuda.versions[0].version",
                       f"leading zeros: write {canonical}", at=bad)


def test_duplicated_version(project: Project, cli) -> None:
    project.edit("{version: 6.3.4}", "{version: 6.4.1, min_driver: 1.2}")
    assert_input_error(project, cli, "accelerators.rocm.versions[1].version",
                       "version 6.4.1 is listed twice (first on line 15)",
                       at="min_driver: 1.2")


def test_os_not_declared(project: Project, cli) -> None:
    project.edit("    os: [ubi9]", "    os: [ubi10]")
    assert_input_error(project, cli, "images.builder.os[0]", "OS 'ubi10' is not declared",
                       "did you mean 'ubi9'", at="ubi10")


def test_missing_template(project: Project, cli) -> None:
    project.edit("template: base.Containerfile.j2", "template: bsae.Containerfile.j2")
    assert_input_error(project, cli, "images.base.template", "not found", at="bsae")


def test_template_outside_the_templates_directory(project: Project, cli) -> None:
    project.edit("template: base.Containerfile.j2", "template: ../matrix/aipcc.yaml")
    assert_input_error(project, cli, "inside the templates directory", at="../matrix")


def test_undefined_template_variable_names_template_and_line(project: Project, cli) -> None:
    project.template("devel.Containerfile.j2",
                     "FROM {{ from_ref }}\n\nRUN echo {{ vars.nccl }}\n")
    message = assert_input_error(project, cli, "devel.Containerfile.j2:3:", "nccl")
    assert "devel/cuda-12.9-el9.6" in message


def test_template_syntax_error(project: Project, cli) -> None:
    project.template("builder.Containerfile.j2", "FROM {{ os_from }}\n{% if %}\n")
    assert_input_error(project, cli, "builder.Containerfile.j2:2", "template syntax error")


def test_two_cells_with_one_name(project: Project, cli) -> None:
    # 12.8.0 and 12.8.1 would both be named cuda-12.8-*.
    project.edit("{version: 12.9.1,", "{version: 12.8.0,")
    assert_input_error(project, cli, "two cells produce the same image",
                       "quay.io/aipcc/builder/cuda-12.8-ubi9")


@pytest.mark.parametrize("bad_os", ["ubi 9", "../etc", "ubi9;rm", "ubi9$(id)", "a/b"])
def test_os_name_characters(project: Project, cli, bad_os: str) -> None:
    project.edit("  ubi9:  {from:", f"  '{bad_os}':  {{from:")
    assert_input_error(project, cli, "is not a valid name", at=bad_os)


def test_from_reference_with_shell_characters(project: Project, cli) -> None:
    project.edit("ubi9/ubi:9.6}", "ubi9/ubi:9.6 && curl evil}")
    assert_input_error(project, cli, "os.ubi9.from", "is not an image reference", at="evil")


def test_unknown_from_image_kind(project: Project, cli) -> None:
    project.edit("from_image: base", "from_image: bsae")
    assert_input_error(project, cli, "images.devel.from_image", "unknown image kind 'bsae'",
                       "did you mean 'base'", at="bsae")


def test_from_image_cycle(project: Project, cli) -> None:
    project.edit("    repository: \"{registry}/base-images/{name}\"",
                 "    repository: \"{registry}/base-images/{name}\"\n    from_image: devel")
    assert_input_error(project, cli, "from_image cycle", "base -> devel -> base")


def test_eol_not_a_date(project: Project, cli) -> None:
    project.edit("eol: 2027-06-30", "eol: next-summer")
    assert_input_error(project, cli, "accelerators.cuda.versions[0].eol", "is not a date",
                       at="next-summer")


def test_unknown_placeholder_in_repository(project: Project, cli) -> None:
    project.edit('"{registry}/builder/{name}"', '"{registry}/builder/{nmae}"')
    assert_input_error(project, cli, "unknown placeholder '{nmae}'", at="nmae")


def test_from_image_parent_missing_for_an_os(project: Project, cli) -> None:
    project.edit("    from_image: base\n    os: [el9.6]", "    from_image: base\n    os: [ubi9]")
    assert_input_error(project, cli, "which the matrix does not build")


def test_bad_resource_quantity(project: Project, cli) -> None:
    project.edit("memory: 4Gi", "memory: lots")
    assert_input_error(project, cli, "images.devel.resources.memory", "is not a quantity")


def test_allow_rule_needs_a_reason(project: Project, cli) -> None:
    project.edit("  cpu: {}", "  cpu: {allow: [{component: nccl, reason: ' '}]}")
    assert_input_error(project, cli, "reason", "a reason must be given")


def test_missing_matrix_file(tmp_path, cli) -> None:
    result = cli("--matrix", str(tmp_path / "nope.yaml"), "list")
    assert result.code == 2
    assert "cannot read the matrix file" in result.err
    assert "Traceback" not in result.err


def test_bad_build_id_and_registry(project: Project, cli) -> None:
    result = cli("--matrix", str(project.matrix), "list", "--build-id", "1;rm")
    assert result.code == 2 and "build id" in result.err
    result = cli("--matrix", str(project.matrix), "list", "--registry", "bad registry")
    assert result.code == 2 and "--registry" in result.err


@pytest.mark.parametrize(("option", "value", "hint"), [
    ("--accelerator", "cdua", "did you mean 'cuda'"),
    ("--os", "ubi8", "did you mean 'ubi9'"),
    ("--kind", "builders", "did you mean 'builder'"),
    ("--only", "cuda-12.8-ubi", "did you mean 'cuda-12.8-ubi9'"),
    ("--version", "12.7", "the matrix has 12.8.1, 12.9.1, 6.3.4, 6.4.1"),
])
def test_filter_that_matches_nothing_is_an_error(project: Project, cli, option: str, value: str,
                                                 hint: str) -> None:
    result = cli("--matrix", str(project.matrix), "list", option, value)
    assert result.code == 2, result
    assert option in result.err and hint in result.err


def test_ci_bundle_of_an_unknown_task(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc", "registry: quay.io/aipcc\n"
                 "ci: {bundles: {buildah-remote: quay.io/x/task-buildah-remote:0.4}}")
    assert_input_error(project, cli, "ci.bundles.buildah-remote",
                       "unknown task 'buildah-remote'", "buildah-remote-oci-ta",
                       at="buildah-remote")


def test_ci_bundle_digest_must_be_sha256(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc", "registry: quay.io/aipcc\n"
                 "ci: {bundles: {buildah-remote-oci-ta: "
                 "'quay.io/x/task-buildah-remote-oci-ta:0.10@sha256:zz'}}")
    assert_input_error(project, cli, "ci.bundles.buildah-remote-oci-ta",
                       "is not an image reference", at="task-buildah")


def test_ci_hermetic_needs_a_prefetch_input(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc", "registry: quay.io/aipcc\nci: {hermetic: true}")
    assert_input_error(project, cli, "ci.hermetic", "ci.prefetch_input", at="true")


def test_ci_prefetch_input_is_json(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc", "registry: quay.io/aipcc\n"
                 "ci: {prefetch_input: '[{type: pip'}")
    assert_input_error(project, cli, "ci.prefetch_input", "not JSON", at="[{type")


def test_ci_committed_names_only_the_kinds_regenerate_knows(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc",
                 "registry: quay.io/aipcc\nci: {committed: [konflux, compat-page]}")
    assert_input_error(project, cli, "ci.committed[1]", "unknown kind 'compat-page'",
                       "did you mean 'compatibility-page'", at="compat-page")


def test_ci_hermetic_is_a_boolean(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc", "registry: quay.io/aipcc\nci: {hermetic: yes}")
    assert_input_error(project, cli, "ci.hermetic", "'yes' is not true or false", at="yes")


def test_min_driver_is_read_as_the_old_name_of_native_driver(project: Project) -> None:
    """Matrices written before the rename keep working, with the one meaning."""
    from aipcc_build.matrix import load

    project.edit("{version: 6.3.4}", "{version: 6.3.4, min_driver: 6.3.0}")
    toolkit = load(str(project.matrix)).accelerators["rocm"].versions[1]
    assert toolkit.native_driver == "6.3.0"


def test_native_driver_and_min_driver_together_are_refused(project: Project, cli) -> None:
    project.edit("{version: 6.3.4}",
                 "{version: 6.3.4, native_driver: 6.3.0, min_driver: 6.3.0}")
    assert_input_error(project, cli, "min_driver is the old name of native_driver",
                       at="min_driver: 6.3.0")


@pytest.mark.parametrize("bad", ["sm_8O", "sm80", "sm_9.0", "gfx94", "gfx9420", "gfxfoo",
                                 "gfx90a:xnak-", "gfx90a:xnack-:xnack+", "gfx11-generic",
                                 "hopper"])
def test_a_misspelled_gpu_arch_stops_every_command_before_any_work(
        project: Project, cli, bad: str, tmp_path) -> None:
    """The validator's reading of gpu_archs is the loader's: `matrix` built the images and
    only then stopped at validation, with no file or line."""
    project.edit("{version: 6.4.1}", f"{{version: 6.4.1, gpu_archs: [gfx942, '{bad}']}}")
    at = f"{project.matrix}:{line_of(project, bad)}:"
    field = "accelerators.rocm.versions[0].gpu_archs[1]"
    assert_input_error(project, cli, field, "is not a GPU architecture" if bad !=
                       "gfx11-generic" else "not a GPU: name them (gfx1100", at=bad)
    report = tmp_path / "report.json"
    for command in (["matrix", "--report", str(report)], ["plan"], ["compat"],
                    ["select", "--gpu", "MI300X"], ["validate", "--build-id", "7"]):
        result = cli("--matrix", str(project.matrix), *command)
        assert result.code == 2, (command, result)
        assert at in result.err and field in result.err, (command, result.err)
        assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    assert not report.exists() and not project.output.exists()


def test_gpu_archs_are_read_in_every_spelling_the_validator_reads(project: Project) -> None:
    from aipcc_build.matrix import load

    project.edit("{version: 6.4.1}", "{version: 6.4.1, gpu_archs: [gfx90a:xnack-, gfx1100]}")
    project.edit("{version: 12.9.1,", "{version: 12.9.1, gpu_archs: [8.0, '90', sm_90a, "
                 "sm_100f, compute_120],")
    accelerators = load(str(project.matrix)).accelerators
    assert accelerators["rocm"].versions[0].gpu_archs == ("gfx90a:xnack-", "gfx1100")
    assert accelerators["cuda"].versions[0].gpu_archs == ("8.0", "90", "sm_90a", "sm_100f",
                                                          "compute_120")


def test_the_installed_command_refuses_a_misspelled_gpu_arch_before_building(
        project: Project, tmp_path) -> None:
    import subprocess
    import sys

    project.edit("{version: 6.4.1}", "{version: 6.4.1, gpu_archs: [gfx0942]}")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "aipcc_build", "--matrix", str(project.matrix),
                           "matrix", "--report", str(report)], capture_output=True, text=True,
                          timeout=120, cwd=project.root, check=False)
    assert done.returncode == 2, done.stderr
    assert f"{project.matrix}:{line_of(project, 'gfx0942')}:" in done.stderr
    assert "accelerators.rocm.versions[0].gpu_archs[0]" in done.stderr
    assert "Traceback" not in done.stderr and not report.exists()
