"""The network (Identity-Mapping Hourglass Network), its loss and weight loading.

from simplepose.models import build_model, build_loss
model = build_model(cfg)              # cfg: config.schema.Config; the skeleton: cfg.data.skeleton's, or pass one
outputs = model(images)               # outputs[stack][scale]: (B, C, H/4/2^k, W/4/2^k), C = skeleton.num_channels
total, breakdown = build_loss(cfg)(outputs, targets, masks)
Checkpoint.load(path).load_into(model)  # weights: checkpoint.format (any checkpoint form, the original's too)
"""

if "." not in __name__:  # imported by its folder name from a checkout: the package must be that checkout's
    import installed_tree

    installed_tree.require()

from simplepose.models.loss import MultiTaskLoss, build_loss
from simplepose.models.posenet import PoseNet, build_model
from simplepose.models.weights import load_state

__all__ = ["MultiTaskLoss", "PoseNet", "build_loss", "build_model", "load_state"]
