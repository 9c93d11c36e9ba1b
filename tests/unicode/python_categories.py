# SPDX-License-Identifier: MIT
"""The expected general categories of tests/test_unicode.cpp, from Python's unicodedata: one line
`<hex code point> <category>` per code point that its Unicode version assigns, and a first line with that version."""
import sys
import unicodedata

with open(sys.argv[1], "w", encoding="ascii") as out:
    out.write(unicodedata.unidata_version + "\n")
    for c in range(0x110000):
        category = unicodedata.category(chr(c))
        if category != "Cn":
            out.write("%X %s\n" % (c, category))
