"""Authenticated readers (issue 25): a Pulp distribution behind Pulp's X.509 content guard,
reached through nginx that verifies the client certificate and forwards it URL-encoded in
X-CLIENT-CERT, as Pulp documents. An image rendered from the demo's templates with
`wheel_index_auth: client-cert` installs with real pip and uv when an entitlement-style
certificate (<id>.pem and <id>-key.pem, X.509 v3, made by openssl here) is mounted where
podman and OpenShift mount it, and says what is missing without it.

The same for `wheel_index_auth: netrc` against Pulp's own RBAC content guard (no proxy: the
content app authenticates Pulp users by HTTP basic auth), with the netrc file mounted where
the renderer's NETRC says. Both tests share the module's Pulp."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all
from aipcc_build.tools.retry import transient_text
from tests.integration.test_pulp import Project, make_project, pulp, served  # noqa: F401
from tests.integration.test_wheel_index import build, uv_wheel  # noqa: F401
from tests.support import oauth
from tests.support import pulp as pulp_server
from tests.support.certs import ENTITLEMENT_ID, certificates
from tests.support.project import REPO
from tests.support.wheels import make_wheel

pytestmark = pytest.mark.integration

MATRIX = """\
schema: 1
product: {{name: wheeltest, version: "2.1"}}
registry: localhost/aipcc-test-pulp
wheel_index: "{proxy}/pypi/{prefix}/{{release}}/{{variant}}/simple/"
wheel_index_auth: {auth}
templates: {templates}
output: {output}
os:
  debian: {{from: {base}}}
accelerators:
  cpu: {{}}
images:
  base: {{template: base.Containerfile.j2, os: [debian]}}
"""


# nginx's own files under {d}; one server follows.
NGINX_HTTP = """\
daemon off;
master_process off;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{}}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
"""
NGINX = NGINX_HTTP + """\
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {certs}/server.pem;
    ssl_certificate_key {certs}/server-key.pem;
    ssl_client_certificate {certs}/ca.pem;
    ssl_verify_client optional;
    proxy_set_header X-CLIENT-CERT $ssl_client_escaped_cert;
    proxy_set_header Accept-Encoding "";
    sub_filter_types *;
    sub_filter_once off;
    sub_filter '{content}' 'https://127.0.0.1:{port}';
    sub_filter '{api}' 'https://127.0.0.1:{port}';
    location /pulp/content/ {{ proxy_pass {content}; }}
    location / {{ proxy_pass {api}; }}
  }}
}}
"""


@contextlib.contextmanager
def nginx(work: Path, config: str, probe: str,
          ssl_context: Optional[ssl.SSLContext] = None) -> Iterator[None]:
    """nginx with CONFIG (its own files under WORK, no service) until PROBE answers."""
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx; `make system`)")
    work.mkdir()
    (work / "nginx.conf").write_text(config)
    with open(work / "stdout.log", "wb") as log:
        process = subprocess.Popen(["nginx", "-p", str(work), "-c", str(work / "nginx.conf")],
                                   stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (work / "error.log").read_text(errors="replace")
            try:
                with urllib.request.urlopen(probe, context=ssl_context, timeout=5):
                    break
            except urllib.error.HTTPError:
                break  # nginx answers (the probe may need credentials)
            except (urllib.error.URLError, OSError):
                assert time.monotonic() < deadline, "nginx did not answer"
                time.sleep(0.2)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.fixture
def proxy(pulp: pulp_server.Pulp, tmp_path: Path) -> Iterator[str]:  # noqa: F811
    """nginx on a free port of 127.0.0.1 in front of the Pulp; its own config, no service.
    Pulp's pages link to its content origin: nginx rewrites that to itself."""
    certificates(tmp_path / "certs")
    work = tmp_path / "nginx"
    port = pulp_server.free_port()
    config = NGINX.format(d=work, port=port, certs=tmp_path / "certs", content=pulp.content,
                          api=pulp.api)
    with nginx(work, config, f"https://127.0.0.1:{port}/pulp/api/v3/status/",
               context(tmp_path)):
        yield f"https://127.0.0.1:{port}"


