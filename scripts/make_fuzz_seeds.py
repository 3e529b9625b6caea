#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses (tests/fuzz/corpus/<harness>/).

Each harness gets a few small valid inputs (so the fuzzer starts past the format checks) and a few
near-valid ones (one field wrong). The files are built here from the format descriptions in the
readers' headers (llm.c shard and model headers, the sharded checkpoint layout, GPT-2's byte-to-unicode
map, the safetensors header and Hugging Face's GPT-2 tensor names), with the standard library only; the input layouts (parameter bytes, the
"@@FILE@@" separator, mode bytes) are the ones documented at the top of each tests/fuzz/*.cpp.

Usage: scripts/make_fuzz_seeds.py [OUT_DIR]   (default: tests/fuzz/corpus next to this script)
"""
import json
import os
import struct
import sys
import zlib

SEP = b"@@FILE@@"


def write(out, harness, name, data):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- token shards -----------------------------------------------------------------------------------
def shard(ids, magic=20240520, version=1, ntok=None):
    header = [magic, version, len(ids) if ntok is None else ntok] + [0] * 253
    return struct.pack("<256i", *header) + struct.pack("<%dH" % len(ids), *ids)


def shard_params(B, T, world, rank, vocab, batches, seek=None):
    """The 10 parameter bytes of fuzz_data_shard.cpp (inverse of its parse_params)."""
    p7, off = 0, 0
    if seek is not None:
        p7 = 1 | (seek[0] << 1)
        off = seek[1]
    return struct.pack("<BBBBHBBh", B - 1, T - 1, world - 1, rank, vocab, batches, p7, off)


def data_shard_seeds(out):
    h = "fuzz_data_shard"
    write(out, h, "valid_one_shard", shard_params(1, 4, 1, 0, 256, 5) + shard([i % 200 for i in range(40)]))
    write(out, h, "valid_two_shards_world2",
          shard_params(2, 3, 2, 1, 0, 10, seek=(1, 5)) + shard(list(range(30))) + SEP + shard(list(range(100, 140))))
    write(out, h, "valid_three_shards_seek",
          shard_params(1, 2, 1, 0, 1000, 15, seek=(2, 1)) + shard(list(range(9))) + SEP + shard([7] * 5) + SEP
          + shard(list(range(500, 520))))
    write(out, h, "bad_magic", shard_params(1, 4, 1, 0, 0, 2) + shard(list(range(20)), magic=20240326))
    write(out, h, "size_mismatch", shard_params(1, 4, 1, 0, 0, 2) + shard(list(range(29)), ntok=30))
    write(out, h, "id_over_vocab", shard_params(1, 4, 1, 0, 100, 3) + shard(list(range(90, 150))))
    write(out, h, "too_few_tokens", shard_params(4, 16, 4, 3, 0, 1) + shard(list(range(50))))


# --- llm.c model files --------------------------------------------------------------------------------
def unit_sizes(L, C, maxT, V):
    """Parameters per unit (embed, block x L, head), as in model/layout.h."""
    Vp = (V + 127) // 128 * 128
    block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C
    return Vp, [Vp * C + maxT * C] + [block] * L + [2 * C]


def model_file(L, NH, C, maxT, V, version=3, vp_override=None, cut=0):
    Vp, units = unit_sizes(L, C, maxT, V)
    n = sum(units)
    header = [20240326, version, maxT, V, L, NH, C, Vp if vp_override is None else vp_override] + [0] * 248
    values = [((i * 37) % 101 - 50) / 16.0 for i in range(n)]  # varied, exactly representable in bf16
    if version == 5:
        body = b"".join(struct.pack("<f", v)[2:] for v in values)  # top 16 bits of the fp32 value
    else:
        body = struct.pack("<%df" % n, *values)
    data = struct.pack("<256i", *header) + body
    return data[: len(data) - cut]


def model_file_seeds(out):
    h = "fuzz_model_file"
    write(out, h, "valid_v3_tiny", model_file(1, 1, 1, 1, 2))
    write(out, h, "valid_v5_small", model_file(2, 2, 2, 4, 5, version=5))
    write(out, h, "valid_v3_v129", model_file(1, 2, 2, 2, 129))
    write(out, h, "bad_vp", model_file(1, 1, 1, 1, 2, vp_override=2))
    write(out, h, "truncated", model_file(1, 1, 1, 1, 2, cut=4))
    write(out, h, "bad_version", model_file(1, 1, 1, 1, 2, version=4))
    write(out, h, "heads_not_dividing", model_file(1, 3, 2, 1, 2))


# --- sharded checkpoints ------------------------------------------------------------------------------
def rank_file(L, NH, C, maxT, V, world, rank, group, step=7, strategy=0, numel_delta=0):
    Vp, units = unit_sizes(L, C, maxT, V)
    words = [1, world, rank, group, strategy, L, NH, C, maxT, V, Vp, len(units), step,
             0x1234, 0x5678, 0x9ABC, 0xDEF0, 0, 3, 0, 0, 0]
    out = b"GPTCKPT1" + struct.pack("<22q", *words)
    shards = []
    for u, numel in enumerate(units):
        padded = (numel + group - 1) // group * group
        sn = padded // group
        off = (rank % group) * sn
        out += struct.pack("<4q", numel + (numel_delta if u == 0 else 0), padded, sn, off)
        shards.append(sn)
    for u, sn in enumerate(shards):
        for which in range(3):
            out += struct.pack("<%df" % sn, *[u + which * 0.5 + i / 64.0 for i in range(sn)])
    return out


def manifest(files, step=7):
    text = "gpt-checkpoint 1\nstep %d\nworld %d\n" % (step, len(files))
    for r, f in enumerate(files):
        text += "file rank_%05d.bin %d %d\n" % (r, len(f), zlib.crc32(f) & 0xFFFFFFFF)
    return text.encode()


def checkpoint_seeds(out):
    h = "fuzz_checkpoint"
    auto, raw = b"\x01", b"\x00"
    tiny = (1, 1, 1, 1, 2)
    small = (2, 2, 2, 3, 5)
    w1 = [rank_file(*tiny, 1, 0, 1)]
    write(out, h, "auto_world1", auto + w1[0])
    w2 = [rank_file(*tiny, 2, r, 2) for r in range(2)]
    write(out, h, "auto_world2_sharded", auto + SEP.join(w2))
    w2r = [rank_file(*tiny, 2, r, 1) for r in range(2)]
    write(out, h, "auto_world2_replicated", auto + SEP.join(w2r))
    w3 = [rank_file(*small, 3, r, 3) for r in range(3)]
    write(out, h, "auto_world3_uneven", auto + SEP.join(w3))
    w4 = [rank_file(*tiny, 4, r, 2, strategy=3) for r in range(4)]
    write(out, h, "auto_world4_hybrid", auto + SEP.join(w4))
    write(out, h, "raw_world1", raw + manifest(w1) + SEP + w1[0])
    write(out, h, "raw_world2", raw + manifest(w2) + SEP + SEP.join(w2))
    bad = bytearray(w1[0])
    bad[-1] ^= 0x40
    write(out, h, "raw_bad_crc", raw + manifest(w1) + SEP + bytes(bad))
    write(out, h, "auto_bad_geometry", auto + rank_file(*tiny, 1, 0, 1, numel_delta=1))
    # Two ranks whose files disagree on the model config (each file consistent on its own).
    write(out, h, "auto_mixed_configs", auto + rank_file(*small, 2, 0, 2) + SEP + rank_file(*tiny, 2, 1, 2))
    # shard_numel = INT64_MIN + 65: shard_numel * group and 12 * shard_numel wrap around to the right values.
    wrap = bytearray(w2[0])
    struct.pack_into("<4q", wrap, 8 + 8 * 22, 129, 130, -(1 << 63) + 65, 0)
    write(out, h, "auto_shard_numel_wraps", auto + bytes(wrap) + SEP + w2[1])


# --- GPT-2 vocabulary files ---------------------------------------------------------------------------
def byte_to_unicode():
    """GPT-2's bytes_to_unicode(): printable bytes stand for themselves, the rest map to 256, 257, ..."""
    table, extra = [], 0
    for b in range(256):
        if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255:
            table.append(b)
        else:
            table.append(256 + extra)
            extra += 1
    return table


def tokenizer_files_seeds(out):
    h = "fuzz_tokenizer_files"
    sym = [chr(c) for c in byte_to_unicode()]

    def key(s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def held_out(d):  # the tail of the harness's synthetic vocabulary: merges 50000-d .. 49999
        enc, bpe = "", ""
        for k in range(50000 - d, 50000):
            a, b = sym[k // 256], sym[k % 256]
            enc += ", %s: %d" % (key(a + b), 256 + k)
            bpe += "%s %s\n" % (a, b)
        return enc + "}", bpe

    for d in (1, 4, 16):
        enc, bpe = held_out(d)
        write(out, h, "tail_valid_%d" % d, bytes([1, d - 1]) + enc.encode() + SEP + bpe.encode())
    enc, bpe = held_out(4)
    write(out, h, "tail_duplicate_id", bytes([1, 3]) + enc.replace("50255", "50254").encode() + SEP + bpe.encode())
    write(out, h, "tail_merge_not_token", bytes([1, 3]) + enc.encode() + SEP + bpe.replace(sym[79], sym[80]).encode())
    write(out, h, "raw_small", b"\x00\x00" + b'{"a": 0, "b": 1, "ab": 2}' + SEP + b"#version: 0.2\na b\n")
    write(out, h, "raw_escapes",
          b"\x00\x00" + b'{"\\u0120the": 0, "\\ud83d\\ude00": -1, "\\"\\\\\\/\\b\\f\\n\\r\\t": 2147483647}' + SEP
          + b"#version: 0.2\n\xc4\xa0 t\n")


# --- tokenizer round trip -----------------------------------------------------------------------------
def roundtrip_seeds(out):
    h = "fuzz_tokenizer_roundtrip"
    texts = {
        "ascii": b"\x00Hello world, it's a test. I'll've 12345 numbers!",
        "special": b"\x01foo<|endoftext|>bar <|endoftext|><|endoftext|>",
        "special_off": b"\x00foo<|endoftext|>bar",
        "unicode": "\x00na\u00efve caf\u00e9 \u65e5\u672c\u8a9e \U0001F600 \u0394x=1\u00bd".encode(),
        "long_piece": b"\x00" + b"a" * 100 + b" " + b"xyz" * 40 + b" " + b"!" * 70,
        "whitespace": "\x00  \n\n\t x   y\r\n \u3000 \u00a0z  ".encode(),
        "invalid_utf8": b"\x00\xff\xfe abc\xc3 \xe2\x82 \xf0\x9f\x98 z\x80\x80",
        "contractions": b"\x00'S 's 't 're 've 'm 'll 'd 'x don't WE'LL",
    }
    shakespeare = os.path.join(os.path.dirname(__file__), "..", "data", "tinyshakespeare", "input.txt")
    if os.path.exists(shakespeare):
        with open(shakespeare, "rb") as f:
            texts["shakespeare"] = b"\x01" + f.read(1500)
    for name, data in texts.items():
        write(out, h, name, data)


# --- safetensors (Hugging Face GPT-2) ---------------------------------------------------------------
def safetensors_file(tensors, metadata=None, pad=True, overrides=None, copies=None):
    """tensors: list of (name, dtype, shape); element k of the whole file's values is (k % 61 - 30) / 8.
    overrides: name -> dict merged into that tensor's header entry (to break one field);
    copies: name -> the name of an earlier tensor whose bytes it repeats (a tied lm_head)."""
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1, "BOOL": 1, "F64": 8}
    header = {} if metadata is None else {"__metadata__": metadata}
    data, k, spans = b"", 0, {}
    for name, dtype, shape in tensors:
        if name in (copies or {}):
            b, e = spans[copies[name]]
            spans[name] = (len(data), len(data) + e - b)
            header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": list(spans[name])}
            data += data[b:e]
            continue
        n = 1
        for d in shape:
            n *= d
        begin = len(data)
        for _ in range(n):
            v = (k % 61 - 30) / 8.0  # exact in f16 and bf16
            k += 1
            if dtype == "F32":
                data += struct.pack("<f", v)
            elif dtype == "F16":
                data += struct.pack("<e", v)
            elif dtype == "BF16":
                data += struct.pack("<f", v)[2:]
            else:
                data += bytes(sizes[dtype])
        spans[name] = (begin, len(data))
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, len(data)]}
        header[name].update((overrides or {}).get(name, {}))
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def gpt2_tensors(L, C, maxT, V, dtype="F32", prefix="", buffers=False, lm_head=False):
    """Hugging Face GPT-2 names and shapes (Conv1D weights [in, out])."""
    t = [(prefix + "wte.weight", dtype, (V, C)), (prefix + "wpe.weight", dtype, (maxT, C))]
    for i in range(L):
        p = "%sh.%d." % (prefix, i)
        t += [(p + "ln_1.weight", dtype, (C,)), (p + "ln_1.bias", dtype, (C,)),
              (p + "attn.c_attn.weight", dtype, (C, 3 * C)), (p + "attn.c_attn.bias", dtype, (3 * C,)),
              (p + "attn.c_proj.weight", dtype, (C, C)), (p + "attn.c_proj.bias", dtype, (C,)),
              (p + "ln_2.weight", dtype, (C,)), (p + "ln_2.bias", dtype, (C,)),
              (p + "mlp.c_fc.weight", dtype, (C, 4 * C)), (p + "mlp.c_fc.bias", dtype, (4 * C,)),
              (p + "mlp.c_proj.weight", dtype, (4 * C, C)), (p + "mlp.c_proj.bias", dtype, (C,))]
        if buffers:
            t += [(p + "attn.bias", "F32", (1, 1, maxT, maxT)), (p + "attn.masked_bias", "F32", ())]
    t += [(prefix + "ln_f.weight", dtype, (C,)), (prefix + "ln_f.bias", dtype, (C,))]
    return t


def safetensors_seeds(out):
    h = "fuzz_safetensors"
    heads = {"format": "pt", "n_head": "2"}
    write(out, h, "valid_gpt2_f32", safetensors_file(gpt2_tensors(1, 4, 2, 3), heads))
    write(out, h, "valid_gpt2_bf16_buffers", safetensors_file(gpt2_tensors(2, 2, 3, 5, "BF16", buffers=True),
                                                              {"n_head": "1"}))
    # GPT2LMHeadModel's state dict: prefix and a tied lm_head
    tensors = gpt2_tensors(1, 2, 2, 3, "F16", prefix="transformer.") + [("lm_head.weight", "F16", (3, 2))]
    data = safetensors_file(tensors, {"format": "pt", "num_attention_heads": "1"},
                            copies={"lm_head.weight": "transformer.wte.weight"})
    write(out, h, "valid_gpt2_f16_prefix", data)
    write(out, h, "valid_generic_dtypes", safetensors_file(
        [("ids", "I64", (3,)), ("mask", "BOOL", (2, 2)), ("x", "F64", ()), ("empty", "F32", (0, 7)),
         ("u", "U8", (5,)), ("h", "F16", (3,))], {"note": "not a model"}, pad=False))
    write(out, h, "empty_header", safetensors_file([], None))
    write(out, h, "bad_overlap", safetensors_file([("a", "F32", (2,)), ("b", "F32", (2,))],
                                                  overrides={"b": {"data_offsets": [4, 12]}}))
    write(out, h, "bad_gap", safetensors_file([("a", "F32", (2,)), ("b", "F32", (1,))],
                                              overrides={"b": {"data_offsets": [12, 16]}}))
    write(out, h, "bad_dtype", safetensors_file([("a", "F32", (2,))], overrides={"a": {"dtype": "F128"}}))
    write(out, h, "bad_shape", safetensors_file([("a", "F32", (2, 3))], overrides={"a": {"shape": [3, 3]}}))
    cut = safetensors_file(gpt2_tensors(1, 4, 2, 3), heads)
    write(out, h, "truncated", cut[: len(cut) // 2])
    write(out, h, "missing_tensor", safetensors_file(gpt2_tensors(1, 4, 2, 3)[:-1], heads))
    write(out, h, "inconsistent_layer", safetensors_file(gpt2_tensors(2, 4, 2, 3), heads,
                                                         overrides={"h.1.mlp.c_fc.weight": {"shape": [8, 8]}}))
    write(out, h, "untied_lm_head", safetensors_file(gpt2_tensors(1, 2, 2, 3) + [("lm_head.weight", "F32", (3, 2))],
                                                     {"n_head": "1"}))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "fuzz", "corpus")
    data_shard_seeds(out)
    model_file_seeds(out)
    checkpoint_seeds(out)
    tokenizer_files_seeds(out)
    roundtrip_seeds(out)
    safetensors_seeds(out)


if __name__ == "__main__":
    main()
