"""How pip and uv in an image reach the image's wheel index: what the renderer writes into
every image and the validator reads back. Kept apart from the matrix model, so that a
validation loads no matrix code."""

from __future__ import annotations

# The config files the renderer writes (pip's and uv's system-wide files, which each tool
# also loads when a user unsets PIP_CONFIG_FILE / UV_CONFIG_FILE).
PIP_CONF = "/etc/pip.conf"
UV_TOML = "/etc/uv/uv.toml"
# The variables that name another config file to each tool.
PIP_CONFIG_FILE, UV_CONFIG_FILE = "PIP_CONFIG_FILE", "UV_CONFIG_FILE"
# The variables that set the one index each tool installs from (UV_DEFAULT_INDEX is uv's
# current name, UV_INDEX_URL the one older uv reads).
INDEX_VARIABLES = ("PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL")
# The variables that name each tool's constraints file (toolkit.constraints writes it), for
# what it installs and for the environments it builds sdists in (pip 26.2 and later pass
# PIP_CONSTRAINT no longer to a build environment).
CONSTRAINT_VARIABLES = ("PIP_CONSTRAINT", "UV_CONSTRAINT", "PIP_BUILD_CONSTRAINT",
                        "UV_BUILD_CONSTRAINT")

# How readers of a wheel index authenticate (the matrix's `wheel_index_auth`): "none";
# "client-cert", the entitlement certificate of the host (subscription-manager's
# /etc/pki/entitlement/<id>.pem and <id>-key.pem), as Red Hat's CDN wants; "netrc", a user
# and password from a netrc file the customer mounts as a secret.
INDEX_AUTH_MODES = ("none", "client-cert", "netrc")
# What the renderer writes for them and the validator checks, beside the label: for
# client-cert, the directory of the uv entry point, first on PATH (the helper,
# in_image/aipcc_index_cert.py, is also pip's sitecustomize hook); for netrc, where podman's and
# buildah's `--secret id=netrc` put the file (/run/secrets/ID).
AUTH_BIN = "/usr/local/libexec/aipcc-build"
# The helper's name in AUTH_BIN: the `uv` entry point there (in_image/uv.sh, in every image)
# runs it instead of the real uv when it is present.
UV_AUTH_HELPER = "aipcc-index-auth"
NETRC_SECRET = "/run/secrets/netrc"
