// Writes tests/io/tokenizer_cases.tsv: tricky strings with the GPT-2 token ids (and pre-tokeniser pieces)
// given by an independent implementation, js-tiktoken (the JavaScript port of tiktoken, which bundles
// the gpt2 ranks). The C++ tokenizer must reproduce every row.
//
// How to run (needs node >= 18 and the npm registry):
//   mkdir -p /tmp/tikref && cd /tmp/tikref && npm init -y && npm install js-tiktoken@1.0.21
//   cd /tmp/tikref && node /path/to/repo/scripts/gen_tokenizer_cases.mjs /path/to/repo
// (js-tiktoken is resolved from the current directory; the argument is the repository root.)
//
// Two details make the reference match tiktoken's Rust engine rather than JavaScript's RegExp:
// - JavaScript's \s differs from Unicode White_Space (it adds U+FEFF and omits U+0085). The pattern is
//   therefore rewritten with an explicit White_Space class, the set that tiktoken (Rust regex) and
//   Python's `regex` module use. Rows where plain js-tiktoken differs are listed in the header.
// - Invalid UTF-8 cannot be passed to any tiktoken API. The project's rule: each byte that does not
//   start a valid UTF-8 sequence is one "other" character (the class of U+FFFD) for the split, and BPE
//   runs on the raw bytes. Those rows are computed here by splitting with the same pattern on the text
//   with U+FFFD in place of each bad byte and merging the original bytes with tiktoken's rule over
//   js-tiktoken's ranks; that path is first checked to equal js-tiktoken's encode on every valid row.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.cwd(), "noop.js"));
const { Tiktoken } = require("js-tiktoken");
const gpt2 = require("js-tiktoken/ranks/gpt2");
const tiktokenVersion = JSON.parse(fs.readFileSync(
  path.join(path.dirname(require.resolve("js-tiktoken")), "..", "package.json"), "utf8")).version;

const root = process.argv[2] ?? path.join(path.dirname(new URL(import.meta.url).pathname), "..");
const outPath = path.join(root, "tests/io/tokenizer_cases.tsv");

// ---- the reference encoders ------------------------------------------------------------------------
const GPT2_PAT = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
if (gpt2.pat_str !== GPT2_PAT) throw new Error(`unexpected gpt2 pattern in js-tiktoken: ${gpt2.pat_str}`);
const WS = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";  // White_Space
const patched = GPT2_PAT.replace("[^\\s", `[^${WS}`).replace("\\S", `[^${WS}]`).replaceAll("\\s", `[${WS}]`);
const enc = new Tiktoken({ ...gpt2, pat_str: patched });
const plain = new Tiktoken(gpt2);
const EOT = "<|endoftext|>";

// Splits bytes into characters: [start, end) of each valid UTF-8 sequence (checked by the platform's
// strict decoder) or of a single bad byte.
const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });  // keep U+FEFF
function chars(bytes) {
  const out = [];
  for (let i = 0; i < bytes.length;) {
    let len = 1, ok = false;
    for (let k = 1; k <= 4 && i + k <= bytes.length && !ok; ++k) {
      try { strict.decode(bytes.subarray(i, i + k)); len = k; ok = true; } catch { /* incomplete */ }
    }
    out.push({ start: i, end: i + len, ok });
    i += len;
  }
  return out;
}

// Pre-tokeniser pieces (byte ranges) of raw bytes, bad bytes standing in as U+FFFD.
function pieces(bytes) {
  let text = "";
  const byteAt = [];  // UTF-16 index -> byte offset
  for (const c of chars(bytes)) {
    const s = c.ok ? strict.decode(bytes.subarray(c.start, c.end)) : "\uFFFD";
    for (let k = 0; k < s.length; ++k) byteAt.push(c.start);
    text += s;
  }
  byteAt.push(bytes.length);
  return [...text.matchAll(new RegExp(patched, "gu"))].map((m) => [byteAt[m.index], byteAt[m.index + m[0].length]]);
}

