if "." not in __name__:  # python -m data.X in a checkout: the package it imports must be this checkout's
    import installed_tree

    installed_tree.require()
