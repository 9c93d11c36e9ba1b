#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the tokenizer test text: one test input per line, each a JSON string (JSON lines), so that a case can hold
any character, line ends included. Deterministic: the same file on every machine and Python 3 version.

    python3 tools/reference/tokenizer_text.py OUT.jsonl [--lines N]

What it holds (each kind many times, alone and mixed): text in many scripts, emoji sequences, decomposed (NFD)
text, numbers, English contractions in every case, whitespace of every kind, code, URLs, and the special-token text
of each tokenizer family, alone, inside words, between spaces and cut short. The reference tokenizer
(tokenizer_reference.js) and Tern's check (tools/bench/tokenizer_check.cpp) read it.
"""

import argparse
import json
import random
import sys
import unicodedata

SEED = 20250614

SCRIPTS = {
    "latin": [
        "Héllo wörld, façade naïve café résumé coöperate Ångström",
        "Ça va? Où êtes-vous? Dès Noël, l'été sera là.",
        "Straße, Größe, Übermaß, Fußgänger ÄÖÜ äöü ß ẞ",
        "Łódź, Kraków, źdźbło, żółć; Čeština: příliš žluťoučký kůň",
        "Ñandú, pingüino, ¿qué tal? ¡Olé! Æsir, Œuvre, ðæt þing",
        "İstanbul'da ılık, ĞÜŞİÖÇ ğüşiöç; Tiếng Việt có dấu: người Việt",
    ],
    "greek": ["Καλημέρα κόσμε· ἐν ἀρχῇ ἦν ὁ λόγος", "ΑΒΓΔ αβγδ ΣΊΣΥΦΟΣ σίσυφος ς", "Ἀθῆναι, ᾅδης, ὦ ἄνδρες"],
    "cyrillic": ["Привет, мир! Съешь же ещё этих мягких французских булок", "ЁЖИК ёжик, Україна: ґ є і ї", "Ђорђе, Љубљана, Њујорк"],
    "arabic": ["مرحبا بالعالم، كيف حالك؟", "اللُّغَةُ العَرَبِيَّةُ ١٢٣٤٥٦٧٨٩٠", "فارسی: سلام دنیا ۱۲۳"],
    "hebrew": ["שלום עולם, מה שלומך?", "בְּרֵאשִׁית בָּרָא אֱלֹהִים", "עברית 2024 ABC מעורב"],
    "devanagari": ["नमस्ते दुनिया, आप कैसे हैं?", "संस्कृतम् भाषा १२३४", "क्षत्रिय ज्ञान श्री"],
    "thai": ["สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรค", "กรุงเทพมหานคร ๑๒๓"],
    "cjk": ["你好，世界！我们今天去公园。", "漢字と中文：龍、亀、𠀋𡈽𡌛", "繁體中文測試，電腦軟體。"],
    "hangul": ["안녕하세요 세계! 한국어 텍스트입니다.", "ㄱㄴㄷ ㅏㅑㅓ 힣 가각"],
    "kana": ["こんにちは世界、カタカナとひらがな。", "ｶﾀｶﾅ半角 ｱｲｳｴｵ ー〜「」『』", "東京タワーへ行きましょう！"],
    "other": ["Ελληνικά ქართული Հայերեն አማርኛ", "ᚠᚢᚦᚨᚱᚲ ᎠᎡᎢ ꦗꦮ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝 ① ⅻ ½ ² ㎏ ﬁ ﬂ"],
}

EMOJI = [
    "😀", "🎉", "🔥", "❤️", "✨", "🚀", "🙂", "🤖",
    "👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈", "🧑🏽‍🚀", "👨🏿‍🦰", "❤️‍🔥",  # ZWJ sequences
    "👍🏻", "👍🏼", "👍🏽", "👍🏾", "👍🏿", "✋🏾",  # skin tones
    "🇫🇷", "🇯🇵", "🇺🇸", "🇩🇪", "🇺🇳", "🏴󠁧󠁢󠁳󠁣󠁴󠁿",  # flags, a tag sequence
    "1️⃣", "#️⃣", "©️", "™", "☺︎",  # keycaps, variation selectors
]

CONTRACTION_WORDS = ["it", "I", "we", "they", "you", "she", "that", "don", "can", "won", "John"]
CONTRACTION_TAILS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]

SPECIALS = [
    "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eot_id|>", "<|reserved_special_token_0|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|endofprompt|>",
    "<think>", "</think>", "<tool_call>", "<s>", "</s>", "<unk>", "<pad>", "<bos>", "<eos>", "<start_of_turn>",
    "<end_of_turn>", "<start_of_image>", "<mask>", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<0x41>", "▁",
]

SPACES = [
    " ", "  ", "   ", "    ", "        ", "\t", "\t\t", " \t ", "\n", "\n\n", "\r\n", "\r", "\r\n\r\n", "\u000b", "\f",
    "\u00a0", "\u1680", "\u2000", "\u2002", "\u2003", "\u2007", "\u2009", "\u200a", "\u200b", "\u202f", "\u205f",
    "\u3000", "\u2028", "\u2029", "\u0085", "\ufeff", " \u00a0 ", "\u00a0\u00a0",
]

CODE = [
    'def f(x):\n    return x**2 + 1  # square\n',
    'for i in range(10):\n\tprint(f"{i:>3}", end="")\n',
    'class Foo(Bar):\n    """Doc."""\n    def __init__(self, *args, **kw):\n        super().__init__()\n',
    '#include <stdio.h>\nint main(void) {\n  printf("%d\\n", 42);\n  return 0;\n}\n',
    'static inline uint32_t rotl(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }',
    'if (a != b && c <= d || !e) { x->y[i++] += 0x1F; } /* comment */',
    '{"name": "tern", "version": [1, 2, 3], "ok": true, "null": null, "pi": 3.14159e+00}',
    '[{"a":1},{"b":[2,3]},{"c":{"d":"e\\"f"}}]',
    'SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;',
    '<div class="x"><a href="#top">Top</a></div>',
    '    indented    code\t\twith\ttabs   ',
    'x = [1,2,3]; y = {k: v for k, v in zip(a, b)}; z = lambda q: q ** 0.5',
    'fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0; 16]; Ok(()) }',
    '$ ls -la | grep "\\.py$" && echo done || exit 1',
]

URLS = [
    "https://example.com/path/to/page?query=1&x=y#frag",
    "http://www.example.org:8080/a_b-c.d~e",
    "ftp://user:pass@host.example.net/file.tar.gz",
    "mailto:someone@example.com",
    "https://de.wikipedia.org/wiki/Stra%C3%9Fe",
    "www.example.co.uk/index.html",
    "https://例え.テスト/パス?q=値",
]

WORDS = (
    "the of and to in is was for on that with as by at from this have are not but be or an it which one all were "
    "when there can been has more if will who no out so up said what its about than into them only other new some "
    "could time these two may first then do any like my now over such our man me even most made after also did many "
    "before must through back years where much your way well down should because each just those people how too "
    "little state good very make world still own see men work long get here between both life being under never day "
    "same another know while last might us great old year off come since against go came right used take three "
    "Tokenization internationalization antidisestablishmentarianism supercalifragilistic floccinaucinihilipilification"
).split()


def numbers(rng):
    kinds = [
        lambda: str(rng.randrange(10 ** rng.randrange(1, 40))),
        lambda: "{:,}".format(rng.randrange(10 ** 12)),
        lambda: "{:,.2f}".format(rng.random() * 10 ** rng.randrange(1, 9)),
        lambda: "{:.6e}".format(rng.random() * 10 ** rng.randrange(-20, 20)),
        lambda: " ".join(str(rng.randrange(1000)).zfill(3) for _ in range(rng.randrange(1, 5))),
        lambda: "{}.{}.{}".format(rng.randrange(1, 32), rng.randrange(1, 13), rng.randrange(1900, 2100)),
        lambda: "+1 ({:03d}) {:03d}-{:04d}".format(rng.randrange(1000), rng.randrange(1000), rng.randrange(10000)),
        lambda: "{}%".format(rng.randrange(101)),
        lambda: "$" + str(rng.randrange(10 ** 6)) + "." + str(rng.randrange(100)).zfill(2),
        lambda: "v{}.{}.{}-rc{}".format(rng.randrange(10), rng.randrange(100), rng.randrange(100), rng.randrange(9)),
        lambda: "0x{:X}".format(rng.randrange(2 ** 64)),
        lambda: "1" * rng.randrange(1, 80),
        lambda: "".join(rng.choice("٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３４５６７８９") for _ in range(rng.randrange(1, 12))),
    ]
    return rng.choice(kinds)()


def contraction(rng):
    word = rng.choice(CONTRACTION_WORDS)
    tail = rng.choice(CONTRACTION_TAILS)
    case = rng.randrange(4)
    if case == 1:
        word, tail = word.upper(), tail.upper()
    elif case == 2:
        tail = tail.upper()
    elif case == 3:
        tail = "".join(c.upper() if rng.random() < 0.5 else c for c in tail)
    if rng.random() < 0.1:
        tail = tail.replace("'", "\u2019")
    return word + tail


def script_text(rng, nfd_chance=0.15):
    text = rng.choice(rng.choice(list(SCRIPTS.values())))
    if rng.random() < nfd_chance:
        text = unicodedata.normalize("NFD", text)
    return text


def random_chars(rng, n):
    """Characters drawn from many blocks: ASCII, controls, Latin-1, combining marks, symbols, CJK, emoji, private use
    and planes 1-2. No surrogates (not valid in UTF-8) and no noncharacters beyond U+FFFE/U+FFFF."""
    blocks = [(0x20, 0x7E), (0x00, 0x1F), (0x7F, 0xFF), (0x100, 0x24F), (0x300, 0x36F), (0x370, 0x3FF),
              (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
              (0x20A0, 0x20CF), (0x2100, 0x22FF), (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
              (0xE000, 0xE0FF), (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0xFFF0, 0xFFFF), (0x1F300, 0x1F6FF),
              (0x1F900, 0x1F9FF), (0x1D400, 0x1D7FF), (0x20000, 0x2000F), (0xE0000, 0xE007F), (0x10FFF0, 0x10FFFF)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(blocks)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def fragment(rng):
    """One piece of text of a random kind."""
    kind = rng.randrange(11)
    if kind == 0:
        return script_text(rng)
    if kind == 1:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 4)))
    if kind == 2:
        return numbers(rng)
    if kind == 3:
        return contraction(rng)
    if kind == 4:
        return rng.choice(SPACES)
    if kind == 5:
        return rng.choice(CODE)
    if kind == 6:
        return rng.choice(URLS)
    if kind == 7:
        return rng.choice(SPECIALS)
    if kind == 8:
        return random_chars(rng, rng.randrange(1, 8))
    words = [rng.choice(WORDS) for _ in range(rng.randrange(1, 8))]
    if rng.random() < 0.2:
        words = [w.upper() if rng.random() < 0.5 else w.capitalize() for w in words]
    return " ".join(words) + rng.choice(["", ".", ",", "!", "?", ";", ":", "...", " -", "'", '"'])


def special_cases(rng):
    """Special-token text in every position: alone, at either end, glued to words, between spaces, repeated, cut
    short, and inside another special token's text."""
    s = rng.choice(SPECIALS)
    t = rng.choice(SPECIALS)
    word = rng.choice(WORDS)
    return rng.choice([
        s, s + s, s + " " + t, s + word, word + s, word + s + word, " " + s, s + " ", " " + s + " ", "  " + s + "  ",
        "\n" + s + "\n", word + " " + s + " " + word, s[:-1], s[1:], s[:-1] + t, "<" + s + ">", s.upper(),
        s + "\n\n" + word, "\t" + s + "\t", s + "\u00a0" + word, word + "\u3000" + s, s + s[:len(s) // 2] + s,
        t + word + " " + s + contraction(rng) + " " + t,
    ])


def whitespace_case(rng):
    parts = []
    for _ in range(rng.randrange(1, 6)):
        parts.append(rng.choice(SPACES) * rng.randrange(1, 4))
        if rng.random() < 0.7:
            parts.append(rng.choice(WORDS))
    return "".join(parts)


def mixed(rng, n):
    return "".join(fragment(rng) + (rng.choice(SPACES) if rng.random() < 0.3 else "") for _ in range(n))


def fixed_cases():
    """Hand-written cases: boundaries and the texts tokenizers most often get wrong."""
    cases = ["", " ", "  ", "\n", "\t", "\r\n", "a", "A", "0", ".", "'", "'s", " 's", "'S", "don't", "DON'T", "I'M",
             "You'RE", "we'Ve", "they'LL", "he'D", "it's", "IT'S", "'''", "'s's's", "a'", "' s",
             "hello world", " hello world", "hello  world", "hello   world ", "hello\nworld", "hello\r\nworld",
             "Hello World", "HELLO WORLD", "hello, world!", "   leading", "trailing   ", "\u00a0nbsp\u00a0",
             "12345678901234567890", "3.14159", "1,000,000", "1 000 000", "2024-01-01T12:00:00Z",
             "\u0000", "a\u0000b", "\ufffd", "\ufeffbom", "\u200b", "e\u0301", "\u0301", "\u0301\u0301\u0301",
             "ﬁ", "Ⅻ", "ｈｅｌｌｏ", "①②③", "㍿", "\u00e9", "e\u0301\u0327", "\u1e9b\u0323",
             "a" * 1000, " " * 1000, "\n" * 200, "ab" * 500, "😀" * 100, "的" * 300, "1" * 500, "\t" * 100,
             "<|endoftext|>", "<|endoftext|><|endoftext|>", " <|endoftext|> ", "<|endoftext|", "|endoftext|>",
             "<s>", "</s>", "<s></s>", " <s> ", "<s>hello</s>", "[INST] hi [/INST]", "<start_of_turn>user\nhi<end_of_turn>\n",
             "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
             "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
             "<bos><start_of_turn>model\n", "<think>\n\n</think>\n\n", "▁", "▁▁hello", "<0x41>", "<unk>"]
    return cases


def generate(lines):
    rng = random.Random(SEED)
    cases = fixed_cases()
    makers = [
        lambda: script_text(rng, nfd_chance=0.5),
        lambda: " ".join(script_text(rng) for _ in range(rng.randrange(2, 5))),
        lambda: " ".join(contraction(rng) for _ in range(rng.randrange(1, 6))),
        lambda: " ".join(numbers(rng) for _ in range(rng.randrange(1, 4))),
        lambda: "".join(rng.choice(EMOJI) + rng.choice(["", " ", "a"]) for _ in range(rng.randrange(1, 6))),
        lambda: rng.choice(CODE) + rng.choice(CODE),
        lambda: "See " + rng.choice(URLS) + " and " + rng.choice(URLS) + ".",
        lambda: special_cases(rng),
        lambda: special_cases(rng) + mixed(rng, 2),
        lambda: whitespace_case(rng),
        lambda: unicodedata.normalize("NFD", mixed(rng, rng.randrange(1, 5))),
        lambda: mixed(rng, rng.randrange(1, 12)),
        lambda: random_chars(rng, rng.randrange(1, 40)),
    ]
    while len(cases) < lines:
        if len(cases) % 997 == 0:
            cases.append(mixed(rng, rng.randrange(100, 400)))  # a long case now and then (a few KB)
        else:
            cases.append(rng.choice(makers)())
    return cases[:lines]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the JSON-lines file to write")
    parser.add_argument("--lines", type=int, default=10240, help="number of test inputs (default 10240)")
    args = parser.parse_args()
    cases = generate(args.lines)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for case in cases:
            f.write(json.dumps(case, ensure_ascii=True) + "\n")
    n_bytes = sum(len(c.encode("utf-8")) for c in cases)
    print("tokenizer_text: {} lines, {} bytes of UTF-8 text -> {}".format(len(cases), n_bytes, args.out),
          file=sys.stderr)


if __name__ == "__main__":
    main()
