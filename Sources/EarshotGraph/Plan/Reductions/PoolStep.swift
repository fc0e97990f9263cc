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
    /// Every window `width` consecutive positions starting `stride` after the last (a pooling
    /// along a plane's rows whose length the stride divides, as BirdNET's 1 x 2 pools): the
    /// kernel then reads the plane in place, without the lists.
    let regular: (stride: Int, width: Int)?

    init(max: Bool, x: GraphPlan.Ref, y: GraphPlan.Ref, planes: Int, plane: Int, starts: [Int32], members: [Int32], divisors: [Float]) {
        (self.max, self.x, self.y, self.planes, self.plane) = (max, x, y, planes, plane)
        (self.starts, self.members, self.divisors) = (starts, members, divisors)
        regular = Self.regular(starts: starts, members: members)
    }

    /// The stride and width when window k is the positions k * stride ..< k * stride + width.
    static func regular(starts: [Int32], members: [Int32]) -> (stride: Int, width: Int)? {
        guard starts.count > 2, starts[1] > 0, members.count > Int(starts[1]) else { return nil }
        let width = Int(starts[1]), stride = Int(members[width]) - Int(members[0])
        guard members[0] == 0, stride > 0 else { return nil }
        for k in 0..<(starts.count - 1) {
            guard Int(starts[k]) == k * width, Int(starts[k + 1]) == (k + 1) * width else { return nil }
            for j in 0..<width where Int(members[k * width + j]) != k * stride + j { return nil }
        }
        return (stride, width)
    }

    func run(_ c: Context) {
        if let regular, !channelsLast {
            divisors.withUnsafeBufferPointer { dv in
                for b in 0..<c.streams {
                    earshot_pool_regular(max ? 1 : 0, c.read(x, b), planes, plane, regular.stride, regular.width, dv.baseAddress!, dv.count,
                                         c.write(y, b))
                }
            }
            return
        }
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
