"""A front on 127.0.0.1 to a docker-registry that adds the OCI 1.1 referrers API it lacks:
a manifest pushed with a `subject` is recorded and answered with `OCI-Subject`, and
GET /v2/NAME/referrers/DIGEST lists what refers to DIGEST, as registries with the API do.
Everything else is passed through unchanged."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import urllib.error
import urllib.request
from typing import Any

from tests.support.http_server import server_thread

_REFERRERS = re.compile(r"^/v2/(.+)/referrers/(sha256:[0-9a-f]{64})(?:\?.*)?$")
_MANIFEST = re.compile(r"^/v2/(.+)/manifests/([^/?]+)$")


class ReferrersFront:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.referrers: dict[tuple[str, str], list[dict[str, Any]]] = {}
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                wanted = _REFERRERS.match(self.path)
                if method == "GET" and wanted:
                    index = json.dumps({"schemaVersion": 2,
                                        "mediaType": "application/vnd.oci.image.index.v1+json",
                                        "manifests": front.referrers.get(
                                            (wanted.group(1), wanted.group(2)), [])}).encode()
                    self._answer(200, {"Content-Type":
                                       "application/vnd.oci.image.index.v1+json"}, index)
                    return
                # skopeo sends one Accept header per media type: all of them.
                headers = {k: ", ".join(self.headers.get_all(k) or [])
                           for k in set(self.headers.keys())
                           if k.lower() not in ("host", "content-length")}
                request = urllib.request.Request(f"http://{front.upstream}{self.path}",
                                                 data=body, method=method, headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, answer = response.status, response.read()
                        sent = dict(response.headers.items())
                except urllib.error.HTTPError as error:
                    status, answer, sent = error.code, error.read(), dict(error.headers.items())
                manifest = _MANIFEST.match(self.path)
                if method == "PUT" and manifest and status == 201 and body:
                    document = json.loads(body)
                    subject = document.get("subject")
                    if isinstance(subject, dict):
                        front.referrers.setdefault(
                            (manifest.group(1), subject["digest"]), []).append({
                                "mediaType": document.get("mediaType"),
                                "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
                                "size": len(body),
                                "artifactType": document.get("artifactType"),
                                **({"annotations": document["annotations"]}
                                   if document.get("annotations") else {})})
                        sent["OCI-Subject"] = subject["digest"]
                self._answer(status, sent, answer)

            def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "transfer-encoding",
                                           "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_HEAD(self) -> None:
                self._forward("HEAD")

            def do_PUT(self) -> None:
                self._forward("PUT")

            def do_POST(self) -> None:
                self._forward("POST")

            def do_PATCH(self) -> None:
                self._forward("PATCH")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ReferrersFront:
        server_thread(self.server).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
