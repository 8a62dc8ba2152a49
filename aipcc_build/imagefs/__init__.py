"""An image's filesystem as the container engine unpacks it: image references opened
(layouts, archives, local containers/storage, registries through skopeo), layer blobs
streamed and checked against their digests and diffIDs, tar members named by Go's
archive/tar rules and placed by containers/storage's, symlinks resolved inside the image
root, files looked up in the final filesystem.

It reads and never judges: the validator (`aipcc_build.validate`) sits above it and
decides what the files mean. Nothing here imports the validator.
"""
