"""The error family. The CLI maps each type to an exit code and prints one line."""

from __future__ import annotations

from .functional import cache
from .patterns import lazy

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    import re
    from collections.abc import Sequence
    from typing import AnyStr, Optional


class AipccError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code = 2
    # The field of the request or the matrix the error is about ("capacity",
    # "images.devel.context"): the CLI names the option that sets it.
    field: Optional[str] = None


class InputError(AipccError):
    """Bad input: a malformed matrix, an unknown name, a wrong argument (exit 2)."""

    def __init__(
        self,
        message: str,
        *,
        file: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
        field: Optional[str] = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = quoted(self.file)
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"


class CheckFailed(AipccError):
    """A check found problems (drift, violations, EOL): exit 1."""

    exit_code = 1

    def __init__(self, message: str, *, field: Optional[str] = None) -> None:
        self.field = field
        super().__init__(message)


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP ended the run. A BaseException, like KeyboardInterrupt: no
    `except Exception` swallows it, so every finally block and context manager on the way
    out cleans up (children stopped, temporary files removed); exit 128 + the signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        # What was done before the signal, said with the stop (which variants an index
        # switched): added on the way out by the code that knows.
        self.done: list[str] = []
        super().__init__(signum)


STDERR_TAIL_LINES = 20
# The longest line of an outside program's stderr a ToolError keeps and echoes: a tool
# printing megabytes without a newline makes no error (log, report, --json) of megabytes.
# A longer line keeps its beginning and its end (`cut_middle`).
MAX_ECHOED_LINE = 1000
# What stands for the middle of a line `cut_middle` cut.
CUT_MARK = " [...] "
MASK = "***"
# The options of skopeo, buildah and pulp-cli whose value is a secret.
_SECRET_OPTION = r"--(?:src-|dest-)?(?:creds|password|registry-token|client-secret|passphrase)"
# What may carry a secret in a message, a log or a report, each kept up to where the secret
# starts (group 1), the secret replaced. Every pattern runs in time linear in the text (a
# build step may print megabytes without a newline): each starts at a literal that no
# repetition before it can also match, so no start rescans what an earlier one read. Each
# comes with the literals (lower case) it cannot match without one of: a text that lacks
# them all is not searched (most lines hold none; a JSON report holds colons, but rarely
# an Authorization header or a secret's field), and a pattern is compiled on first use,
# not by every start of the CLI (issue 37: two compiled for every `--json` report were 1%
# of a warm `validate`).
_SECRETS = (
    # the user information of a URL, with or without a password (`https://TOKEN@host`,
    # `docker://me:s3cret@host/ns`), not a digest (`docker://base:1@sha256:...`); a
    # scheme's letters before `://` are not read, which made the pattern quadratic on a
    # long run of letters
    (("://",), r"(://)(?<=[a-z0-9+.-]://)[^\s/@'\"<>]+(?=@(?!sha(?:256|512):))"),
    # a secret option of a tool's command line (skopeo, buildah, pulp-cli), `--creds X`
    # or `--creds=X`
    (("--",), rf"({_SECRET_OPTION}(?:=|\s+))(?!-)\S+"),
    # an HTTP Authorization header as a tool or a server echoes it
    (("authorization:",), r"(authorization:\s*(?:bearer|basic|token)\s+)[^\s'\"]+"),
    # a query or form field (`?access_token=X`, `&client_secret=X`, a signed URL's signature)
    (("=",), r"([?&;\s](?:access_token|refresh_token|id_token|token|password|passwd|secret|"
          r"client_secret|api_key|apikey|x-amz-signature|x-amz-credential|signature|sig)=)"
          r"[^&\s'\"#]+"),
    # a JSON field that holds one (`"password": "X"`, an OAuth answer echoed in an error)
    (("passw", "secret", "token", "api_key"),
     r"([\"'](?:password|passwd|client_secret|access_token|refresh_token|id_token|"
     r"api_key|token)[\"']\s*:\s*[\"'])[^\"']*"),
)
# user:password@ of a reference without a scheme (`me:s3cret@host/ns`), never NAME:TAG
# before a digest (`base:1@sha256:...`): first the word before each such `@` (it starts
# after whitespace, a quote, `/` or `@`, so words never overlap), then, in `_masked_user`,
# where its user starts: at the word's start when whitespace, a quote or nothing comes
# before it, else after a `=`, `(`, `[` or `,` in it (`--url=me:pw@host`).
_WORD_BEFORE_AT = r"(?<![^\s/@'\"])[^\s/@'\"]+(?=@(?!sha(?:256|512):))"
_USER_AFTER = "=([,"


def _masked_user(match: re.Match[str]) -> str:
    word = match.group(0)
    before = match.string[match.start() - 1] if match.start() else ""
    starts = ([0] if before in ("", '"', "'") or before.isspace() else []) + [
        index + 1 for index, char in enumerate(word) if char in _USER_AFTER]
    for start in starts:
        if start < len(word) and word[start] != ":":
            # the first candidate whose user is not empty decides: a later one would find
            # the same colon, or none
            colon = word.find(":", start)
            if 0 <= colon < len(word) - 1:
                return word[:start] + MASK
            break
    return word


def without_credentials(text: str) -> str:
    """TEXT with every credential masked: the user information of URLs and references,
    secret options of command lines, Authorization headers, secret query, form and JSON
    fields. The one masking function: every message, error, log and report goes through
    it (the CLI's output streams all of it, `masked_lines` the files). Linear in TEXT."""
    if not text:
        return text
    # The literals are looked for in the text as given: masking replaces a secret with
    # MASK, which joins no literal across it, so it only ever removes some. Outside ASCII,
    # where a case-blind pattern matches letters lower() does not make (a dotless ı, a
    # long ſ), every pattern is searched.
    lowered = text.lower() if text.isascii() else None
    text = _masked(text, lowered, *_SECRETS[0])
    if "@" in text:
        text = _compiled(_WORD_BEFORE_AT).sub(_masked_user, text)
    for literals, pattern in _SECRETS[1:]:
        text = _masked(text, lowered, literals, pattern)
    return text


def _masked(text: str, lowered: Optional[str], literals: tuple[str, ...], pattern: str
            ) -> str:
    if lowered is not None and not any(literal in lowered for literal in literals):
        return text
    return _compiled(pattern).sub(lambda match: match.group(1) + MASK, text)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """PATTERN compiled, ignoring case, once in a process; `re` imported then (a message
    without a literal of any pattern, as most are, needs none)."""
    import re

    return re.compile(pattern, re.IGNORECASE)


def masked_command(argv: Sequence[str]) -> list[str]:
    """ARGV with every credential masked, the value of a secret option (`--creds X`) too."""
    masked: list[str] = []
    for arg in argv:
        # (the option's pattern starts with `--`: other words are not matched against it)
        secret_value = masked and masked[-1].startswith("--") and \
            _compiled(_SECRET_OPTION).fullmatch(masked[-1])
        masked.append(MASK if secret_value else without_credentials(arg))
    return masked


# What a registry failure a containers/image tool (skopeo, buildah) reports means, and
# what fixes it: (phrase in its stderr, message about HOST, the request field that fixes it).
_REGISTRY_TROUBLE = (
    ("server gave http response to https client",
     "the registry {host} speaks plain HTTP, not HTTPS: use it with TLS verification off",
     "tls_verify"),
    ("certificate signed by unknown authority",
     "the registry {host} shows a TLS certificate no trusted authority signed: add its CA "
     "to the system's trust store, or use it with TLS verification off", "tls_verify"),
    ("x509:", "the registry {host}'s TLS certificate is not valid for it: add its CA to the "
     "system's trust store, or use it with TLS verification off", "tls_verify"),
    ("connection refused",
     "nothing answers at {host} (connection refused): is the registry running there?", None),
    ("no such host", "{host} is no known host name: check the registry's name", None),
    ("unauthorized", "the registry {host} wants credentials it was not given: log in "
     "(skopeo login {host}) or give an auth file that holds them", None),
    ("authentication required", "the registry {host} wants credentials it was not given: "
     "log in (skopeo login {host}) or give an auth file that holds them", None),
    ("denied", "the registry {host} refused access: log in (skopeo login {host}) as a user "
     "allowed to, or give an auth file that holds such credentials", None),
    ("i/o timeout", "the registry {host} did not answer in time: is it reachable from here?",
     None),
)
_REGISTRY_HOST = lazy(r'(?:registry |https?://|docker://)([A-Za-z0-9.-]+(?::\d+)?)[/:"\s]')
_TOOL_MESSAGE = lazy(r'msg="((?:[^"\\]|\\.)*)"')


def registry_trouble(stderr: str) -> Optional[tuple[str, Optional[str]]]:
    """What a registry failure in a tool's STDERR means and the request field that fixes
    it (None: not a registry failure this knows)."""
    lowered = stderr.lower()
    for phrase, message, field in _REGISTRY_TROUBLE:
        if phrase in lowered:
            host = _REGISTRY_HOST.search(stderr)
            return message.format(host=host.group(1) if host else "?"), field
    return None


class ToolError(AipccError):
    """An outside program (buildah, skopeo, git) failed or timed out; carries its command
    and the tail of its stderr. A registry failure it reports is said in words with what
    fixes it, the tool's own text kept as a detail."""

    def __init__(self, command: Sequence[str], returncode: int, stderr: str,
                 timed_out: bool = False) -> None:
        # A password given in a reference is echoed by the tool: never kept, never shown.
        self.command = masked_command(command)
        self.returncode = returncode
        # Masked before it is cut: a cut must not leave a secret without what names it.
        lines = [cut_middle(line, MAX_ECHOED_LINE) for line in
                 without_credentials(stderr).strip().splitlines()[-STDERR_TAIL_LINES:]]
        self.stderr = "\n".join(lines)
        self.timed_out = timed_out
        tail = "\n".join(lines[-5:])
        trouble = registry_trouble(tail) if not timed_out else None
        if trouble is not None:
            said = _TOOL_MESSAGE.findall(tail)
            detail = said[-1].replace('\\"', '"') if said else tail.splitlines()[-1]
            self.field = trouble[1]
            super().__init__(f"{trouble[0]} ({command[0]}: {detail})")
            return
        super().__init__(f"{command[0]} exited {returncode}: {tail}" if tail else
                         f"{command[0]} exited {returncode}")


class ToolMissing(InputError):
    """An outside program is not installed: one clear error, before any work starts."""

    def __init__(self, program: str) -> None:
        self.program = program
        super().__init__(f"{program} is not installed (install the {program} package; "
                         "the README's first command sets everything up)")


def quoted(text: str, *, always: bool = False) -> str:
    """TEXT, a reference, path or value a user gave, for a one-line message: quoted as
    Python writes it (`'a\\nb'`) when it holds a control character (a line break would make
    the message read as two; the quotes keep an escaped line break apart from the two
    characters `\\n`), or ALWAYS (a message that quotes it anyway); else as it is."""
    return repr(text) if always or not text.isprintable() else text


def excerpt(value: object, limit: int = 80) -> str:
    """VALUE (what an outside document says: a registry's, an attestation's) for a
    one-line message: control characters escaped, at most LIMIT characters and an
    ellipsis; a lying source cannot make a report of megabytes."""
    text = clipped(value if isinstance(value, str) else repr(value), limit)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def cut_middle(text: AnyStr, limit: int) -> AnyStr:
    """TEXT (an outside program's line, decoded or not), at most LIMIT characters or bytes
    of it: a longer one keeps its beginning and its end, CUT_MARK between. A program says
    why it failed at the end of what it printed ("...: 503 Service Unavailable",
    "connection reset by peer"), where the table of transient errors reads it."""
    if len(text) <= limit:
        return text
    head = max(0, (limit - len(CUT_MARK)) // 2)
    end = max(0, limit - len(CUT_MARK) - head)
    if isinstance(text, str):
        return text[:head] + CUT_MARK + text[len(text) - end:]
    return text[:head] + CUT_MARK.encode() + text[len(text) - end:]


def clipped(text: str, limit: int) -> str:
    """TEXT, at most LIMIT characters of it and an ellipsis when it is longer."""
    return text[:limit] + "..." if len(text) > limit else text
