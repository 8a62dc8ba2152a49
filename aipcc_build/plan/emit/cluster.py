"""What a build cluster cannot reach: a registry, a base image or a wheel index on the
machine that made the plan (`localhost`, a loopback address). A pod's loopback is the pod;
such a plan would fail in every task, so Konflux and plain Tekton plans refuse it unless
the cluster runs on that very machine (a kind or minikube cluster with host networking)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Optional
from urllib.parse import urlsplit

from ...errors import InputError
from ...matrix import ImageSpec, Matrix


def refuse_loopback(matrix: Matrix, images: Iterable[ImageSpec],
                    registry: Optional[str]) -> None:
    """Raise InputError naming the first matrix field (or --registry) whose registry, base
    image or wheel index is on the planning machine."""
    if registry is not None and _loopback(_image_host(registry)):
        raise _refused("--registry", registry)
    if _loopback(_image_host(matrix.registry)):
        # Not field="registry": errors with that field name the --registry option.
        raise InputError("registry: " + _refused("", matrix.registry).message,
                         file=matrix.path)
    for name, spec in matrix.os.items():
        for base in (spec.from_ref, *spec.platform_froms.values()):
            if _loopback(_image_host(base)):
                raise _refused(f"os.{name}.from", base, matrix)
    for image in images:
        if image.wheel_index and _loopback(urlsplit(image.wheel_index).hostname or ""):
            field = ("accelerators." + image.accelerator + ".wheel_index"
                     if f"accelerators.{image.accelerator}.wheel_index" in matrix.locations
                     else "wheel_index")
            raise _refused(field, image.wheel_index, matrix, image.key)


def _refused(field: str, value: str, matrix: Optional[Matrix] = None,
             image: str = "") -> InputError:
    message = (f"'{value}'{f' (image {image})' if image else ''} is on this machine, which "
               "no build cluster reaches: name a registry, base image and index the cluster "
               "can reach, or pass --allow-loopback for a cluster on this machine")
    if matrix is None:
        return InputError(message, field=field or None)
    return matrix.error(field, message)


def _image_host(reference: str) -> str:
    """The registry host of an image reference (`localhost/x` and `127.0.0.1:5000/x` name
    one; `library/x` and `x` do not)."""
    first, _, rest = reference.partition("/")
    if not rest:
        return ""
    if first == "localhost" or "." in first or ":" in first or first.startswith("["):
        return first.rsplit(":", 1)[0] if not first.endswith("]") else first
    return ""


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
