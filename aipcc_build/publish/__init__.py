"""The publish stage: registry operations on images a build already pushed (promote,
mirror) and the wheel indexes. The push of a freshly built image is the build worker's last
step (build/), so that a run never leaves an unvalidated image in a registry."""
