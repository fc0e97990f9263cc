import CEarshotKernels

/// MaxPool and AveragePool over precomputed windows: output o of a plane takes the input
/// positions members[starts[o]..<starts[o + 1]] of that plane.
struct PoolStep: InputOutputStep {
    let max: Bool
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    let planes, plane: Int
    let starts: [Int32]
    let members: [Int32]
    let divisors: [Float]
    /// Input and output channels-last ([plane][planes]): a Conv that writes so before it, one
    /// that reads so after it, each the other's only neighbour.
    var channelsLast = false

    func run(_ c: Context) {
        starts.withUnsafeBufferPointer { st in
            members.withUnsafeBufferPointer { mb in
                divisors.withUnsafeBufferPointer { dv in
                    for b in 0..<c.streams {
                        if channelsLast {
                            earshot_pool_last(max ? 1 : 0, c.read(x, b), planes, st.baseAddress!, mb.baseAddress ?? st.baseAddress!,
                                              dv.baseAddress!, dv.count, c.write(y, b))
                        } else {
                            earshot_pool(max ? 1 : 0, c.read(x, b), planes, plane, st.baseAddress!, mb.baseAddress ?? st.baseAddress!,
                                         dv.baseAddress!, dv.count, c.write(y, b))
                        }
                    }
                }
            }
        }
    }
}

extension PoolStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