def context(tmp_path: Path, client: bool = False) -> ssl.SSLContext:
    made = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.pem"))
    if client:
        made.load_cert_chain(str(tmp_path / "certs" / "client.pem"),
                             str(tmp_path / "certs" / "client-key.pem"))
    return made


def call(pulp: pulp_server.Pulp, method: str, path: str,  # noqa: F811
         body: dict[str, object]) -> dict[str, object]:
    """One Pulp API call; a task it starts is waited for."""
    request = urllib.request.Request(
        pulp.api + path if path.startswith("/") else path, method=method,
        data=json.dumps(body).encode(), headers={
            "Content-Type": "application/json", "Authorization": "Basic " + base64.b64encode(
                f"{pulp.user}:{pulp.password}".encode()).decode()})
    with urllib.request.urlopen(request, timeout=60) as answer:
        result: dict[str, object] = json.loads(answer.read())
    if "task" in result:
        deadline = time.monotonic() + 120
        while (task := pulp.get(str(result["task"])))["state"] not in ("completed", "failed"):
            assert time.monotonic() < deadline, task
            time.sleep(0.2)
        assert task["state"] == "completed", task
    return result


def published(pulp: pulp_server.Pulp, tmp_path: Path, uv_wheel: Path,  # noqa: F811
              debian_base: str) -> Project:
    """cpu-debian on the Pulp: uv's wheel and three small projects of its own."""
    project = make_project(pulp, tmp_path / "project", debian_base)
    wheels = project.wheels("cpu-debian")
    (wheels / uv_wheel.name).symlink_to(uv_wheel)
    for name in ("cpu-lib", "cpu-tool", "cpu-extra"):
        make_wheel(wheels, name, "1.0")
    done = project.index(f"pulp+{pulp.api}", f"cpu-debian={wheels}")
    assert done.returncode == 0, done.stderr
    return project


def guard(pulp: pulp_server.Pulp, project: Project, guard_href: str) -> str:  # noqa: F811
    """Put cpu-debian's distribution behind the content guard GUARD_HREF; its base path."""
    base_path = f"{project.prefix}/2.1/cpu-debian"
    distribution = pulp.get(f"/pulp/api/v3/distributions/python/pypi/?base_path={base_path}"
                            )["results"][0]
    call(pulp, "PATCH", distribution["pulp_href"], {"content_guard": guard_href})
    return base_path


def demo_image(tmp_path: Path, index: str, prefix: str, debian_base: str, auth: str) -> str:
    """One image of the demo's base template, rendered for AUTH against the index at INDEX
    (origin); its tag."""
    matrix_path = tmp_path / f"matrix-{auth}.yaml"
    matrix_path.write_text(MATRIX.format(
        proxy=index, prefix=prefix, auth=auth, templates=REPO / "templates" / "demo",
        output=tmp_path / f"out-{auth}", base=debian_base))
    matrix = load(str(matrix_path))
    apply(matrix, render_all(matrix), check=False, remove_stale=False)
    containerfile = tmp_path / f"out-{auth}" / "base" / "cpu-debian" / "Containerfile"
    tag = f"localhost/aipcc-test-pulp/auth-{uuid.uuid4().hex[:8]}"
    built = build(str(containerfile), tag)
    assert built.returncode == 0, built.stderr[-3000:]
    return tag