// tiktoken's merge: repeatedly join the adjacent pair whose concatenation has the lowest rank.
function bpe(piece) {
  const rank = (a, b) => enc.rankMap.get(Array.from(piece.subarray(a, b)).join(","));
  const whole = rank(0, piece.length);
  if (whole !== undefined) return [whole];
  let parts = Array.from({ length: piece.length + 1 }, (_, i) => i);  // part boundaries
  for (;;) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 2 < parts.length; ++i) {
      const r = rank(parts[i], parts[i + 2]);
      if (r !== undefined && r < bestRank) { best = i; bestRank = r; }
    }
    if (best < 0) break;
    parts.splice(best + 1, 1);
  }
  return parts.slice(0, -1).map((s, i) => rank(s, parts[i + 1]));
}

function encodeBytes(bytes, special) {
  const ids = [];
  const eot = new TextEncoder().encode(EOT);
  let start = 0;
  const ordinary = (b) => { for (const [s, e] of pieces(b)) ids.push(...bpe(b.subarray(s, e))); };
  if (special) {
    for (let i = 0; i + eot.length <= bytes.length;) {
      if (eot.every((x, k) => bytes[i + k] === x)) {
        ordinary(bytes.subarray(start, i));
        ids.push(50256);
        i += eot.length;
        start = i;
      } else ++i;
    }
  }
  ordinary(bytes.subarray(start));
  return ids;
}

