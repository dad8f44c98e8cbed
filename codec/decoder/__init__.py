"""The codec's decode side, the grouping decoder: one image's averaged maps -> people (docs/evaluation.md#decoding),
numpy only.

``decode.decode_people`` runs the stages in order: ``peaks`` (keypoint candidates, refined and scored), ``limbs``
(each limb's candidate pairs scored along its map), ``assemble`` (greedy assembly into people); ``resample`` holds
the bicubic kernel the peak score samples with. Every setting is a field of one ``config.schema.DecodeSettings``
(``cfg.eval`` is one). The decoder imports only ``config``, the codec's channel layout (``codec.layout``) and its
``codec.person.Person``.
"""
