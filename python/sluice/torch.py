"""PyTorch: batches as torch tensors, without copies, where a
torch.utils.data.DataLoader was.

    import sluice, sluice.torch
    ds = (sluice.Dataset.image_folder(root).shuffle(sluice.ALL, seed=0)
          .map_image(preset="train", size=224)
          .batch(256, drop_remainder=True).prefetch(sluice.AUTOTUNE))
    loader = sluice.torch.DataLoader(ds, dtype=torch.float32)
    for epoch in range(epochs):
        loader.set_epoch(epoch)                  # optional: iter() counts epochs itself
        for images, labels in loader:            # float32 [256, 3, 224, 224], int64 [256]
            ...
        print(loader.report())

Resume after preemption (torchdata's StatefulDataLoader convention):

    torch.save({"model": model.state_dict(), "loader": loader.state_dict()}, path)
    ...
    ckpt = torch.load(path)
    loader.load_state_dict(ckpt["loader"])   # the next iter() goes on mid-epoch

Each numeric tensor reaches torch through DLPack over the library's memory
(no copy); the memory is released when the last torch tensor using it dies.
Strings (paths) stay Python lists. Treat the tensors as read-only: the
library may hand the same memory out again (cache).
"""

import warnings

import numpy as _np
import torch as _torch
from torch.utils.dlpack import from_dlpack as _from_dlpack

from . import _dlpack, _structure, _tensor
from ._constants import SL_STRING, SL_UINT16
from ._lib import lib

__all__ = ["DataLoader", "to_torch"]


def to_torch(owner, as_bytes=False):
    """The tensors of an element (an ElementRef) as a tuple: torch tensors
    for numeric tensors (zero-copy), str / lists of str for strings (bytes
    when as_bytes: the dataset's ``strings`` is "bytes")."""
    el = owner.ptr
    out = []
    for i in range(lib.sl_element_size(el)):
        t = lib.sl_element_tensor(el, i)
        code = lib.sl_tensor_dtype(t)
        if code == SL_STRING:
            out.append(_tensor.tensor_value(t, owner, as_bytes))
        elif code == SL_UINT16 and not hasattr(_torch, "uint16"):
            # torch before 2.3 has no uint16 (decode="raw" depth maps):
            # widened to int32, every value kept, at the cost of a copy
            v = _tensor.tensor_value(t, owner)
            out.append(_torch.from_numpy(_np.asarray(v).astype(_np.int32)))
        else:
            out.append(_from_dlpack(_dlpack.element_capsule(el, i)))
    return tuple(out)


