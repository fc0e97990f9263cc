// The products' arithmetic a model is loaded with (`Model(contentsOf:precision:)`) and the int8
// products' instruction path (`Quantized.use`), for the programs that load models without
// importing the graph module.
@_exported import enum EarshotGraph.Precision
@_exported import enum EarshotGraph.Quantized
