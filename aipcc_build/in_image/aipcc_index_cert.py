#!/usr/bin/env python3
"""Presents the host's entitlement certificate to pip and uv, or tells them that the netrc
secret is missing (written into images by aipcc-build for a wheel index with
`wheel_index_auth: client-cert` or `netrc`; AUTH below says which).

subscription-manager keeps a certificate and its key in two files, /etc/pki/entitlement/
<id>.pem and <id>-key.pem; podman mounts the host's into every container (mounts.conf:
/run/secrets/etc-pki-entitlement, linked from /etc/pki/entitlement-host on UBI) and
OpenShift mounts the entitlement secret at /etc/pki/entitlement. pip (PIP_CLIENT_CERT) and
uv (SSL_CLIENT_CERT) each want the two in one PEM: this writes it, at use time, into an
anonymous file in memory that belongs to the pip or uv process and has no name in any file
system (memfd_create; O_TMPFILE where Python is older than 3.8); the variable names it as
/proc/PID/fd/N, which the process, and the builds it starts while it runs, can open. The
kernel frees it when pip or uv exits, whichever way (a failure, a signal, SIGKILL), so the
key outlives no install. A named file would not do: under `BUILDAH_ISOLATION=chroot`
/dev/shm is the build host's, and a file left there keeps an entitlement's key on a shared
CI runner; no image layer holds the key either.

Two ways in: the image's sitecustomize runs `python_hook()` at the start of every Python of
the image, a venv's too, and acts only in pip (`pip ...`, `python -m pip ...`, a notebook's
`%pip`, a venv's own pip) and in `python -m uv`, which it sends through the `uv` entry
point; this file, run as `uv` first on PATH, sets the variable and runs the real uv. A
variable the user set is left alone. Without a certificate, pip's and uv's install commands
are told what is missing and where it was looked for, then run (and the index refuses
them).

netrc: pip and uv read the user and password themselves from the file NETRC names (the
image sets /run/secrets/netrc, where `--secret id=netrc` puts it); when it is missing, or
has no entry for the index's host, they send nothing and the index answers 401 or 403
without saying why. Here an install is told first.
Standard library only: it runs on the image's Python (3.6 and later).
"""

import contextlib
import os
import stat
import sys

# The image's `wheel_index_auth`: the renderer writes this line with the image's mode
# ("none" too: the pip hook then only keeps a user's constraints beside the image's).
AUTH = "client-cert"
# The image's constraints (toolkit/constraints.py writes it) and pip's variables for them:
# a user's value would replace the image's file and pip.conf's setting; pip reads a list
# of files, whitespace-separated, so the image's file is added to it instead.
CONSTRAINTS = "/etc/aipcc-constraints.txt"
PIP_CONSTRAINT_VARIABLES = ("PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT")
# The image's `uv` entry point (in_image/uv.sh), which `python -m uv` is sent through.
UV_ENTRY_POINT = "/usr/local/libexec/aipcc-build/uv"
DIRECTORIES = ("/etc/pki/entitlement", "/run/secrets/etc-pki-entitlement",
               "/etc/pki/entitlement-host")
RUNTIME = "/dev/shm"
PIP_COMMANDS = ("install", "download", "wheel", "index", "lock")
UV_COMMANDS = ("pip", "sync", "add", "lock", "run", "tool", "venv", "export", "tree")


def find(directories=DIRECTORIES):
    """(certificate, key) paths of the first entitlement in DIRECTORIES, or None."""
    for directory in directories:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if not name.endswith("-key.pem"):
                continue
            key = os.path.join(directory, name)
            certificate = os.path.join(directory, name[:-len("-key.pem")] + ".pem")
            if _regular(key) and _regular(certificate):
                return certificate, key
    return None


def _regular(path):
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.R_OK)
    except OSError:
        return False


