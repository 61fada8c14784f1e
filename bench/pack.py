#!/usr/bin/env python3
"""Padding left by pack against padded_batch and bucket_by_sequence_length,
on the lengths of real documents.

    /usr/bin/python3 bench/pack.py [DIR ...] [--length 512] [--batch 16]
        [--unit file|paragraph] [--max-docs 20000] [--rounds 3]

The documents are the text files under DIR (default /usr/share/doc, whose
READMEs, changelogs and copyright files are real prose of a long-tailed
length; .gz files are read decompressed), one document per file or, with
--unit paragraph, per paragraph (text between blank lines: short
documents, as in instruction tuning), split into words; each word becomes
a token id (its crc32 modulo 50257). A
document longer than --length is cut into pieces of --length tokens, so
every strategy sees the same sequences and loses no token. Then, through
sluice (from_generator of the sequences, in file order):

  padded_batch_longest  padded_batch(B): each batch padded to its longest
  padded_batch_fixed    padded_batch(B, padded_shapes=[L]): a fixed shape,
                        what a compiled (XLA) step needs
  bucket_by_length      bucket_by_sequence_length, boundaries 16, 32, ...,
                        L/2, batch sizes B*L/boundary (the same tokens per
                        batch), padding to the batch's longest
  pack_binsN            pack(L, num_packing_bins=N).batch(B), N = 1, 8, 64

For each: padding_fraction = padded slots / all slots of the rows it
yields, the rows, and the seconds and tokens/s of the run (medians of
--rounds; the Python generator is most of that time). One JSON object per
line, the length distribution first.
"""

import argparse
import gzip
import json
import os
import statistics
import sys
import time
import zlib

import numpy as np

import sluice


def documents(roots, max_docs, unit):
    docs = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if os.path.islink(path) or name.endswith((".png", ".jpg", ".pdf")):
                    continue
                try:
                    if name.endswith(".gz"):
                        with gzip.open(path, "rb") as f:
                            raw = f.read(1 << 22)
                    else:
                        with open(path, "rb") as f:
                            raw = f.read(1 << 22)
                except (OSError, EOFError, zlib.error):
                    continue
                if b"\0" in raw[:4096]:
                    continue  # not text
                texts = raw.split(b"\n\n") if unit == "paragraph" else [raw]
                for text in texts:
                    words = text.split()
                    if words:
                        docs.append(np.array([zlib.crc32(w) % 50257 for w in words],
                                             dtype=np.int32))
                    if len(docs) >= max_docs:
                        return docs
    return docs


def pieces(docs, length):
    out = []
    for d in docs:
        out.extend(d[i:i + length] for i in range(0, len(d), length))
    return out


def strategies(length, batch):
    bounds = []
    b = 16
    while b <= length // 2:
        bounds.append(b)
        b *= 2
    sizes = [max(1, batch * length // x) for x in bounds] + [batch]

    def bucket(ds):
        return ds.bucket_by_sequence_length(lambda s: len(s), bounds, sizes)
    return [
        ("padded_batch_longest", lambda ds: ds.padded_batch(batch), 0),
        ("padded_batch_fixed", lambda ds: ds.padded_batch(batch, padded_shapes=[length]), 0),
        ("bucket_by_length", bucket, 0),
        ("pack_bins1", lambda ds: ds.pack(length, num_packing_bins=1).batch(batch), 1),
        ("pack_bins8", lambda ds: ds.pack(length, num_packing_bins=8).batch(batch), 1),
        ("pack_bins64", lambda ds: ds.pack(length, num_packing_bins=64).batch(batch), 1),
    ]


def run(seqs, build, packed):
    ds = build(sluice.Dataset.from_generator(lambda: iter(seqs),
                                             output_signature=sluice.TensorSpec([None],
                                                                                "int32")))
    slots = tokens = rows = 0
    t0 = time.perf_counter()
    for el in ds.as_numpy_iterator():
        if packed:
            values, segments, _ = el
            tokens += int(np.count_nonzero(segments))
            slots += segments.size
            rows += segments.shape[0]
        else:
            slots += el.size
            rows += el.shape[0]
    seconds = time.perf_counter() - t0
    return slots, rows, seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="*", default=["/usr/share/doc"])
    p.add_argument("--length", type=int, default=512)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--unit", choices=("file", "paragraph"), default="file")
    p.add_argument("--max-docs", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    docs = documents(args.dirs, args.max_docs, args.unit)
    if not docs:
        sys.exit("pack.py: no text documents under %s" % " ".join(args.dirs))
    seqs = pieces(docs, args.length)
    lens = np.array([len(s) for s in seqs])
    doc_lens = np.array([len(d) for d in docs])
    total = int(lens.sum())
    print(json.dumps({"bench": "pack", "what": "lengths", "unit": args.unit,
                      "documents": len(docs),
                      "doc_tokens_median": float(np.median(doc_lens)),
                      "doc_tokens_p90": float(np.percentile(doc_lens, 90)),
                      "doc_tokens_max": int(doc_lens.max()), "sequences": len(seqs),
                      "tokens": total, "sequence_length": args.length,
                      "seq_tokens_mean": round(float(lens.mean()), 1),
                      "seq_tokens_median": float(np.median(lens)),
                      "cut_to_length": int((lens == args.length).sum())}), flush=True)
    results = {}
    for _ in range(args.rounds):  # the strategies alternate within a round
        for name, build, packed in strategies(args.length, args.batch):
            slots, rows, seconds = run(seqs, build, packed)
            results.setdefault(name, []).append((slots, rows, seconds))
    for name, runs in results.items():
        slots, rows = runs[0][0], runs[0][1]
        seconds = statistics.median(r[2] for r in runs)
        print(json.dumps({"bench": "pack", "strategy": name, "unit": args.unit,
                          "sequence_length": args.length,
                          "batch": args.batch, "rows": rows, "slots": slots,
                          "padding_fraction": round(1 - total / slots, 4),
                          "seconds_median": round(seconds, 3),
                          "tokens_per_s": round(total / seconds)}), flush=True)


if __name__ == "__main__":
    main()
