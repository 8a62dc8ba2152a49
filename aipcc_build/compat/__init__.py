"""The compat stage: toolkit facts (drivers, GPU architectures, EOL), the compatibility
table of a matrix, and which images run on a node (`select`)."""

# EOL within this many days counts as eol-soon (compat, select, the EOL check).
DEFAULT_WARN_DAYS = 90
