#!/usr/bin/env python3
"""Writes the tokenizer conformance corpus (tests/data/tokenizer/*.txt, cases.jsonl).

Hand-written text plus generated edge cases; deterministic. Re-run only to change the corpus:
    python3 tests/data/tokenizer/gen_corpus.py
The texts are original to llmr (no third-party text) except where a line says otherwise.
"""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))

PROSE = """The committee met on Tuesday to review the proposal. It wasn't the first time they'd discussed it,
and it won't be the last. "We're close," said the chair, "but we've still got work to do."
I'm certain you'll agree: the numbers don't lie. She'd have told us if she'd known.
THEY'RE HERE! I'M READY. YOU'LL SEE. WE'VE WON. HE'D KNOW. IT'S DONE. DON'T STOP.
They'Re mixed-CaSe: It'S, We'Ve, You'Ll, I'M, He'D, Can'T, They'rE, we'LL, i'm.
Curly quotes are different: it’s, we’re, don’t — and so are ‘single’ and “double” ones.
Mr. O'Neil's dog's bone; the '90s; rock 'n' roll; 'tis the season; y'all'd've.
Prices: $3.50, €12, £7.99, ¥1200; 50% off; 3×4=12; ½ cup; 2nd, 3rd, 21st place.
E-mail me at someone@example.com or visit https://example.org/path?q=1&r=two#frag.
Newlines and paragraphs matter.

A second paragraph follows a blank line.\tA tab.  Two spaces.   Three spaces.
"""

CODE = r'''#include <stdio.h>
/* A comment with    aligned     columns */
int main(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') printf("%s\n", argv[i]);
    }
    return 0;
}

def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

class Foo(Bar):  # inherits
    def __init__(self, **kwargs):
        super().__init__()
        self.x = kwargs.get("x", 0x1F)

{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b\u00e9"}, "empty": {}}
SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;
$ ls -la | grep -v '^d' | awk '{print $9}' > /tmp/out.txt 2>&1
fn main() { let v: Vec<u8> = vec![0; 16]; println!("{:?}", &v[..4]); }
<div class="x" id='y'><a href="/p?a=1&amp;b=2">link</a></div>
x+=1;y-=2;z*=3;w/=4;a%=5;b<<=6;c>>=7;d&=8;e|=9;f^=10;!==;===;=>;->;::;...;?.;??=
    indented with tabs	and	spaces    mixed
		double tab
'''

CJK = """中华人民共和国成立于1949年。北京是中国的首都，也是政治和文化中心。
我们今天学习了自然语言处理的基本概念，包括分词、词性标注和命名实体识别。
繁體中文與簡體中文在字形上有所不同，例如「體」與「体」。
한국어는 한글로 표기합니다. 서울은 대한민국의 수도입니다. 안녕하세요!
漢字、ひらがな、カタカナ、한글 and English mixed together in one line。
"""

JAPANESE = """今日は良い天気ですね。東京タワーに行きましょう！
私の名前は田中です。ＡＢＣ株式会社で働いています。電話番号は０３－１２３４－５６７８です。
ｶﾀｶﾅ（半角）とカタカナ（全角）、ﾃﾞｰﾀﾍﾞｰｽとデータベース。
「こんにちは」と彼は言った。『吾輩は猫である』は夏目漱石の小説だ。
ＧＰＵを使ってLLMを高速化する。Python3.12とＣ言語で実装。〜〜〜ー・…
ﾊﾟﾋﾟﾌﾟﾍﾟﾎﾟ　全角スペース　と半角スペース 混在。
令和７年１１月２２日（土）午前１０時３０分
"""

EMOJI = """Hello 👋 world 🌍! Family: 👨‍👩‍👧‍👦 Couple: 👩‍❤️‍💋‍👨 Flags: 🇯🇵🇺🇸🇪🇸🏳️‍🌈🏴‍☠️
Skin tones: 👍🏻👍🏼👍🏽👍🏾👍🏿 Keycaps: 1️⃣2️⃣#️⃣*️⃣ Zodiac ♈♉ Cards 🂡 Math 𝔸𝕓𝒸 𝟘𝟙𝟚
Emoji only: 😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗☺😚😙🥲😋😛😜🤪😝🤑🤗🤭🫢🫣🤫🤔
Text then emoji🎉no space🎉 and ZWJ 🧑‍💻 technologist 🧑🏽‍🚀 astronaut, 🐻‍❄️ polar bear.
Variation selectors: ☃︎ ☃️ ❤ ❤️ ✔ ✔️ and tags 🏴󠁧󠁢󠁳󠁣󠁴󠁿 (Scotland).
"""

