"""The wheel-index stage: per-variant PEP 503 indexes of judged wheels, published as a
static tree or to Pulp. Image release (promote, mirror) is publish/'s."""
