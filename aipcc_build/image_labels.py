"""The labels the renderer writes into every image and the validator reads back: the
image's identity (accelerator, its version, the variant) and the wheel index it is
configured for with how its readers authenticate."""

ACCELERATOR = "ai.aipcc.accelerator"
ACCELERATOR_VERSION = "ai.aipcc.accelerator.version"
VARIANT = "ai.aipcc.variant"
IMAGE_KIND = "ai.aipcc.image.kind"
IMAGE_NAME = "ai.aipcc.image.name"
WHEEL_INDEX = "ai.aipcc.wheel-index"
WHEEL_INDEX_AUTH = "ai.aipcc.wheel-index.auth"  # written when readers authenticate
# The constraints file pip and uv read (toolkit/constraints.py): the renderer's promise that
# the image keeps to its toolkit, which the validator then holds it to.
CONSTRAINTS = "ai.aipcc.constraints"
