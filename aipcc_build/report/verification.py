"""How `verify` looks: a line per image (verified, or each problem), or JSON."""

from __future__ import annotations

import sys

from .console import emit_json

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from ..publish.verify import VerifyResult


def verified(result: VerifyResult, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": result.ok, "images": [
            {"ref": image.ref, "digest": image.digest, "ok": image.ok,
             "platforms": image.platforms, "problems": list(image.problems)}
            for image in result.images]})
        return
    for image in result.images:
        at = f" ({image.digest})" if image.digest else ""
        if image.ok:
            sys.stdout.write(f"verified {image.ref}{at}: signed, {image.platforms} "
                             "platform(s) with an SBOM and an ok verdict\n")
        for problem in image.problems:
            sys.stdout.write(f"FAILED {image.ref}{at}: {problem}\n")
