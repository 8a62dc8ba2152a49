"""The publish stage: registry operations on images a build already pushed (promote,
mirror). The push of a freshly built image is the build worker's last step (imagebuild/),
so that a run never leaves an unvalidated image in a registry; wheel indexes are
wheel_indexes/'."""

# Images copied (and looked at) at once by promote and mirror.
COPY_JOBS = 4
