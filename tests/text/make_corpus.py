#!/usr/bin/python3
"""Writes a deterministic corpus for the byte-level BPE tests: one JSON string per line (records may hold
newlines, tabs and carriage returns), at least 10,000 records of varied text.

  /usr/bin/python3 tests/text/make_corpus.py OUT.jsonl [N_RECORDS]

Mixes English with contractions in every case, accented Latin (NFC and NFD, so combining marks),
Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai, CJK, kana, Hangul, emoji (ZWJ sequences, skin
tones, flags, keycaps), numbers of several scripts and lengths, whitespace runs (spaces, tabs, \\n,
\\r\\n, NBSP, ideographic space, thin space), code, URLs, JSON, punctuation runs, special-token text,
and very long pieces (more than 64 bytes) that take the heap path of the merge loop.
All characters are assigned in Unicode 14 and the text is valid UTF-8. Left out on purpose, because
tiktoken (Rust) and JavaScript disagree on them: U+0085 and U+FEFF (whitespace or not), and U+017F
after an apostrophe (case folding); see text/bpe.h.
"""
import json
import random
import sys
import unicodedata

WORDS_EN = ("the of and to in is you that it he was for on are as with his they at be this have from or "
            "one had by word but not what all were we when your can said there use an each which she do how "
            "their if will up other about out many then them these so some her would make like him into time "
            "has look two more write go see number no way could people my than first water been call who oil "
            "its now find long down day did get come made may part tokenizer byte pair encoding merges rank "
            "Hello World GPT OpenAI JavaScript Python nabla tensor gradient").split()
CONTRACTIONS = ["don't", "DON'T", "Don't", "I'm", "I'M", "you're", "YOU'RE", "You'Re", "we've", "WE'VE", "they'll",
                "THEY'LL", "They'Ll", "she'd", "SHE'D", "it's", "IT'S", "It'S", "can't", "won't", "o'clock",
                "rock'n'roll", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL",
                "'D", "''s", "'''", "'x", "'", "l'homme", "aujourd'hui", "rock 'n' roll"]
SCRIPTS = {
    "fr": "Le cœur a ses raisons que la raison ne connaît point. Où êtes-vous? À bientôt, garçon! Ça va très bien.",
    "de": "Größenwahn führt zu Übermut; Straße, Mädchen, Äpfel und Öl. Fußgängerübergänge überqueren.",
    "es": "¿Dónde está el niño? ¡Qué día más bonito! La cigüeña bebió agua en el año 1999.",
    "pl": "Zażółć gęślą jaźń. Łódź, Kraków, Gdańsk i Wrocław.",
    "vi": "Tiếng Việt có dấu: người, được, những, thương, trường học, Hà Nội.",
    "el": "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. Ελληνικά γράμματα: αβγδεζηθ ΑΒΓΔ.",
    "ru": "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва 2024 года.",
    "uk": "Гей, хлопці, не вспію — на ґанку ваша файна їжа знищується бурундучком.",
    "ar": "الخط العربي جميل جدا. مرحبا بالعالم! السلام عليكم ورحمة الله ١٢٣٤٥٦٧٨٩٠.",
    "he": "שלום עולם! עברית נכתבת מימין לשמאל. הַשָּׁלוֹם",
    "hi": "नमस्ते दुनिया। हिन्दी भाषा में लिखा गया वाक्य। संख्या १२३४५",
    "bn": "আমি বাংলায় গান গাই। কলকাতা ২০২৩",
    "ta": "தமிழ் மொழி மிகவும் பழமையானது. வணக்கம்!",
    "th": "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ ๑๒๓",
    "zh": "我能吞下玻璃而不伤身体。中文分词很难，对吧？北京二〇二四年。",
    "ja": "私はガラスを食べられます。それは私を傷つけません。カタカナとひらがな、ｶﾀｶﾅ。",
    "ko": "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 한국어 123",
    "ka": "ქართული ენა ძალიან ლამაზია.",
    "am": "ሰላም ለዓለም። አማርኛ ቋንቋ።",
    "hy": "Բարև աշխարհ: Հայերեն լեզու:",
    "math": "∀x∈ℝ: x² ≥ 0; ∑ᵢ aᵢ = ½·π ≈ 3.14159…; ∫₀^∞ e^{-x} dx = 1; ℵ₀ < 𝔠; 𝐀𝐁𝐂 𝒳𝒴 ⅫⅣ ⑴⑵ ①②",
    "fullwidth": "ＡＢＣ　ｄｅｆ　１２３　！？　（全角）",
}
EMOJI = ["😀", "😂", "🤖", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "1️⃣", "❤️", "✨", "🔥", "🎉", "🐍",
         "🦀", "☕", "⚡", "🧑🏿‍🚀", "🙈🙉🙊"]
NUMBERS = ["0", "7", "42", "123", "1234", "12345", "3.14159", "1,000,000", "2024-06-01", "10:30", "-17", "+1e-9",
           "0xFF", "0b1011", "٣٤٥", "१२३", "１２３", "²³", "½", "Ⅻ", "9999999999999999", "007", "1st", "2nd", "3rd",
           "$19.99", "€5", "¥100", "50%", "#1", "v1.2.3"]
