"""The one training engine shared by train.py, train_parallel.py and train_distributed.py."""

if "." not in __name__:  # python -m engine.X in a checkout: the package it imports must be this checkout's
    import installed_tree

    installed_tree.require()
