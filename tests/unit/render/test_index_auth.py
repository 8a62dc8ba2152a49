"""wheel_index_auth in rendered Containerfiles, and the helper that presents the host's
entitlement certificate to pip and uv (aipcc_build/in_image/aipcc_index_cert.py), run here on
the host's Python against files made in the test."""

from __future__ import annotations

import importlib.util
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aipcc_build.image_index_settings import AUTH_BIN
from aipcc_build.matrix import load
from aipcc_build.render import HEADER_PREFIX, RenderedFile, render_all
from tests.support.project import Project

PATTERN = "https://idx.example/{release}/{variant}/simple/"
HELPER = Path(__file__).resolve().parents[3] / "aipcc_build" / "in_image" / "aipcc_index_cert.py"


def copied_helper(item: RenderedFile) -> str:
    """The helper a rendered Containerfile COPYs in, without its generated-file header."""
    assert f"image-files/aipcc_index_cert.py {AUTH_BIN}/" in item.text
    first, header, rest = item.files["aipcc_index_cert.py"].split("\n", 2)
    assert header.startswith(HEADER_PREFIX)
    return f"{first}\n{rest}"


def rendered_files(project: Project, auth: str) -> dict[str, RenderedFile]:
    project.edit("registry: quay.io/aipcc", f'registry: quay.io/aipcc\nwheel_index: "{PATTERN}"'
                 f"\nwheel_index_auth: {auth}")
    return {item.image.key: item for item in render_all(load(project.matrix))}


def rendered(project: Project, auth: str) -> dict[str, str]:
    return {key: item.text for key, item in rendered_files(project, auth).items()}


def test_client_cert_installs_the_helper_after_from_and_labels_the_mode(
        project: Project) -> None:
    project.template("base.Containerfile.j2", "FROM {{ os_from }}\nRUN pip install torch\n")
    item = rendered_files(project, "client-cert")["base/cuda-12.8-el9.6"]
    text = item.text
    config = text[text.index("FROM "):text.index("RUN pip install torch")]
    assert f"ENV PATH={AUTH_BIN}:$PATH" in config
    assert "aipcc_index_cert.python_hook()" in config
    assert f'mv {AUTH_BIN}/aipcc_index_cert.py "$stdlib/"' in config
    assert copied_helper(item) == HELPER.read_text()
    assert 'ai.aipcc.wheel-index.auth="client-cert"' in text
    # The template kept PATH: the identity does not add the wrapper's directory twice.
    assert text.count(f"ENV PATH={AUTH_BIN}:$PATH") == 1


def test_a_template_that_replaces_path_gets_the_wrapper_back_at_the_end(
        project: Project) -> None:
    project.template("base.Containerfile.j2", "FROM {{ os_from }}\nENV LD_LIBRARY_PATH=/x \\\n"
                     "    PATH=/opt/venv/bin:/usr/bin\n")
    text = rendered(project, "client-cert")["base/cuda-12.8-el9.6"]
    identity = text[text.index("# Image identity"):]
    assert f"ENV PATH={AUTH_BIN}:$PATH" in identity


def test_netrc_points_pip_and_uv_at_the_secret_and_installs_the_helper_in_netrc_mode(
        project: Project) -> None:
    item = rendered_files(project, "netrc")["base/cuda-12.8-el9.6"]
    text = item.text
    assert text.count("ENV NETRC=/run/secrets/netrc") == 2  # after FROM and in the identity
    assert 'ai.aipcc.wheel-index.auth="netrc"' in text
    source = copied_helper(item)
    assert 'AUTH = "netrc"\n' in source and 'AUTH = "client-cert"' not in source
    assert source.replace('AUTH = "netrc"', 'AUTH = "client-cert"') == HELPER.read_text()
    # Without python3 the build goes on (pip and uv read the netrc themselves).
    assert f"RUN command -v python3 >/dev/null || {{ rm {AUTH_BIN}/aipcc_index_cert.py; " \
        "exit 0; } \\" in text
    assert text.count(f"ENV PATH={AUTH_BIN}:$PATH") == 1