RTL = """مرحبا بالعالم! كيف حالك اليوم؟ اللغة العربية جميلة جدا.
اَلْعَرَبِيَّةُ بِالتَّشْكِيلِ الْكَامِلِ — النص مع الحركات.
الأرقام العربية: ٠١٢٣٤٥٦٧٨٩ و ۱۲۳ الفارسية، وأرقام 123 لاتينية.
שלום עולם! מה שלומך היום? עברית נכתבת מימין לשמאל.
בְּרֵאשִׁית בָּרָא אֱלֹהִים — טקסט עם ניקוד.
Mixed: the word سلام means peace and שלום means peace too.
"""

COMBINING = """Café vs Cafe\u0301 (precomposed vs combining acute). Ångström vs A\u030angstro\u0308m.
Zalgo: Z\u0351\u036b\u0343a\u0310\u0352l\u0301\u0347g\u0358\u0348o\u0363\u0339 text.
Vietnamese: Tiếng Việt có dấu: ả ạ ẫ ệ ữ ỗ. Thai: ภาษาไทยไม่มีช่องว่างระหว่างคำ
Devanagari: हिन्दी भाषा में संयुक्ताक्षर क्षत्रिय। Tamil: தமிழ் மொழி.
Combining marks alone: \u0301\u0302\u0303 after space: a \u0301b and \u20dd circled \u20e3.
Greek: Ελληνικά με τόνους ΐ ΰ; Cyrillic: Привет, мир! ЁЖИК ёжик.
Letter-like: ℕ ℤ ℚ ℝ ℂ ™ ℃ № Ⅻ ⅻ ﬁ ﬂ ﬀ Ǆ ǅ ǆ ß ẞ ſ ı İ.
"""

def numbers():
    out = []
    digits = "12345678901234567890123456789012345678901234567890"
    for n in range(1, 41):
        out.append(digits[:n])
    out.append(" ".join(str(10 ** k) for k in range(0, 25)))
    out.append("3.14159265358979323846 2.718281828 -42 +7 1e-9 0x1f 0b1010 1_000_000 1,234,567.89")
    out.append("v1.2.3 2024-01-15T10:30:00Z 192.168.0.1 +1 (555) 123-4567 ISBN 978-3-16-148410-0")
    out.append("Full-width: １２３４５６７８９０ Arabic-Indic: ٣٤٥ Devanagari: १२३ Superscript: x² y³ ¼ ½ Ⅳ ⑤")
    out.append("a1b22c333d4444e55555f666666 A1B2C3 abc123def 123abc 12ab34 ١٢٣abc")
    return "\n".join(out) + "\n"

def whitespace():
    parts = []
    for n in (1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 64, 100, 257):
        parts.append("x" + " " * n + "y")
    parts.append("tabs\t\t\t\tend\t")
    parts.append("crlf line\r\nnext\r\n\r\nblank crlf\r\r\rcr only\n\r\n\rmixed")
    parts.append("trailing spaces   \n   leading spaces\n \n  \n\n\n\n")
    parts.append("nbsp\u00a0here ideographic\u3000space thin\u2009space em\u2003space")
    parts.append("line\u2028separator para\u2029separator nel\u0085next vt\x0bff\x0cend")
    parts.append("mongolian\u180evowel zero\u200bwidth bom\ufeffmark")
    parts.append(" " * 40 + "\n" + "\t" * 20 + "\n" + " \t \t \n \r\n")
    parts.append("    four-space indent\n        eight\n\t\ttwo tabs\n")
    return "\n".join(parts) + "\n" + " " * 5000 + "\n" + "\n" * 300 + "end"

SPECIALS_REAL = ["<|startoftext|>", "<|endoftext|>", "<|reserved_200000|>", "<|reserved_200001|>",
                 "<|return|>", "<|constrain|>", "<|reserved_200004|>", "<|channel|>", "<|start|>",
                 "<|end|>", "<|message|>", "<|reserved_200009|>", "<|reserved_200010|>",
                 "<|reserved_200011|>", "<|call|>", "<|reserved_200013|>", "<|reserved_200014|>",
                 "<|reserved_200015|>", "<|reserved_200016|>", "<|reserved_200017|>", "<|endofprompt|>"]