def test_an_entitlement_certificate_mounted_like_podman_does_lets_pip_and_uv_install(
        pulp: pulp_server.Pulp, proxy: str, tmp_path: Path, uv_wheel: Path,  # noqa: F811
        debian_base: str) -> None:
    project = published(pulp, tmp_path, uv_wheel, debian_base)

    # The distribution goes behind an X.509 guard trusting the test's CA.
    ca = (tmp_path / "certs" / "ca.pem").read_text()
    x509 = call(pulp, "POST", "/pulp/api/v3/contentguards/certguard/x509/",
                {"name": f"{project.prefix}-x509", "ca_certificate": ca})
    base_path = guard(pulp, project, str(x509["pulp_href"]))
    wheel_url = f"{proxy}/pulp/content/{base_path}/cpu_lib-1.0-py3-none-any.whl"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(wheel_url, context=context(tmp_path), timeout=30)
    assert refused.value.code == 403  # Pulp's guard, no certificate forwarded
    with urllib.request.urlopen(wheel_url, context=context(tmp_path, client=True),
                                timeout=30) as answer:
        assert answer.read(2) == b"PK"

    tag = demo_image(tmp_path, proxy, project.prefix, debian_base, "client-cert")
    container = ""
    entitlement = tmp_path / "entitlement"  # what subscription-manager keeps
    entitlement.mkdir()
    shutil.copy(tmp_path / "certs" / "client.pem", entitlement / f"{ENTITLEMENT_ID}.pem")
    shutil.copy(tmp_path / "certs" / "client-key.pem",
                entitlement / f"{ENTITLEMENT_ID}-key.pem")
    try:
        container = subprocess.run(["buildah", "from", "--pull-never", tag], check=True,
                                   capture_output=True, text=True, timeout=300).stdout.strip()

        def run(script: str, *mounts: str) -> subprocess.CompletedProcess[str]:
            volumes = [f"-v={tmp_path / 'certs'}:/test-ca:ro", *(f"-v={m}" for m in mounts)]
            return subprocess.run(
                ["buildah", "run", *volumes, "--env=PIP_CERT=/test-ca/ca.pem",
                 "--env=SSL_CERT_FILE=/test-ca/ca.pem", container, "--", "sh", "-c", script],
                capture_output=True, text=True, timeout=600)

        # Without a certificate: told what is missing and where, and refused.
        bare = run("pip install cpu-lib")
        assert bare.returncode != 0
        assert "pip: this image's wheel index needs a client certificate" in bare.stderr
        assert "/etc/pki/entitlement, /run/secrets/etc-pki-entitlement" in bare.stderr

        podman_like = f"{entitlement}:/etc/pki/entitlement:ro"
        pip = run("pip install cpu-lib uv && /usr/bin/python3 -m pip install cpu-extra",
                  podman_like)
        assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-3000:]
        assert "Successfully installed cpu-lib-1.0" in pip.stdout
        assert "Successfully installed cpu-extra-1.0" in pip.stdout
        uv = run("command -v uv && uv pip install cpu-tool", podman_like)
        assert uv.returncode == 0, uv.stdout + uv.stderr[-3000:]
        assert uv.stdout.startswith("/usr/local/libexec/aipcc-build/uv")  # the wrapper
        assert "+ cpu-tool==1.0" in uv.stderr

        uv_bare = run("uv pip install cpu-other")
        assert uv_bare.returncode != 0
        assert "uv: this image's wheel index needs a client certificate" in uv_bare.stderr

        # The container's filesystem (what a commit makes a layer of) holds no key: the
        # combined PEM lived in memory that pip and uv held while they ran.
        key_line = (entitlement / f"{ENTITLEMENT_ID}-key.pem").read_text().splitlines()[1]
        found = subprocess.run(["buildah", "run", container, "--", "grep", "-rlF", key_line,
                                "/etc", "/opt", "/usr", "/root", "/tmp", "/var", "/run"],
                               capture_output=True, text=True, timeout=300)
        assert found.stdout.strip() == "", found.stdout
    finally:
        if container:
            subprocess.run(["buildah", "rm", container], capture_output=True, timeout=300)
        subprocess.run(["buildah", "rmi", "-f", tag], capture_output=True, timeout=300)


