"""The JUnit XML of a run: one testcase per image and platform, failures with the tail of
their log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import without_credentials
from ..fsutil import write_atomic
from ..imagebuild.build_report import iso_time

if TYPE_CHECKING:
    from ..imagebuild.outcomes import RunResult


def write_junit(result: RunResult, path: str) -> None:
    """One testcase per image and platform (`name [linux/arm64]` when an image has several),
    failures with the tail of their log, for CI dashboards."""
    from xml.etree import ElementTree as ET

    from ..imagebuild.outcomes import Status

    failed = {Status.FAILED, Status.PUSH_FAILED}
    suite = ET.Element("testsuite", {
        "name": "aipcc-build matrix",
        "tests": str(len(result.images)),
        "failures": str(sum(item.status in failed for item in result.images)),
        "errors": "0",
        "skipped": str(sum(item.status in (Status.SKIPPED, Status.CANCELLED)
                           for item in result.images)),
        "time": f"{result.end - result.start:.3f}",
        "timestamp": iso_time(result.start) or "",
    })
    for item in result.images:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"aipcc-build.{item.image.kind}",
            "name": f"{item.image.name} [{item.platform}]" if item.image.multi_platform
            else item.image.name,
            "time": f"{item.duration or 0:.3f}",
        })
        if item.status in failed:
            failure = ET.SubElement(case, "failure", {"message": item.message,
                                                      "type": item.status.value})
            failure.text = "\n".join(item.log_tail)
        elif item.status is not Status.OK:
            ET.SubElement(case, "skipped", {"message": f"{item.status.value}: {item.message}"})
        ET.SubElement(case, "system-out").text = "\n".join(
            [f"log: {item.log}", *(f"validation warning: {w}" for w in item.warnings)])
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    write_atomic(path, without_credentials(
        ET.tostring(root, encoding="unicode", xml_declaration=True)) + "\n")
