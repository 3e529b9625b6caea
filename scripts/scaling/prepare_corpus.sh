#!/usr/bin/env bash
# The IsoFLOP study's corpus: ~27 MB of public-domain English prose that Debian packages ship (the King
# James and World English Bibles, Matthew Henry's Concise Commentary, Spurgeon's Treasury of David, the
# Scofield notes, Bierce's Devil's Dictionary, the Jargon File). Installs the packages when missing
# (as root, with apt-get), extracts plain text with scripts/scaling/corpus_text.py, and tokenizes it at
# byte level with `gpt tokenize` into data/pd_english_byte/ (git-ignored): train_*.bin and val_*.bin, the
# validation split being one 32 kB chunk in 25 of every source (~1.1 MB), and both splits in 1 kB pieces
# shuffled across sources (corpus_text.py says why). DIR/corpus_version.txt names this layout.
#   usage: scripts/scaling/prepare_corpus.sh [--gpt PATH] [--out DIR]    (default build/gpt, data/pd_english_byte)
# Does nothing when DIR already holds this layout's shards; fails when it holds an older layout's (delete
# the folder to rebuild).
set -euo pipefail
cd "$(dirname "$0")/../.."
gpt="${GPT:-build/gpt}"
out=data/pd_english_byte
while [ $# -gt 0 ]; do
  case "$1" in
    --gpt) [ $# -ge 2 ] || { echo "prepare_corpus.sh: error: --gpt needs a path" >&2; exit 2; }; gpt="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || { echo "prepare_corpus.sh: error: --out needs a folder" >&2; exit 2; }; out="$2"; shift 2 ;;
    *) echo "prepare_corpus.sh: error: unknown argument '$1' (usage: prepare_corpus.sh [--gpt PATH] [--out DIR])" >&2; exit 2 ;;
  esac
done
[ -x "$gpt" ] || { echo "prepare_corpus.sh: error: --gpt $gpt: no executable there" >&2; exit 2; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3
version="$("$py" scripts/scaling/corpus_text.py --print-version)"
if ls "$out"/train_*.bin > /dev/null 2>&1 && ls "$out"/val_*.bin > /dev/null 2>&1; then
  if [ "$(cat "$out/corpus_version.txt" 2>/dev/null)" != "$version" ]; then
    echo "prepare_corpus.sh: error: $out holds shards of another layout than '$version' (see its corpus_version.txt); delete it to rebuild" >&2
    exit 1
  fi
  echo "prepare_corpus.sh: $out already holds the shards (delete it to rebuild)"
  exit 0
fi

pkgs="bible-kjv bible-kjv-text libsword-utils sword-text-web sword-comm-mhcc sword-comm-tdavid sword-comm-scofield dict-devil dict-jargon"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "prepare_corpus.sh: installing$missing"
  if [ "$(id -u)" != 0 ]; then
    echo "prepare_corpus.sh: error: the packages$missing are missing and installing them needs root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing > /dev/null
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" scripts/scaling/corpus_text.py --out "$tmp"
"$gpt" tokenize --tokenizer byte --input "$tmp/docs" --out "$out" --val-fraction "$(cat "$tmp/val_fraction.txt")"
cp "$tmp/sources.csv" "$out/sources.csv"
cp "$tmp/corpus_version.txt" "$out/corpus_version.txt"
echo "prepare_corpus.sh: wrote $out"
