"""Whether an image's pip and uv keep to its toolkit: the constraints file the renderer
writes (`toolkit.constraints`) must be in the final filesystem, say it is for the image's
accelerator and release, and be named by PIP_CONSTRAINT and UV_CONSTRAINT.

The layer scans read the file with pip's and uv's config files (it is as small and is
matched by name, `index_config.CONFIG_FILE`), and keep only what its header line says it
is for, as a setting under `CONSTRAINTS_KEY`: a warm validation reads nothing more.

The images judged are those the renderer labelled with the file (`ai.aipcc.constraints`):
the file is the renderer's promise, not every image's. The renderer labels an image whose
last stage carries the file (`toolkit.constraints.stage_carries`): not one FROM scratch, a
root file system copied in with no pip, uv or Python to keep to anything, which a matrix
may hold too. One rendered before the file existed, or built by other means, is not failed
for lacking it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from .. import image_labels
from ..image_index_settings import CONSTRAINT_VARIABLES
from .results import OK, VIOLATION, Expectation, Finding, IndexSetting

CONSTRAINTS_KEY = "aipcc-constraints"  # the setting a scan records for the file
_VARIABLES = CONSTRAINT_VARIABLES


def constraints_setting(path: str, text: str) -> IndexSetting:
    """What a scan keeps of the constraints file at PATH: the target its header names
    ("cuda 12.8"; empty when it names none)."""
    from ..toolkit.constraints import target_in

    target = target_in(text)
    return IndexSetting(path, CONSTRAINTS_KEY, str(target) if target else "")


def judge_constraints(settings: Sequence[tuple[IndexSetting, Optional[str]]],
                      env: Mapping[str, str], labels: Mapping[str, str],
                      expected: Expectation) -> list[Finding]:
    """Findings on the constraints of an image aipcc-build labelled (none for another):
    SETTINGS are the final filesystem's constraint settings, with their layer digests."""
    if not labels.get(image_labels.CONSTRAINTS):
        return []
    # Only here: the warm validation of an image of another builder loads no constraints
    # module (issue 37).
    from ..toolkit.constraints import CONSTRAINTS_PATH, target_of

    wanted = str(target_of(expected.accelerator, expected.version))
    found = [(s, digest) for s, digest in settings if s.source == CONSTRAINTS_PATH]

    def finding(status: str, path: str, reason: str, claim: Optional[str] = None,
                digest: Optional[str] = None) -> Finding:
        return Finding(status, "constraints", path, reason, component="constraints",
                       component_version=claim, layer_digest=digest)

    if not found:
        return [finding(VIOLATION, CONSTRAINTS_PATH, "the image carries no constraints file: "
                        f"pip and uv may install wheels of another toolkit than {wanted} "
                        "(render its Containerfile again)")]
    setting, digest = found[-1]
    if setting.url != wanted:
        said = f"is for {setting.url}" if setting.url else "names no toolkit"
        return [finding(VIOLATION, setting.source, f"the constraints file {said}, in a "
                        f"{wanted} image", setting.url or None, digest)]
    unset = [name for name in _VARIABLES if env.get(name) != CONSTRAINTS_PATH]
    if unset:
        return [finding(VIOLATION, f"config:Env/{name}", f"{name} does not name "
                        f"{CONSTRAINTS_PATH}: that tool does not keep to {wanted}",
                        env.get(name) or None) for name in unset]
    return [finding(OK, setting.source, f"pip and uv keep to {wanted}", setting.url, digest)]
