@_exported import EarshotAudio
@_exported import EarshotFeatures
@_exported import EarshotModel
