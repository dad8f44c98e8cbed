"""The network (Identity-Mapping Hourglass Network), its loss and weight loading.

from models import build_model, build_loss, load_weights
model = build_model(cfg)              # cfg: config.schema.Config; the skeleton: cfg.data.skeleton's, or pass one
outputs = model(images)               # outputs[stack][scale]: (B, C, H/4/2^k, W/4/2^k), C = skeleton.num_channels
total, breakdown = build_loss(cfg)(outputs, targets, masks)
"""

from models.loss import MultiTaskLoss, build_loss
from models.posenet import PoseNet, build_model
from models.weights import load_weights

__all__ = ["MultiTaskLoss", "PoseNet", "build_loss", "build_model", "load_weights"]
