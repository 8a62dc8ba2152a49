"""The build stage: `matrix_build.build_matrix` builds, validates and pushes every image of
a matrix. Its rooms: `defaults` (every default of a run, once), `options` (how a run goes),
`scheduler` (the loop: dependency order, job and resource limits), `worker` (one image's
build -> validate -> push; the manifest list worker), `builder` (what the scheduler needs
from a builder) and `buildah_builder` (that builder on the real buildah), `outcomes`
(status, events, results: what `report/` reads), `build_report` (the file later stages
read), `preflight`, `runs` (run locks, leftovers), `uploads`.

Importing the package costs nothing: the CLI reads `defaults` while it starts."""