SPACES = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", "  \n  ", "\u00a0",
          "\u3000", "\u2009", " \t ", "\n\t", "\r", "        ", "\x0b", "\x0c", "\u2028"]
CODE = [
    "int main(int argc, char** argv) {\n    return 0;\n}\n",
    "def f(x):\n    return x ** 2  # square\n",
    "for (size_t i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "const re = /'s|'t|'re/gu; console.log(`${x}`);",
    '{"name": "nabla", "version": "0.1.0", "deps": ["zlib", "gtest"], "ok": true, "n": null}',
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "https://example.com/path/to/file?query=1&lang=en#section-2",
    "user@example.org <mailto:user@example.org>",
    "#include <vector>\n#include \"text/bpe.h\"\n",
    "x = [i for i in range(10) if i % 2 == 0]",
    "if (a && b || !c) { x <<= 2; y >>= 1; z ^= ~w; }",
    "    indented\tline\twith\ttabs",
    "<div class=\"row\"><p>Hello &amp; welcome!</p></div>",
    "$ ls -la | grep '.cpp' > out.txt 2>&1",
    "!!!???...---***+++===~~~```'''\"\"\"",
    "a->b; c::d; e=>f; g?.h; i??j; k...l",
    "__init__ __main__ self._x = None",
    "<|endoftext|>",
    "text <|endoftext|> more text",
    "<|fim_prefix|>code<|fim_suffix|>",
]


def nfd(s):
    return unicodedata.normalize("NFD", s)


def sentence(rng):
    n = rng.randint(3, 14)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.45:
            w = rng.choice(WORDS_EN)
        elif r < 0.6:
            w = rng.choice(CONTRACTIONS)
        elif r < 0.72:
            w = rng.choice(NUMBERS)
        elif r < 0.8:
            w = rng.choice(EMOJI)
        elif r < 0.9:
            words = rng.choice(list(SCRIPTS.values())).split()
            w = rng.choice(words)
        else:
            w = rng.choice(WORDS_EN).upper() if rng.random() < 0.5 else rng.choice(WORDS_EN).capitalize()
        out.append(w)
        out.append(rng.choice(SPACES) if rng.random() < 0.15 else " ")
    s = "".join(out).rstrip(" ") if rng.random() < 0.7 else "".join(out)
    return s + rng.choice([".", "!", "?", "", ",", "...", " :)", "\n"])


def long_piece(rng):
    kind = rng.randrange(8)
    n = rng.randint(65, 400)
    if kind == 0:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    if kind == 1:
        return "".join(rng.choice("0123456789") for _ in range(n))
    if kind == 2:
        return " " * n + "x"
    if kind == 3:
        return "".join(rng.choice(EMOJI) for _ in range(n // 4))
    if kind == 4:
        return "a" * n
    if kind == 5:
        return "".join(rng.choice("=-*#_.~") for _ in range(n))
    if kind == 6:
        return "".join(rng.choice("абвгдеёжзийклмнопрстуфхцчшщъыьэюя") for _ in range(n // 2))
    return "\n" * (n // 8) + "\t" * (n // 8) + "end"


def record(rng, i):
    r = rng.random()
    if r < 0.35:
        return sentence(rng)
    if r < 0.55:
        key = rng.choice(sorted(SCRIPTS))
        s = SCRIPTS[key]
        if rng.random() < 0.3:
            s = nfd(s)  # combining marks
        words = s.split(" ")
        a = rng.randrange(len(words))
        b = rng.randint(a + 1, len(words))
        return " ".join(words[a:b]) + (rng.choice(SPACES) if rng.random() < 0.3 else "")
    if r < 0.7:
        return rng.choice(CODE) + (rng.choice(SPACES) if rng.random() < 0.5 else "")
    if r < 0.8:
        return "".join(rng.choice(SPACES) + rng.choice(WORDS_EN + NUMBERS + EMOJI) for _ in range(rng.randint(1, 8)))
    if r < 0.85:
        return long_piece(rng)
    if r < 0.9:
        # random characters from mixed pools, including combining marks alone
        pool = ("abcXYZ019 '\t\n\r!?.,;:-_()[]{}<>\"/\\@#$%^&*+=|~`" "éÀçßøŒ" "αβγΩ" "жЖ" "ا" "ש" "क्षि" "ก่" "中文"
                "かカ" "한" "\u0301\u0308\u0323" "\u00a0\u3000\u2009" "²½Ⅻ٣" "😀👍🏽🇫🇷")
        return "".join(rng.choice(pool) for _ in range(rng.randint(1, 60)))
    if r < 0.95:
        return "\n".join(sentence(rng) for _ in range(rng.randint(2, 5)))
    return rng.choice(EMOJI) * rng.randint(1, 5) + " " + rng.choice(WORDS_EN)


def main():
    out_path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 12000
    rng = random.Random(44)
    with open(out_path, "w", encoding="utf-8") as f:
        for i in range(n):
            s = record(rng, i)
            assert "\u0085" not in s and "\ufeff" not in s and "\u017f" not in s
            f.write(json.dumps(s, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
