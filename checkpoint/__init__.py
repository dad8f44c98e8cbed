"""The checkpoint file: what training writes and evaluation, export, the demo and the converter read.

    checkpoint.format     the ``Checkpoint`` type: weights, typed config, skeleton, opaque training state; atomic
                          save, safe load, every older form it reads
    checkpoint.original   the converter of the original Simple Pose's weights to a checkpoint of ours
                          (``python -m simplepose.checkpoint.original``; the names are mapped by ``models.weights``)

It stands above ``config``, ``data`` and ``models`` and below ``evaluate`` and ``engine``: both sides read the same
format, and neither reaches into the other. What only a training process needs (RNG states, the code version, resume
paths, temporary files) is the training engine's (``engine.checkpointer``).
"""

if "." not in __name__:  # imported by its folder name from a checkout: the package must be that checkout's
    import installed_tree

    installed_tree.require()
