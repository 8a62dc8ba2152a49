# The README's two commands: `make demo` and `make test`. Each sets up what a fresh
# Debian or Fedora machine lacks, then runs. Nothing else is done by hand.
VENV ?= .venv
PYTHON ?= python3
# mmdebstrap builds the Debian base image (scripts/base-os); qemu-user-static and binfmt-support
# run foreign-architecture (arm64) RUN steps (scripts/setup-emulation). postgresql: the
# tests' own Pulp keeps its database in a cluster of its own (tests/support/pulp.py). nginx:
# the TLS proxy forwarding client certificates to Pulp's X.509 guard, and the web server that
# checks bearer tokens for Pulp with auth_request (its own config, no service;
# tests/integration/test_pulp_auth.py). clang-tools-22 (bookworm-security; Debian's clang-14
# cannot write compressed bundles) and binutils: LLVM's clang-offload-bundler and the
# assembler and linker that put its bundles into a shared object, the truth the device-code
# reader is compared with (tests/integration/test_gpu_code.py). rpm (rpm-build on RPM
# hosts): rpmbuild and rpm write the RPM databases the validator reads through links
# (tests/integration/test_rpmdb_links.py).
SYSTEM_PACKAGES_DEB := buildah skopeo docker-registry busybox-static zstd chromium git \
	mmdebstrap qemu-user-static binfmt-support postgresql nginx clang-tools-22 binutils rpm
SYSTEM_PACKAGES_RPM := buildah skopeo docker-distribution busybox zstd chromium git \
	postgresql-server nginx clang binutils rpm-build
# RPM hosts build the base image with dnf --installroot (no mmdebstrap needed) and register
# qemu through systemd-binfmt (no binfmt-support package). RHEL has no qemu-user-static:
# without it the arm64 tests skip, so it must not fail the install.
SYSTEM_PACKAGES_RPM_OPTIONAL := qemu-user-static
# RUN steps need chroot isolation where the OCI runtime cannot use the host's cgroups.
export BUILDAH_ISOLATION ?= chroot

.PHONY: demo test system venv ci-image

# The image CI jobs run in (matrix/ci.yaml, docs/ci/): built on the Debian base, validated.
# `make ci-image CI_IMAGE_ARGS="--push"` also pushes quay.io/aipcc/ci/aipcc-build:1-main.
CI_IMAGE_ARGS ?=
ci-image: system venv
	scripts/base-os >/dev/null
	scripts/ci-wheels containerfiles/ci/aipcc-build/cpu-debian/wheels >/dev/null
	$(VENV)/bin/aipcc-build --matrix matrix/ci.yaml matrix --build-id main $(CI_IMAGE_ARGS)

# make demo DEMO_ARGS="--registry-port 5001" picks the registry port.
demo: system venv
	scripts/demo $(DEMO_ARGS)

# tox's `oldest` env: a Python 3.9 on PATH, else pyenv's (as on the project's CI machines);
# none: the env is skipped.
export AIPCC_OLDEST_PYTHON ?= $(or $(shell command -v python3.9 2>/dev/null | grep -v /shims/),\
	$(lastword $(wildcard $(HOME)/.pyenv/versions/3.9.*/bin/python3.9)),python3.9)

# The suite streams; Python 3.9's unit run, lint and types run beside it (in a tox workdir
# of their own) and their output follows. The package is built once, before both: two tox
# runs building it at once share setuptools' staging directory in the tree, and one fails.
TEST_WHEELS := .tox/dist
test: system venv
	@rm -rf $(TEST_WHEELS) && $(VENV)/bin/pip wheel --quiet --no-deps --wheel-dir $(TEST_WHEELS) .
	@pkg=$$(echo $(TEST_WHEELS)/*.whl); \
	$(VENV)/bin/tox --installpkg $$pkg --workdir .tox/side -e oldest,lint,type >.tox/side.log 2>&1 & side=$$!; \
	$(VENV)/bin/tox --installpkg $$pkg -e py; suite=$$?; \
	wait $$side; checks=$$?; cat .tox/side.log; \
	[ $$suite -eq 0 ] && [ $$checks -eq 0 ]

system:
	@if command -v apt-get >/dev/null; then \
	  missing=$$(for p in $(SYSTEM_PACKAGES_DEB); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  fi; \
	elif command -v dnf >/dev/null; then \
	  dnf install -y -q $(SYSTEM_PACKAGES_RPM); \
	  dnf install -y -q $(SYSTEM_PACKAGES_RPM_OPTIONAL) || true; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]' tox
	touch $@