def specials():
    lines = ["Every special token: " + " ".join(SPECIALS_REAL),
             "Glued: " + "".join(SPECIALS_REAL),
             "<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>",
             "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"SF\"}<|call|>",
             "Look-alikes: <|START|> <|start |> < |start|> <|start| > <|startt|> <|star|> <start> |start| <||> <|>",
             "<|endoftext <|endoftext| endoftext|> <<|end|>> <|<|end|>|> <|reserved_200019|> <|reserved_201087|> <|reserved_1|>",
             "<|im_start|>user<|im_end|> <s> </s> [INST] <<SYS>> <|begin_of_text|> <|eot_id|>",
             "text<|end|>text<|end|><|end|>\n<|end|> <|end|>  <|end|>\t<|end|>"]
    return "\n".join(lines) + "\n"

def cases():
    c = []
    c += ["", " ", "  ", "\n", "\r\n", "\t", "a", "A", "é", "中", "😀", "'", "'s", "'S", "x's", "X'S",
          "it'ſ", "IT'ſ", "we'LL", "can'T", "they'Re", "I'M", "he'D", "you'VE", "'ll've'd", "''s",
          "don't", "DON'T", "Don'T", "'re", " 're", "'", "''", "'''", "a'b'c'd"]
    c += ["1" * n for n in range(1, 13)] + ["x" + "9" * n + "x" for n in range(1, 9)]
    c += [" " * n for n in (3, 4, 10, 33)] + ["a" + " " * n + "b" for n in (1, 2, 3, 9)]
    c += ["a\r\nb", "a\n\nb", "a \n b", "a\r\r\nb", " \r\n ", "x\n\r\n\ry", "a\t\nb", "end \n"]
    c += ["\u00a0", "a\u00a0b", "a\u3000b", "a\u2028b", "a\u0085b", "a\u180eb", "a\u200bb", "a\ufeffb",
          "a\u180e b", " \u180e", "\u180e\u180e x", "\u0085\u0085 x", "\ufeff \ufeff"]
    c += ["<|start|>", "<|end|>x", "x<|message|>", "<|endoftext|><|endoftext|>", "<|start", "|>",
          "<|reserved_200018|>", "<|endofprompt|>", "<|return|> <|call|>"]
    c += ["ab\u0301c", "\u0301", " \u0301", "x\u20e3", "😀\u200d😀", "👨‍👩‍👧", "🇯🇵", "a😀b", "😀 😀",
          "ǅungla", "ǅ", "ᾈ", "Ⅻ", "ⅻx", "ℕat", "ﬁne", "İstanbul", "ǈ'S", "ǆ's", "ὈΔΥΣΣΕΎΣ's"]
    c += ["Hello, world!", "hello world", "HELLO WORLD", "HelloWorld", "helloWORLD", "camelCaseWord",
          "snake_case_word", "kebab-case-word", "path/to/file.txt", "a/b\n/c", "x.y\r\n", "!!!\n\n",
          "???\r\n/", " ...\n", "--\n\n\n", "\"quoted\"", "(parens)", "[brackets]", "{braces}"]
    c += ["日本語のテキスト", "カタカナ", "ｶﾀｶﾅ", "ひらがな", "漢字かな交じり文", "ＡＢＣ", "１２３４",
          "한국어", "中文，标点。", "Ελληνικά", "Русский", "עברית", "العربية", "हिन्दी", "ภาษาไทย"]
    return c

def main():
    files = {"prose_en.txt": PROSE, "code.txt": CODE, "cjk.txt": CJK, "japanese.txt": JAPANESE,
             "emoji.txt": EMOJI, "rtl.txt": RTL, "combining.txt": COMBINING, "numbers.txt": numbers(),
             "whitespace.txt": whitespace(), "specials.txt": specials()}
    for name, text in files.items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    with open(os.path.join(HERE, "cases.jsonl"), "w", encoding="utf-8") as f:
        for t in cases():
            f.write(json.dumps(t, ensure_ascii=False) + "\n")

if __name__ == "__main__":
    main()