def test_none_writes_no_label(project: Project) -> None:
    text = rendered(project, "none")["base/cuda-12.8-el9.6"]
    assert "wheel-index.auth" not in text and "NETRC" not in text


@pytest.fixture
def helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("aipcc_index_cert", HELPER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def entitlement(directory: Path, name: str = "4711") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.pem").write_text("-----BEGIN CERTIFICATE-----\nC\n"
                                           "-----END CERTIFICATE-----\n")
    (directory / f"{name}-key.pem").write_text("-----BEGIN PRIVATE KEY-----\nK\n"
                                               "-----END PRIVATE KEY-----\n")
    return directory


def test_find_pairs_a_certificate_with_its_key_in_the_first_directory(
        helper: ModuleType, tmp_path: Path) -> None:
    first, second = tmp_path / "entitlement", tmp_path / "run-secrets"
    first.mkdir()
    (first / "lonely-key.pem").write_text("no certificate beside it")
    (first / "dir-key.pem").mkdir()  # not a file
    os.symlink("/dev/null", first / "dev.pem")
    os.symlink("/dev/null", first / "dev-key.pem")  # a device, not a regular file
    entitlement(second)
    assert helper.find((str(tmp_path / "absent"), str(first), str(second))) == (
        str(second / "4711.pem"), str(second / "4711-key.pem"))
    assert helper.find((str(first),)) is None


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_combine_holds_one_pem_in_a_file_without_a_name(
        helper: ModuleType, tmp_path: Path) -> None:
    source = entitlement(tmp_path / "e")
    runtime = tmp_path / "shm"
    runtime.mkdir()
    path = helper.combine(str(source / "4711.pem"), str(source / "4711-key.pem"),
                          str(runtime))
    fd = int(path.rsplit("/", 1)[1])
    try:
        assert path == f"/proc/{os.getpid()}/fd/{fd}"  # a child of pip opens it too
        text = Path(path).read_text()
        assert text.index("BEGIN CERTIFICATE") < text.index("BEGIN PRIVATE KEY")
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
        assert os.fstat(fd).st_nlink == 0  # in no directory: nothing to leave behind
        assert os.get_inheritable(fd)  # uv's wrapper execs uv with it open
        assert os.listdir(runtime) == []
    finally:
        os.close(fd)


