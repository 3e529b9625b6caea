#!/usr/bin/python3
"""Plain text of the public-domain English books that Debian packages ship, for the IsoFLOP study's corpus
(`scripts/scaling/prepare_corpus.sh` installs the packages and calls this script, then `gpt tokenize`).

Sources (all public domain; the packages' copyright files say so):
  kjv       King James Bible (1611/1769), package bible-kjv-text, read with the `bible` program (bible-kjv)
  web       World English Bible (2015 SWORD edition), sword-text-web, read with mod2imp (libsword-utils)
  mhcc      Matthew Henry's Concise Commentary (1706/1865), sword-comm-mhcc
  tdavid    C. H. Spurgeon, The Treasury of David (1869-1885), sword-comm-tdavid
  scofield  Scofield Reference Notes (1917), sword-comm-scofield
  devil     Ambrose Bierce, The Devil's Dictionary (1911), dict-devil
  jargon    The Jargon File 4.4.7 (2003, placed in the public domain), dict-jargon

The SWORD modules are OSIS XML in per-verse entries: tags and footnotes are stripped, entities decoded.
The sword-comm-mhcc module is damaged in Debian's build: every entry holds a ~66 kB window of the running
text, so consecutive entries overlap; it is rebuilt from its sections (split at the pre-verse milestones,
the truncated last section of each window dropped, every section kept once). Every source is then
deduplicated by paragraph (a paragraph longer than 40 characters is kept only the first time it appears).

Split: every source is cut at paragraph ends into chunks of about --chunk-bytes; one chunk in --val-every
of every source is held out, so the validation text is a mix of all sources, not the tail of the last book.

Order: every chunk is then re-cut at paragraph ends into pieces of about --piece-bytes, and the pieces are
shuffled (training and held-out parts apart). `gpt train` reads its data sequentially, so the order of the
file is the order of training: with 32 kB documents in order, a run of 1,000 steps of 512 bytes read only
16 documents, and the last few hundred steps, where the learning rate decays, one or two, from whichever
source came next; runs that stopped at different points then differed by the style of what they read last,
not by their size. Pieces of 1 kB make every stretch of a few dozen steps a mix of all sources, and the
validation batches (the first bytes of the held-out part) a mix of all sources too.

Output: OUT/docs/NNNNN.txt, one piece each, the training pieces then the held-out ones; `gpt tokenize`
takes the last fraction of its token stream as validation, and OUT/val_fraction.txt holds the exact
fraction for byte tokens (bytes + one EOT between documents) so the cut falls on the first held-out piece.
OUT/sources.csv lists each source's bytes.
"""
import argparse
import hashlib
import html
import random
import re
import subprocess
import sys
from pathlib import Path

# The layout this script makes with its default flags; OUT/corpus_version.txt records it, and isoflop.py and
# prepare_corpus.sh refuse a data folder made with another (the older one: 32 kB documents in order).
CORPUS_VERSION = "pd_english_byte 2: 1 kB pieces shuffled across sources"
DEFAULTS = {"chunk_bytes": 32768, "piece_bytes": 1024, "val_every": 25, "seed": 1234}

NOTE = re.compile(r"<note\b.*?</note>", re.S)
TAG = re.compile(r"<[^>]*>")
PREVERSE = re.compile(r'<div type="x-milestone" subType="x-preverse" sID="[^"]*"/>')


def imp_entries(text):
    """(key, body) of each `$$$key` entry of a mod2imp dump."""
    key, buf = None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("$$$"):
            if key is not None:
                yield key, "".join(buf)
            key, buf = line[3:].strip(), []
        else:
            buf.append(line)
    if key is not None:
        yield key, "".join(buf)


def clean_osis(s):
    s = NOTE.sub("", s)
    s = re.sub(r'<div[^>]*eID[^>]*type="x-p"[^>]*/>|<div[^>]*type="x-p"[^>]*eID[^>]*/>', "\n", s)
    s = re.sub(r"<(lb|/l|/p|/title)\b[^>]*>", "\n", s)
    s = TAG.sub("", s)
    s = html.unescape(s)
    s = re.sub(r"[ \t\r]+", " ", s)
    s = re.sub(r" *\n *", "\n", s)
    return s.strip()