def combine(certificate, key, runtime=RUNTIME):
    """Certificate and key in one PEM held by this process only; the path that opens it
    (/proc/PID/fd/N). The file has no name, so nothing is left behind when the process
    ends; the descriptor stays open (and is inherited across uv's exec) until then."""
    with open(certificate, "rb") as handle:
        data = handle.read().rstrip(b"\n") + b"\n"
    with open(key, "rb") as handle:
        data += handle.read()
    fd = _anonymous_file(runtime)
    try:
        os.fchmod(fd, 0o600)
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.set_inheritable(fd, True)
    except BaseException:  # a full memory file system: the descriptor goes, and the file
        os.close(fd)
        raise
    # The pid, not "self": a child of pip (a build backend) opens its parent's descriptor.
    return f"/proc/{os.getpid()}/fd/{fd}"


def _anonymous_file(runtime):
    """A file in memory without a name: memfd_create, or an O_TMPFILE in RUNTIME (a memory
    file system) on a Python without it."""
    if hasattr(os, "memfd_create"):
        with contextlib.suppress(OSError):  # a kernel without memfd (before 3.17)
            return os.memfd_create("aipcc-index-cert", 0)
    return os.open(runtime, os.O_RDWR | getattr(os, "O_TMPFILE", 0o20200000), 0o600)


def missing(tool, directories=DIRECTORIES):
    return ("{}: this image's wheel index needs a client certificate: no entitlement "
            "certificate (<id>.pem with <id>-key.pem) in {}. Run on a host registered with "
            "subscription-manager (podman mounts its certificates), mount the entitlement "
            "secret at /etc/pki/entitlement (OpenShift), or give the directory with "
            "-v DIR:/etc/pki/entitlement:ro\n".format(tool, ", ".join(directories)))


def present(variable, tool, arguments, wanted, directories=DIRECTORIES, runtime=RUNTIME):
    """Set VARIABLE to a combined PEM unless the user set it; tell a command that fetches
    (one of WANTED among ARGUMENTS) when there is none."""
    if os.environ.get(variable):
        return
    found = find(directories)
    if found is None:
        if set(arguments) & set(wanted):
            sys.stderr.write(missing(tool, directories))
        return
    try:
        os.environ[variable] = combine(found[0], found[1], runtime)
    except OSError as error:
        sys.stderr.write(f"{tool}: cannot prepare the client certificate: {error}\n")


def _tool_arguments(argv, tool="pip", scripts=True):
    """The arguments after TOOL in a Python's command line, or None when it does not run
    TOOL: `python3 [options] -m TOOL ...` or, where SCRIPTS, `python3 [options]
    /usr/bin/TOOL3 ...` (a script)."""
    for index in range(1, len(argv)):
        argument = argv[index]
        if argument == "-m":
            return argv[index + 2:] if argv[index + 1:index + 2] == [tool] else None
        if argument.startswith("-"):
            if argument in ("-c", "-X", "-W"):  # -c runs no tool; -X/-W take a value
                return None if argument == "-c" else _tool_arguments(
                    argv[:index] + argv[index + 2:], tool, scripts)
            continue
        name = os.path.basename(argument)
        return argv[index + 1:] if scripts and \
            name.split("-")[0].rstrip("0123456789.") == tool else None
    return None


def netrc_problem(environ=None):
    """What keeps pip and uv from authenticating with the netrc file NETRC names (None when
    nothing does, or when the user unset NETRC: then ~/.netrc is theirs to manage)."""
    import netrc  # here, not at the top: every Python of the image imports this module
    from urllib.parse import urlsplit

    environ = os.environ if environ is None else environ
    path = environ.get("NETRC")
    if not path:
        return None
    if not _regular(path):
        return f"no netrc file at {path} (NETRC)"
    url = environ.get("PIP_INDEX_URL") or environ.get("UV_DEFAULT_INDEX") \
        or environ.get("UV_INDEX_URL") or ""
    host = urlsplit(url).hostname
    try:
        entries = netrc.netrc(path)
    except netrc.NetrcParseError:
        # Not the parser's message: it quotes the token it stumbled on, which may be a
        # piece of a password (one with a space in it); its line number is often the next.
        return f"{path} cannot be read as a netrc file (`machine HOST login USER password " \
            "TOKEN` lines)"
    except (OSError, UnicodeError) as error:
        return f"{path} cannot be read: {getattr(error, 'strerror', None) or type(error).__name__}"
    if host and entries.authenticators(host) is None:
        return (f"{path} has no entry for {host} (a line `machine {host} login USER "
                "password TOKEN`)")
    return None


