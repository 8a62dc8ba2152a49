"""Outside programs: one process runner (`runner`) under every one of them, and one module
per program (buildah, skopeo, git) that knows its arguments and its output."""
