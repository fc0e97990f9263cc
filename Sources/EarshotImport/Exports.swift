// The readers' errors are part of `ImportError` (`.onnx`, `.tflite`).
@_exported import EarshotONNX
@_exported import EarshotTFLite
