@_exported import EarshotAudio
@_exported import EarshotFeatures
@_exported import EarshotModel
@_exported import EarshotGraph
@_exported import EarshotONNX
@_exported import EarshotTFLite
