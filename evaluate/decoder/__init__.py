"""The grouping decoder: one image's averaged maps -> people (docs/evaluation.md#decoding), numpy only.

``decode.decode_people`` runs the stages in order: ``peaks`` (keypoint candidates, refined and scored), ``limbs``
(each limb's candidate pairs scored along its map), ``assemble`` (greedy assembly into people); ``resample`` holds
the bicubic kernel the peak score samples with. The decoder imports nothing else of ``evaluate``.
"""