def test_a_netrc_secret_lets_pip_and_uv_past_pulps_rbac_guard(
        pulp: pulp_server.Pulp, tmp_path: Path, uv_wheel: Path,  # noqa: F811
        debian_base: str) -> None:
    """Pulp's RBAC content guard: the content app authenticates a Pulp user by HTTP basic
    auth (DRF's authentication classes run in front of every guard) and lets those with the
    guard's download role fetch. The simple pages stay open, as pulp_python serves them."""
    project = published(pulp, tmp_path, uv_wheel, debian_base)
    reader, secret = f"{project.prefix}-reader", uuid.uuid4().hex
    call(pulp, "POST", "/pulp/api/v3/users/", {"username": reader, "password": secret})
    rbac = call(pulp, "POST", "/pulp/api/v3/contentguards/core/rbac/",
                {"name": f"{project.prefix}-rbac"})
    call(pulp, "POST", f"{rbac['pulp_href']}add_role/",
         {"role": "core.rbaccontentguard_downloader", "users": [reader]})
    base_path = guard(pulp, project, str(rbac["pulp_href"]))
    wheel_url = f"{pulp.content}/pulp/content/{base_path}/cpu_lib-1.0-py3-none-any.whl"

    def fetch(user: str, password: str) -> int:
        request = urllib.request.Request(wheel_url, headers={
            "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode())
            .decode()} if user else {})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    assert (fetch("", ""), fetch(reader, "wrong"), fetch(reader, secret)) == (403, 403, 200)

    tag = demo_image(tmp_path, pulp.api, project.prefix, debian_base, "netrc")
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {reader} password {secret}\n")
    netrc.chmod(0o600)
    wrong = tmp_path / "netrc-elsewhere"
    wrong.write_text(f"machine pulp.example.com login {reader} password {secret}\n")
    container = ""
    try:
        container = subprocess.run(["buildah", "from", "--pull-never", tag], check=True,
                                   capture_output=True, text=True, timeout=300).stdout.strip()

        def run(script: str, secret_file: Optional[Path] = None
                ) -> subprocess.CompletedProcess[str]:
            mounts = [f"-v={secret_file}:/run/secrets/netrc:ro"] if secret_file else []
            argv = ["buildah", "run", *mounts, container, "--", "sh", "-c", script]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if done.returncode != 0 and transient_text(done.stderr):
                # The runtime failed to start (tools.retry's table): once more.
                done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            return done

        bare = run("pip install cpu-lib")
        assert bare.returncode != 0
        assert "pip: this image's wheel index needs a user and password: no netrc file at " \
               "/run/secrets/netrc" in bare.stderr, bare.stderr[-3000:]
        elsewhere = run("pip install cpu-lib", wrong)
        assert elsewhere.returncode != 0
        assert "/run/secrets/netrc has no entry for 127.0.0.1" in elsewhere.stderr, \
            elsewhere.stderr[-3000:]

        pip = run("pip install cpu-lib uv && /usr/bin/python3 -m pip install cpu-extra", netrc)
        assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-3000:]
        assert "Successfully installed cpu-lib-1.0" in pip.stdout
        assert "Successfully installed cpu-extra-1.0" in pip.stdout
        uv = run("uv pip install cpu-tool", netrc)
        assert uv.returncode == 0, uv.stdout + uv.stderr[-3000:]
        assert "+ cpu-tool==1.0" in uv.stderr
        uv_bare = run("uv pip install --no-cache --reinstall cpu-tool")
        assert uv_bare.returncode != 0
        assert "uv: this image's wheel index needs a user and password" in uv_bare.stderr, \
            uv_bare.stderr[-3000:]
        assert secret not in pip.stdout + pip.stderr + uv.stdout + uv.stderr
    finally:
        if container:
            subprocess.run(["buildah", "rm", container], capture_output=True, timeout=300)
        subprocess.run(["buildah", "rmi", "-f", tag], capture_output=True, timeout=300)