class DataLoader:
    """Iterable over a sluice Dataset that yields torch tensors (a tuple of
    them for elements of several values: ``for images, labels in loader``;
    dicts of them for dict elements, as torch's default collate gives),
    one pass per ``iter()`` (an epoch), like torch.utils.data.DataLoader.

    Epochs: each ``iter()`` runs the next epoch, counted from 0, so every
    epoch has a new shuffle and new crops; ``set_epoch(n)`` (as
    DistributedSampler has) makes the next ``iter()`` run epoch n, and the
    count goes on from there. The same seed and epoch give the same
    batches, byte for byte.

    Checkpoints: ``state_dict()`` is a dict of plain values (the epoch, the
    pass's position as bytes) that torch.save writes; ``load_state_dict``
    on a DataLoader over the same pipeline, in any process, makes the next
    ``iter()`` yield exactly the batches the saved one had not yet yielded,
    and later ``iter()`` calls the following epochs.

    layout "NCHW" (default): batches of images from map_image(layout="HWC")
        come out as [N, C, H, W] views (torch.channels_last memory format,
        which convolutions take as is), and so do their masks
        (map_image(mask_key=...)), as [N, C, H, W] too; None leaves them
        NHWC. Pipelines built with map_image(layout="CHW") are NCHW already.
    dtype: None keeps the pipeline's dtype (uint8 from the default
        map_image); torch.float32 converts uint8 images to [0, 1] floats,
        then subtracts `mean` and divides by `std` when given (per channel).
        map_image(dtype="float32") does the same in C, on the workers.
    device: moves every tensor there (non_blocking) after conversion.
    options: sluice.Options for each pass, on top of the dataset's.

    ``stats()``, ``report()``, ``iterator`` and ``epoch`` refer to the
    current (last started) pass.

    Data-parallel training (DDP): build the dataset with ``distribute()``
    after its shuffle; every rank then gets its part of each epoch and the
    same number of batches, with no sampler (see examples/ddp_train.py).
    The loader warns when torch.distributed runs several processes over a
    dataset without it."""

    def __init__(self, dataset, layout="NCHW", dtype=None, mean=None, std=None, device=None,
                 options=None):
        if layout not in ("NCHW", None):
            raise ValueError("layout must be 'NCHW' or None")
        if dataset.options.merge(options).epoch is not None:
            raise ValueError("the DataLoader picks each pass's epoch (it counts them, or "
                             "set_epoch(n) says); give no epoch in the options")
        self.dataset = dataset
        self.layout = layout
        self.dtype = dtype
        self.device = device
        self.options = options
        self._mean = _torch.tensor(mean, dtype=_torch.float32) if mean is not None else None
        self._std = _torch.tensor(std, dtype=_torch.float32) if std is not None else None
        self.iterator = None
        self._next_epoch = 0
        self._exhausted = False  # the current pass has yielded its last batch
        self._resume = None  # a state for the next iter()
        _warn_if_not_distributed(dataset)

    def set_epoch(self, epoch):
        """The epoch the next ``iter()`` runs (later ones follow from it)."""
        if isinstance(epoch, bool) or int(epoch) != epoch or epoch < 0:
            raise ValueError("set_epoch: the epoch must be an int >= 0, not %r" % (epoch,))
        self._next_epoch = int(epoch)
        self._resume = None

    STATE_VERSION = 1

    def state_dict(self):
        """Where the loader stands, as a dict torch.save can write: during a
        pass, the position after the last batch it yielded; between passes
        (or before the first), the epoch the next iter() starts."""
        it = self.iterator
        if isinstance(self._resume, list):
            raise ValueError("state_dict: the loader holds the states of several ranks it "
                             "has not resumed yet; iterate it first")
        if self._resume is not None:
            return {"version": self.STATE_VERSION, "epoch": self._next_epoch,
                    "state": self._resume}
        if it is None or self._exhausted or it._it is None:
            return {"version": self.STATE_VERSION, "epoch": self._next_epoch, "state": None}
        return {"version": self.STATE_VERSION, "epoch": it.epoch, "state": it.state()}

    def load_state_dict(self, state_dict):
        """Takes a state_dict() of a DataLoader over the same pipeline: the
        next iter() resumes its pass (or starts its next epoch). Or the list
        of every rank's state_dict() from one checkpoint (gathered with
        torch.distributed.all_gather_object, or read from each rank's
        file): the pipeline's distribute then splits what those ranks had
        not consumed between this job's ranks, whatever their number, so
        every element of the epoch is used once across the change."""
        if isinstance(state_dict, (list, tuple)):
            dicts = list(state_dict)
            if not dicts or any(not isinstance(d, dict) or "epoch" not in d for d in dicts):
                raise ValueError("load_state_dict: expected DataLoader.state_dict() dicts")
            epochs = {d["epoch"] for d in dicts}
            if len(epochs) != 1:
                raise ValueError("load_state_dict: the ranks' states are of epochs %s; give "
                                 "the states of one checkpoint" % sorted(epochs))
            states = [d.get("state") for d in dicts]
            self.set_epoch(epochs.pop())
            if all(x is None for x in states):  # between passes: the next epoch starts
                self._resume = None
            elif any(x is None for x in states):
                raise ValueError("load_state_dict: some ranks were between passes and some "
                                 "inside one")
            else:
                self._resume = [bytes(x) for x in states]
            return
        if not isinstance(state_dict, dict) or "epoch" not in state_dict:
            raise ValueError("load_state_dict: expected a dict from DataLoader.state_dict(), "
                             "not %r" % (type(state_dict).__name__,))
        version = state_dict.get("version", 1)
        if version > self.STATE_VERSION:
            raise ValueError("load_state_dict: state version %d is newer than this sluice's (%d)"
                             % (version, self.STATE_VERSION))
        self.set_epoch(state_dict["epoch"])
        state = state_dict.get("state")
        if state is not None and not isinstance(state, (bytes, bytearray)):
            raise TypeError("load_state_dict: 'state' must be bytes, not %s"
                            % type(state).__name__)
        self._resume = bytes(state) if state is not None else None

    @property
    def epoch(self):
        """The epoch of the current pass (None before the first)."""
        return self.iterator.epoch if self.iterator is not None else None

    def __len__(self):
        return len(self.dataset)

    def _image(self, x):
        if x.dim() != 4:
            return x
        nchw = self.dataset.image_layout == "CHW"
        if self.layout == "NCHW" and not nchw:
            x = x.permute(0, 3, 1, 2)
            nchw = True
        if self.dtype is not None and x.dtype != self.dtype:
            if x.dtype == _torch.uint8 and self.dtype.is_floating_point:
                x = x.to(self.dtype).div_(255)
            else:
                x = x.to(self.dtype)
        if x.is_floating_point() and (self._mean is not None or self._std is not None):
            shape = (1, -1, 1, 1) if nchw else (1, 1, 1, -1)
            if self._mean is not None:
                x = x.sub(self._mean.view(shape))
            if self._std is not None:
                x = x.div(self._std.view(shape))
        return x

    def _convert(self, values, pack):
        out = list(values)
        at = self.dataset._image_leaf
        if at < len(out) and isinstance(out[at], _torch.Tensor) and self.dataset.image_layout:
            out[at] = self._image(out[at])
        at = self.dataset._mask_leaf
        if (at is not None and at < len(out) and isinstance(out[at], _torch.Tensor)
                and out[at].dim() == 4 and self.layout == "NCHW"
                and self.dataset.image_layout == "HWC"):
            out[at] = out[at].permute(0, 3, 1, 2)  # the mask keeps its dtype
        if self.device is not None:
            out = [v.to(self.device, non_blocking=True) if isinstance(v, _torch.Tensor) else v
                   for v in out]
        return pack(out)

    def __iter__(self):
        if self.iterator is not None:
            self.iterator.close()
        if self._resume is not None:
            state, self._resume = self._resume, None
            it = self.dataset.iterator(self.options, state=state)
            if it.epoch != self._next_epoch:
                it.close()
                raise ValueError("load_state_dict: the state is of epoch %d, the dict says %d"
                                 % (it.epoch, self._next_epoch))
        else:
            it = self.dataset.iterator(self.options, epoch=self._next_epoch)
        self._next_epoch = it.epoch + 1
        self.iterator = it
        self._exhausted = False
        # The pass stays open after its end (or a break) so that stats() and
        # report() can describe it; the next pass or close() frees it. An
        # error or Ctrl-C frees it at once.
        as_bytes = pack = None  # known once the first element is out (see Dataset.strings)
        try:
            while True:
                try:
                    owner = it.next_element()
                except StopIteration:
                    self._exhausted = True
                    return
                if as_bytes is None:
                    as_bytes = self.dataset.strings == "bytes"
                    pack = _structure.packer(_structure.of_dataset(self.dataset._ptr))
                yield self._convert(to_torch(owner, as_bytes), pack)
        except GeneratorExit:
            raise
        except BaseException:
            it.close()
            raise

    def stats(self):
        """Statistics of the current pass (see sluice.Iterator.stats)."""
        return self._current().stats()

    def report(self):
        """The bottleneck report of the current pass (sluice.Iterator.report)."""
        return self._current().report()

    def _current(self):
        if self.iterator is None:
            raise RuntimeError("no pass has started yet: iterate first")
        return self.iterator

    def close(self):
        if self.iterator is not None:
            self.iterator.close()
            self.iterator = None


def _warn_if_not_distributed(dataset):
    """Under DDP (torch.distributed initialised, world size > 1) a dataset
    without distribute() gives every rank the whole epoch."""
    try:
        import torch.distributed as tdist
        ddp = tdist.is_available() and tdist.is_initialized() and tdist.get_world_size() > 1
    except Exception:  # a partial torch build
        return
    if ddp and dataset.distributed is None:
        warnings.warn("sluice.torch.DataLoader: torch.distributed runs %d processes but the "
                      "dataset has no distribute(): every rank reads the whole epoch. Call "
                      "ds.distribute() after the shuffle (it reads the rank from the "
                      "launcher); no sampler is needed." % tdist.get_world_size(), stacklevel=3)
