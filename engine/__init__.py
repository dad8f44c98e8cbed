"""The one training engine shared by train.py, train_parallel.py and train_distributed.py."""
