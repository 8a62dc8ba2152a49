"""The compat stage: toolkit facts (drivers, GPU architectures, EOL), the compatibility
table of a matrix, and which images run on a node (`select`)."""
