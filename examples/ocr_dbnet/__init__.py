"""A small but real DBNet text-detection pipeline (Lightning), instrumented with perfkit.

    data.py         synthetic receipts, generated per index (``SyntheticReceipts``)
    targets.py      DBNet training targets and ``db_collate_fn`` (PyClipper, in DataLoader workers)
    model.py        backbone + FPN + DB head, and the DB loss
    postprocess.py  probability map -> boxes (contours + PyClipper unclip)
    metrics.py      precision / recall / hmean at IoU >= 0.5
    module.py       ``DBNetModule`` (LightningModule) and ``make_loaders``

Where the time goes is the point of the demo: the PyClipper offsets and border distances of
``db_collate_fn`` and the unclip of ``postprocess`` are timed with ``@perfkit.timed``.
"""
