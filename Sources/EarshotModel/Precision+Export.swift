// The products' arithmetic a model is loaded with (`Model(contentsOf:precision:)`), for the
// programs that load models without importing the graph module.
@_exported import enum EarshotGraph.Precision
