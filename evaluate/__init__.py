"""Test-time path: multi-scale + flip inference, keypoint grouping, COCO AP, demo and export."""