def test_without_memfd_the_pem_is_an_unnamed_file_in_memory(
        helper: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python older than 3.8 (UBI 8's 3.6) has no os.memfd_create: an O_TMPFILE file."""
    source = entitlement(tmp_path / "e")
    runtime = tmp_path / "shm"
    runtime.mkdir()
    monkeypatch.delattr(helper.os, "memfd_create")
    path = helper.combine(str(source / "4711.pem"), str(source / "4711-key.pem"),
                          str(runtime))
    fd = int(path.rsplit("/", 1)[1])
    try:
        assert "BEGIN PRIVATE KEY" in Path(path).read_text()
        assert os.fstat(fd).st_nlink == 0 and os.listdir(runtime) == []
    finally:
        os.close(fd)


def test_the_pem_goes_when_the_process_that_made_it_ends(tmp_path: Path) -> None:
    """pip ends, whichever way (here SIGKILL): the combined key is nowhere afterwards, while
    a child it started (a build backend) could read it as long as pip ran."""
    source = entitlement(tmp_path / "e")
    script = (
        "import importlib.util, subprocess, sys, time\n"
        f"spec = importlib.util.spec_from_file_location('h', {str(HELPER)!r})\n"
        "h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)\n"
        f"path = h.combine({str(source / '4711.pem')!r}, {str(source / '4711-key.pem')!r})\n"
        "child = subprocess.run(['cat', path], capture_output=True, text=True)\n"
        "print(path, 'BEGIN PRIVATE KEY' in child.stdout, flush=True)\n"
        "time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout is not None
        path, child_read = process.stdout.readline().split()
        assert child_read == "True"
        assert "BEGIN PRIVATE KEY" in Path(path).read_text()
    finally:
        process.kill()
        process.wait()
    assert not Path(path).exists()


def test_present_sets_the_variable_and_leaves_the_users_alone(
        helper: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    dirs = (str(entitlement(tmp_path / "e")),)
    monkeypatch.delenv("PIP_CLIENT_CERT", raising=False)
    helper.present("PIP_CLIENT_CERT", "pip", ["install", "x"], helper.PIP_COMMANDS, dirs,
                   str(tmp_path))
    assert "BEGIN PRIVATE KEY" in Path(os.environ["PIP_CLIENT_CERT"]).read_text()
    monkeypatch.setenv("PIP_CLIENT_CERT", "/my/own.pem")
    helper.present("PIP_CLIENT_CERT", "pip", ["install", "x"], helper.PIP_COMMANDS, dirs,
                   str(tmp_path))
    assert os.environ["PIP_CLIENT_CERT"] == "/my/own.pem"
    assert capsys.readouterr().err == ""


def test_without_a_certificate_an_install_is_told_what_is_missing_and_where(
        helper: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PIP_CLIENT_CERT", raising=False)
    dirs = (str(tmp_path / "a"), str(tmp_path / "b"))
    helper.present("PIP_CLIENT_CERT", "pip", ["--version"], helper.PIP_COMMANDS, dirs,
                   str(tmp_path))
    assert capsys.readouterr().err == ""  # only commands that fetch are told
    helper.present("PIP_CLIENT_CERT", "pip", ["-q", "install", "x"], helper.PIP_COMMANDS,
                   dirs, str(tmp_path))
    err = capsys.readouterr().err
    assert "needs a client certificate" in err and "<id>.pem with <id>-key.pem" in err
    assert f"{tmp_path}/a, {tmp_path}/b" in err
    assert "PIP_CLIENT_CERT" not in os.environ


@pytest.mark.parametrize("argv, arguments", [
    (["/usr/bin/python3", "/usr/bin/pip", "install", "x"], ["install", "x"]),
    (["python3", "-m", "pip", "install"], ["install"]),
    (["python3", "-I", "-X", "utf8", "-m", "pip", "-q", "install"], ["-q", "install"]),
    (["python3", "/usr/local/bin/pip3.11", "download"], ["download"]),
    (["python3", "-c", "import pip"], None),
    (["python3", "/usr/bin/pipx", "install"], None),
    (["python3", "-m", "venv", "pip"], None),
    (["python3"], None),
])
def test_the_hook_acts_in_pip_only(helper: ModuleType, argv: list[str],
                                   arguments: list[str] | None) -> None:
    assert helper._tool_arguments(argv) == arguments


@pytest.mark.parametrize("argv, arguments", [
    (["python3", "-m", "uv", "sync"], ["sync"]),
    (["python3", "-I", "-m", "uv", "run", "--with", "x"], ["run", "--with", "x"]),
    (["python3", "/opt/venv/bin/uv", "sync"], None),  # uv is a program, not a script
    (["python3", "-m", "pip", "install", "uv"], None),
])
def test_the_hook_sees_python_m_uv(helper: ModuleType, argv: list[str],
                                   arguments: list[str] | None) -> None:
    assert helper._tool_arguments(argv, "uv", scripts=False) == arguments


def test_the_uv_wrapper_runs_the_next_uv_with_the_combined_pem(tmp_path: Path) -> None:
    wrapper_dir, real_dir = tmp_path / "wrapper", tmp_path / "real"
    wrapper_dir.mkdir()
    real_dir.mkdir()
    (wrapper_dir / "uv").symlink_to(HELPER)
    real = real_dir / "uv"
    real.write_text('#!/bin/sh\necho "args: $*"\ncat "$SSL_CLIENT_CERT"\n')
    real.chmod(0o755)
    env = {"PATH": f"{wrapper_dir}:{real_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    command = [sys.executable, str(wrapper_dir / "uv"), "pip", "install", "x"]
    # The helper's directories are fixed (the image's); without them, the wrapper tells.
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert "args: pip install x" in result.stdout
    if not any(Path(d).is_dir() for d in ("/etc/pki/entitlement",
                                          "/run/secrets/etc-pki-entitlement")):
        assert "needs a client certificate" in result.stderr
    alone = subprocess.run(command, env={**env, "PATH": str(wrapper_dir)},
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 127 and "uv is not installed" in alone.stderr


def test_the_uv_wrapper_hands_uv_the_pem_and_it_is_gone_when_uv_exits(
        tmp_path: Path) -> None:
    wrapper_dir, real_dir = tmp_path / "wrapper", tmp_path / "real"
    wrapper_dir.mkdir()
    real_dir.mkdir()
    mount = entitlement(tmp_path / "entitlement")
    (wrapper_dir / "uv").write_text(HELPER.read_text().replace(
        'DIRECTORIES = ("/etc/pki/entitlement",', f'DIRECTORIES = ({str(mount)!r},'))
    real = real_dir / "uv"
    real.write_text('#!/bin/sh\necho "$SSL_CLIENT_CERT"\ngrep -c BEGIN "$SSL_CLIENT_CERT"\n'
                    'exit 3\n')
    real.chmod(0o755)
    shm_before = set(os.listdir("/dev/shm"))
    result = subprocess.run(
        [sys.executable, str(wrapper_dir / "uv"), "pip", "install", "x"],
        env={"PATH": f"{wrapper_dir}:{real_dir}:/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr  # uv's own exit code (it failed)
    path, count = result.stdout.split()
    assert re.fullmatch(r"/proc/\d+/fd/\d+", path) and count == "2"
    assert not Path(path).exists()
    assert not {n for n in set(os.listdir("/dev/shm")) - shm_before if "aipcc" in n}


def test_a_kubernetes_secret_mount_is_followed(helper: ModuleType, tmp_path: Path) -> None:
    """OpenShift's etc-pki-entitlement secret: entitlement.pem and entitlement-key.pem are
    symlinks into a ..data directory, as the kubelet mounts every secret."""
    mount = tmp_path / "etc-pki-entitlement"
    entitlement(mount / "..2026_11_24_14_00_00.1", "entitlement")
    (mount / "..data").symlink_to("..2026_11_24_14_00_00.1")
    for name in ("entitlement.pem", "entitlement-key.pem"):
        (mount / name).symlink_to(f"..data/{name}")
    assert helper.find((str(mount),)) == (str(mount / "entitlement.pem"),
                                          str(mount / "entitlement-key.pem"))


def test_a_failed_write_leaves_nothing_and_pip_is_told(
        helper: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    dirs = (str(entitlement(tmp_path / "e")),)
    monkeypatch.delenv("PIP_CLIENT_CERT", raising=False)
    before = open_descriptors()

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(helper.os, "write", full)
        helper.present("PIP_CLIENT_CERT", "pip", ["install"], helper.PIP_COMMANDS, dirs,
                       str(tmp_path))
    assert "cannot prepare the client certificate" in capsys.readouterr().err
    assert "PIP_CLIENT_CERT" not in os.environ
    assert open_descriptors() == before and os.listdir(tmp_path) == ["e"]
    # Neither memfd nor the memory file system: told, not a traceback.
    monkeypatch.delattr(helper.os, "memfd_create")
    helper.present("PIP_CLIENT_CERT", "pip", ["install"], helper.PIP_COMMANDS, dirs,
                   str(tmp_path / "absent"))
    assert "cannot prepare the client certificate" in capsys.readouterr().err


def netrc_env(path: Path, index: str = "https://idx.example/3.0/cpu/simple/") -> dict[str, str]:
    return {"NETRC": str(path), "PIP_INDEX_URL": index}


def test_netrc_problems_say_what_keeps_pip_from_authenticating(
        helper: ModuleType, tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    assert helper.netrc_problem(netrc_env(netrc)) == f"no netrc file at {netrc} (NETRC)"
    (tmp_path / "dir").mkdir()
    assert "no netrc file" in helper.netrc_problem(netrc_env(tmp_path / "dir"))
    os.symlink("/dev/null", tmp_path / "device")
    assert "no netrc file" in helper.netrc_problem(netrc_env(tmp_path / "device"))
    netrc.write_text("machine other.example login u password s3cret\n")
    problem = helper.netrc_problem(netrc_env(netrc))
    assert problem == (f"{netrc} has no entry for idx.example (a line `machine idx.example "
                       "login USER password TOKEN`)")
    netrc.write_text("machine idx.example login u password s3cret\n")
    assert helper.netrc_problem(netrc_env(netrc)) is None
    netrc.write_text("default login u password s3cret\n")
    assert helper.netrc_problem(netrc_env(netrc)) is None
    # A password with a space: the parser stumbles on its second half, never shown.
    netrc.write_text("\nmachine idx.example login u password s3cr half2\n")
    assert helper.netrc_problem(netrc_env(netrc)) == (
        f"{netrc} cannot be read as a netrc file (`machine HOST login USER password TOKEN` "
        "lines)")
    netrc.write_bytes(b"machine idx.example login u password \xff\xfe\n")
    assert "cannot be read" in helper.netrc_problem(netrc_env(netrc))
    assert helper.netrc_problem({"PIP_INDEX_URL": "https://idx.example/"}) is None  # unset


def test_check_netrc_tells_only_commands_that_fetch(
        helper: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = netrc_env(tmp_path / "absent")
    helper.check_netrc("pip", ["--version"], helper.PIP_COMMANDS, env)
    assert capsys.readouterr().err == ""
    helper.check_netrc("pip", ["install", "x"], helper.PIP_COMMANDS, env)
    err = capsys.readouterr().err
    assert err.startswith("pip: this image's wheel index needs a user and password: no netrc "
                          f"file at {tmp_path}/absent (NETRC). Give it as a secret named netrc")
    assert err.count("\n") == 1


def test_the_uv_wrapper_in_netrc_mode_tells_and_runs_uv(tmp_path: Path) -> None:
    wrapper_dir, real_dir = tmp_path / "wrapper", tmp_path / "real"
    wrapper_dir.mkdir()
    real_dir.mkdir()
    (wrapper_dir / "uv").write_text(
        HELPER.read_text().replace('AUTH = "client-cert"', 'AUTH = "netrc"'))
    real = real_dir / "uv"
    real.write_text('#!/bin/sh\necho "args: $* cert=${SSL_CLIENT_CERT:-none}"\n')
    real.chmod(0o755)
    env = {"PATH": f"{wrapper_dir}:{real_dir}:/usr/bin:/bin", "HOME": str(tmp_path),
           **netrc_env(tmp_path / "netrc")}
    command = [sys.executable, str(wrapper_dir / "uv"), "pip", "install", "x"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert "args: pip install x cert=none" in result.stdout
    assert "uv: this image's wheel index needs a user and password: no netrc file" \
        in result.stderr
    (tmp_path / "netrc").write_text("machine idx.example login u password p\n")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert result.stderr == "" and "args: pip install x" in result.stdout


def test_a_users_pip_constraints_add_to_the_images(helper: ModuleType, tmp_path: Path) -> None:
    image = tmp_path / "aipcc-constraints.txt"
    image.write_text("nvidia-cuda-runtime==0+x\n")
    environ = {"PIP_CONSTRAINT": "/home/me/c.txt", "PIP_BUILD_CONSTRAINT": ""}
    helper.keep_constraints(environ, str(image))
    assert environ == {"PIP_CONSTRAINT": f"/home/me/c.txt {image}",
                       "PIP_BUILD_CONSTRAINT": str(image)}
    helper.keep_constraints(environ, str(image))  # once only
    assert environ["PIP_CONSTRAINT"] == f"/home/me/c.txt {image}"
    # The deliberate override, and pip.conf's setting where the variable is unset.
    kept = {"PIP_CONSTRAINT": "/dev/null"}
    helper.keep_constraints(kept, str(image))
    assert kept == {"PIP_CONSTRAINT": "/dev/null"}
    # An image without the file (one rendered before it) is left alone.
    alone = {"PIP_CONSTRAINT": "/home/me/c.txt"}
    helper.keep_constraints(alone, str(tmp_path / "none"))
    assert alone == {"PIP_CONSTRAINT": "/home/me/c.txt"}
