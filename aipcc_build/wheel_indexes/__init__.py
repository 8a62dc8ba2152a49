"""The wheel-index stage: per-variant PEP 503 indexes of judged wheels, published as a
static tree (`static_tree`) or to Pulp (`pulp`), both fed by `variants` (the layout and the
judging they share); `destinations.publish_indexes` is the one entry point. Image release
(promote, mirror) is publish/'s.

Nothing is imported here: a command that only names the default loads no judging."""

DEFAULT_KEEP = 3  # older generations (Pulp: repository versions) kept besides the current