def sword(module):
    p = subprocess.run(["mod2imp", module], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if p.returncode != 0 or not p.stdout:
        raise SystemExit(f"corpus_text.py: error: mod2imp {module} failed (is its sword package installed?)")
    return p.stdout.decode("utf-8", errors="replace")


def sword_text(module):
    return [clean_osis(body) for _, body in imp_entries(sword(module))]


def mhcc_text():
    sections, seen = [], set()
    for _, body in imp_entries(sword("MHCC")):
        parts = PREVERSE.split(body)
        if len(body) > 60000:  # a truncated window: its last section is cut off mid-text
            parts = parts[:-1]
        for p in parts:
            t = clean_osis(p)
            h = hashlib.sha1(t.encode()).digest()
            if t and h not in seen:
                seen.add(h)
                sections.append(t)
    return sections


def kjv_text():
    p = subprocess.run(["bible", "-l0", "gen1:1-rev22:21"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if p.returncode != 0 or not p.stdout:
        raise SystemExit("corpus_text.py: error: `bible` failed (install bible-kjv and bible-kjv-text)")
    out = []
    for line in p.stdout.decode("utf-8", errors="replace").splitlines():
        line = line.strip()
        m = re.match(r"^\d+ (.*)$", line)
        out.append(m.group(1) if m else line)  # verse numbers dropped; book/chapter headings kept
    return ["\n".join(out)]


def dictd_text(name):
    import gzip
    path = Path(f"/usr/share/dictd/{name}.dict.dz")
    if not path.is_file():
        raise SystemExit(f"corpus_text.py: error: {path} is missing (install dict-{name})")
    text = gzip.open(path).read().decode("utf-8", errors="replace")
    entries = []
    for block in re.split(r"\n(?=\S)", text):  # an entry starts with its headword at column 0
        if block.startswith("00-database"):
            continue
        lines = [l.strip() for l in block.splitlines()]
        # join wrapped lines into paragraphs
        paras, cur = [], []
        for l in lines:
            if l:
                cur.append(l)
            elif cur:
                paras.append(" ".join(cur))
                cur = []
        if cur:
            paras.append(" ".join(cur))
        entries.append("\n".join(paras))
    return entries


SOURCES = {
    "kjv": kjv_text,
    "web": lambda: sword_text("engWEB2015eb"),
    "mhcc": mhcc_text,
    "tdavid": lambda: sword_text("TDavid"),
    "scofield": lambda: sword_text("Scofield"),
    "devil": lambda: dictd_text("devil"),
    "jargon": lambda: dictd_text("jargon"),
}


def paragraphs(pieces, seen):
    out = []
    for piece in pieces:
        for para in piece.split("\n"):
            p = para.strip()
            if not p:
                continue
            h = hashlib.sha1(p.encode()).digest()
            if len(p) > 40 and h in seen:
                continue
            seen.add(h)
            out.append(p)
    return out


def chunks(paras, size):
    cur, n = [], 0
    for p in paras:
        cur.append(p)
        n += len(p.encode()) + 1
        if n >= size:
            yield "\n".join(cur) + "\n"
            cur, n = [], 0
    if cur:
        yield "\n".join(cur) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for docs/, val_fraction.txt, sources.csv, corpus_version.txt")
    ap.add_argument("--print-version", action="store_true", help="print the default layout's name and exit")
    ap.add_argument("--sources", default=",".join(SOURCES), help=f"comma-separated subset of {','.join(SOURCES)}")
    ap.add_argument("--chunk-bytes", type=int, default=DEFAULTS["chunk_bytes"], help="chunk size (default 32768)")
    ap.add_argument("--piece-bytes", type=int, default=DEFAULTS["piece_bytes"], help="size of the shuffled pieces (default 1024)")
    ap.add_argument("--val-every", type=int, default=DEFAULTS["val_every"], help="one chunk in K of each source is held out (25)")
    ap.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    a = ap.parse_args()
    if a.print_version:
        print(CORPUS_VERSION)
        return 0
    if not a.out:
        ap.error("--out is required")
    if a.chunk_bytes <= 0 or a.piece_bytes <= 0 or a.val_every <= 1:
        ap.error("--chunk-bytes and --piece-bytes must be positive and --val-every at least 2")
    names = [s.strip() for s in a.sources.split(",") if s.strip()]
    for n in names:
        if n not in SOURCES:
            ap.error(f"--sources: unknown source '{n}'")
    out = Path(a.out)
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for f in docs.glob("*.txt"):
        f.unlink()
    seen, train, val, rows = set(), [], [], []
    for n in names:
        cs = list(chunks(paragraphs(SOURCES[n](), seen), a.chunk_bytes))
        nbytes = sum(len(c.encode()) for c in cs)
        rows.append((n, nbytes, len(cs)))
        for i, c in enumerate(cs):
            (val if i % a.val_every == a.val_every // 2 else train).append(c)
        print(f"{n}: {nbytes / 1e6:.2f} MB in {len(cs)} chunks", flush=True)
    train = [p for c in train for p in chunks(c.rstrip("\n").split("\n"), a.piece_bytes)]
    val = [p for c in val for p in chunks(c.rstrip("\n").split("\n"), a.piece_bytes)]
    random.Random(a.seed).shuffle(train)
    random.Random(a.seed + 1).shuffle(val)
    allc = train + val
    width = len(str(len(allc)))
    for i, c in enumerate(allc):
        (docs / f"{i:0{width}d}.txt").write_text(c, encoding="utf-8")
    tb = sum(len(c.encode()) for c in train)
    vb = sum(len(c.encode()) for c in val)
    # byte tokens: one per byte plus one EOT between consecutive documents; the val part starts with the
    # EOT that precedes the first held-out document
    total = tb + vb + len(allc) - 1
    n_val = vb + len(val)
    (out / "val_fraction.txt").write_text(f"{n_val / total:.12f}\n")
    custom = {k: getattr(a, k) for k in DEFAULTS if getattr(a, k) != DEFAULTS[k]}
    (out / "corpus_version.txt").write_text((f"custom layout {custom}" if custom else CORPUS_VERSION) + "\n")
    with open(out / "sources.csv", "w") as f:
        f.write("source,bytes,chunks\n")
        for r in rows:
            f.write(f"{r[0]},{r[1]},{r[2]}\n")
    print(f"total {(tb + vb) / 1e6:.2f} MB: train {tb / 1e6:.2f} MB in {len(train)} documents, "
          f"val {vb / 1e6:.2f} MB in {len(val)} documents (val fraction {n_val / total:.6f})")


if __name__ == "__main__":
    sys.exit(main())
