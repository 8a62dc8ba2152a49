"""Outside programs: one process runner (`runner`) under every one of them, and one module
per program (buildah, skopeo, git) that knows its arguments and its output."""

# A short call (inspect, version, rev-parse) that has not answered in this long is hung.
# Here, not in `runner`: `skopeo` names it as it is imported, and a validation read in
# place (a warm one among them) never loads the runner.
SHORT_TIMEOUT = 120.0