// ---- the strings -----------------------------------------------------------------------------------
const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
const cases = [
  ["hello world", "Hello world"],
  ["lower case", "hello world"],
  ["empty", ""],
  ["single space", " "],
  ["contractions", "I'm here, you're there, we've been, they'll go, she'd say, it's John's, don't"],
  ["contractions back to back", "'s't're've'm'll'd"],
  ["upper-case contractions are not", "IT'S DON'T I'M WE'LL YOU'RE THEY'VE SHE'D"],
  ["mixed-case contractions", "'S 'T 'RE 'Ve 'LL 'sS 'reE"],
  ["apostrophes", "rock 'n' roll 'tis ''s ''' it''s"],
  ["curly apostrophe", "don\u2019t it\u2019s"],
  ["leading spaces", "  leading spaces"],
  ["trailing spaces", "trailing spaces   "],
  ["space runs", "a  b   c    d     e"],
  ["newlines", "line1\nline2\n\nline3\n\n\n"],
  ["crlf", "one\r\ntwo\r\n\r\nthree\r\n"],
  ["tabs", "\tindented\n\t\tdouble\t tab \t"],
  ["whitespace only", "   \n  \t  \n"],
  ["space before newline before word", "end. \n Next\n  \nx"],
  ["digits", "12345 67890 3.14159 1,000,000 0x1F 2024-01-01"],
  ["letters and digits", " 123abc456 def789 abc123def"],
  ["accents", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m"],
  ["combining marks", "cafe\u0301 nai\u0308ve"],
  ["greek and cyrillic", "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5, \u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440"],
  ["cjk", "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002"],
  ["hangul", "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4"],
  ["arabic and hebrew", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd"],
  ["devanagari", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e"],
  ["thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01"],
  ["emoji", "I \u2764\ufe0f emoji \u{1f600}\u{1f603}\u{1f604}"],
  ["skin tones", "\u{1f44d}\u{1f3fd} \u{1f44b}\u{1f3ff} \u{1f9d1}\u{1f3fb}\u200d\u{1f4bb}"],
  ["zwj sequences", "\u{1f468}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466} and \u{1f3f3}\ufe0f\u200d\u{1f308} flag"],
  ["flags", "\u{1f1fa}\u{1f1f8}\u{1f1ef}\u{1f1f5} ok"],
  ["long letter run", "a".repeat(500)],
  ["long space run", " ".repeat(300) + "x"],
  ["long punctuation run", "!".repeat(200)],
  ["long newline run", "\n".repeat(100)],
  ["long two-letter repeat", "ab".repeat(200)],
  ["long word repeat", "Supercalifragilisticexpialidocious".repeat(5)],
  ["long digit run", "9".repeat(150) + " 0" + "1".repeat(99)],
  ["eot as text", EOT],
  ["eot as text, special", EOT, true],
  ["eot inside text, special", "Hello<|endoftext|>World <|endoftext|> again", true],
  ["eot inside text, ordinary", "Hello<|endoftext|>World <|endoftext|> again"],
  ["eot twice, special", EOT + EOT, true],
  ["partial eot, special", "<|endoftext| <|endoftext", true],
  ["unicode spaces", "a\u00a0b\u3000c\u2003d\u2028e \u00a0f"],
  ["next line U+0085", "x\u0085y \u0085 z\u0085 a \u0085b \u0085!\u0085\u0085c"],
  ["byte order mark U+FEFF", "x\ufeffy \ufeff z\ufeff a \ufeffb \ufeff!\ufeff\ufeffc"],
  ["zero-width space", "a\u200bb \u200b c"],
  ["information separators", "a\x1cb\x1dc \x1e\x1f d"],
  ["control characters", "\x00\x01 \x7f\x08x"],
  ["number categories", "\u216b \u00bd \u00b2 \u0661\u0662\u0663 \u0967\u0968\u0969 \uff11\uff12\uff13"],
  ["letter categories", "\u00aa \u00ba \u00b5 \u00df \u01c5 \u02b0"],
  ["punctuation", "Hello!!! ... ??? -- __init__ @user #tag $100 %20"],
  ["python code", "def f(x):\n    return x**2  # square\n\n\nclass A:\n\tpass\n"],
  ["url", "https://example.com/path?q=1&r=2#frag"],
  ["invalid: ff fe", hex("fffe")],
  ["invalid: byte inside word", hex("616263ff646566")],
  ["invalid: continuation bytes after space", hex("20808120746578740a")],
  ["invalid: truncated 3-byte sequence", hex("48656c6c6f20e28220776f726c64")],
  ["invalid: surrogate", hex("61eda08062")],
  ["invalid: overlong slash", hex("c0af2061")],
  ["invalid: above U+10FFFF", hex("f490808020")],
  ["invalid: truncated emoji at end", hex("6869f09f98")],
];

// ---- write the table -------------------------------------------------------------------------------
const utf8 = new TextEncoder();
const toHex = (b) => Buffer.from(b).toString("hex");
const rows = [];
const differs = [];
for (const [name, value, special = false] of cases) {
  const bytes = typeof value === "string" ? utf8.encode(value) : value;
  const ids = encodeBytes(bytes, special);
  if (typeof value === "string") {
    const ref = enc.encode(value, special ? "all" : [], []);
    if (ref.join() !== ids.join()) throw new Error(`byte path disagrees with js-tiktoken on "${name}"`);
    if (plain.encode(value, special ? "all" : [], []).join() !== ref.join()) differs.push(name);
  }
  const ranges = pieces(bytes);
  ranges.forEach(([s, e], i) => {
    if (s >= e || s !== (i ? ranges[i - 1][1] : 0)) throw new Error(`pieces do not tile "${name}"`);
  });
  if ((ranges.at(-1)?.[1] ?? 0) !== bytes.length) throw new Error(`pieces do not cover "${name}"`);
  const ps = ranges.map(([s, e]) => toHex(bytes.subarray(s, e)));
  rows.push(["case", name, special ? 1 : 0, toHex(bytes) || "-", ps.join(",") || "-", ids.join(" ") || "-"].join("\t"));
}
const shakespeare = fs.readFileSync(path.join(root, "data/tinyshakespeare/input.txt"), "utf8");
const all = enc.encode(shakespeare);
let h = 0xcbf29ce484222325n;
for (const id of all) h = BigInt.asUintN(64, (h ^ BigInt(id)) * 0x100000001b3n);
rows.push(["file", "data/tinyshakespeare/input.txt", 0, all.length, h.toString(16).padStart(16, "0")].join("\t"));

const header = [
  "# GENERATED by scripts/gen_tokenizer_cases.mjs; do not edit. GPT-2 token ids from an independent",
  `# implementation: js-tiktoken ${tiktokenVersion} (gpt2 ranks), node ${process.versions.node}, Unicode ${process.versions.unicode}.`,
  "# \\s = Unicode White_Space as in tiktoken's Rust engine; plain js-tiktoken (JavaScript \\s) differs on:",
  `#   ${differs.join("; ") || "(none)"}`,
  "# Rows: case <name> <allow_special 0|1> <text as hex> <pieces as hex, comma-separated> <ids>",
  "#       file <path> <allow_special> <token count> <FNV-1a 64 over the ids: h = (h ^ id) * 0x100000001b3>",
  "# '-' stands for an empty field.",
];
fs.writeFileSync(outPath, header.join("\n") + "\n" + rows.join("\n") + "\n");
console.log(`wrote ${outPath}: ${cases.length} cases; plain js-tiktoken differs on ${differs.length}`);
