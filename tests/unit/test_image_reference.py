"""The one reader of image references."""

from __future__ import annotations

import random
import re

from aipcc_build.image_reference import below, is_reference, repository_of, split, tag_of


def test_tag_digest_and_port() -> None:
    assert split("quay.io/aipcc/base/cuda:3.0-1") == ("quay.io/aipcc/base/cuda", "3.0-1", None)
    assert split("127.0.0.1:5000/ns/img") == ("127.0.0.1:5000/ns/img", None, None)
    assert split("127.0.0.1:5000/ns/img:1@sha256:ab") == ("127.0.0.1:5000/ns/img", "1",
                                                          "sha256:ab")
    assert split("h/r@sha256:ab") == ("h/r", None, "sha256:ab")
    assert repository_of("localhost:5000/a/b:c") == "localhost:5000/a/b"
    assert tag_of("localhost:5000/a/b") is None
    assert below("h:1/ns/a/b:t", "h:1/ns/") == "a/b"
    assert below("h:1/nsx/a:t", "h:1/ns") is None


# The grammar's regular expression, which is_reference reads with str methods.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
GRAMMAR = re.compile(rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
                     r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?")


def test_is_reference_reads_the_grammar_as_its_regular_expression_does() -> None:
    """Random texts over the grammar's characters (and a few outside it), pieced from its
    parts so that most are near misses: is_reference agrees with the expression on each."""
    rng = random.Random(40)
    pieces = ["a", "z9", "B", "0", ".", "_", "__", "___", "-", "--", ":", ":5000", "/", "//",
              "@", "@sha256:" + "a" * 64, "@sha256:" + "A" * 64, "@sha256:" + "a" * 63,
              "sha256:", "\n", " ", "é", "٣", "x" * 128, "x" * 127]
    cases = ["", "a", "a/b", "h:1/a", "h:/a", "a:1", "a:-1", "a:.1", "a:_1", "a" + ":" + "t" * 128,
             "a:" + "t" * 129, "a__b", "a___b", "a-_b", "a._b", "a--b", "a..b", "H/a", "A",
             "h/a:1/b", "a@sha256:" + "0" * 64, "h:5000/a/b:c@sha256:" + "f" * 64, "a\n",
             "localhost:5000/ns/img:1", "a/B", "-a", "a-", "h.io:0x1/a"]
    cases += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
              for _ in range(20000)]
    for text in cases:
        assert is_reference(text) == (GRAMMAR.fullmatch(text) is not None), repr(text)


def test_is_reference_is_linear_on_long_texts() -> None:
    """A long text is read in one pass: 10 MB of a tag or of separators, 1 MB of a
    component of hyphens or of a host (0.9 s and 0.25 s of CPU at 10 MB), where a
    reading that went back over the text from each character would already take hours."""
    for text in ["a" + "-" * 1_000_000 + "a", "h" * 1_000_000 + ":5/a",
                 "a:" + "t" * 10_000_000, "a" + "._" * 5_000_000]:
        assert isinstance(is_reference(text), bool)
