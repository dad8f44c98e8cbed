"""The codec: what the network is taught and how its maps are read back, in one place (docs/design.md#layers).

``pose_codec.PoseCodec`` ties the parts together: ``targets`` (encode: the target maps at each scale, the ignore
masks' scales), ``decoder`` (decode: peaks, limbs, assembly into people; settings: ``config.schema.DecodeSettings``),
``layout`` (which channel holds what, the loss's channel groups, the flip permutation) and ``network_input`` (the
input's /255 scaling). It imports only ``config``, ``utils``, numpy and OpenCV; ``data``, ``models`` and
``evaluate`` build on it.
"""
