"""Token files with random access: numpy's .npy arrays and Megatron-LM's
indexed dataset (.idx + .bin), as the tools that write them lay them out."""

import struct

import numpy as np
import pytest

import sluice


def write_megatron(prefix, sequences, doc_starts, dtype=np.uint16):
    """The index megatron.core.datasets.indexed_dataset writes: header,
    version 1, dtype code, counts, sizes, byte pointers, document indices."""
    codes = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5,
             np.float64: 6, np.float32: 7, np.uint16: 8}
    item = np.dtype(dtype).itemsize
    with open(prefix + ".bin", "wb") as f:
        for s in sequences:
            f.write(np.asarray(s, dtype=dtype).tobytes())
    sizes = np.array([len(s) for s in sequences], dtype=np.int32)
    pointers = np.concatenate([[0], np.cumsum(sizes[:-1].astype(np.int64) * item)])
    docs = np.array(list(doc_starts) + [len(sequences)], dtype=np.int64)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", codes[dtype]))
        f.write(struct.pack("<Q", len(sequences)) + struct.pack("<Q", len(docs)))
        f.write(sizes.tobytes() + pointers.astype(np.int64).tobytes() + docs.tobytes())


def test_npy_rows_and_chunks(tmp_path):
    rows = np.arange(24, dtype=np.int32).reshape(6, 4)
    np.save(tmp_path / "rows.npy", rows)
    ds = sluice.Dataset.npy(str(tmp_path / "rows.npy"))
    assert len(ds) == 6
    got = [np.array(x) for x in ds]
    assert all((g == r).all() and g.dtype == np.int32 for g, r in zip(got, rows))
    flat = np.arange(1000, 1010, dtype=np.uint16)
    np.save(tmp_path / "flat.npy", flat)
    chunks = [np.array(x) for x in sluice.Dataset.npy(str(tmp_path / "flat.npy"), seq_len=4)]
    assert [c.tolist() for c in chunks] == [flat[:4].tolist(), flat[4:8].tolist(),
                                            flat[8:].tolist()]
    np.save(tmp_path / "big.npy", rows.astype(">i4"))
    with pytest.raises(sluice.UnsupportedError, match="big.npy"):
        sluice.Dataset.npy(str(tmp_path / "big.npy"))


def test_megatron_sequences_documents_and_a_shuffle(tmp_path):
    seqs = [[1, 2, 3], [], [4, 5, 6, 7], [8], [9, 10]]
    prefix = str(tmp_path / "corpus_text_document")
    write_megatron(prefix, seqs, [0, 2, 4])
    ds = sluice.Dataset.megatron(prefix)
    assert [np.array(x).tolist() for x in ds] == seqs
    assert np.array(next(iter(ds))).dtype == np.uint16
    docs = sluice.Dataset.megatron(prefix, documents=True)
    assert [np.array(x).tolist() for x in docs] == [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10]]
    order = [np.array(x).tolist() for x in ds.shuffle(sluice.ALL, seed=2)]
    assert sorted(map(tuple, order)) == sorted(map(tuple, seqs))
    # padded_batch over sequences of different lengths, as a language model batches them
    batches = [np.array(b) for b in ds.padded_batch(2)]
    assert batches[0].shape == (2, 3) and batches[1].tolist() == [[4, 5, 6, 7], [8, 0, 0, 0]]
    with open(prefix + ".idx", "r+b") as f:
        f.seek(9)
        f.write(struct.pack("<Q", 7))
    with pytest.raises(sluice.CorruptDataError, match="version 7"):
        sluice.Dataset.megatron(prefix)