# Pulp trusting its web server (pulpcore's "webserver authentication"): the API reads the
# user from the Remote-User header that nginx sets after auth_request asked the token issuer
# whether the bearer token is valid. The API document stays open, as pulp-glue needs it to
# find the token URL.
BEARER_NGINX = NGINX_HTTP + """\
  server {{
    listen 127.0.0.1:{port};
    client_max_body_size 0;
    location = /_token_check {{
      internal;
      proxy_method GET;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_pass {issuer}/introspect;
    }}
    location /pulp/api/v3/docs/ {{
      proxy_set_header Remote-User "";
      proxy_pass {api};
    }}
    location / {{
      auth_request /_token_check;
      auth_request_set $token_user $upstream_http_x_remote_user;
      proxy_set_header Remote-User $token_user;
      proxy_pass {api};
    }}
  }}
}}
"""
REMOTE_USER_SETTINGS = """
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.RemoteUserBackend",
                           "pulpcore.backends.ObjectRolePermissionBackend"]
REST_FRAMEWORK__DEFAULT_AUTHENTICATION_CLASSES = (
    "pulpcore.app.authentication.PulpRemoteUserAuthentication",)
REMOTE_USER_ENVIRON_NAME = "HTTP_REMOTE_USER"
REMOTE_USER_OPENAPI_SECURITY_SCHEME = {{"type": "oauth2", "flows": {{"clientCredentials": {{
    "tokenUrl": "{token_url}", "scopes": {{}}}}}}}}
"""


def test_publishing_with_oauth2_client_credentials_through_a_bearer_only_api(
        pulp: pulp_server.Pulp, tmp_path: Path, debian_base: str) -> None:  # noqa: F811
    client_secret = f"cs-{uuid.uuid4().hex}"
    project = make_project(pulp, tmp_path / "project", debian_base)
    wheels = project.wheels("cpu-debian")
    for name in ("cpu-lib", "cpu-tool"):
        make_wheel(wheels, name, "1.0")
    with oauth.running({"aipcc-publisher": (client_secret, pulp.user)}) as issuer, \
            pulp_server.another_api(pulp, REMOTE_USER_SETTINGS.format(
                token_url=issuer.token_url)) as api:
        port = pulp_server.free_port()
        gateway = f"http://127.0.0.1:{port}"
        with nginx(tmp_path / "nginx", BEARER_NGINX.format(
                d=tmp_path / "nginx", port=port, issuer=issuer.url, api=api),
                f"{gateway}/pulp/api/v3/docs/api.json?component=core"):
            # The API behind nginx takes a bearer token and nothing else.
            for headers in ({}, {"Authorization": "Basic " + base64.b64encode(
                    f"{pulp.user}:{pulp.password}".encode()).decode()}):
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(urllib.request.Request(
                        f"{gateway}/pulp/api/v3/repositories/", headers=headers), timeout=30)
                assert refused.value.code == 401

            def publish(secret: str) -> subprocess.CompletedProcess[str]:
                config = project.directory / "config" / "pulp" / "cli.toml"
                config.write_text(f'[cli]\nbase_url = "{gateway}"\nclient_id = '
                                  f'"aipcc-publisher"\nclient_secret = "{secret}"\n')
                return project.index(f"pulp+{gateway}", f"cpu-debian={wheels}")

            wrong = publish("not-the-secret")
            assert wrong.returncode == 2, wrong.stdout + wrong.stderr
            lines = wrong.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].endswith(
                f"the OAuth2 token issuer at {issuer.url}/token refused the client "
                "credentials of the pulp-cli profile or PULP_CLIENT_ID/PULP_CLIENT_SECRET "
                "(invalid_client)"), wrong.stderr
            assert "not-the-secret" not in wrong.stdout + wrong.stderr
            assert served(pulp, project) == {}  # nothing made, nothing switched

            first = publish(client_secret)
            assert first.returncode == 0, first.stderr
            base_path = f"{project.prefix}/2.1/cpu-debian"
            version = served(pulp, project)[base_path]
            content = pulp.get(f"{version}")["content_summary"]["present"]
            assert content["python.python"]["count"] == 2
            assert issuer.issued >= 1

            # The identity provider revokes each token after three requests: in the middle
            # of a publish Pulp's web server answers 401, a new token is fetched and the
            # publish goes on.
            issuer.uses_per_token = 3
            issued = issuer.issued
            make_wheel(wheels, "cpu-extra", "1.0")
            second = publish(client_secret)
            assert second.returncode == 0, second.stderr
            assert served(pulp, project)[base_path] != version
            assert issuer.issued - issued >= 3, issuer.issued - issued
            for output in (first, second):
                text = output.stdout + output.stderr
                assert client_secret not in text
                assert not any(token in text for token in issuer.tokens)
