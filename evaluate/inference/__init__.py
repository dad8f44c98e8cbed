"""The network at test time: what turns images into averaged maps for the decoder.

``multiscale``: the multi-scale + flip forward of a *predictor* (``Predictor``: batch -> maps) and the resize onto
the decoding grid; ``model_loader``: a checkpoint -> the network it trained; ``onnx_runner``: an exported ONNX
file as a predictor; ``oracle``: ground-truth maps as a predictor (the decoder's upper bound).
"""
