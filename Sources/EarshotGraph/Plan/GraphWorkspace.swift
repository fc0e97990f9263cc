/// The memory a plan's runs use: for one caller at a time, kept from step to step so that a
/// step allocates nothing.
public struct GraphWorkspace: Sendable {
    var arena: [Float] = []
    var scratch: [Float] = []
    /// An empty workspace.
    public init() {}
}
