"""What a layer member is, as its tar type flag says: the kinds the reader (`tar`) reads
and the final-tree model (`overlay`) keeps. Apart from the reader so that the model of an
image stacked from cached scans (a warm validation, issue 37) loads no tar reader."""

REGULAR = "0"
HARDLINK = "1"
SYMLINK = "2"
CHARDEV = "3"
BLOCKDEV = "4"
DIRECTORY = "5"
FIFO = "6"
GLOBAL = "g"  # a PAX global header
