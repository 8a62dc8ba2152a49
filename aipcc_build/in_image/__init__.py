"""Programs the renderer writes into images, run there by the image's own Python (3.9 and
later: the unit tests run them on the oldest, tox's `oldest` env), with the standard
library only. Nothing of aipcc-build imports them: the renderer reads their text."""
