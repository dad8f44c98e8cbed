"""From images to averaged maps at test time.

``map_source``: what turns an input batch into maps (a network, ``onnx_runner``'s ONNX file, ``oracle``'s ground
truth; each batch carries its images' transform, ``ImageMeta``); ``multiscale``: the multi-scale + flip forward of a
map source and the resize onto the decoding grid; ``checkpoint_model``: a checkpoint -> the network it trained;
``inference_setup``: precision and memory format per device; ``onnx_export``: the network as an ONNX file.
Without torch (the runtime without PyTorch runs these, and the PyTorch path with them): ``host_maps``, the inputs,
flip fusion and resizes onto the grid in NumPy and OpenCV; ``onnx_session``, an ONNX file opened with its config and
skeleton, NumPy in and out; ``plan``, what every image of an estimator runs with.
"""