def netrc_missing(tool, problem):
    return (f"{tool}: this image's wheel index needs a user and password: {problem}. Give "
            "it as a secret named netrc: `podman run --secret netrc ...`, `RUN --mount=type="
            "secret,id=netrc ...` in a Containerfile (build with --secret id=netrc,src=FILE), "
            "or -v FILE:/run/secrets/netrc:ro\n")


def check_netrc(tool, arguments, wanted, environ=None):
    """Tell a command that fetches (one of WANTED among ARGUMENTS) what keeps it from
    authenticating."""
    if not set(arguments) & set(wanted):
        return
    problem = netrc_problem(environ)
    if problem is not None:
        sys.stderr.write(netrc_missing(tool, problem))


def keep_constraints(environ=None, constraints=CONSTRAINTS):
    """Add the image's constraints file to a PIP_CONSTRAINT or PIP_BUILD_CONSTRAINT the user
    set (pip would read theirs instead of the image's); /dev/null among them is the
    deliberate override and is left alone, as is an unset variable (pip.conf names it)."""
    environ = os.environ if environ is None else environ
    if not os.path.isfile(constraints):
        return
    for variable in PIP_CONSTRAINT_VARIABLES:
        value = environ.get(variable)
        if value is None:
            continue
        files = value.split()
        if constraints not in files and "/dev/null" not in files:
            environ[variable] = " ".join(files + [constraints])


def python_hook():
    """Run by the sitecustomize of every Python of the image, a venv's too: act only when it
    runs pip, or uv as `python -m uv`."""
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            argv = handle.read().decode("utf-8", "replace").split("\0")[:-1]
    except OSError:
        return
    uv_arguments = _tool_arguments(argv, "uv", scripts=False)
    if uv_arguments is not None:
        uv_module(uv_arguments)
        return
    arguments = _tool_arguments(argv)
    if arguments is None:
        return
    keep_constraints()
    if AUTH == "netrc":
        check_netrc("pip", arguments, PIP_COMMANDS)
    elif AUTH == "client-cert":
        present("PIP_CLIENT_CERT", "pip", arguments, PIP_COMMANDS)


def uv_module(arguments, entry=UV_ENTRY_POINT):
    """`python -m uv ...` runs the uv of its Python's scripts directory, past the `uv` entry
    point on PATH: run that uv through the entry point instead (it takes the first `uv` on
    PATH after its own directory, so that directory goes first). Nothing happens where
    either is missing: uv's own module then says what it says."""
    import sysconfig  # here, not at the top: every Python of the image imports this module

    scripts = sysconfig.get_path("scripts")
    if not (_executable(entry) and _executable(os.path.join(scripts, "uv"))):
        return
    os.environ["PATH"] = os.pathsep.join(
        [os.path.dirname(entry), scripts, os.environ.get("PATH", "")])
    os.execv(entry, [entry] + list(arguments))


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def run_uv(argv):
    """Run the real uv (the next one on PATH) with SSL_CLIENT_CERT set."""
    here = os.path.dirname(os.path.abspath(argv[0]))
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, "uv")
        if directory and os.path.abspath(directory) != here and _executable(candidate):
            if AUTH == "netrc":
                check_netrc("uv", argv[1:], UV_COMMANDS)
            else:
                present("SSL_CLIENT_CERT", "uv", argv[1:], UV_COMMANDS)
            os.execv(candidate, [candidate] + argv[1:])
    sys.stderr.write("uv: uv is not installed in this image (only aipcc-build's wrapper "
                     f"in {here} is on PATH)\n")
    return 127


if __name__ == "__main__":
    sys.exit(run_uv(sys.argv))
