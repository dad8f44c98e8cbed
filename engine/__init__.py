"""The one training engine shared by train.py, train_parallel.py and train_distributed.py."""

if "." not in __name__:  # imported by its folder name from a checkout: the package must be that checkout's
    import installed_tree

    installed_tree.require()
