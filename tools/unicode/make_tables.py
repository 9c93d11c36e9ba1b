#!/usr/bin/env python3
"""Generates runtime/src/text/unicode_data.cpp (the tables of runtime/src/text/unicode_data.h) from the Unicode
Character Database.

  python3 tools/unicode/make_tables.py [--ucd /usr/share/unicode] [--out runtime/src/text/unicode_data.cpp]

The UCD comes with Debian's unicode-data package (apt-get install unicode-data). Reads UnicodeData.txt, PropList.txt,
DerivedCoreProperties.txt, DerivedNormalizationProps.txt, SpecialCasing.txt, CaseFolding.txt,
auxiliary/GraphemeBreakProperty.txt and emoji/emoji-data.txt. Standard library only.
"""
import argparse
import os
import re
import sys

CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
              "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"]
GRAPHEME_BREAKS = ["Other", "CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend", "SpacingMark",
                   "L", "V", "T", "LV", "LVT"]
MAX = 0x110000
SHIFT = 7
BLOCK = 1 << SHIFT


def data_lines(path):
    """(first, last, fields) per data line of a UCD file in the `range ; value ; ...  # comment` layout."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split(";")]
            span = fields[0].split("..")
            first = int(span[0], 16)
            last = int(span[1], 16) if len(span) > 1 else first
            yield first, last, fields[1:]


def property_set(path, name):
    s = set()
    for first, last, fields in data_lines(path):
        if fields[0] == name:
            s.update(range(first, last + 1))
    return s


def read_unicode_data(path):
    """Per code point: (category, ccc, decomposition string, simple lowercase)."""
    entries = {}
    range_start = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            cp = int(fields[0], 16)
            name = fields[1]
            record = (fields[2], int(fields[3]), fields[5], int(fields[13], 16) if fields[13] else None)
            if name.endswith(", First>"):
                range_start = cp
                continue
            if name.endswith(", Last>"):
                for c in range(range_start, cp + 1):
                    entries[c] = (record[0], record[1], "", None)
                continue
            entries[cp] = record
    return entries


def c_array(values, per_line=24):
    out = []
    for i in range(0, len(values), per_line):
        out.append("  " + ",".join(str(v) for v in values[i:i + per_line]) + ",")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--ucd", default="/usr/share/unicode")
    parser.add_argument("--out", default=os.path.join(root, "runtime", "src", "text", "unicode_data.cpp"))
    args = parser.parse_args()
    ucd = args.ucd

    with open(os.path.join(ucd, "DerivedCoreProperties.txt"), encoding="utf-8") as f:
        version = re.match(r"# DerivedCoreProperties-([0-9.]+)\.txt", f.readline()).group(1)

    entries = read_unicode_data(os.path.join(ucd, "UnicodeData.txt"))
    white_space = property_set(os.path.join(ucd, "PropList.txt"), "White_Space")
    alphabetic = property_set(os.path.join(ucd, "DerivedCoreProperties.txt"), "Alphabetic")
    pictographic = property_set(os.path.join(ucd, "emoji", "emoji-data.txt"), "Extended_Pictographic")
    exclusions = property_set(os.path.join(ucd, "DerivedNormalizationProps.txt"), "Full_Composition_Exclusion")
    grapheme = {}
    for first, last, fields in data_lines(os.path.join(ucd, "auxiliary", "GraphemeBreakProperty.txt")):
        for c in range(first, last + 1):
            grapheme[c] = GRAPHEME_BREAKS.index(fields[0])

    # Two-stage table of packed records (layout in unicode_data.h).
    records = []
    record_index = {}
    per_cp = []
    for c in range(MAX):
        e = entries.get(c)
        category = CATEGORIES.index(e[0]) if e else CATEGORIES.index("Cn")
        r = (category | grapheme.get(c, 0) << 5 | (c in white_space) << 9 | (c in alphabetic) << 10 |
             (c in pictographic) << 11)
        if r not in record_index:
            record_index[r] = len(records)
            records.append(r)
        per_cp.append(record_index[r])
    if len(records) > 256:
        sys.exit("more than 256 distinct records: kStage2 needs a wider type")
    blocks = []
    block_index = {}
    stage1 = []
    for b in range(MAX // BLOCK):
        block = tuple(per_cp[b * BLOCK:(b + 1) * BLOCK])
        if block not in block_index:
            block_index[block] = len(blocks)
            blocks.append(block)
        stage1.append(block_index[block])
    stage2 = [v for block in blocks for v in block]

    # Combining class runs.
    runs = []
    for c in range(MAX):
        ccc = entries[c][1] if c in entries else 0
        if ccc == 0:
            continue
        if runs and runs[-1][1] == c - 1 and runs[-1][2] == ccc:
            runs[-1][1] = c
        else:
            runs.append([c, c, ccc])

    # Decompositions and compositions.
    decompositions = []
    pool = []
    compositions = []
    for c in sorted(entries):
        d = entries[c][2]
        if not d:
            continue
        compat = d.startswith("<")
        if compat:
            d = d.split(">", 1)[1]
        mapping = [int(x, 16) for x in d.split()]
        decompositions.append((c, len(pool), len(mapping), int(compat)))
        pool.extend(mapping)
        if not compat and len(mapping) == 2 and c not in exclusions:
            compositions.append((mapping[0], mapping[1], c))
    compositions.sort()
    if len(pool) > 0xFFFF:
        sys.exit("decomposition pool past 16-bit offsets")

    # Lower-case mappings: simple ones, then the unconditional SpecialCasing entries over them.
    lower = {c: [e[3]] for c, e in entries.items() if e[3] is not None and e[3] != c}
    for first, _, fields in data_lines(os.path.join(ucd, "SpecialCasing.txt")):
        condition = fields[3] if len(fields) > 4 else ""
        if condition:
            continue
        mapping = [int(x, 16) for x in fields[0].split()]
        if mapping == [first]:
            lower.pop(first, None)
        else:
            lower[first] = mapping

    folds = []
    for first, _, fields in data_lines(os.path.join(ucd, "CaseFolding.txt")):
        if fields[0] in ("C", "S"):
            folds.append((first, int(fields[1], 16)))
    folds.sort()

    out = []
    out.append("// Generated by tools/unicode/make_tables.py from the Unicode Character Database %s; do not edit." % version)
    out.append("// The layout of each table is in unicode_data.h.")
    out.append('#include "text/unicode_data.h"\n')
    out.append("namespace tern::unicode::data {\n")
    out.append('const char* const kVersion = "%s";\n' % version)
    out.append("const uint16_t kStage1[0x110000 >> kShift] = {\n%s\n};\n" % c_array(stage1))
    out.append("const uint8_t kStage2[] = {\n%s\n};\n" % c_array(stage2, 32))
    out.append("const uint16_t kRecords[] = {\n%s\n};\n" % c_array(records, 16))
    out.append("const CombiningRun kCombining[] = {\n%s\n};" % "\n".join(
        "  {0x%X,0x%X,%d}," % tuple(r) for r in runs))
    out.append("const size_t kCombiningCount = %d;\n" % len(runs))
    out.append("const Decomposition kDecompositions[] = {\n%s\n};" % "\n".join(
        "  {0x%X,%d,%d,%d}," % d for d in decompositions))
    out.append("const size_t kDecompositionCount = %d;\n" % len(decompositions))
    out.append("const uint32_t kDecompositionPool[] = {\n%s\n};\n" % c_array(["0x%X" % v for v in pool], 12))
    out.append("const Composition kCompositions[] = {\n%s\n};" % "\n".join(
        "  {0x%X,0x%X,0x%X}," % p for p in compositions))
    out.append("const size_t kCompositionCount = %d;\n" % len(compositions))
    out.append("const LowerMapping kLowerMappings[] = {\n%s\n};" % "\n".join(
        "  {0x%X,{%s}}," % (c, ",".join("0x%X" % v for v in (lower[c] + [0, 0])[:3])) for c in sorted(lower)))
    out.append("const size_t kLowerMappingCount = %d;\n" % len(lower))
    out.append("const CaseFold kCaseFolds[] = {\n%s\n};" % "\n".join("  {0x%X,0x%X}," % f for f in folds))
    out.append("const size_t kCaseFoldCount = %d;\n" % len(folds))
    out.append("}  // namespace tern::unicode::data")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d records, %d blocks, %d combining runs, %d decompositions, %d compositions, %d lower, %d folds" % (
        args.out, len(records), len(blocks), len(runs), len(decompositions), len(compositions), len(lower),
        len(folds)))


if __name__ == "__main__":
    main()
